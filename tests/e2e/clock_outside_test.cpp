// Issue 26, "the clock outside the kernel's process" and "no process
// outlives its calls", through the real CLI on a project of its own with two
// driven gates: `py` (a frozen Python driver, drv.py, loading the arm's k.run)
// and `cxx` (the C++ driver tests/support/forge_cxx_driver.cpp loading the
// arm's libforge_kernel.so). Each test is an attack, written as a hostile
// kernel would; the samples that decide are densefeed's own timestamps of
// every iteration (orchestrator/launch/outside_clock.h).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "outside_clock.h"
#include "test_support.h"
#include "timing_checks.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;
const std::filesystem::path kBin = DENSEFEED_BIN_DIR;
const std::filesystem::path kKernels = FORGE_KERNELS_DIR;

// h.py: the py gate's reference, y = 2 x, x ~ N(0, 1) from the seed.
const char* kHarness = R"(import argparse, os
import numpy as np
p = argparse.ArgumentParser(); p.add_argument('--n', type=int); p.add_argument('--seed', type=int); p.add_argument('--out')
a = p.parse_args()
np.save(os.path.join(a.out, 'y.npy'), 2 * np.random.default_rng(a.seed).standard_normal(a.n))
)";

// k.py: the arm's kernel. run(x, mode, ms) -> 2 x, costing ms (sleep, then
// spin the last 2 ms), fast2x half of it. Attacks:
//   patchws    at import, replaces densefeed_harness.Harness.write_samples
//              (not among what the driver watches) by one that divides the
//              samples by 40: equal-speed code that claims 40x
//   clockwrite the first call writes 'e' to the outside clock's socket
//   fork       the first call forks a child that rewrites samples.json
//              once the driver wrote it
//   cache      issue 26's caching attack: the first call's y again, at no
//              cost, for inputs of the same shape (the same arrays on every
//              call)
//   memo       an earlier call's y, at no cost, for inputs of equal bytes
//   sleepy     3 ms more per call: the base an agent slows down
//   diskmemo   issue 29's hostile trial: each y stored under its input's
//              sha256 in the arm's driver cache (XDG_CACHE_HOME), read back
//              by any later call of any process; its first call of all
//              (the warm-up call) also computes, at full cost, the pool of
//              input sets densefeed drew before the fix (set 0 the run's
//              DENSEFEED_SEED, then SplitMix64) and every set its
//              DENSEFEED_INPUT_SEEDS names
//   prime      every process's first timed call (its second: the gate's
//              warmup is 1) computes, at full cost, the y of every set its
//              DENSEFEED_INPUT_SEEDS names, and answers the rest from
//              memory: a slow first timed iteration, free others
const char* kKernel = R"(import hashlib, os, time
import numpy as np
CALLS = [0]
CACHE, MEMO = {}, {}
M64 = (1 << 64) - 1
def old_pool(seed, count):
    out, state = [seed], seed
    while len(out) < count:
        state = (state + 0x9E3779B97F4A7C15) & M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        out.append(z ^ (z >> 31))
    return out
def key_of(x):
    return hashlib.sha256(x.tobytes()).hexdigest()
def memo_dir():
    d = os.path.join(os.environ.get('XDG_CACHE_HOME') or '/tmp', 'memo')
    os.makedirs(d, exist_ok=True)
    return d
def precompute(seeds, n, ms, store):
    for s in seeds:
        x = np.random.default_rng(s).standard_normal(n)
        spend(ms / 1e3, time.perf_counter())
        store(key_of(x), 2 * x)
if '"patchws"' in os.environ.get('DENSEFEED_PARAMS', ''):
    import densefeed_harness
    real = densefeed_harness.Harness.write_samples
    densefeed_harness.Harness.write_samples = lambda self, samples, *a, **k: real(self, [s / 40 for s in samples], *a, **k)
def spend(s, start):
    end = start + s
    if s > 2e-3: time.sleep(max(0, end - time.perf_counter() - 2e-3))
    while time.perf_counter() < end: pass
def run(x, mode, ms):
    if mode == 'sleepy':
        time.sleep(0.003)
    t = time.perf_counter()
    CALLS[0] += 1
    if mode == 'clockwrite' and CALLS[0] == 1:
        os.write(int(os.environ['DENSEFEED_CLOCK_FD']), b'e')
    if mode == 'fork' and CALLS[0] == 1 and os.fork() == 0:
        out = os.path.join(os.environ['DENSEFEED_OUT'], 'samples.json')
        for _ in range(20000):
            if os.path.exists(out):
                time.sleep(0.002)
                open(out, 'w').write('{"unit": "ms", "samples": [%s]}' % ', '.join(['0.001'] * int(os.environ['DENSEFEED_ITERS'])))
                os._exit(0)
            time.sleep(0.001)
        os._exit(0)
    if mode == 'cache' and 'y' in CACHE and CACHE['shape'] == x.shape:
        return CACHE['y']
    seeds = [int(v) for v in os.environ.get('DENSEFEED_INPUT_SEEDS', '').split(',') if v]
    if mode == 'diskmemo':
        d = memo_dir()
        store = lambda k, y: np.save(os.path.join(d, k + '.npy'), y)
        if not os.path.exists(os.path.join(d, 'primed')):
            precompute(old_pool(int(os.environ['DENSEFEED_SEED']), 17) + seeds, x.size, ms, store)
            open(os.path.join(d, 'primed'), 'w').close()
        f = os.path.join(d, key_of(x) + '.npy')
        if os.path.exists(f):
            return np.load(f)
        spend(ms / 1e3, t)
        store(key_of(x), 2 * x)
        return 2 * x
    if mode == 'prime':
        if CALLS[0] == 2:
            precompute(seeds, x.size, ms, MEMO.__setitem__)
        return MEMO.get(key_of(x), 2 * x)
    key = hashlib.sha256(x.tobytes()).hexdigest() if mode == 'memo' else None
    if key is not None and key in MEMO:
        return MEMO[key]
    spend((ms / 2 if mode == 'fast2x' else ms) / 1e3, t)
    y = 2 * x
    if mode == 'cache':
        CACHE.update(y=y, shape=x.shape)
    if key is not None:
        MEMO[key] = y
    return y
)";

// s.py: the self gate's candidate, timing itself (no bench.driver): each
// iteration costs ms (sleep, then spin the last 2 ms) and is timed, or, in
// mode launch, reports 0.0004 ms as a timer that sees only a kernel's launch
// would (issue 26: "a launch-only timer without bench.work"); mode same is
// honest, a parameter apart from the base.
const char* kSelfHarness = R"(import argparse, json, os, time
import numpy as np
p = argparse.ArgumentParser(); p.add_argument('--mode'); p.add_argument('--n', type=int); p.add_argument('--ms', type=float)
p.add_argument('--seed', type=int); p.add_argument('--out')
a = p.parse_args()
y = 2 * np.random.default_rng(a.seed).standard_normal(a.n)
if os.environ.get('DENSEFEED_MODE', 'gate') == 'bench':
    warm, iters = int(os.environ['DENSEFEED_WARMUP']), int(os.environ['DENSEFEED_ITERS'])
    samples = []
    for k in range(warm + iters):
        t = time.perf_counter(); end = t + a.ms / 1e3
        time.sleep(max(0, end - time.perf_counter() - 2e-3))
        while time.perf_counter() < end: pass
        dt = 0.0004 if a.mode == 'launch' else (time.perf_counter() - t) * 1e3
        if k >= warm: samples.append(dt)
    json.dump({'unit': 'ms', 'samples': samples}, open(os.path.join(a.out, 'samples.json'), 'w'))
np.save(os.path.join(a.out, 'y.npy'), y)
)";

const char* kDriver = R"(import argparse
from densefeed_driver import Driver
import numpy as np
p = argparse.ArgumentParser(); p.add_argument('--n', type=int); p.add_argument('--ms', type=float)
a = p.parse_args()
d = Driver()
kernel = d.load_kernel()
ms = float(d.params.get('cost', a.ms))  # gate pymem's cost param reaches the kernel, not the timer
d.time(lambda x: kernel(x, d.params['mode'], ms), outputs=lambda y: {'y': y},
       inputs=lambda h: np.random.default_rng(h.seed).standard_normal(a.n))
)";

std::string py_gate() {
  return "gate: py\ndescription: y = 2 x\n"
         "reference:\n  command: [python3, \"{project}/h.py\", --n, \"{case.n}\", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "candidate:\n  command: [python3, \"{project}/h.py\", --n, \"{case.n}\", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "params:\n  mode: {type: string, enum: [honest, fast2x, patchws, clockwrite, fork, cache, memo, sleepy, diskmemo, prime], default: honest}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
         "cases:\n  grid:\n    - {n: [1000], ms: [10]}\nprofiles: {quick: {}, full: {}}\n"
         "timeout_s: 120\nbench:\n  warmup: 1\n  iters: 8\n  max_seconds_per_case: 60\n  cases: [{ms: 10}]\n"
         "  driver:\n    command: [python3, \"{project}/drv.py\", --n, \"{case.n}\", --ms, \"{case.ms}\"]\n"
         "    kernel: {module: k, function: run}\n"
         "freezes: [h.py, drv.py]\n";
}

std::string self_gate() {
  return "gate: self\ndescription: y = 2 x\n"
         "reference:\n  command: [python3, \"{project}/h.py\", --n, \"{case.n}\", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "candidate:\n  command: [python3, \"{project}/s.py\", --mode, \"{param.mode}\", --n, \"{case.n}\", --ms, \"{case.ms}\", "
         "--seed, \"{seed}\", --out, \"{out}\"]\n"
         "params:\n  mode: {type: string, enum: [honest, same, launch], default: honest}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
         "cases:\n  grid:\n    - {n: [1000], ms: [10]}\nprofiles: {quick: {}, full: {}}\n"
         "timeout_s: 120\nbench:\n  warmup: 1\n  iters: 8\n  max_seconds_per_case: 60\n  cases: [{ms: 10}]\n"
         "freezes: [h.py]\n";
}

// Gates `mem` (s.py, self-timed) and `pymem` (drv.py, the trusted Python
// driver) declare a working set of 1 GiB per iteration (bench.work bytes,
// case value mb) and take param cost ms per iteration (drv.py hands it to
// the kernel: a driver may not take parameters), so that a test can
// pick a time whose achieved rate lies between the machine's memory and
// in-cache copy rates.
std::string mem_gate(bool driven) {
  const std::string name = driven ? "pymem" : "mem";
  return "gate: " + name + "\ndescription: y = 2 x\n"
         "reference:\n  command: [python3, \"{project}/h.py\", --n, \"{case.n}\", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "candidate:\n  command: [python3, \"{project}/" + std::string(driven ? "h.py" : "s.py") + "\", " +
         (driven ? "" : "--mode, honest, --ms, \"{param.cost}\", ") + "--n, \"{case.n}\", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "params:\n  mode: {type: string, enum: [honest, same], default: honest}\n  cost: {type: number, default: 10}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
         "cases:\n  grid:\n    - {n: [1000], mb: [1024]}\nprofiles: {quick: {}, full: {}}\n"
         "timeout_s: 120\nbench:\n  warmup: 1\n  iters: 8\n  max_seconds_per_case: 90\n  cases: [{mb: 1024}]\n"
         "  work: {bytes: \"mb * 1048576\"}\n" +
         (driven ? "  driver:\n    command: [python3, \"{project}/drv.py\", --n, \"{case.n}\", --ms, \"0\"]\n"
                   "    kernel: {module: k, function: run}\n"
                 : "") +
         "freezes: [h.py, drv.py]\n";
}

std::string cxx_gate() {
  return "gate: cxx\ndescription: y = 2 x\n"
         "reference:\n  command: [forge_cxx_harness, --n, \"{case.n}\", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "candidate:\n  command: [forge_cxx_harness, --n, \"{case.n}\", --seed, \"{seed}\", --out, \"{out}\"]\n"
         "params:\n  mode: {type: string, enum: [honest, fast2x, cache, memo], default: honest}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
         "cases:\n  grid:\n    - {n: [1000], ms: [10]}\nprofiles: {quick: {}, full: {}}\n"
         "timeout_s: 120\nbench:\n  warmup: 1\n  iters: 8\n  max_seconds_per_case: 60\n  cases: [{ms: 10}]\n"
         "  driver:\n    command: [forge_cxx_driver, --n, \"{case.n}\", --ms, \"{case.ms}\"]\n"
         "    kernel: {library: libforge_kernel.so, symbol: forge_kernel_run}\n"
         "freezes: [h.py]\n";
}

// Two processes spinning on the CPU for as long as it lives: a loaded machine.
class CpuBurners {
 public:
  explicit CpuBurners(int n) {
    for (int i = 0; i < n; ++i) {
      const pid_t p = ::fork();
      if (p == 0) {
        for (volatile unsigned long k = 0;; k = k + 1) {
        }
      }
      if (p > 0) pids_.push_back(p);
    }
  }
  ~CpuBurners() {
    for (pid_t p : pids_) ::kill(p, SIGKILL);
    for (pid_t p : pids_) ::waitpid(p, nullptr, 0);
  }

 private:
  std::vector<pid_t> pids_;
};

class ClockOutside : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "project";
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::locked_project(repo_,
                                      {{"densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n"
                                                          "harness_path: [lib]\n"},
                                       {"h.py", kHarness},
                                       {"k.py", kKernel},
                                       {"drv.py", kDriver},
                                       {"s.py", kSelfHarness},
                                       {"gates/self.yaml", self_gate()},
                                       {"gates/mem.yaml", mem_gate(false)},
                                       {"gates/pymem.yaml", mem_gate(true)},
                                       {"lib/libforge_kernel.so", testing::read_file(kKernels / "libforge_kernel.so")},
                                       {"gates/py.yaml", py_gate()},
                                       {"gates/cxx.yaml", cxx_gate()}},
                                      kExe, env()),
              "");
  }
  std::map<std::string, std::string> env() const { return testing::with_on_path(kBin, testing::project_env(dir_ / "home")); }
  testing::CliResult df(std::vector<std::string> args) const { return testing::run_cli(kExe, args, repo_, env()); }
  void candidate_library(const std::string& variant) const {
    std::filesystem::copy_file(kKernels / ("libforge_kernel" + variant + ".so"), repo_ / "lib" / "libforge_kernel.so",
                               std::filesystem::copy_options::overwrite_existing);
  }
  // Gate `g`, candidate WORKTREE in `mode` against the base at `base`
  // (main: the trusted ref's commit) in `base_mode`, with an acceptance run
  // to promote to.
  std::pair<int, J> run(const std::string& g, const std::string& mode, const std::string& base = "main",
                        const std::string& base_mode = "honest") {
    // `mode` and `base_mode` may carry more params after a comma ("same, cost: 12").
    const std::string tag = mode.substr(0, mode.find(','));
    const auto m = dir_ / (g + "-" + tag + std::to_string(counter_++) + ".yaml");
    testing::write_file(m, "experiment: " + g + "-" + tag + "\nhypothesis: h\npredicted_effect: p\ngate: " + g +
                               "\ncandidate: {revision: WORKTREE, params: {mode: " + mode + "}}\n"
                               "base: {revision: " + base + ", params: {mode: " + base_mode + "}}\n"
                               "acceptance:\n  command: [python3, -c, \"import json, os; json.dump(dict(t=1), "
                               "open(os.environ['DENSEFEED_OUT'] + '/metrics.json', 'w'))\"]\n"
                               "  criteria: [\"t <= 2\"]\n");
    const auto r = df({"run", m.string(), "--json"});
    J doc = J::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
    return {r.exit_code, doc};
  }
  J sql(const std::string& query) const {
    const auto r = testing::run_cli("/usr/bin/sqlite3", {"-json", (repo_ / ".densefeed" / "ledger.db").string(), query}, repo_, env());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out.empty() ? J::array() : J::parse(r.out, nullptr, false);
  }
  static std::vector<std::string> flag_kinds(const J& report) {
    std::vector<std::string> kinds;
    for (const auto& c : report["stages"]["bench"]["cases"]) {
      for (const auto& f : c["timing_flags"]) kinds.push_back(f["kind"]);
    }
    return kinds;
  }
  static bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }
  void nothing_recorded_faster(const J& report) const {
    ASSERT_TRUE(report.contains("experiment_id")) << report.dump(1);
    EXPECT_EQ(sql("SELECT COUNT(*) AS n FROM bench_cases WHERE experiment_id = " +
                  std::to_string(report["experiment_id"].get<std::int64_t>()) + " AND verdict = 'faster'")[0]["n"],
              0);
  }
  static std::string bench_reason(const J& r) { return r["stages"]["bench"].value("reason", std::string()); }

  testing::TempDir dir_;
  std::filesystem::path repo_;
  int counter_ = 0;
};

// Issue 26's first attack: equal-speed code whose module divides the samples
// the driver writes by 40 ("faster 39.6x, timed by the gate's trusted
// driver" before). The samples that decide are densefeed's: the candidate's
// median is the kernel's 10 ms, not 0.25; and the driver's own samples,
// kept as the cross-check, disagree with densefeed's clock: red, on a quiet
// and a loaded machine alike.
TEST_F(ClockOutside, AKernelThatPatchesWriteSamplesAtImportIsNotFaster) {
  for (const bool loaded : {false, true}) {
    std::optional<CpuBurners> burners;
    if (loaded) burners.emplace(2);
    const auto [code, r] = run("py", "patchws");
    EXPECT_EQ(code, 1) << " loaded " << loaded << r.dump(1).substr(0, 4000);
    EXPECT_EQ(r["stages"]["bench"]["status"], "red") << " loaded " << loaded << r["stages"]["bench"].dump(1);
    EXPECT_EQ(r["record"]["stages"]["bench"]["failure"]["kind"], "implausible_timing") << r["record"].dump(1);
    EXPECT_EQ(r["record"]["stages"]["bench"]["failure"]["who"], "candidate");
    EXPECT_TRUE(has(flag_kinds(r), "clock_disagrees")) << " loaded " << loaded << r["stages"]["bench"].dump(1);
    const auto& c = r["stages"]["bench"]["cases"][0];
    EXPECT_NE(c["verdict"], "faster") << c.dump(1);
    // The shrunk samples count as densefeed's bracket less its overhead and
    // jitter (bound_by_outside_clock): within microseconds of the 10 ms.
    EXPECT_GE(c["candidate_median"].get<double>(), 9.95) << c.dump(1);
    EXPECT_GT(c["timing_checks"]["outside_clock"]["samples_raised"]["candidate"].get<int>(), 0) << c.dump(1);
    EXPECT_LE(c["speedup"].get<double>(), 1.1) << " loaded " << loaded << c.dump(1);
    EXPECT_NE(bench_reason(r).find("the driver's clock disagrees with densefeed's"), std::string::npos) << bench_reason(r);
    nothing_recorded_faster(r);
  }
}

TEST_F(ClockOutside, AKernelWritingToTheClockPipeIsRed) {
  for (const std::string g : {"py", "cxx"}) {
    if (g == "cxx") candidate_library("_clock_write");
    const auto [code, r] = run(g, g == "py" ? "clockwrite" : "honest");
    EXPECT_EQ(code, 1) << g << r.dump(1).substr(0, 4000);
    EXPECT_EQ(r["stages"]["bench"]["status"], "red") << g << r["stages"]["bench"].dump(1);
    EXPECT_EQ(r["record"]["stages"]["bench"]["failure"]["kind"], "implausible_timing") << g << r["record"].dump(1);
    EXPECT_NE(bench_reason(r).find("the driver's clock protocol was broken"), std::string::npos) << g << bench_reason(r);
    nothing_recorded_faster(r);
  }
}

// Issue 26's fork-and-rewrite attack (the rewrite won 22 of 25 rounds
// before): red on a quiet and a loaded machine alike, because the driver
// refuses to write anything while a process the kernel started is there,
// naming it; had it written, the rewrite could not change the decision, which
// is densefeed's clock. The child waits up to 20 s for samples.json: it dies
// with the sandbox's PID namespace when the driver exits (bwrap's pid 1), so
// the round ends at once.
TEST_F(ClockOutside, AForkedChildThatRewritesSamplesIsRed) {
  candidate_library("_fork");
  for (const bool loaded : {false, true}) {
    std::optional<CpuBurners> burners;
    if (loaded) burners.emplace(2);
    for (const std::string g : {"cxx", "py"}) {
      const auto start = std::chrono::steady_clock::now();
      const auto [code, r] = run(g, g == "py" ? "fork" : "honest");
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_EQ(code, 1) << g << " loaded " << loaded << r.dump(1).substr(0, 4000);
      EXPECT_EQ(r["stages"]["bench"]["status"], "red") << g << " loaded " << loaded << r["stages"]["bench"].dump(1);
      EXPECT_NE(bench_reason(r).find("process(es) running after its calls"), std::string::npos) << g << bench_reason(r);
      EXPECT_LT(s, 20.0) << g << ": the forked child outlived the driver";
      nothing_recorded_faster(r);
    }
  }
}

// Issue 26's caching attack: a kernel that returns the same arrays on every
// call because the inputs were the same (17.2x in Python, 66982x in C++
// before). Every iteration now has an input set of its own (input_sets.h),
// so the cached arrays are the answer to another iteration's inputs: red,
// naming the timed iteration and its input set, on a quiet and a loaded
// machine alike, through both drivers.
TEST_F(ClockOutside, AKernelReturningCachedResultsIsRedNamingTheIteration) {
  candidate_library("");
  for (const bool loaded : {false, true}) {
    std::optional<CpuBurners> burners;
    if (loaded) burners.emplace(2);
    for (const std::string g : {"py", "cxx"}) {
      const auto [code, r] = run(g, "cache");
      EXPECT_EQ(code, 1) << g << " loaded " << loaded << r.dump(1).substr(0, 4000);
      EXPECT_EQ(r["stages"]["bench"]["status"], "red") << g << " loaded " << loaded << r["stages"]["bench"].dump(1);
      EXPECT_NE(bench_reason(r).find("what was timed is not what was gated: timed iteration "), std::string::npos)
          << g << bench_reason(r);
      EXPECT_NE(bench_reason(r).find("(its input set, seed "), std::string::npos) << g << bench_reason(r);
      nothing_recorded_faster(r);
    }
  }
}

// The same attack keyed on the inputs' bytes: correct, but no iteration of
// a process sees inputs an earlier one saw, so the memo never answers and
// the candidate is the base's speed; the case records how many input sets
// it drew and how many reference runs gated them.
TEST_F(ClockOutside, AKernelMemoisingOnItsInputsGainsNothing) {
  candidate_library("");
  for (const std::string g : {"py", "cxx"}) {
    const auto [code, r] = run(g, "memo");
    EXPECT_EQ(code, 0) << g << r.dump(1).substr(0, 4000);
    const auto& c = r["stages"]["bench"]["cases"][0];
    EXPECT_NE(c["verdict"], "faster") << g << c.dump(1);
    nothing_recorded_faster(r);
    const auto& inputs = c["timing_checks"]["inputs"];
    ASSERT_TRUE(inputs.is_object()) << g << c["timing_checks"].dump(1);
    EXPECT_EQ(inputs["sets"], 2 * 8) << g << inputs.dump(1);  // twice iters 8 (warm-ups draw outside the pool)
    EXPECT_TRUE(inputs["pool_seed"].is_number_unsigned()) << g << inputs.dump(1);
    EXPECT_TRUE(inputs["gated"].get<bool>()) << g << inputs.dump(1);
    EXPECT_GE(inputs["reference_runs"].get<int>(), 8) << g << inputs.dump(1);
    EXPECT_GE(c["candidate_median"].get<double>(), 9.0) << g << c.dump(1);
  }
}

// Issue 29's hostile trial, both halves. diskmemo: a kernel that keeps its
// answers in the arm's driver cache folder, keyed by input, and spends its
// untimed warm-up call computing the pool densefeed drew from the run's
// seed (and the sets the warm-up was told): before the fix the warm-up saw
// pool sets and rounds shared the folder, so its timed iterations were
// answered from disk. Now the pool comes from a seed no arm is told,
// warm-ups draw outside it and every timed round gets a throwaway copy of
// the cache: no answer is ever found, and it is the base's speed. prime:
// a process that computes its whole round at its first timed call and
// answers the rest from memory wins every median (7 of 8 iterations free)
// but not the arms' total time: held back (stall) or slower, never faster.
TEST_F(ClockOutside, AKernelMemoisingInItsCacheFolderOrPrimingAtItsFirstCallIsNeverFaster) {
  {
    const auto [code, r] = run("py", "diskmemo");
    EXPECT_EQ(code, 0) << r.dump(1).substr(0, 4000);
    const auto& c = r["stages"]["bench"]["cases"][0];
    EXPECT_NE(c["verdict"], "faster") << c.dump(1);
    nothing_recorded_faster(r);
    EXPECT_GE(c["candidate_median"].get<double>(), 9.0) << c.dump(1);  // never answered from disk
    const auto runs = repo_ / ".densefeed" / "ledger-runs";
    std::size_t copies = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(runs)) copies += e.path().filename() == "driver-cache";
    EXPECT_EQ(copies, 0u) << "a timed round's copy of the driver cache outlived its round";
  }
  {
    const auto [code, r] = run("py", "prime");
    EXPECT_EQ(code, 0) << r.dump(1).substr(0, 4000);
    const auto& c = r["stages"]["bench"]["cases"][0];
    EXPECT_TRUE(c["verdict"] == "inconclusive" || c["verdict"] == "slower") << c.dump(1);
    nothing_recorded_faster(r);
    if (c["verdict"] == "inconclusive") {
      const auto guards = c["guards"].dump();
      EXPECT_NE(guards.find("stall"), std::string::npos) << c.dump(1);
    }
  }
}

// Issue 26's launch-only timer without bench.work: equal-speed code whose
// own timer reports 0.0004 ms for a 10 ms iteration (before: its process
// grew 50.7 ms per iteration and the run was green, inconclusive). The
// wall-growth check sees the untimed time per iteration, on a quiet and a
// loaded machine alike: red. An honest candidate of equal speed beside it,
// loaded, is not red.
TEST_F(ClockOutside, ALaunchOnlyTimerWithoutDeclaredWorkIsRed) {
  for (const bool loaded : {false, true}) {
    std::optional<CpuBurners> burners;
    if (loaded) burners.emplace(2);
    const auto [code, r] = run("self", "launch");
    EXPECT_EQ(code, 1) << " loaded " << loaded << r.dump(1).substr(0, 4000);
    EXPECT_EQ(r["stages"]["bench"]["status"], "red") << " loaded " << loaded << r["stages"]["bench"].dump(1);
    EXPECT_TRUE(has(flag_kinds(r), "unseen_time")) << " loaded " << loaded << r["stages"]["bench"].dump(1);
    EXPECT_NE(bench_reason(r).find("the timer does not see the work"), std::string::npos) << bench_reason(r);
    nothing_recorded_faster(r);
    for (const auto& c : r["stages"]["bench"]["cases"]) {
      for (const auto& f : c["timing_flags"]) std::printf("[ figure ] loaded %d: %s %s\n", loaded, f["kind"].get<std::string>().c_str(), f["figures"].dump().c_str());
    }
    if (!loaded) continue;
    const auto [honest_code, honest] = run("self", "same");
    EXPECT_EQ(honest_code, 0) << honest.dump(1).substr(0, 4000);
    EXPECT_FALSE(has(flag_kinds(honest), "unseen_time")) << honest["stages"]["bench"].dump(1);
  }
}

// Issue 26's CPU ceiling: `machine calibrate` took the best copy rate at any
// size (103.6 GB/s, set by a 32 KiB copy; 29.9 GB/s at 32 MiB), so a kernel
// whose declared bytes exceed what the memory can move was never flagged on
// a CPU. Now it records the rate at buffers of 4x the last-level cache beside
// it, and a case whose declared working set exceeds that cache is held to the
// memory rate. The candidate here takes the time at which 1 GiB per
// iteration would be moved at 0.9 x the in-cache ceiling (under the old bar,
// above the memory's): red, faster than the machine, naming the working set,
// through the self-timed harness and the trusted Python driver, quiet and
// loaded (load only makes it slower: still above the memory's rate); the
// base, at 1/1.2 of the memory rate, is not flagged.
TEST_F(ClockOutside, AKernelClaimingMoreBytesThanTheMemoryMovesIsFasterThanTheMachine) {
  const auto cal = df({"machine", "calibrate", "--cpu-only", "--json"});
  ASSERT_EQ(cal.exit_code, 0) << cal.out << cal.err;
  const J m = J::parse(cal.out)["ceilings"][0];
  const double cache = m["figures"]["last_level_cache_bytes"].get<double>(), memory = m["figures"]["memory_copy_bytes_per_s"].get<double>();
  const double in_cache = m["bytes_per_s"].get<double>(), bytes = 1024.0 * 1048576;
  ASSERT_GT(cache, 0) << "sysfs names no last-level cache on this machine: " << cal.out;
  ASSERT_LT(cache, bytes) << "the gates' 1 GiB working set must exceed the last-level cache";
  ASSERT_GT(memory, 1e8) << cal.out;
  ASSERT_GT(in_cache * 0.9, memory * kCeilingMargin * 1.5) << "the in-cache rate must be well above the memory's for this test: " << cal.out;
  const double candidate_ms = bytes / (0.9 * in_cache) * 1e3, base_ms = bytes / (memory / 1.2) * 1e3;
  std::printf("[ figure ] copy rate in cache %.1f GB/s, beyond %.0f MiB of last-level cache %.1f GB/s; candidate %.2f ms, base %.2f ms per GiB\n",
              in_cache / 1e9, cache / 1048576, memory / 1e9, candidate_ms, base_ms);
  const std::string candidate = "same, cost: " + std::to_string(candidate_ms), base = "honest, cost: " + std::to_string(base_ms);
  for (const bool loaded : {false, true}) {
    std::optional<CpuBurners> burners;
    if (loaded) burners.emplace(2);
    for (const std::string g : {"mem", "pymem"}) {
      const auto [code, r] = run(g, candidate, "main", base);
      EXPECT_EQ(code, 1) << g << " loaded " << loaded << r.dump(1).substr(0, 4000);
      EXPECT_EQ(r["stages"]["bench"]["status"], "red") << g << " loaded " << loaded << r["stages"]["bench"].dump(1);
      EXPECT_NE(bench_reason(r).find("faster than the machine: the candidate arm's bandwidth"), std::string::npos) << g << bench_reason(r);
      EXPECT_NE(bench_reason(r).find("for a working set beyond its"), std::string::npos) << g << bench_reason(r);
      bool flagged_candidate = false, flagged_base = false;
      for (const auto& c : r["stages"]["bench"]["cases"]) {
        for (const auto& f : c["timing_flags"]) {
          if (f["kind"] != "faster_than_machine") continue;
          (f["arm"] == "candidate" ? flagged_candidate : flagged_base) = true;
          EXPECT_DOUBLE_EQ(f["figures"]["ceiling"].get<double>(), memory) << g << f.dump();
          EXPECT_LT(f["figures"]["achieved"].get<double>(), in_cache * kCeilingMargin) << g << ": the old in-cache bar would not have caught it";
        }
      }
      EXPECT_TRUE(flagged_candidate) << g << " loaded " << loaded << r["stages"]["bench"].dump(1);
      EXPECT_FALSE(flagged_base) << g << " loaded " << loaded << r["stages"]["bench"].dump(1);
      nothing_recorded_faster(r);
    }
  }
}

// The bracket's overhead (µs per iteration: the median of empty brackets,
// the driver's two writes to the clock socket and its timer) is recorded in
// the case's checks, for both drivers; an honest 2x does not disagree with
// the outside clock.
TEST_F(ClockOutside, TheBracketOverheadIsRecorded) {
  candidate_library("");
  for (const std::string g : {"py", "cxx"}) {
    const auto [code, r] = run(g, "fast2x");
    ASSERT_EQ(code, 0) << g << r.dump(1).substr(0, 4000);
    const auto& c = r["stages"]["bench"]["cases"][0];
    // Its verdict on a shared machine may be inconclusive by drift; that the
    // honest 2x is faster is TimingForge's and TimingForgeCxx's honest tests.
    EXPECT_NE(c["verdict"], "slower") << g << c.dump(1);
    EXPECT_FALSE(has(flag_kinds(r), "clock_disagrees")) << g << c.dump(1);
    const auto& oc = c["timing_checks"]["outside_clock"];
    ASSERT_TRUE(oc.is_object()) << g << c["timing_checks"].dump(1);
    for (const char* arm : {"base", "candidate"}) {
      ASSERT_TRUE(oc["bracket_overhead_us"][arm].is_number()) << g << oc.dump(1);
      const double us = oc["bracket_overhead_us"][arm].get<double>();
      EXPECT_GT(us, 0.0) << g << oc.dump(1);
      EXPECT_LT(us, 5000.0) << g << oc.dump(1);
      std::printf("[ figure ] %s driver, %s: bracket overhead %.1f us per iteration (median of %s)\n", g.c_str(), arm, us,
                  oc["overhead_of"].get<std::string>().c_str());
    }
    // What decides is the outside interval: the kernel's cost and the
    // bracket, never less than the cost.
    EXPECT_GE(c["base_median"].get<double>(), 10.0) << g << c.dump(1);
    EXPECT_GE(c["candidate_median"].get<double>(), 5.0) << g << c.dump(1);
    // The base at the trusted ref's commit is not the agent's.
    EXPECT_EQ(r["record"]["base_origin"]["kind"], "trusted_ref") << r["record"].dump(1);
  }
}

// Issue 26's sabotaged base: equal code, the WORKTREE base 3 ms slower per
// call ("faster 3.77x, timed by the gate's trusted driver" before). It still
// runs, but the record names the base as the agent's, promote refuses it
// without --accept-agent-base, the database refuses a promotion written
// around densefeed, and the person's acceptance is recorded like the others.
TEST_F(ClockOutside, ASabotagedWorktreeBaseIsRefusedByPromote) {
  const CpuBurners load(2);
  const auto [code, r] = run("py", "honest", "WORKTREE", "sleepy");
  ASSERT_EQ(code, 0) << r.dump(1).substr(0, 4000);
  const auto& origin = r["record"]["base_origin"];
  EXPECT_EQ(origin["kind"], "worktree") << origin.dump(1);
  EXPECT_NE(origin["reason"].get<std::string>().find("the checkout the agent writes in"), std::string::npos) << origin.dump(1);
  const auto id = std::to_string(r["experiment_id"].get<std::int64_t>());
  EXPECT_EQ(sql("SELECT base_origin FROM experiments WHERE id = " + id)[0]["base_origin"], "worktree");
  const auto text = df({"ledger", "show", id});
  EXPECT_NE(text.out.find("base: worktree"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("promotion needs --accept-agent-base"), std::string::npos) << text.out;
  // The agent is told first to measure against a base it did not write.
  ASSERT_FALSE(r["next"].empty()) << r.dump(1).substr(0, 4000);
  EXPECT_EQ(r["next"][0]["kind"], "trusted-base") << r["next"].dump(1);
  EXPECT_NE(r["next"][0]["why"].get<std::string>().find("--accept-agent-base"), std::string::npos) << r["next"].dump(1);
  auto p = df({"promote", id, "--by", "carol"});
  EXPECT_EQ(p.exit_code, 1) << p.out << p.err;
  EXPECT_NE(p.out.find("its benchmark's base is one the agent wrote (worktree"), std::string::npos) << p.out;
  const auto refused = testing::run_cli("/usr/bin/sqlite3", {"-bail", (repo_ / ".densefeed" / "ledger.db").string(),
                                                              "INSERT INTO promotions(experiment_id, promoted_by, promoted_at) "
                                                              "VALUES (" + id + ", 'x', 'now');"},
                                        repo_, env());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("the benchmark's base is one the agent wrote"), std::string::npos) << refused.err;
  EXPECT_EQ(sql("SELECT COUNT(*) AS n FROM promotions")[0]["n"], 0);
  p = df({"promote", id, "--by", "carol", "--accept-agent-base"});
  EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
  const J accepted = sql("SELECT concern, accepted_by FROM bench_acceptances WHERE experiment_id = " + id);
  ASSERT_EQ(accepted.size(), 1u) << accepted.dump();
  EXPECT_EQ(accepted[0]["concern"], "agent_base");
  EXPECT_EQ(accepted[0]["accepted_by"], "carol");
}

// The same sabotage committed: a branch whose own commit makes the kernel
// sleep 3 ms per call, named as the base. Its own commits since the merge
// base with main change k.py: agent_commits, naming the file, refused by
// promote the same way. A base at main, the trusted ref, needs nothing.
TEST_F(ClockOutside, ABaseWhoseOwnCommitsChangeTheKernelIsRefusedByPromote) {
  ASSERT_EQ(testing::git(repo_, {"checkout", "-q", "-b", "slowed"}).exit_code, 0);
  std::string k = testing::read_file(repo_ / "k.py");
  const std::string at = "def run(x, mode, ms):\n";
  ASSERT_NE(k.find(at), std::string::npos);
  k.insert(k.find(at) + at.size(), "    time.sleep(0.003)\n");
  testing::write_file(repo_ / "k.py", k);
  ASSERT_EQ(testing::git(repo_, {"commit", "-q", "-am", "a slower kernel"}).exit_code, 0);
  ASSERT_EQ(testing::git(repo_, {"checkout", "-q", "main"}).exit_code, 0);
  const auto [code, r] = run("py", "honest", "slowed", "honest");
  ASSERT_EQ(code, 0) << r.dump(1).substr(0, 4000);
  const auto& origin = r["record"]["base_origin"];
  EXPECT_EQ(origin["kind"], "agent_commits") << origin.dump(1);
  EXPECT_EQ(origin["changed"], J::array({"k.py"})) << origin.dump(1);
  EXPECT_EQ(origin["changed_count"], 1);
  EXPECT_EQ(origin["merge_base"].get<std::string>().size(), 40u);
  const auto id = std::to_string(r["experiment_id"].get<std::int64_t>());
  auto p = df({"promote", id, "--by", "carol"});
  EXPECT_EQ(p.exit_code, 1) << p.out << p.err;
  EXPECT_NE(p.out.find("agent_commits"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("k.py"), std::string::npos) << p.out;
  p = df({"promote", id, "--by", "carol", "--accept-agent-base"});
  EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
  // The trusted ref's commit as the base: promoted with no acceptance.
  const auto [code2, r2] = run("py", "fast2x");
  ASSERT_EQ(code2, 0) << r2.dump(1).substr(0, 4000);
  EXPECT_EQ(r2["record"]["base_origin"]["kind"], "trusted_ref");
  const auto id2 = std::to_string(r2["experiment_id"].get<std::int64_t>());
  p = df({"promote", id2, "--by", "carol"});
  EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
  EXPECT_EQ(sql("SELECT COUNT(*) AS n FROM bench_acceptances WHERE experiment_id = " + id2)[0]["n"], 0);
}

// Issue 26's sabotaged base hidden in the trusted ref's own history (found
// by a hostile trial: both were promoted as trusted_history before): a
// slowed commit on main reverted at once, named by its sha; and a slowed
// branch merged into main with -s ours (main's files unchanged, the branch
// now an ancestor). Neither has commits of its own after its merge base,
// but their files are not the trusted ref's: agent_commits, naming k.py. A
// commit whose files are the trusted ref's (an empty commit before it) is
// trusted_history.
TEST_F(ClockOutside, ASlowedBaseHiddenInTheTrustedRefsHistoryIsTheAgents) {
  const auto judged = [&](const std::string& base) {
    const auto m = dir_ / ("hidden" + std::to_string(counter_++) + ".yaml");
    testing::write_file(m, "experiment: hidden\nhypothesis: h\npredicted_effect: p\ngate: py\n"
                           "candidate: {revision: main, params: {mode: fast2x}}\nbase: {revision: " + base + ", params: {mode: honest}}\n");
    const auto r = df({"run", m.string(), "--no-bench", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const J doc = J::parse(r.out, nullptr, false);
    return doc.is_object() ? doc["record"]["base_origin"] : J();
  };
  const auto git = [&](const std::vector<std::string>& args) { ASSERT_EQ(testing::git(repo_, args).exit_code, 0) << args.front(); };
  const auto head = [&] { return testing::git(repo_, {"rev-parse", "HEAD"}).out.substr(0, 40); };
  git({"commit", "-q", "--allow-empty", "-m", "nothing"});
  const std::string same = head();
  std::string k = testing::read_file(repo_ / "k.py");
  const std::string at = "def run(x, mode, ms):\n";
  ASSERT_NE(k.find(at), std::string::npos);
  const std::string slow = std::string(k).insert(k.find(at) + at.size(), "    time.sleep(0.003)\n");
  testing::write_file(repo_ / "k.py", slow);
  git({"commit", "-q", "-am", "slower"});
  const std::string slowed = head();
  git({"revert", "--no-edit", "HEAD"});
  git({"checkout", "-q", "-b", "slowb"});
  testing::write_file(repo_ / "k.py", slow);
  git({"commit", "-q", "-am", "slower again"});
  git({"checkout", "-q", "main"});
  git({"merge", "-q", "-s", "ours", "--no-edit", "slowb"});
  for (const std::string base : {slowed, std::string("slowb")}) {
    const J origin = judged(base);
    EXPECT_EQ(origin["kind"], "agent_commits") << base << origin.dump(1);
    EXPECT_EQ(origin["changed"], J::array({"k.py"})) << base << origin.dump(1);
  }
  const J origin = judged(same);
  EXPECT_EQ(origin["kind"], "trusted_history") << origin.dump(1);
  EXPECT_EQ(origin["changed_count"], 0) << origin.dump(1);
  // Once a person promoted slowb as a candidate (its acceptance passed), a
  // base at it is that promoted commit, not the agent's.
  const auto m = dir_ / "promote-slowb.yaml";
  testing::write_file(m, "experiment: slowb\nhypothesis: h\npredicted_effect: p\ngate: py\n"
                         "candidate: {revision: slowb, params: {mode: honest}}\nbase: {revision: main, params: {mode: honest}}\n"
                         "acceptance:\n  command: [python3, -c, \"import json, os; json.dump(dict(t=1), "
                         "open(os.environ['DENSEFEED_OUT'] + '/metrics.json', 'w'))\"]\n  criteria: [\"t <= 2\"]\n");
  const auto ran = df({"run", m.string(), "--no-bench", "--json"});
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  const auto id = std::to_string(J::parse(ran.out)["experiment_id"].get<std::int64_t>());
  const auto p = df({"promote", id, "--by", "carol"});
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const J promoted = judged("slowb");
  EXPECT_EQ(promoted["kind"], "promoted") << promoted.dump(1);
  EXPECT_EQ(promoted["changed_count"], 0) << promoted.dump(1);
}

// The protocol itself, on records made here: a round is exactly
// kEmptyBrackets + warmup + iters (b, e) pairs; one byte more, one missing,
// a socket still held open, a message the kernel did not stamp, a stamp
// before its 'b': broken, typed.
std::vector<ClockRecord> records(const std::string& bytes) {
  std::vector<ClockRecord> r;
  std::int64_t t = 1'000'000'000;
  for (char b : bytes) r.push_back({b, t += 2'000'000});
  return r;
}

std::string pairs(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "be";
  return s;
}

TEST(ClockOutsideProtocol, ARoundIsExactlyItsPairsInOrder) {
  const ClockRound ok = read_clock_round(records(pairs(kEmptyBrackets + 1 + 4)), false, 1, 4);
  ASSERT_EQ(ok.error, ClockProtocolError::none) << ok.reason;
  EXPECT_EQ(ok.empty_ms.size(), static_cast<std::size_t>(kEmptyBrackets));
  ASSERT_EQ(ok.timed_ms.size(), 4u);
  for (double v : ok.timed_ms) EXPECT_DOUBLE_EQ(v, 2.0);
  EXPECT_EQ(read_clock_round(records(pairs(kEmptyBrackets + 5) + "e"), false, 1, 4).error, ClockProtocolError::too_many);
  EXPECT_EQ(read_clock_round(records(pairs(kEmptyBrackets + 4)), false, 1, 4).error, ClockProtocolError::too_few);
  EXPECT_EQ(read_clock_round(records("bee" + pairs(kEmptyBrackets + 4)), false, 1, 4).error, ClockProtocolError::out_of_order);
  EXPECT_EQ(read_clock_round(records(pairs(kEmptyBrackets + 5)), true, 1, 4).error, ClockProtocolError::held_open);
  auto unstamped = records(pairs(kEmptyBrackets + 5));
  unstamped[5].sent_ns.reset();
  EXPECT_EQ(read_clock_round(unstamped, false, 1, 4).error, ClockProtocolError::unstamped);
  auto stepped = records(pairs(kEmptyBrackets + 5));
  stepped[2 * kEmptyBrackets + 3].sent_ns = *stepped[2 * kEmptyBrackets + 2].sent_ns - 1;
  EXPECT_EQ(read_clock_round(stepped, false, 1, 4).error, ClockProtocolError::unstamped);
}

// The samples that decide: the driver's, bounded by densefeed's intervals.
// An honest CUDA-event sample (50 us in a 126 us bracket whose empty
// brackets, timer and sync included, take 74 us) counts as itself; one
// shrunk to a fortieth counts as the bracket less the overhead and jitter;
// one longer than its bracket as the bracket.
TEST(ClockOutsideProtocol, TheDriversSamplesCountOnlyWithinTheOutsideClock) {
  const std::vector<double> empty = {0.070, 0.072, 0.074, 0.074, 0.076, 0.078, 0.074, 0.073};
  const BoundedSamples b = bound_by_outside_clock({0.050, 0.25, 12.0}, {0.126, 10.1, 10.0}, empty);
  ASSERT_EQ(b.ms.size(), 3u);
  EXPECT_DOUBLE_EQ(b.overhead_ms, 0.074);
  EXPECT_NEAR(b.jitter_ms, 3 * 0.0015, 1e-12);
  EXPECT_DOUBLE_EQ(b.ms[0], 0.050);
  EXPECT_NEAR(b.ms[1], 10.1 - 0.074 - 0.0045, 1e-12);
  EXPECT_DOUBLE_EQ(b.ms[2], 10.0);
  EXPECT_EQ(b.raised, 1u);
  EXPECT_EQ(b.lowered, 1u);
  // Without empty brackets nothing is subtracted: the bracket itself.
  EXPECT_DOUBLE_EQ(bound_by_outside_clock({1.0}, {2.0}, {}).ms[0], 2.0);
}

// The cross-check: a sample longer than the outside interval around it, or
// samples shrunk to a fortieth, are clock_disagrees; an honest driver's,
// short of the outside intervals by the bracket's overhead, are not.
TEST(ClockOutsideProtocol, TheDriversSamplesMustLieInsideTheOutsideClock) {
  EXPECT_FALSE(check_clock_agrees({{{9.9, 9.95}, {10.0, 10.0}, 0.05}}, "candidate").has_value());
  const auto longer = check_clock_agrees({{{9.9, 10.2}, {10.0, 10.0}, 0.05}}, "candidate");
  ASSERT_TRUE(longer.has_value());
  EXPECT_EQ(longer->kind, TimingFlagKind::clock_disagrees);
  EXPECT_EQ(longer->figures["iteration"], 1);
  const auto shrunk = check_clock_agrees({{{0.25, 0.25}, {10.0, 10.0}, 0.05}}, "candidate");
  ASSERT_TRUE(shrunk.has_value());
  EXPECT_EQ(shrunk->kind, TimingFlagKind::clock_disagrees);
  EXPECT_DOUBLE_EQ(shrunk->figures["inside_sum_ms"].get<double>(), 0.5);
}

}  // namespace
}  // namespace densefeed
