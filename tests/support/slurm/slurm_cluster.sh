#!/usr/bin/env bash
# slurm_cluster.sh: a real single-node Slurm cluster (slurmctld + slurmd +
# a private munged) for end-to-end tests, started and stopped idempotently.
#
#   slurm_cluster.sh start    start what is not running, wait for the node to be
#                             idle, print "SLURM_CONF=<dir>/slurm.conf" on stdout
#   slurm_cluster.sh stop     cancel jobs, stop the daemons this script started
#   slurm_cluster.sh status   exit 0 if running and answering, else 1
#   slurm_cluster.sh env      print the SLURM_CONF line
#
# Everything (configs, munge key/socket, state, spool, logs, pid files, the two
# fake GPU device files) lives in DENSEFEED_SLURM_DIR (default
# /var/tmp/densefeed-slurm; every parent must be world-searchable, so not a
# 0700 /tmp). /etc/slurm and /etc/munge are never read or written. Daemons run
# as root (start/stop re-exec through `sudo -n` when not root); clients work
# as any user with SLURM_CONF exported. Ports: DENSEFEED_SLURM_CTLD_PORT
# (16817), DENSEFEED_SLURM_SLURMD_PORT (16818). DENSEFEED_SLURM_CPUS=N
# configures N CPUs whatever the hardware (SlurmdParameters=config_overrides).
#
# Measured here (Debian 12, Slurm 22.05.8, 2 cores, a job per CPU at a time):
#  - start: 0.5-1.2 s cold, 0.1 s when already up; stop 0.5 s.
#  - Batch jobs start on slurmctld's 1-s scheduler tick: `sbatch --wrap 'sleep
#    1'` is RUNNING 0.1-1.0 s and COMPLETED 1.2-2.1 s after submit (srun: 0.07
#    s). `sbatch --wait` polls slowly (10 s); poll `scontrol show job -o ID`.
#  - `scontrol show job -o ID` gives: exit 3: JobState=FAILED
#    Reason=NonZeroExitCode ExitCode=3:0; `kill -9 $$`: JobState=FAILED
#    Reason=JobLaunchFailure ExitCode=0:9; scancel while running:
#    JobState=CANCELLED ExitCode=0:15 (pending: 0:0); time limit:
#    JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 (0:9 if the job ignores
#    SIGTERM: SIGKILL KillWait=2 s later); --output/--error: StdOut=/StdErr=
#    the expanded paths (default both slurm-ID.out in the submit directory).
#  - Time limits are whole minutes (--time=0:01 shows TimeLimit=00:01:00), and
#    slurmctld checks them every 30 s (compiled in), so a 1-minute limit fires
#    60-90 s after start (82 s measured). OverTimeLimit adds minutes; KillWait
#    only spaces SIGTERM and SIGKILL. Fastest TIMEOUT: once the job is RUNNING,
#    `scontrol update JobId=ID TimeLimit=0` (the job's owner may) gives TIMEOUT
#    at the next 30-s check (7-17 s measured).
#  - A finished job stays visible for MinJobAge=300 s plus up to 60 s (purge
#    tick); 305-314 s measured.
#  - --gres=gpu:1 sets CUDA_VISIBLE_DEVICES (and SLURM_JOB_GPUS,
#    GPU_DEVICE_ORDINAL) to 0 or 1; two concurrent 1-GPU jobs got 0 and 1;
#    --gres=gpu:2 gives 0,1; no --gres leaves them unset.
#  - --wrap scripts run under /bin/sh (dash on Debian).
set -euo pipefail

readonly PROG=${0##*/}
DIR=${DENSEFEED_SLURM_DIR:-/var/tmp/densefeed-slurm}
DIR=${DIR%/}
readonly DIR
readonly CONF=$DIR/slurm.conf
readonly CTLD_PORT=${DENSEFEED_SLURM_CTLD_PORT:-16817}
readonly SLURMD_PORT=${DENSEFEED_SLURM_SLURMD_PORT:-16818}
readonly START_TIMEOUT=${DENSEFEED_SLURM_START_TIMEOUT:-30}
readonly MUNGE_DIR=$DIR/munge
readonly MUNGE_SOCKET=$MUNGE_DIR/munge.socket
readonly MUNGE_PID=$MUNGE_DIR/munged.pid
readonly MUNGE_LOG=$MUNGE_DIR/munged.log
readonly CTLD_PID=$DIR/run/slurmctld.pid
readonly SLURMD_PID=$DIR/run/slurmd.pid
readonly CTLD_LOG=$DIR/log/slurmctld.log
readonly SLURMD_LOG=$DIR/log/slurmd.log
NODE=$(hostname -s 2>/dev/null || true)
NODE=${NODE:-localhost}
readonly NODE

export SLURM_CONF=$CONF
if [[ -n ${DENSEFEED_SLURM_CPUS:-} && ! $DENSEFEED_SLURM_CPUS =~ ^[1-9][0-9]*$ ]]; then
    printf '%s: error: DENSEFEED_SLURM_CPUS must be a positive integer (got %s)\n' "$PROG" "$DENSEFEED_SLURM_CPUS" >&2
    exit 2
fi

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() {
    printf '%s: error: %s\n' "$PROG" "$1" >&2
    shift
    local f
    for f in "$@"; do
        if [[ -s $f ]]; then
            printf '%s: --- last lines of %s ---\n' "$PROG" "$f" >&2
            tail -n 15 "$f" >&2 || true
        fi
    done
    exit 1
}

# alive PID: the process exists and is not a zombie (an init that reaps late
# leaves exited daemons in /proc for a while).
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat:0:1} != Z ]]
}

# pid_of PIDFILE COMM: the pid in PIDFILE if that process is alive and named COMM.
pid_of() {
    local pid comm
    [[ -r $1 ]] || return 1
    read -r pid <"$1" 2>/dev/null || return 1
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$2" ]] && alive "$pid" || return 1
    printf '%s\n' "$pid"
}

daemons_alive() {
    pid_of "$MUNGE_PID" munged >/dev/null &&
        pid_of "$CTLD_PID" slurmctld >/dev/null &&
        pid_of "$SLURMD_PID" slurmd >/dev/null
}

# node_state: the node's state as sinfo reports it (empty if sinfo fails).
node_state() {
    timeout 10 sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n 1 || true
}

answering() {
    [[ -r $CONF ]] || return 1
    daemons_alive || return 1
    case $(node_state) in
    idle | mixed | allocated | completing) return 0 ;;
    *) return 1 ;;
    esac
}

print_env() { printf 'SLURM_CONF=%s\n' "$CONF"; }

need_root() {
    [[ $(id -u) -eq 0 ]] && return 0
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        exec sudo -n env DENSEFEED_SLURM_DIR="$DIR" \
            DENSEFEED_SLURM_CTLD_PORT="$CTLD_PORT" \
            DENSEFEED_SLURM_SLURMD_PORT="$SLURMD_PORT" \
            DENSEFEED_SLURM_START_TIMEOUT="$START_TIMEOUT" \
            DENSEFEED_SLURM_CPUS="${DENSEFEED_SLURM_CPUS:-}" \
            bash "$0" "$@"
    fi
    die "'$1' needs root (slurmd runs jobs as their users) and 'sudo -n' is not available"
}

take_lock() {
    [[ $DIR == /* ]] || die "DENSEFEED_SLURM_DIR must be an absolute path (got '$DIR')"
    mkdir -p "$DIR" || die "cannot create state directory $DIR"
    chmod 0755 "$DIR"
    exec 9>>"$DIR/lock" || die "cannot open lock file $DIR/lock"
    flock -w 180 9 || die "timed out waiting for the lock $DIR/lock (another $PROG running?)"
}

# Every directory above DIR must be searchable by all (munged refuses a socket
# path that is not; clients run as job users) and not writable by group/other
# unless sticky (munged's security checks).
check_parents() {
    local d=$DIR perm
    while [[ -n $d && $d != / ]]; do
        d=${d%/*}
        [[ -z $d ]] && d=/
        perm=$(stat -c %a "$d") || die "cannot stat $d"
        if (((8#$perm & 1) == 0)); then
            die "$d (mode $perm) is not searchable by others; munged and job users need that: choose another DENSEFEED_SLURM_DIR (e.g. under /var/tmp)"
        fi
        [[ $d == / ]] && break
    done
}

# The node definition: real topology from `slurmd -C`, memory a bit below actual.
node_line() {
    local hw cpus mem sockets cores threads boards
    if [[ -n ${DENSEFEED_SLURM_CPUS:-} ]]; then
        mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
        printf 'CPUs=%s RealMemory=%s' "$DENSEFEED_SLURM_CPUS" "$((mem * 9 / 10))"
        return
    fi
    hw=$(slurmd -C 2>/dev/null | head -n 1) || hw=
    field() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" <<<"$hw"; }
    cpus=$(field CPUs)
    boards=$(field Boards)
    sockets=$(field SocketsPerBoard)
    cores=$(field CoresPerSocket)
    threads=$(field ThreadsPerCore)
    mem=$(field RealMemory)
    if [[ -z $cpus || -z $sockets || -z $cores || -z $threads || -z $mem ]]; then
        cpus=$(nproc)
        mem=$(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo)
        printf 'CPUs=%s RealMemory=%s' "$cpus" "$((mem * 9 / 10))"
        return
    fi
    printf 'CPUs=%s Boards=%s SocketsPerBoard=%s CoresPerSocket=%s ThreadsPerCore=%s RealMemory=%s' \
        "$cpus" "${boards:-1}" "$sockets" "$cores" "$threads" "$((mem * 9 / 10))"
}

# Two fake GPUs: character devices with major 120 (reserved for local /
# experimental use, never opened). slurmd rejects plain files ("not a valid
# character or block device") and then sets no CUDA_VISIBLE_DEVICES at all.
make_fake_gpus() {
    local i f
    for i in 0 1; do
        f=$DIR/gpu/nvidia$i
        [[ -c $f ]] && continue
        rm -f "$f"
        mknod -m 0666 "$f" c 120 "$i" ||
            die "mknod $f failed (needs CAP_MKNOD); slurmd accepts only device files as GPUs"
    done
}

# gen_conf FILE: the wanted content of FILE (slurm.conf, gres.conf, ...).
gen_conf() {
    case $1 in
    slurm.conf)
        cat <<EOF
# Written by $PROG; regenerated on every start (edits are lost).
ClusterName=densefeed
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$CTLD_LOG
SlurmdLogFile=$SLURMD_LOG
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,sched_interval=5,bf_interval=5
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
ReturnToService=2
MinJobAge=300
KillWait=2
OverTimeLimit=0
InactiveLimit=0
CompleteWait=0
Waittime=0
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=30
EOF
        if [[ -n ${DENSEFEED_SLURM_CPUS:-} ]]; then echo SlurmdParameters=config_overrides; fi
        cat <<EOF
NodeName=$NODE NodeAddr=127.0.0.1 $(node_line) Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
        ;;
    gres.conf)
        cat <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu File=$DIR/gpu/nvidia[0-1]
EOF
        ;;
    cgroup.conf)
        cat <<EOF
# No plugin here uses cgroups (proctrack/linuxproc, task/none). slurmd and
# slurmstepd load the cgroup plugin anyway; cgroup/v1's init touches nothing,
# where cgroup/v2's (what autodetect picks on a v2 host) sets up a systemd scope.
CgroupPlugin=cgroup/v1
ConstrainCores=no
ConstrainDevices=no
ConstrainRAMSpace=no
EOF
        ;;
    plugstack.conf) echo '# empty: no SPANK plugins (keeps /etc/slurm/plugstack.conf out)' ;;
    esac
}

readonly CONF_FILES="slurm.conf gres.conf cgroup.conf plugstack.conf"

# configs_current: the files on disk are what this script would write now.
configs_current() {
    local f
    [[ -c $DIR/gpu/nvidia0 && -c $DIR/gpu/nvidia1 ]] || return 1
    for f in $CONF_FILES; do
        [[ -r $DIR/$f && $(gen_conf "$f") == "$(cat "$DIR/$f")" ]] || return 1
    done
}

# write_configs: returns 0 if any file changed.
write_configs() {
    local f changed=1
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run" "$DIR/gpu"
    chmod 0755 "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run" "$DIR/gpu"
    make_fake_gpus
    for f in $CONF_FILES; do
        printf '%s\n' "$(gen_conf "$f")" >"$DIR/$f.new"
        if cmp -s "$DIR/$f.new" "$DIR/$f"; then
            rm -f "$DIR/$f.new"
        else
            chmod 0644 "$DIR/$f.new"
            mv -f "$DIR/$f.new" "$DIR/$f"
            changed=0
        fi
    done
    return "$changed"
}

start_munged() {
    pid_of "$MUNGE_PID" munged >/dev/null && return 0
    command -v munged >/dev/null || die "munged not found (apt-get install munge)"
    mkdir -p "$MUNGE_DIR"
    chmod 0755 "$MUNGE_DIR"
    if [[ ! -s $MUNGE_DIR/munge.key ]]; then
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile="$MUNGE_DIR/munge.key" ||
                die "mungekey failed to create $MUNGE_DIR/munge.key"
        else
            dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none ||
                die "cannot write $MUNGE_DIR/munge.key"
        fi
    fi
    chown root:root "$MUNGE_DIR/munge.key"
    chmod 0600 "$MUNGE_DIR/munge.key"
    rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock" "$MUNGE_PID"
    munged --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
        --pid-file="$MUNGE_PID" --log-file="$MUNGE_LOG" \
        --seed-file="$MUNGE_DIR/munged.seed" </dev/null >>"$MUNGE_LOG" 2>&1 9>&- ||
        die "munged failed to start" "$MUNGE_LOG"
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -S $MUNGE_SOCKET ]] && pid_of "$MUNGE_PID" munged >/dev/null && return 0
        sleep 0.1
    done
    die "munged did not create $MUNGE_SOCKET within 5 s" "$MUNGE_LOG"
}

# start_slurm_daemon NAME PIDFILE LOG
start_slurm_daemon() {
    pid_of "$2" "$1" >/dev/null && return 0
    command -v "$1" >/dev/null || die "$1 not found (apt-get install slurmctld slurmd slurm-client)"
    rm -f "$2"
    "$1" -f "$CONF" </dev/null >>"$3" 2>&1 9>&- || die "$1 failed to start (exit $?)" "$3"
    local i
    for ((i = 0; i < 50; i++)); do
        pid_of "$2" "$1" >/dev/null && return 0
        sleep 0.1
    done
    die "$1 did not stay up (no live pid in $2 after 5 s)" "$3"
}

# stop_daemon NAME PIDFILE: SIGTERM, wait up to 10 s, then SIGKILL.
stop_daemon() {
    local pid i
    pid=$(pid_of "$2" "$1") || {
        rm -f "$2"
        return 0
    }
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    if alive "$pid"; then
        say "$1 (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.2
    fi
    rm -f "$2"
}

stop_slurm() {
    local i ids
    if pid_of "$CTLD_PID" slurmctld >/dev/null && pid_of "$SLURMD_PID" slurmd >/dev/null; then
        ids=$(timeout 10 squeue -h -o %i 2>/dev/null || true)
        if [[ -n $ids ]]; then
            # shellcheck disable=SC2086 # one id per word
            timeout 10 scancel $ids 2>/dev/null || true
            for ((i = 0; i < 50; i++)); do
                [[ -z $(timeout 10 squeue -h -t R,CG -o %i 2>/dev/null) ]] && break
                sleep 0.1
            done
        fi
    fi
    stop_daemon slurmd "$SLURMD_PID"
    stop_daemon slurmctld "$CTLD_PID"
    # Job steps outlive slurmd; ours carry our SLURM_CONF in their environment.
    local p
    for p in /proc/[0-9]*; do
        [[ $(cat "$p/comm" 2>/dev/null) == slurmstepd ]] || continue
        if grep -qzxF "SLURM_CONF=$CONF" "$p/environ" 2>/dev/null; then
            kill -KILL "${p#/proc/}" 2>/dev/null || true
        fi
    done
}

wait_idle() {
    local deadline=$((SECONDS + START_TIMEOUT)) state='' resumed=0
    while ((SECONDS < deadline)); do
        pid_of "$CTLD_PID" slurmctld >/dev/null || die "slurmctld exited while the node came up" "$CTLD_LOG"
        pid_of "$SLURMD_PID" slurmd >/dev/null || die "slurmd exited while the node came up" "$SLURMD_LOG"
        state=$(node_state)
        case $state in
        idle | mixed | allocated | completing) return 0 ;;
        down* | drain* | fail* | inval*)
            # A node left down/drained by an earlier run: ReturnToService=2
            # covers most cases, an explicit resume the rest.
            if ((resumed == 0)); then
                resumed=1
                timeout 10 scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
            fi
            ;;
        esac
        sleep 0.1
    done
    die "node $NODE not idle after ${START_TIMEOUT} s (sinfo says '${state:-no answer}'; scontrol show node $NODE gives the reason)" \
        "$CTLD_LOG" "$SLURMD_LOG"
}

# already_up: the cluster answers and either runs this script's current
# configuration or has jobs queued (a restart to apply a changed configuration
# would cancel them, so that waits for an explicit stop).
already_up() {
    answering || return 1
    configs_current && return 0
    [[ -z $(timeout 10 squeue -h -o %i 2>/dev/null) ]] && return 1
    say "warning: the configuration in $DIR is not what this script writes now, but jobs are queued: keeping the running cluster ('$PROG stop; $PROG start' applies it)"
}

cmd_start() {
    # Fast path, no lock (the lock file may not be writable by this user).
    if already_up; then
        print_env
        return 0
    fi
    need_root start
    take_lock
    if already_up; then
        print_env
        return 0
    fi
    check_parents
    local tool
    for tool in slurmctld slurmd sinfo scontrol squeue munged flock timeout; do
        command -v "$tool" >/dev/null || die "$tool not found (apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge)"
    done
    if write_configs; then
        # A changed configuration (a new port, CPU count...) needs a restart.
        stop_slurm
    fi
    start_munged
    start_slurm_daemon slurmctld "$CTLD_PID" "$CTLD_LOG"
    start_slurm_daemon slurmd "$SLURMD_PID" "$SLURMD_LOG"
    wait_idle
    print_env
}

cmd_stop() {
    if ! pid_of "$MUNGE_PID" munged >/dev/null && ! pid_of "$CTLD_PID" slurmctld >/dev/null &&
        ! pid_of "$SLURMD_PID" slurmd >/dev/null; then
        return 0
    fi
    need_root stop
    take_lock
    stop_slurm
    stop_daemon munged "$MUNGE_PID"
    rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
status) answering ;;
env) print_env ;;
*)
    printf 'usage: %s start|stop|status|env\n' "$PROG" >&2
    exit 2
    ;;
esac
