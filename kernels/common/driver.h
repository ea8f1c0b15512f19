// Trusted benchmark drivers in C++ (README, "Timings the candidate cannot
// forge"; issue 16): the C++ counterpart of kernels/python/densefeed_driver.py.
//
// A gate that declares
//
//   bench:
//     driver:
//       command: [affine_chain_driver, --T, "{case.T}", ...]
//       kernel: {library: libaffine_chain_kernel.so, symbol: densefeed_affine_chain_run}
//
// has densefeed run that program, built from the trusted ref's frozen files
// like the reference, once per bench round and arm, inside the arm's sandbox.
// The program builds the case's inputs with frozen code, loads the arm's
// kernel with Driver::load_kernel() and times it with Driver::time():
//
//   densefeed::Driver d;                                   // before any arm code
//   auto* run = d.load_kernel_as<densefeed_affine_chain_fn>();
//   d.time([&] { ... run(&problem) ... }, [&] { return outputs; }, options);
//
// densefeed passes, besides the harness protocol's variables:
//   DENSEFEED_KERNEL           {"library": "libX.so", "symbol": "name"} (the gate's)
//   DENSEFEED_KERNEL_PATH      the arm's bin folders, ':'-separated, in order:
//                              the folders a bare argv[0] of the arm's own
//                              commands is looked up in (ArmContext::exe_dirs:
//                              a revision's build bin, then the project's
//                              harness_path under the arm's tree)
//   DENSEFEED_ARM_PROJECT      the arm's tree
//   DENSEFEED_TRUSTED_PROJECT  the trusted tree the driver comes from (a kernel is never loaded from it)
//   DENSEFEED_PARAMS           the arm's parameters (JSON object), for the kernel's arguments
//
// The library is the first DENSEFEED_KERNEL_PATH folder's regular file of
// that name (a name with '/' or '..' is refused); its real path must lie in
// that folder's real path and, unless the trusted tree is the arm's own
// (--trust-worktree), outside the trusted tree. It is opened with
// dlopen(RTLD_NOW | RTLD_LOCAL) and the symbol must be defined by the library
// itself.
//
// Every iteration (after kEmptyBrackets empty ones: the timer started and
// stopped with nothing between) is bracketed for densefeed's outside clock
// when DENSEFEED_CLOCK_FD is set: 'b' (the kernel stamps it as it is written)
// before the timer starts, 'e' after it stops; the driver's samples count only within
// densefeed's timestamps (at most the bracket, at least the bracket less the
// empty brackets' overhead: timing_checks.h bound_by_outside_clock). After the
// calls, a process the library left (stray_processes) is a DriverError.
// Driver::time() writes OUT/samples.json (per-iteration ms), OUT/timed.json
// ({"iterations": [{OUTPUT: sha256 of its .npy bytes}, ...]}, one entry per
// timed iteration; with TimingOptions::prepare also "input_seeds", the seed
// of each timed iteration's inputs), OUT/timed/K/NAME.npy for the first
// timed iteration K of every distinct pair of input set and outputs, and the
// last iteration's outputs as
// OUT/NAME.npy; the same protocol as densefeed_driver.py, which
// orchestrator/bench_runner.cpp checks (every distinct set is gated against
// the reference of its input set's seed).
//
// What the driver checks, because the arm's library runs in this process
// (its global constructors run inside dlopen):
//   - the clock: std::chrono::steady_clock::now and the clock_gettime it
//     rests on are resolved before dlopen and kept in a page made read-only;
//     after loading and after the timed calls the page must still be
//     read-only, each pointer must still be what the process's global lookup
//     gives, the first bytes of each function's code must be unchanged, and
//     the library must define neither symbol itself (an interposition
//     attempt: a RTLD_LOCAL library cannot interpose on the driver, but one
//     that tries is not honest). LD_PRELOAD and LD_AUDIT must be unset.
//   - the output folder: empty before dlopen, still empty after it (a
//     global constructor that writes samples.json), and at the end holding
//     nothing the driver did not write;
//   - threads: none more after the calls than before dlopen (a thread could
//     rewrite what the driver records); signals are blocked while the files
//     are written, and the process ends with _exit(0) right after, so no
//     atexit handler or static destructor of the library's runs.
// Not caught in the process (densefeed's outside checks, timing_checks.h,
// are the backstop: a clock made slow shows as wall time the samples do not
// see, samples forged once as claims the wall time does not repeat): code
// that makes the driver's memory writable again and changes it (the clock
// table and its checks, libc's vDSO pointer, the samples), a clock that is
// put back before the driver looks, a library that writes every file itself
// and ends the process before the driver looks (in-process code can do all
// the driver can), and, in a driver that sets no TimingOptions::prepare, a
// kernel that caches its result across calls on the same inputs. Forged claims within the wall time's noise escape the
// outside checks too, and are left to the gate's speedup bound and its
// declared work against the machine's ceilings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness_env.h"

namespace densefeed {

// A failure the driver reports: a malformed variable, a library not found or
// refused, a kernel that returned an error, a check above that failed. The
// message says which and names the file, symbol or variable.
class DriverError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What densefeed tells a driver.
struct DriverEnv {
  HarnessEnv harness;  // mode bench; seed and out set
  std::string library;
  std::string symbol;
  std::vector<std::filesystem::path> kernel_path;
  std::filesystem::path arm_project;
  std::filesystem::path trusted_project;  // the arm's tree when unset
  nlohmann::json params = nlohmann::json::object();
  // DENSEFEED_CLOCK_FD: densefeed's outside-clock socket (orchestrator/
  // outside_clock.h); -1 where densefeed cannot reach the driver with one.
  int clock_fd = -1;
  // DENSEFEED_INPUT_SEEDS: the seed of each iteration's input set, warm-up
  // first then the timed ones (orchestrator/input_sets.h); empty when unset.
  std::vector<std::uint64_t> input_seeds;
};

// Brackets with nothing inside that time() sends before the warm-up, for
// densefeed's figure of the bracket's overhead (outside_clock.h's
// kEmptyBrackets).
inline constexpr int kEmptyBrackets = 8;

// Processes besides this one that the kernel library left: "PID (command)".
// Inside the sandbox (its own PID namespace, pid 1 bwrap) every process /proc
// lists except this one and its ancestors; outside it, this process's
// descendants (the Driver is a child subreaper, so an orphaned grandchild is
// still one) and, when this process leads its group (densefeed starts it with
// setsid), the group's members. Zombies (state Z, X) run no code and are not
// counted.
std::vector<std::string> stray_processes();

// Reads the variables through `lookup`. Throws DriverError naming the
// variable: not bench mode, no seed or out, DENSEFEED_KERNEL not a
// {"library", "symbol"} object, a library name with '/' or '..' or a symbol
// that is not a C identifier, no DENSEFEED_ARM_PROJECT or
// DENSEFEED_KERNEL_PATH, DENSEFEED_PARAMS not a JSON object.
DriverEnv read_driver_env(const EnvLookup& lookup);

// The library's real path, as the header says. Throws DriverError naming the
// folders looked in.
std::filesystem::path find_kernel_library(const DriverEnv& env);

// One output of a timed iteration as the gate names it: a C-order array of
// float32 ("<f4") or float64 ("<f8"). The data is read when time() records
// the iteration, so it may point at a buffer each call overwrites.
struct TimedOutput {
  std::string name;
  std::string descr;
  std::vector<std::size_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;

  static TimedOutput f32(std::string name, std::span<const float> data, std::vector<std::size_t> shape);
  static TimedOutput f64(std::string name, std::span<const double> data, std::vector<std::size_t> shape);
};

// The timer of one call: start() just before it, stop_ms() just after; the
// region must hold all the call's work (a device timer synchronises).
class CallTimer {
 public:
  virtual ~CallTimer() = default;
  virtual void start() = 0;
  virtual double stop_ms() = 0;
  // The least call of this timer's device, for the empty brackets (between
  // start() and stop_ms() with no kernel call): what an honest call's sample
  // is short of densefeed's bracket by beyond the timer itself (a device's
  // launch and completion latency). Nothing on the CPU.
  virtual void empty_call() {}
  // Before densefeed's bracket opens: waits for the device work queued
  // outside the timed region (an input upload, the L2 flush, the outputs'
  // poisoning), so that the bracket holds the call alone, as the device
  // timer does. Nothing on the CPU.
  virtual void settle() {}
};

struct TimingOptions {
  // Before every call (and before flush), outside the timed region: build
  // that iteration's input set from `seed` (DENSEFEED_INPUT_SEEDS' entry;
  // the run's seed when unset) where the call will read it. Set by every
  // bundled driver: the kernel never sees the same inputs twice in a
  // process, so a kernel caching its results gains nothing, and densefeed
  // gates each timed iteration against the reference of its set; timed.json
  // then records "input_seeds". Required when densefeed sets
  // DENSEFEED_INPUT_SEEDS (DriverError); unset by hand: the same inputs.
  std::function<void(std::uint64_t seed)> prepare;
  // Before every call, outside the timed region: an L2 flush, the outputs
  // poisoned with NaN so that an element a call does not write shows.
  std::function<void()> flush;
  // Default: std::chrono::steady_clock through the driver's protected clock.
  CallTimer* timer = nullptr;
  // A library that keeps threads of its own by design; its gate's frozen
  // driver says so.
  bool allow_threads = false;
};

class Driver {
 public:
  // Reads the process's environment, checks the output folder is empty and
  // that no LD_PRELOAD / LD_AUDIT is set, and takes the clock's snapshot.
  // Construct it first in main(), before any arm code can run.
  // Throws DriverError.
  Driver();
  explicit Driver(DriverEnv env);
  ~Driver();
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  const DriverEnv& env() const { return env_; }
  std::uint64_t seed() const { return *env_.harness.seed; }
  const std::filesystem::path& out() const { return *env_.harness.out; }

  // The arm's string parameter `name` (DENSEFEED_PARAMS). Throws DriverError
  // when it is absent or not a string.
  std::string param(const std::string& name) const;

  // Finds and opens the arm's library and returns the address of the
  // gate's symbol; then checks the clock, the output folder and the threads
  // (its constructors have run). Call it once, after everything the driver
  // itself sets up (a device's context: its threads count as the driver's).
  // Throws DriverError.
  void* load_kernel();
  template <typename F>
  F* load_kernel_as() {
    return reinterpret_cast<F*>(load_kernel());
  }

  // The protected clock's steady_clock::now(), in ns since its epoch.
  std::int64_t now_ns() const;

  // Runs `call` DENSEFEED_WARMUP + DENSEFEED_ITERS times, each as:
  // flush(), timer start, call(), timer stop, then (timed iterations only)
  // outputs() hashed and recorded. Writes the files the header names and
  // ends the process with _exit(0). Throws DriverError (from call or a
  // failed check) before anything is written.
  [[noreturn]] void time(const std::function<void()>& call,
                         const std::function<std::vector<TimedOutput>()>& outputs,
                         const TimingOptions& options = {});

 private:
  struct Clock;
  void check_untouched(const std::string& when) const;
  std::size_t threads() const;          // this process's running threads (/proc/self/task)
  std::size_t threads_settled() const;  // threads(), after up to 200 ms for joined ones to be released
  void check_out_empty(const std::string& when) const;

  DriverEnv env_;
  Clock* clock_ = nullptr;  // one read-only page (mmap), see the header
  void* library_ = nullptr;
  std::size_t threads_before_ = 0;
};

// main() of a driver program: runs body() and maps its failures to exit
// codes, printing "NAME: message" on stderr: 1 for DriverError and anything
// else the run throws (the bench stage is red for the candidate, error for
// the base), 2 for a bad argument (std::invalid_argument).
int driver_main(const char* name, const std::function<void()>& body);

}  // namespace densefeed
