#include "driver.h"

#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>

#include "npy_writer.h"
#include "samples_writer.h"

namespace densefeed {

namespace {

// Bytes of each clock function's code kept to see an inline hook (a jump
// written over its first instructions): longer than any x86-64 or AArch64
// jump sequence.
constexpr std::size_t kCodeBytes = 32;

// libstdc++'s std::chrono::steady_clock::now() (the _V2 inline namespace
// since GCC 4.8.3, GLIBCXX_3.4.19) and what it reads the clock with.
constexpr const char* kNowSymbol = "_ZNSt6chrono3_V212steady_clock3nowEv";
constexpr const char* kGetTimeSymbol = "clock_gettime";

std::optional<std::string> process_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

bool is_c_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

bool inside(const std::filesystem::path& p, const std::filesystem::path& dir) {
  const auto rel = p.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

std::string sha256_hex(std::string_view header, const void* data, std::size_t bytes) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), header.data(), header.size()) != 1 ||
      EVP_DigestUpdate(ctx.get(), data, bytes) != 1 || EVP_DigestFinal_ex(ctx.get(), md.data(), &len) != 1) {
    throw DriverError("OpenSSL: SHA-256 failed");
  }
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", md[i]);
  return hex;
}

std::size_t itemsize(const std::string& descr) {
  if (descr == "<f4") return 4;
  if (descr == "<f8") return 8;
  throw DriverError(fmt::format("output dtype '{}': the driver writes <f4 or <f8", descr));
}

void write_output(const std::filesystem::path& path, const TimedOutput& o, const void* data) {
  if (o.descr == "<f4") {
    write_npy(path, std::span<const float>(static_cast<const float*>(data), o.bytes / 4), o.shape);
  } else {
    write_npy(path, std::span<const double>(static_cast<const double*>(data), o.bytes / 8), o.shape);
  }
}

// The mapping of /proc/self/maps holding `address`: its permissions ("r--p").
std::string permissions_of(const void* address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  while (std::getline(maps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %7s", &lo, &hi, perms) == 3 && a >= lo && a < hi) return perms;
  }
  return "";
}

// The steady clock as time() reads it: through the protected page.
class SteadyTimer : public CallTimer {
 public:
  explicit SteadyTimer(const Driver& d) : d_(d) {}
  void start() override { t0_ = d_.now_ns(); }
  double stop_ms() override { return static_cast<double>(d_.now_ns() - t0_) / 1e6; }

 private:
  const Driver& d_;
  std::int64_t t0_ = 0;
};

// Writes one byte of the outside clock's protocol (outside_clock.h).
void clock_send(int fd, char byte) {
  for (;;) {
    const ssize_t n = ::write(fd, &byte, 1);
    if (n == 1) return;
    if (n < 0 && errno == EINTR) continue;
    throw DriverError(fmt::format("the outside clock's socket (DENSEFEED_CLOCK_FD={}): write failed: {}", fd,
                                  n < 0 ? std::strerror(errno) : "nothing written"));
  }
}

// The kernel stamps the byte inside this write (outside_clock.h): the stamp
// precedes whatever the driver does after it returns.
void clock_begin(int fd) {
  if (fd >= 0) clock_send(fd, 'b');
}

void clock_end(int fd) {
  if (fd >= 0) clock_send(fd, 'e');
}

struct ProcStat {
  pid_t ppid = 0;
  pid_t pgrp = 0;
  char state = '?';
  std::string command;
};

std::optional<ProcStat> proc_stat(const std::string& pid) {
  std::string text;
  std::getline(std::ifstream("/proc/" + pid + "/stat"), text);
  const auto open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= text.size()) return std::nullopt;
  ProcStat st;
  std::istringstream rest(text.substr(close + 2));
  rest >> st.state >> st.ppid >> st.pgrp;
  std::ifstream cmdline("/proc/" + pid + "/cmdline", std::ios::binary);
  std::string cmd((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  std::replace(cmd.begin(), cmd.end(), '\0', ' ');
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  st.command = cmd.empty() ? text.substr(open + 1, close - open - 1) : cmd.substr(0, 80);
  return st;
}

}  // namespace

std::vector<std::string> stray_processes() {
  const pid_t me = ::getpid(), group = ::getpgrp();
  std::map<pid_t, ProcStat> procs;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) continue;
    if (auto st = proc_stat(name)) procs[static_cast<pid_t>(std::stol(name))] = std::move(*st);
  }
  std::set<pid_t> ancestors;
  for (pid_t p = me; procs.count(p) && !ancestors.count(p); p = procs[p].ppid) ancestors.insert(p);
  const bool sandboxed = procs.count(1) && procs[1].command.substr(0, procs[1].command.find(' ')).ends_with("bwrap");
  // The group is the driver's own only when it leads it (densefeed's launcher
  // starts it with setsid); otherwise its members are whoever started it and
  // their other children (ctest's parallel tests, a shell's jobs).
  const bool own_group = group == me;
  const auto descends = [&](pid_t pid) {
    std::set<pid_t> seen;
    while (procs.count(pid) && seen.insert(pid).second) {
      pid = procs[pid].ppid;
      if (pid == me) return true;
    }
    return false;
  };
  std::vector<std::string> out;
  for (const auto& [pid, st] : procs) {
    if (ancestors.count(pid) || st.state == 'Z' || st.state == 'X') continue;
    if (sandboxed || (own_group && st.pgrp == group) || descends(pid)) out.push_back(fmt::format("{} ({})", pid, st.command));
  }
  return out;
}

// One page of its own (mmap), read-only once filled: what the timing rests on.
struct Driver::Clock {
  using Now = std::chrono::steady_clock::time_point (*)();
  using GetTime = int (*)(clockid_t, timespec*);
  Now now = nullptr;
  GetTime gettime = nullptr;
  unsigned char now_code[kCodeBytes] = {};
  unsigned char gettime_code[kCodeBytes] = {};
};

DriverEnv read_driver_env(const EnvLookup& lookup) {
  DriverEnv env;
  try {
    env.harness = read_harness_env(lookup);
  } catch (const HarnessEnvError& e) {
    throw DriverError(e.what());
  }
  if (env.harness.mode != HarnessMode::bench) {
    throw DriverError(fmt::format("DENSEFEED_MODE={}: a benchmark driver runs in bench mode only", to_string(env.harness.mode)));
  }
  if (!env.harness.seed) throw DriverError("DENSEFEED_SEED is not set: densefeed draws the seed");
  if (!env.harness.out) throw DriverError("DENSEFEED_OUT is not set: densefeed names the output folder");
  const std::string kernel = lookup("DENSEFEED_KERNEL").value_or("");
  const auto doc = nlohmann::json::parse(kernel, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("library") || !doc["library"].is_string() ||
      !doc.contains("symbol") || !doc["symbol"].is_string()) {
    throw DriverError(fmt::format("DENSEFEED_KERNEL: expected {{\"library\": ..., \"symbol\": ...}} (a C entry point), got '{}'",
                                  kernel));
  }
  env.library = doc["library"];
  env.symbol = doc["symbol"];
  if (env.library.empty() || env.library.find('/') != std::string::npos || env.library.find("..") != std::string::npos) {
    throw DriverError(fmt::format("DENSEFEED_KERNEL: library '{}': a file name, without '/' or '..', looked up in the arm's "
                                  "bin folders", env.library));
  }
  if (!is_c_identifier(env.symbol)) {
    throw DriverError(fmt::format("DENSEFEED_KERNEL: symbol '{}' is not a C identifier", env.symbol));
  }
  std::stringstream path(lookup("DENSEFEED_KERNEL_PATH").value_or(""));
  for (std::string dir; std::getline(path, dir, ':');) {
    if (!dir.empty()) env.kernel_path.emplace_back(dir);
  }
  if (env.kernel_path.empty()) throw DriverError("DENSEFEED_KERNEL_PATH is empty: densefeed names the arm's bin folders");
  env.arm_project = lookup("DENSEFEED_ARM_PROJECT").value_or("");
  if (env.arm_project.empty()) throw DriverError("DENSEFEED_ARM_PROJECT is not set: densefeed names the arm's tree");
  env.trusted_project = lookup("DENSEFEED_TRUSTED_PROJECT").value_or("");
  if (env.trusted_project.empty()) env.trusted_project = env.arm_project;
  if (const std::string clock = lookup("DENSEFEED_CLOCK_FD").value_or(""); !clock.empty()) {
    if (!std::all_of(clock.begin(), clock.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) || clock.size() > 6) {
      throw DriverError(fmt::format("DENSEFEED_CLOCK_FD='{}': expected a descriptor number (densefeed sets it)", clock));
    }
    env.clock_fd = std::stoi(clock);
  }
  if (const std::string seeds = lookup("DENSEFEED_INPUT_SEEDS").value_or(""); !seeds.empty()) {
    std::stringstream list(seeds);
    for (std::string one; std::getline(list, one, ',');) {
      std::uint64_t v = 0;
      const auto [end, err] = std::from_chars(one.data(), one.data() + one.size(), v);
      if (one.empty() || err != std::errc() || end != one.data() + one.size()) {
        throw DriverError(fmt::format("DENSEFEED_INPUT_SEEDS='{}': expected comma-separated u64 seeds (densefeed sets it)",
                                      seeds.substr(0, 80)));
      }
      env.input_seeds.push_back(v);
    }
  }
  const std::string params = lookup("DENSEFEED_PARAMS").value_or("{}");
  env.params = nlohmann::json::parse(params, nullptr, false);
  if (env.params.is_discarded() || !env.params.is_object()) {
    throw DriverError(fmt::format("DENSEFEED_PARAMS: expected a JSON object, got '{}'", params));
  }
  return env;
}

std::filesystem::path find_kernel_library(const DriverEnv& env) {
  std::error_code ec;
  const auto trusted = std::filesystem::weakly_canonical(env.trusted_project, ec);
  const auto arm = std::filesystem::weakly_canonical(env.arm_project, ec);
  std::vector<std::string> looked;
  for (const auto& dir : env.kernel_path) {
    const auto candidate = dir / env.library;
    looked.push_back(dir.string());
    if (!std::filesystem::exists(candidate, ec)) continue;
    const auto real = std::filesystem::canonical(candidate, ec);
    const auto real_dir = std::filesystem::canonical(dir, ec);
    if (ec || !std::filesystem::is_regular_file(real, ec)) {
      throw DriverError(fmt::format("{}: not a regular file", candidate.string()));
    }
    // A link may not lead out of the folder it was found in: the file loaded
    // is the arm's build product, nothing else on the machine.
    if (!inside(real, real_dir)) {
      throw DriverError(fmt::format("{} is a link to {}, outside the arm's folder {}", candidate.string(), real.string(),
                                    real_dir.string()));
    }
    // The trusted tree may lie inside the arm's (a worktree holds the
    // workspace's exports): a library there is the trusted ref's build, not
    // the arm's, and timing it would measure the wrong thing.
    if (trusted != arm && inside(real, trusted)) {
      throw DriverError(fmt::format("library '{}' was found at {}, in the trusted tree {}, not the arm's {}", env.library,
                                    real.string(), trusted.string(), arm.string()));
    }
    return real;
  }
  throw DriverError(fmt::format("library '{}' is not in the arm's bin folders ({}): build the arm's kernel library",
                                env.library, fmt::join(looked, ", ")));
}

TimedOutput TimedOutput::f32(std::string name, std::span<const float> data, std::vector<std::size_t> shape) {
  return TimedOutput{std::move(name), "<f4", std::move(shape), data.data(), data.size_bytes()};
}

TimedOutput TimedOutput::f64(std::string name, std::span<const double> data, std::vector<std::size_t> shape) {
  return TimedOutput{std::move(name), "<f8", std::move(shape), data.data(), data.size_bytes()};
}

Driver::Driver() : Driver(read_driver_env(process_env)) {}

Driver::Driver(DriverEnv env) : env_(std::move(env)) {
  for (const char* name : {"LD_PRELOAD", "LD_AUDIT"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      throw DriverError(fmt::format("{} is set ('{}'): a preloaded library could replace the driver's clock", name, v));
    }
  }
  check_out_empty("when the driver started");
  // A child subreaper: a process the library forks and orphans (double fork)
  // becomes the driver's child instead of init's, so stray_processes() still
  // finds it by its parent chain (prctl(2), PR_SET_CHILD_SUBREAPER).
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
    throw DriverError(fmt::format("prctl(PR_SET_CHILD_SUBREAPER): {}", std::strerror(errno)));
  }
  void* page = ::mmap(nullptr, sizeof(Clock), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) throw DriverError(fmt::format("mmap: {}", std::strerror(errno)));
  clock_ = new (page) Clock;
  clock_->now = &std::chrono::steady_clock::now;
  clock_->gettime = &::clock_gettime;
  std::memcpy(clock_->now_code, reinterpret_cast<const void*>(clock_->now), kCodeBytes);
  std::memcpy(clock_->gettime_code, reinterpret_cast<const void*>(clock_->gettime), kCodeBytes);
  if (::mprotect(page, sizeof(Clock), PROT_READ) != 0) throw DriverError(fmt::format("mprotect: {}", std::strerror(errno)));
  check_untouched("when the driver started");
}

Driver::~Driver() {
  // time() ends the process; this runs only when a driver fails before it.
  if (clock_ != nullptr) ::munmap(clock_, sizeof(Clock));
}

std::string Driver::param(const std::string& name) const {
  if (!env_.params.contains(name) || !env_.params[name].is_string()) {
    throw DriverError(fmt::format("DENSEFEED_PARAMS: no string parameter '{}' (the gate declares it)", name));
  }
  return env_.params[name];
}

std::int64_t Driver::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_->now().time_since_epoch()).count();
}

void Driver::check_untouched(const std::string& when) const {
  std::vector<std::string> changed;
  if (const auto perms = permissions_of(clock_); perms.rfind("r--", 0) != 0) {
    changed.push_back(fmt::format("the page of the clock's pointers is '{}', no longer read-only", perms));
  }
  const std::array<std::pair<const char*, const void*>, 2> fns = {
      std::pair{kNowSymbol, reinterpret_cast<const void*>(clock_->now)},
      std::pair{kGetTimeSymbol, reinterpret_cast<const void*>(clock_->gettime)}};
  for (const auto& [symbol, fn] : fns) {
    if (const void* global = ::dlsym(RTLD_DEFAULT, symbol); global != fn) {
      changed.push_back(fmt::format("{} now resolves to {} instead of {}", symbol, global, fn));
    }
    if (library_ != nullptr) {
      if (const void* own = ::dlsym(library_, symbol); own != nullptr && own != fn) {
        changed.push_back(fmt::format("the kernel library defines {} itself (an attempt to interpose on the driver's clock)", symbol));
      }
    }
  }
  if (std::memcmp(clock_->now_code, reinterpret_cast<const void*>(clock_->now), kCodeBytes) != 0) {
    changed.push_back(fmt::format("the code of {} was rewritten", kNowSymbol));
  }
  if (std::memcmp(clock_->gettime_code, reinterpret_cast<const void*>(clock_->gettime), kCodeBytes) != 0) {
    changed.push_back(fmt::format("the code of {} was rewritten", kGetTimeSymbol));
  }
  if (!changed.empty()) {
    throw DriverError(fmt::format("{}, what the driver's clock rests on had changed: {}: its timings cannot be trusted", when,
                                  fmt::join(changed, "; ")));
  }
}

std::size_t Driver::threads() const {
  // A thread the library joined may still be listed for a moment while the
  // kernel tears it down (pthread_join returns once its tid is cleared, in
  // do_exit, before the task is released). It runs no user code once its
  // memory is gone: a task whose state is Z or X (proc(5), stat field 3), or
  // whose status has no VmSize (no mm), is not counted.
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    std::string text;
    std::getline(std::ifstream(it->path() / "stat"), text);
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;  // already gone
    const char state = close + 2 < text.size() ? text[close + 2] : '?';
    if (state == 'Z' || state == 'X') continue;
    std::ifstream status(it->path() / "status");
    bool has_mm = false;
    for (std::string line; !has_mm && std::getline(status, line);) has_mm = line.rfind("VmSize:", 0) == 0;
    if (has_mm) ++n;
  }
  return n;
}

std::size_t Driver::threads_settled() const {
  // Up to 200 ms for joined threads to be released (no time an attacker's
  // thread gains: it could as well have ended before the check); a thread
  // still running after that is one the library left behind.
  std::size_t n = threads();
  for (int i = 0; i < 40 && n > threads_before_; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    n = threads();
  }
  return n;
}

void Driver::check_out_empty(const std::string& when) const {
  std::error_code ec;
  std::vector<std::string> found;
  for (auto it = std::filesystem::directory_iterator(out(), ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    found.push_back(it->path().filename().string());
  }
  if (ec) throw DriverError(fmt::format("{}: cannot be listed: {}", out().string(), ec.message()));
  if (!found.empty()) {
    std::sort(found.begin(), found.end());
    throw DriverError(fmt::format("{}, the output folder {} already held {}: only the driver writes there", when,
                                  out().string(), fmt::join(found, ", ")));
  }
}

void* Driver::load_kernel() {
  if (library_ != nullptr) throw DriverError("load_kernel() was called twice");
  const auto path = find_kernel_library(env_);
  threads_before_ = threads();
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw DriverError(fmt::format("dlopen {}: {}", path.string(), ::dlerror()));
  library_ = handle;
  // Its constructors have run: whatever they did shows now.
  check_untouched(fmt::format("after loading {}", path.string()));
  check_out_empty(fmt::format("after loading {}", path.string()));
  if (threads() > threads_before_) {
    throw DriverError(fmt::format("loading {} started {} thread(s): a thread could rewrite what the driver records", path.string(),
                                  threads() - threads_before_));
  }
  ::dlerror();
  void* symbol = ::dlsym(handle, env_.symbol.c_str());
  if (symbol == nullptr) {
    throw DriverError(fmt::format("{} has no symbol '{}' (the gate's C entry point)", path.string(), env_.symbol));
  }
  // The symbol must be the library's own, not one of its dependencies'.
  Dl_info info{};
  link_map* map = nullptr;
  if (::dladdr(symbol, &info) == 0 || ::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr ||
      info.dli_fname == nullptr || map->l_name == nullptr || std::strcmp(info.dli_fname, map->l_name) != 0) {
    throw DriverError(fmt::format("symbol '{}' is not defined by {} itself ({})", env_.symbol, path.string(),
                                  info.dli_fname ? info.dli_fname : "unknown object"));
  }
  return symbol;
}

void Driver::time(const std::function<void()>& call, const std::function<std::vector<TimedOutput>()>& outputs,
                  const TimingOptions& options) {
  if (library_ == nullptr) throw DriverError("time() before load_kernel()");
  SteadyTimer steady(*this);
  CallTimer& timer = options.timer != nullptr ? *options.timer : steady;
  const unsigned warmup = env_.harness.warmup, iters = env_.harness.iters;
  std::vector<double> samples;
  nlohmann::json iterations = nlohmann::json::array();
  std::set<std::string> seen;
  std::set<std::filesystem::path> written;
  std::vector<TimedOutput> last;
  std::vector<std::string> last_bytes;
  const int clock = env_.clock_fd;
  // One input set per iteration (TimingOptions::prepare), each from its own
  // seed; by hand (no DENSEFEED_INPUT_SEEDS) every iteration the run's seed.
  std::vector<std::uint64_t> seeds;
  if (!options.prepare && !env_.input_seeds.empty()) {
    throw DriverError("densefeed draws a set of inputs for every iteration (DENSEFEED_INPUT_SEEDS): the gate's driver must set "
                      "TimingOptions::prepare, building one set from its seed");
  }
  if (options.prepare) {
    seeds = env_.input_seeds;
    if (seeds.empty()) seeds.assign(warmup + iters, seed());
    if (seeds.size() != warmup + iters) {
      throw DriverError(fmt::format("DENSEFEED_INPUT_SEEDS has {} seeds for {} iterations (warm-up and timed)", seeds.size(),
                                    warmup + iters));
    }
  }
  // Empty brackets: the timer (and a device timer's least call and its
  // synchronisation) with no kernel call between start and stop, so densefeed's figure of the overhead
  // holds what an honest sample is short of its bracket by.
  for (int k = 0; k < kEmptyBrackets; ++k) {
    timer.settle();
    clock_begin(clock);
    timer.start();
    timer.empty_call();
    (void)timer.stop_ms();
    clock_end(clock);
  }
  for (unsigned k = 0; k < warmup + iters; ++k) {
    if (options.prepare) options.prepare(seeds[k]);
    if (options.flush) options.flush();
    timer.settle();
    clock_begin(clock);
    timer.start();
    call();
    const double ms = timer.stop_ms();
    clock_end(clock);
    if (k < warmup) continue;
    samples.push_back(ms);
    std::vector<TimedOutput> outs = outputs();
    nlohmann::json entry = nlohmann::json::object();
    std::vector<std::string> headers;
    for (const auto& o : outs) {
      std::size_t count = 1;
      for (std::size_t d : o.shape) count *= d;
      if (o.name.empty() || entry.contains(o.name) || o.data == nullptr || count * itemsize(o.descr) != o.bytes) {
        throw DriverError(fmt::format("output '{}': empty, repeated, or {} bytes for shape ({})", o.name, o.bytes,
                                      fmt::join(o.shape, ", ")));
      }
      headers.push_back(npy_header(o.descr, o.shape));
      entry[o.name] = sha256_hex(headers.back(), o.data, o.bytes);
    }
    // Kept once per pair of input set and outputs: the same outputs for two
    // sets are two things to gate.
    const std::string key = (seeds.empty() ? std::string() : std::to_string(seeds[k]) + " ") + entry.dump();
    if (seen.insert(key).second) {
      const auto dir = out() / "timed" / std::to_string(k - warmup);
      std::filesystem::create_directories(dir);
      written.insert(out() / "timed");
      written.insert(dir);
      for (const auto& o : outs) {
        write_output(dir / (o.name + ".npy"), o, o.data);
        written.insert(dir / (o.name + ".npy"));
      }
    }
    iterations.push_back(std::move(entry));
    if (k + 1 == warmup + iters) {
      last = outs;
      for (const auto& o : outs) last_bytes.emplace_back(static_cast<const char*>(o.data), o.bytes);
    }
  }
  check_untouched("after the timed calls");
  if (const std::size_t now = options.allow_threads ? 0 : threads_settled(); now > threads_before_) {
    throw DriverError(fmt::format("the kernel library left {} thread(s) running after its calls: a thread could rewrite what the "
                                  "driver records, so its timings cannot be trusted", now - threads_before_));
  }
  if (const auto strays = stray_processes(); !strays.empty()) {
    throw DriverError(fmt::format("the kernel library left {} process(es) running after its calls ({}): a process could rewrite "
                                  "what the driver records, so its timings cannot be trusted", strays.size(),
                                  fmt::join(std::vector<std::string>(strays.begin(), strays.begin() + std::min<std::size_t>(3, strays.size())), ", ")));
  }
  std::error_code ec;
  std::vector<std::string> foreign;
  for (auto it = std::filesystem::recursive_directory_iterator(out(), ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!written.count(it->path())) foreign.push_back(std::filesystem::relative(it->path(), out()).string());
  }
  if (!foreign.empty()) {
    throw DriverError(fmt::format("the output folder holds {}, which the driver did not write: the kernel library wrote there",
                                  fmt::join(foreign, ", ")));
  }
  // From here to _exit nothing of the library's may run: no signal handler
  // in the middle of the writes, no atexit handler or destructor after them.
  sigset_t all;
  sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, nullptr);
  for (std::size_t i = 0; i < last.size(); ++i) write_output(out() / (last[i].name + ".npy"), last[i], last_bytes[i].data());
  {
    std::ofstream timed(out() / "timed.json", std::ios::trunc);
    nlohmann::json record{{"iterations", iterations}};
    if (options.prepare && !env_.input_seeds.empty()) record["input_seeds"] = std::vector<std::uint64_t>(seeds.begin() + warmup, seeds.end());
    timed << record.dump() << '\n';
    timed.close();
    if (!timed) throw DriverError(fmt::format("{}: write failed", (out() / "timed.json").string()));
  }
  write_samples_json(out() / "samples.json", samples);
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(0);
}

int driver_main(const char* name, const std::function<void()>& body) {
  try {
    body();
    std::fprintf(stderr, "%s: the driver ended without timing the kernel\n", name);
    return 3;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace densefeed
