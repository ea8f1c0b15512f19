// The kda_decode harness and the gate's reference, kda_decode_reference, as
// densefeed runs them: real processes, the protocol's environment, a temporary
// output directory and the files they leave there; and every bad input refused
// with exit code 2 and a message naming what was wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensor_file.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::string kHarness = KDA_DECODE_EXE;
const std::string kReference = KDA_DECODE_REFERENCE_EXE;

class KdaHarness : public ::testing::Test {
 protected:
  testing::CliResult run(const std::string& exe, std::vector<std::string> args,
                         std::map<std::string, std::string> env = {}) {
    return testing::run_cli(exe, args, dir_.path(), env);
  }
  std::vector<double> read(const std::string& dir, const std::string& name, std::vector<std::size_t>* shape,
                           std::string* dtype) {
    const TensorFile f = TensorFile::open_npy(dir_ / dir / (name + ".npy"));
    *shape = f.shape();
    *dtype = f.dtype();
    std::vector<double> x(f.size());
    f.read_doubles(0, f.size(), x.data());
    return x;
  }
  testing::TempDir dir_;
};

double rel_l2(const std::vector<double>& c, const std::vector<double>& r) {
  double e = 0, n = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    e += (c[i] - r[i]) * (c[i] - r[i]);
    n += r[i] * r[i];
  }
  return std::sqrt(e / n);
}

TEST_F(KdaHarness, GateModeWritesBothOutputsInShapeAndCloseToTheReference) {
  const std::vector<std::string> sizes = {"--batch", "3", "--heads", "4", "--dim", "128", "--seed", "99"};
  std::vector<std::string> ref_args = sizes;
  ref_args.insert(ref_args.end(), {"--out", (dir_ / "ref").string()});
  ASSERT_EQ(run(kReference, ref_args).exit_code, 0);
  for (const std::string version : {"v0", "v3"}) {
    std::vector<std::string> args = {"--version", version};
    args.insert(args.end(), sizes.begin(), sizes.end());
    args.insert(args.end(), {"--out", (dir_ / version).string()});
    const auto r = run(kHarness, args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string name : {"o", "state"}) {
      std::vector<std::size_t> cs, rs;
      std::string cd, rd;
      const auto c = read(version, name, &cs, &cd);
      const auto ref = read("ref", name, &rs, &rd);
      EXPECT_EQ(cd, "float32");
      EXPECT_EQ(rd, "float64");
      EXPECT_EQ(cs, rs);
      const std::vector<std::size_t> want = name == "o" ? std::vector<std::size_t>{3, 4, 128}
                                                        : std::vector<std::size_t>{3, 4, 128, 128};
      EXPECT_EQ(cs, want);
      for (const double x : c) ASSERT_TRUE(std::isfinite(x));
      // The gate's bounds (gates/kda-decode.yaml).
      EXPECT_LT(rel_l2(c, ref), name == "o" ? 1e-6 : 4e-7) << version << " " << name;
    }
  }
}

TEST_F(KdaHarness, BenchModeWritesSamplesAndTheTimedOutputs) {
  const auto r = run(kHarness, {"--version", "v0", "--batch", "2", "--heads", "2", "--seed", "5"},
                     {{"DENSEFEED_MODE", "bench"}, {"DENSEFEED_WARMUP", "1"}, {"DENSEFEED_ITERS", "4"},
                      {"DENSEFEED_OUT", (dir_ / "bench").string()}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto samples = nlohmann::json::parse(testing::read_file(dir_ / "bench" / "samples.json"));
  EXPECT_EQ(samples["unit"], "ms");
  EXPECT_EQ(samples["samples"].size(), 4u);
  std::vector<std::size_t> shape;
  std::string dtype;
  const auto state = read("bench", "state", &shape, &dtype);
  EXPECT_EQ(shape, (std::vector<std::size_t>{2, 2, 128, 128}));
  for (const double x : state) ASSERT_TRUE(std::isfinite(x));
}

TEST_F(KdaHarness, TheSkipDecayFaultChangesTheStateAndSaysSo) {
  const std::vector<std::string> args = {"--version", "v3", "--batch", "1", "--heads", "2", "--seed", "3"};
  auto good = args, bad = args;
  good.insert(good.end(), {"--out", (dir_ / "good").string()});
  bad.insert(bad.end(), {"--out", (dir_ / "bad").string()});
  ASSERT_EQ(run(kHarness, good).exit_code, 0);
  const auto r = run(kHarness, bad, {{"KDA_DECODE_FAULT", "skip-decay"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("NOT decayed"), std::string::npos) << r.err;
  std::vector<std::size_t> shape;
  std::string dtype;
  EXPECT_GT(rel_l2(read("bad", "state", &shape, &dtype), read("good", "state", &shape, &dtype)), 0.1);
}

TEST_F(KdaHarness, BadInputExits2NamingTheFlagOrVariable) {
  const std::string out = (dir_ / "x").string();
  struct Bad {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string named;
  };
  const std::vector<Bad> cases = {
      {{"--version", "v9", "--batch", "1", "--out", out}, {}, "--version"},
      {{"--version", "v3", "--batch", "0", "--out", out}, {}, "--batch"},
      {{"--version", "v3", "--batch", "1", "--heads", "-4", "--out", out}, {}, "--heads"},
      {{"--version", "v3", "--batch", "1", "--device", "tpu", "--out", out}, {}, "--device"},
      {{"--version", "v3", "--batch", "1", "--seed", "1", "--out", out}, {{"KDA_DECODE_FAULT", "bogus"}}, "KDA_DECODE_FAULT"},
      {{"--version", "v3", "--batch", "1", "--seed", "1", "--out", out}, {{"DENSEFEED_MODE", "trace"}}, "DENSEFEED_MODE"},
      {{"--version", "v3", "--batch", "1", "--out", out}, {}, "--seed"},
      {{"--version", "v3", "--batch", "1"}, {{"DENSEFEED_SEED", "12"}}, "--out"},
      {{"--version", "v3", "--batch", "1", "--out", out, "--seed", "0x10"}, {}, "--seed"},
  };
  for (const auto& c : cases) {
    const auto r = run(kHarness, c.args, c.env);
    EXPECT_EQ(r.exit_code, 2) << c.named << ": " << r.err;
    EXPECT_NE(r.err.find(c.named), std::string::npos) << r.err;
  }
  const auto ref = run(kReference, {"--batch", "2", "--seed", "1", "--out", out}, {{"DENSEFEED_MODE", "bench"}});
  EXPECT_EQ(ref.exit_code, 2);
  EXPECT_NE(ref.err.find("supports gate only"), std::string::npos) << ref.err;
  const auto missing = run(kReference, {"--seed", "1", "--out", out});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--batch"), std::string::npos) << missing.err;
}

// Without CUDA in the build the harness refuses the device as bad input; with
// it, the run either works (a GPU is there) or fails as infrastructure (3)
// naming the CUDA call, never silently falls back to the CPU.
TEST_F(KdaHarness, CudaDeviceIsRefusedWithoutCudaAndNeverFallsBackToTheCpu) {
  const auto r = run(kHarness, {"--version", "v3", "--device", "cuda", "--batch", "1", "--heads", "2", "--seed",
                                "1", "--out", (dir_ / "gpu").string()});
#if KDA_DECODE_CUDA_BUILT
  if (r.exit_code == 0) {
    std::vector<std::size_t> shape;
    std::string dtype;
    EXPECT_EQ(read("gpu", "state", &shape, &dtype).size(), 2u * 128 * 128);
  } else {
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
  }
#else
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--device cuda: CUDA path not built"), std::string::npos) << r.err;
#endif
  const auto dim = run(kHarness, {"--version", "v3", "--device", "cuda", "--batch", "1", "--dim", "64", "--seed", "1",
                                  "--out", (dir_ / "gpu64").string()});
  EXPECT_EQ(dim.exit_code, 2) << dim.err;
}

}  // namespace
}  // namespace densefeed
