// forge_cxx_driver: the frozen benchmark driver of the C++ timing-forge gate
// (tests/e2e/timing_forge_cxx_test.cpp), on kernels/common/driver.h: x from
// forge_inputs.h (a set of its own per iteration, from its seed), the arm's
// forge_kernel_run(x, n, y, mode, ms) timed with
// the steady clock, y recorded.
//
//   forge_cxx_driver --n N --ms MS
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "driver.h"
#include "forge_inputs.h"
#include "harness_args.h"

using ForgeKernel = int(const double* x, std::size_t n, double* y, const char* mode, double ms);

int main(int argc, char** argv) {
  return densefeed::driver_main("forge_cxx_driver", [&] {
    densefeed::Driver driver;
    std::string n_text, ms_text;
    for (int i = 1; i + 1 < argc; i += 2) (std::string(argv[i]) == "--n" ? n_text : ms_text) = argv[i + 1];
    const std::size_t n = densefeed::parse_positive_arg("--n", n_text);
    const double ms = std::stod(ms_text);
    const std::string mode = driver.param("mode");
    std::vector<double> x = densefeed::testing::forge_inputs(driver.seed(), n);
    std::vector<double> y(n);
    auto* kernel = driver.load_kernel_as<ForgeKernel>();
    densefeed::TimingOptions options;
    // Every iteration its own inputs, in the same buffer (so a kernel that
    // keys a cache on the pointer sees the same x every call).
    options.prepare = [&](std::uint64_t seed) {
      const std::vector<double> next = densefeed::testing::forge_inputs(seed, n);
      std::copy(next.begin(), next.end(), x.begin());
    };
    options.flush = [&] { std::fill(y.begin(), y.end(), std::numeric_limits<double>::quiet_NaN()); };
    driver.time(
        [&] {
          if (const int rc = kernel(x.data(), n, y.data(), mode.c_str(), ms); rc != 0) {
            throw densefeed::DriverError(fmt::format("forge_kernel_run returned {}", rc));
          }
        },
        [&] { return std::vector{densefeed::TimedOutput::f64("y", y, {n})}; }, options);
  });
}
