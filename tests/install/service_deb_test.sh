#!/usr/bin/env bash
# ServiceE2E.TheDebianPackageInstallsTheServiceItsUserAndUnit (issue 28): the
# .deb installs the service as a team deploys it: the user densefeed and the
# group densefeed-agents (postinst), /var/lib/densefeed (0700), the unit
# densefeed@.service (valid to systemd-analyze where it can check it), and
# `densefeed serve` run as that user answers `densefeed --service SOCKET`.
# Needs root and dpkg (CI has both); exits 77 (skipped, saying why) without.
# Everything it installs is removed again.
#   service_deb_test.sh BUILD_DIR
set -euo pipefail
build=$1
fail() { echo "ServiceE2E.DebianPackage: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "skipped: not root, so the .deb cannot be installed here"; exit 77; }
command -v dpkg >/dev/null || { echo "skipped: no dpkg here"; exit 77; }
if dpkg-query -W -f='${Status}' densefeed 2>/dev/null | grep -q "install ok installed"; then
  echo "skipped: a densefeed package is installed on this machine already; this test installs and removes its own"
  exit 77
fi

tmp=$(mktemp -d)
chmod 755 "$tmp"
tag=t$$
service_pid=
cleanup() {
  [ -n "$service_pid" ] && kill "$service_pid" 2>/dev/null && wait "$service_pid" 2>/dev/null || true
  dpkg --purge densefeed >/dev/null 2>&1 || true
  userdel densefeed >/dev/null 2>&1 || true
  groupdel densefeed >/dev/null 2>&1 || true
  groupdel densefeed-agents >/dev/null 2>&1 || true
  rm -rf "$tmp" "/var/lib/densefeed/$tag" "/run/densefeed/$tag.sock"
  rmdir /var/lib/densefeed /run/densefeed 2>/dev/null || true
}
trap cleanup EXIT

cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/out" >"$tmp/cpack.log" 2>&1 || { cat "$tmp/cpack.log" >&2; fail "cpack failed"; }
deb=$(ls "$tmp"/out/*.deb)
dpkg-deb --contents "$deb" | awk '{print $NF}' >"$tmp/contents"
for f in ./usr/lib/systemd/system/densefeed@.service ./usr/share/densefeed/service/example.yaml ./usr/share/densefeed/service/SERVICE.md \
         ./usr/share/densefeed/schemas/service.schema.json; do
  grep -qxF "$f" "$tmp/contents" || fail "the .deb does not contain $f"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -t | grep -qx './postinst' || fail "the .deb has no postinst"

dpkg -i "$deb" >"$tmp/dpkg.log" 2>&1 || { cat "$tmp/dpkg.log" >&2; fail "dpkg -i failed (its dependencies are what setup.sh installs)"; }
getent passwd densefeed >/dev/null || fail "postinst made no user densefeed"
getent group densefeed-agents >/dev/null || fail "postinst made no group densefeed-agents"
id -nG densefeed | tr ' ' '\n' | grep -qx densefeed-agents || fail "densefeed is not in densefeed-agents: $(id -nG densefeed)"
[ "$(stat -c '%a %U' /var/lib/densefeed)" = "700 densefeed" ] || fail "/var/lib/densefeed is $(stat -c '%a %U' /var/lib/densefeed)"
[ "$(getent passwd densefeed | cut -d: -f7)" = /usr/sbin/nologin ] || fail "densefeed has a login shell"
if command -v systemd-analyze >/dev/null; then
  # Offline: the unit's syntax, its directives and that ExecStart's binary exists.
  if ! out=$(systemd-analyze verify /usr/lib/systemd/system/densefeed@.service 2>&1); then
    fail "systemd-analyze verify: $out"
  fi
  verified="systemd-analyze verify ok"
else
  verified="systemd-analyze not here: unit not verified"
fi

# A project of its own, readable by the service's user.
repo=$tmp/repo
mkdir -p "$repo"
git -C "$repo" init -q -b main
(cd "$repo" && HOME=$tmp /usr/bin/densefeed init >/dev/null)
git -C "$repo" -c user.name=t -c user.email=t@e add -A
git -C "$repo" -c user.name=t -c user.email=t@e commit -q -m sample
chmod -R a+rX "$repo"
install -d -m 0755 -o densefeed /run/densefeed
cat >"$tmp/$tag.yaml" <<YAML
repository: $repo
trusted_ref: main
state: /var/lib/densefeed/$tag
socket: /run/densefeed/$tag.sock
socket_group: densefeed-agents
people: []
worker: {slots: 1, profile: quick, gpus: none}
YAML
chmod 644 "$tmp/$tag.yaml"
setpriv --reuid=densefeed --regid=densefeed --init-groups -- /usr/bin/densefeed serve --config "$tmp/$tag.yaml" >"$tmp/serve.log" 2>&1 &
service_pid=$!
for _ in $(seq 100); do [ -S "/run/densefeed/$tag.sock" ] && break; sleep 0.1; done
[ -S "/run/densefeed/$tag.sock" ] || { cat "$tmp/serve.log" >&2; fail "the service made no socket"; }
[ "$(stat -c '%a %U %G' "/run/densefeed/$tag.sock")" = "660 densefeed densefeed-agents" ] ||
  fail "the socket is $(stat -c '%a %U %G' "/run/densefeed/$tag.sock")"
[ "$(stat -c '%a %U' "/var/lib/densefeed/$tag")" = "700 densefeed" ] || fail "the state folder is $(stat -c '%a %U' "/var/lib/densefeed/$tag")"
gates=$(cd "$tmp" && /usr/bin/densefeed --service "/run/densefeed/$tag.sock" gate list) || fail "gate list through the service: $gates"
[ "$gates" = scan-sharded ] || fail "gate list through the service printed '$gates'"
status=0
out=$(cd "$tmp" && /usr/bin/densefeed --service "/run/densefeed/$tag.sock" status 1 2>&1) || status=$?
[ "$status" -eq 2 ] && [[ "$out" == *"no experiment with id 1"* ]] || fail "status 1 through the service: exit $status: $out"
echo "ServiceE2E.DebianPackage: ok: $(basename "$deb"); user densefeed, group densefeed-agents, $verified, served gate list and status"
