// forge_cxx_harness: reference and candidate of the C++ timing-forge gate
// (tests/e2e/timing_forge_cxx_test.cpp), gate mode only: y = 2 x as y.npy,
// float64, x from forge_inputs.h.
//
//   forge_cxx_harness --n N --seed S --out DIR
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "forge_inputs.h"
#include "harness_args.h"
#include "npy_writer.h"

int main(int argc, char** argv) {
  try {
    std::string n, seed, out;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i];
      (flag == "--n" ? n : flag == "--seed" ? seed : out) = argv[i + 1];
    }
    const densefeed::HarnessEnv env = densefeed::read_harness_env();
    std::vector<double> y = densefeed::testing::forge_inputs(densefeed::seed_arg(seed, env), densefeed::parse_positive_arg("--n", n));
    for (double& v : y) v *= 2;
    const std::vector<std::size_t> shape = {y.size()};
    densefeed::write_npy(densefeed::out_arg(out, env) / "y.npy", y, shape);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "forge_cxx_harness: %s\n", e.what());
    return 2;
  }
}
