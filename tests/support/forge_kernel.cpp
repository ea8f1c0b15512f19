// The arm's kernel of the C++ timing-forge gate (tests/e2e/timing_forge_cxx_test.cpp):
// forge_kernel_run(x, n, y, mode, ms) writes y = 2 x and "costs" ms by
// sleeping and spinning the last 2 ms (a late wake-up on a loaded machine
// does not overshoot), counted from its entry. Modes:
//   honest     costs ms
//   fast2x     costs ms / 2
//   wrongpath  fast and wrong (y = 0) on every call but the last, whose
//              outputs a checker of the last iteration alone would see
//   cache      the first call's y again, at no cost, for the same x pointer
//   memo       an earlier call's y, at no cost, for x of equal contents
// Built in variants that cheat at load time (compile definitions):
//   FORGE_INTERPOSE  defines clock_gettime and std::chrono::steady_clock::now
//                    itself, both running 4x slow, to slow the driver's clock
//   FORGE_CTOR       a global constructor writes forged samples.json and
//                    timed.json into DENSEFEED_OUT, then returns
//   FORGE_CTOR_EXIT  a global constructor computes the right outputs for the
//                    seed, writes every file the driver would (claiming
//                    FORGE_CLAIM_MS per iteration, default 10, without
//                    running anything) and ends the process with _exit(0),
//                    after sleeping FORGE_PAD_MS (default 0) so that the
//                    samples fit in the process's run
//   FORGE_THREAD     a global constructor leaves a thread running
//   FORGE_CALL_THREAD  the last call leaves a thread running (sleeping 30 s)
//   FORGE_FORK       the first call forks a child that waits for the
//                    driver's samples.json and rewrites it claiming 0.001 ms
//                    per iteration (issue 26's fork-and-rewrite attack)
//   FORGE_CLOCK_WRITE  the first call writes an 'e' to the outside clock's
//                    socket (DENSEFEED_CLOCK_FD), to end its bracket early
//   FORGE_JOINED     every call starts a thread and joins it before it
//                    returns, as a serving model does (honest); the thread
//                    holds its own table of many descriptors, which the
//                    kernel closes after pthread_join has returned, so the
//                    joined thread is still listed when the call returns
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "forge_inputs.h"
#if defined(FORGE_CTOR_EXIT)
#include <openssl/evp.h>
#endif

namespace {

std::int64_t raw_now_ns() {
  timespec ts{};
  ::syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void spend_from(std::int64_t start_ns, double s) {
  const std::int64_t end = start_ns + static_cast<std::int64_t>(s * 1e9);
  const std::int64_t sleep = end - raw_now_ns() - 2'000'000;
  if (sleep > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(sleep));
  while (raw_now_ns() < end) {
  }
}

unsigned calls = 0;

unsigned total_calls() {
  const char* w = std::getenv("DENSEFEED_WARMUP");
  const char* i = std::getenv("DENSEFEED_ITERS");
  return static_cast<unsigned>((w ? std::atoi(w) : 0) + (i ? std::atoi(i) : 0));
}

#if defined(FORGE_CTOR) || defined(FORGE_CTOR_EXIT)
void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}
#endif

}  // namespace

extern "C" int forge_kernel_run(const double* x, std::size_t n, double* y, const char* mode_text, double ms) {
  const std::int64_t t = raw_now_ns();
  ++calls;
  const std::string mode = mode_text;
  if (mode == "wrongpath" && calls < total_calls()) {
    std::memset(y, 0, n * sizeof(double));
    return 0;
  }
  // Issue 26's caching attack: "cache" keeps the first call's y for the
  // same x pointer and size and returns it at no cost (the same arrays on
  // every call); "memo" keys it on x's contents (an FNV-1a hash of its
  // bytes), returning the result of an earlier call on equal inputs.
  static const double* cached_x = nullptr;
  static std::vector<double> cached_y;
  static std::vector<std::pair<std::uint64_t, std::vector<double>>> memo;
  std::uint64_t key = 1469598103934665603ULL;
  if (mode == "memo") {
    const auto* bytes = reinterpret_cast<const unsigned char*>(x);
    for (std::size_t i = 0; i < n * sizeof(double); ++i) key = (key ^ bytes[i]) * 1099511628211ULL;
    for (const auto& [k, v] : memo) {
      if (k == key && v.size() == n) {
        std::copy(v.begin(), v.end(), y);
        return 0;
      }
    }
  }
  if (mode == "cache" && cached_x == x && cached_y.size() == n) {
    std::copy(cached_y.begin(), cached_y.end(), y);
    return 0;
  }
  spend_from(t, mode == "fast2x" ? ms / 2e3 : ms / 1e3);
  for (std::size_t i = 0; i < n; ++i) y[i] = 2 * x[i];
  if (mode == "cache") cached_x = x, cached_y.assign(y, y + n);
  if (mode == "memo") memo.emplace_back(key, std::vector<double>(y, y + n));
#if defined(FORGE_JOINED)
  std::thread helper([] {
    rlimit files{};
    ::getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 65536);
    ::setrlimit(RLIMIT_NOFILE, &files);
    if (::unshare(CLONE_FILES) != 0) return;
    for (rlim_t k = 3; k + 1 < files.rlim_cur; ++k) {
      if (::dup(0) < 0) break;
    }
  });
  helper.join();
#endif
#if defined(FORGE_FORK)
  if (calls == 1 && ::fork() == 0) {
    const char* out = std::getenv("DENSEFEED_OUT");
    const auto samples = std::filesystem::path(out ? out : ".") / "samples.json";
    std::string forged = "{\"unit\": \"ms\", \"samples\": [0.001";
    for (int k = 1; k < std::atoi(std::getenv("DENSEFEED_ITERS")); ++k) forged += ", 0.001";
    forged += "]}\n";
    for (int i = 0; i < 20000; ++i) {  // up to 20 s
      std::error_code ec;
      if (std::filesystem::exists(samples, ec)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        std::ofstream(samples, std::ios::trunc) << forged;
        ::_exit(0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ::_exit(0);
  }
#endif
#if defined(FORGE_CLOCK_WRITE)
  if (calls == 1) {
    if (const char* fd = std::getenv("DENSEFEED_CLOCK_FD")) (void)!::write(std::atoi(fd), "e", 1);
  }
#endif
#if defined(FORGE_CALL_THREAD)
  if (calls == total_calls()) std::thread([] { std::this_thread::sleep_for(std::chrono::seconds(30)); }).detach();
#endif
  return 0;
}

#if defined(FORGE_INTERPOSE)
namespace {
std::int64_t t0 = raw_now_ns();
}
extern "C" int clock_gettime(clockid_t, timespec* ts) {
  const std::int64_t slow = t0 + (raw_now_ns() - t0) / 4;
  ts->tv_sec = slow / 1'000'000'000;
  ts->tv_nsec = slow % 1'000'000'000;
  return 0;
}
namespace std::chrono {
inline namespace _V2 {
steady_clock::time_point steady_clock::now() noexcept {
  return time_point(std::chrono::nanoseconds(t0 + (raw_now_ns() - t0) / 4));
}
}  // namespace _V2
}  // namespace std::chrono
#endif

#if defined(FORGE_CTOR) || defined(FORGE_CTOR_EXIT)
#if !defined(FORGE_CLAIM_MS)
#define FORGE_CLAIM_MS "10.0"  // the ms each forged sample claims
#endif
namespace {
// The .npy bytes of y: header as numpy writes format 1.0 for '<f8' (n,).
std::string npy(const std::vector<double>& y) {
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(y.size()) + ",), }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(reinterpret_cast<const char*>(y.data()), y.size() * sizeof(double));
  return out;
}

__attribute__((constructor)) void forge_files() {
  const std::filesystem::path out = std::getenv("DENSEFEED_OUT");
  const int iters = std::atoi(std::getenv("DENSEFEED_ITERS"));
  std::string samples = "{\"unit\": \"ms\", \"samples\": [";
  for (int i = 0; i < iters; ++i) samples += (i ? ", " : "") + std::string(FORGE_CLAIM_MS);
  samples += "]}\n";
#if defined(FORGE_CTOR)
  write(out / "samples.json", samples);
  write(out / "timed.json", "{\"iterations\": []}\n");
#else
  // Right outputs for the seed, computed once; n from the case (DENSEFEED_CASE {"n": 1000, ...}).
  const std::string c = std::getenv("DENSEFEED_CASE");
  const std::size_t n = std::stoul(c.substr(c.find("\"n\":") + 4));
  std::vector<double> y = densefeed::testing::forge_inputs(std::stoull(std::getenv("DENSEFEED_SEED")), n);
  for (double& v : y) v *= 2;
  const std::string bytes = npy(y);
  write(out / "timed" / "0" / "y.npy", bytes);
  write(out / "y.npy", bytes);
  // The sha256 the driver would record for it.
  unsigned char md[32];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  std::string sum;
  for (unsigned int i = 0; i < len; ++i) {
    sum += "0123456789abcdef"[md[i] >> 4];
    sum += "0123456789abcdef"[md[i] & 15];
  }
  std::string timed = "{\"iterations\": [";
  for (int i = 0; i < iters; ++i) timed += (i ? ", " : "") + std::string("{\"y\": \"") + sum + "\"}";
  timed += "]}\n";
  write(out / "timed.json", timed);
  write(out / "samples.json", samples);
#if defined(FORGE_PAD_MS)
  std::this_thread::sleep_for(std::chrono::milliseconds(FORGE_PAD_MS));
#endif
  _exit(0);
#endif
}
}  // namespace
#endif

#if defined(FORGE_THREAD)
namespace {
__attribute__((constructor)) void leave_thread() {
  std::thread([] { std::this_thread::sleep_for(std::chrono::seconds(30)); }).detach();
}
}  // namespace
#endif
