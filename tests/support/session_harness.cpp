// A C++ session harness (kernels/common/session_serve.h) for the Session
// tests: y = 2 x, x[i] = (splitmix64(seed + i) >> 11) * 2^-53 for i < n (n
// from the case). --fail-at N throws in case n = N (an error answer, the
// session goes on); --exit-at N exits 3 in it; --chatty 1 writes a line on
// stdout in every case, through printf and std::cout (serve sends both to
// stderr: descriptor 1 carries the answers alone).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "npy_writer.h"
#include "samples_writer.h"
#include "session_serve.h"

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

int main(int argc, char** argv) {
  long fail_at = -1, exit_at = -1, chatty = 0;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--fail-at") fail_at = std::atol(argv[i + 1]);
    if (std::string(argv[i]) == "--exit-at") exit_at = std::atol(argv[i + 1]);
    if (std::string(argv[i]) == "--chatty") chatty = std::atol(argv[i + 1]);
  }
  densefeed::serve([&](const densefeed::HarnessEnv& env, const densefeed::SessionCase& c) {
    const long n = std::atol(c.at("n").c_str());
    if (n == fail_at) throw std::runtime_error("no kernel for n = " + std::to_string(n));
    if (n == exit_at) std::exit(3);
    if (chatty) {
      std::printf("printf: case n = %ld\n", n);
      std::fflush(stdout);
      std::cout << "cout: case n = " << n << std::endl;
    }
    std::vector<double> y(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = 2.0 * static_cast<double>(splitmix64(*env.seed + i) >> 11) * 0x1.0p-53;
    const std::size_t shape[] = {y.size()};
    densefeed::write_npy(*env.out / "y.npy", y, shape);
  });
  return 0;
}
