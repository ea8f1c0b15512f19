// The affine_chain harness and the gate's reference, affine_chain_reference, as
// densefeed runs them: real processes, the protocol's environment, a temporary
// output directory, and the files they leave there.
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/process.hpp>
#include <nlohmann/json.hpp>

namespace {

namespace bp = boost::process;
namespace fs = std::filesystem;

struct Result {
  int exit_code = -1;
  std::string stderr_text;
};

// A parsed .npy file (format 1.0, C order).
struct Npy {
  std::string descr;
  std::vector<std::size_t> shape;
  std::string data;
};

// Minimal reader for the files the harness writes; fails the test on anything
// else. Checks the header against the format spec rather than trusting it.
Npy read_npy(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  Npy npy;
  EXPECT_GE(bytes.size(), 10u);
  if (bytes.size() < 10) return npy;
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) |
      (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos) << header;
  const std::size_t d = header.find("'descr': '");
  EXPECT_NE(d, std::string::npos);
  npy.descr = header.substr(d + 10, 3);
  const std::size_t open = header.find("'shape': (");
  const std::size_t close = header.find(')', open);
  std::string dims = header.substr(open + 10, close - open - 10);
  for (std::size_t pos = 0; pos < dims.size();) {
    const std::size_t comma = dims.find(',', pos);
    const std::string item = dims.substr(pos, comma - pos);
    if (item.find_first_not_of(' ') != std::string::npos) npy.shape.push_back(std::stoul(item));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  npy.data = bytes.substr(10 + header_len);
  return npy;
}

template <typename T>
std::vector<T> values(const Npy& npy) {
  std::vector<T> v(npy.data.size() / sizeof(T));
  std::memcpy(v.data(), npy.data.data(), v.size() * sizeof(T));
  return v;
}

class AffineChainHarness : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "affine_chain_harness.XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `exe` (the harness by default) with `args` and the protocol variables
  // `vars` on top of this process's environment (from which any DENSEFEED_* is
  // removed first).
  Result run(const std::vector<std::string>& args,
             const std::map<std::string, std::string>& vars = {},
             const std::string& exe = AFFINE_CHAIN_EXE) {
    bp::environment env = boost::this_process::environment();
    for (const char* name : {"DENSEFEED_MODE", "DENSEFEED_SEED", "DENSEFEED_OUT",
                             "DENSEFEED_WARMUP", "DENSEFEED_ITERS", "DENSEFEED_CASE"}) {
      if (env.find(name) != env.end()) env.erase(name);
    }
    for (const auto& [name, value] : vars) env[name] = value;
    bp::ipstream err;
    bp::child child(bp::exe = exe, bp::args = args, env, bp::std_out > bp::null,
                    bp::std_err > err, bp::std_in < bp::null);
    Result r;
    for (std::string line; std::getline(err, line);) r.stderr_text += line + "\n";
    child.wait();
    r.exit_code = child.exit_code();
    return r;
  }

  // A small varlen case: 2 sequences, 2 heads, K = 32, V = 16, 4 shards.
  std::vector<std::string> small_case(const std::string& path, const std::string& precision,
                                      const std::string& shards) {
    return {"--path",     path,      "--precision", precision, "--T",      "1024",
            "--seq-lens", "300,724", "--shards",    shards,    "--heads",  "2",
            "--dim-k",    "32",      "--dim-v",     "16",      "--regime", "long-memory"};
  }

  fs::path dir_;
};

TEST_F(AffineChainHarness, GateWritesFinalStatesAsNpy) {
  const fs::path out = dir_ / "candidate";
  fs::create_directory(out);
  const Result r = run(small_case("partitioned", "tf32x3", "4"),
                       {{"DENSEFEED_SEED", "123"}, {"DENSEFEED_OUT", out.string()}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(std::distance(fs::directory_iterator(out), fs::directory_iterator()), 1);
  const Npy npy = read_npy(out / "final_state.npy");
  EXPECT_EQ(npy.descr, "<f4");
  EXPECT_EQ(npy.shape, (std::vector<std::size_t>{2, 2, 32, 16}));
  const std::vector<float> v = values<float>(npy);
  ASSERT_EQ(v.size(), 2u * 2 * 32 * 16);
  ASSERT_EQ(npy.data.size(), v.size() * 4);
  std::size_t nonzero = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    nonzero += (x != 0.0f);
  }
  EXPECT_EQ(nonzero, v.size());
}

TEST_F(AffineChainHarness, ReferenceIsFloat64AndAgreesWithTheCandidate) {
  const fs::path ref = dir_ / "reference";
  const fs::path cand = dir_ / "candidate";
  std::vector<std::string> ref_args = small_case("unpartitioned", "fp64", "1");
  ref_args.insert(ref_args.end(), {"--seed", "77", "--out", ref.string()});
  ASSERT_EQ(run(ref_args).exit_code, 0);
  std::vector<std::string> cand_args = small_case("partitioned", "ieee", "4");
  cand_args.insert(cand_args.end(), {"--seed", "77", "--out", cand.string()});
  ASSERT_EQ(run(cand_args).exit_code, 0);

  const Npy r = read_npy(ref / "final_state.npy");
  const Npy c = read_npy(cand / "final_state.npy");
  EXPECT_EQ(r.descr, "<f8");
  EXPECT_EQ(r.shape, c.shape);
  const std::vector<double> rv = values<double>(r);
  const std::vector<float> cv = values<float>(c);
  ASSERT_EQ(rv.size(), cv.size());
  double num = 0.0;
  double den = 0.0;
  for (std::size_t i = 0; i < rv.size(); ++i) {
    num += (cv[i] - rv[i]) * (cv[i] - rv[i]);
    den += rv[i] * rv[i];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-5);

  // Same seed, another process: the same bytes. Another seed: other inputs.
  const fs::path again = dir_ / "again";
  cand_args.back() = again.string();
  ASSERT_EQ(run(cand_args).exit_code, 0);
  EXPECT_EQ(read_npy(again / "final_state.npy").data, c.data);
  const fs::path other = dir_ / "other";
  cand_args[cand_args.size() - 3] = "78";
  cand_args.back() = other.string();
  ASSERT_EQ(run(cand_args).exit_code, 0);
  EXPECT_NE(read_npy(other / "final_state.npy").data, c.data);
}

TEST_F(AffineChainHarness, BenchWritesOneSamplePerTimedIteration) {
  const fs::path out = dir_ / "bench";
  fs::create_directory(out);
  const Result r = run(small_case("partitioned", "tf32", "2"), {{"DENSEFEED_MODE", "bench"},
                                                                {"DENSEFEED_SEED", "5"},
                                                                {"DENSEFEED_OUT", out.string()},
                                                                {"DENSEFEED_WARMUP", "2"},
                                                                {"DENSEFEED_ITERS", "4"}});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  std::ifstream in(out / "samples.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc.at("unit"), "ms");
  ASSERT_EQ(doc.at("samples").size(), 4u);
  for (const auto& s : doc.at("samples")) EXPECT_GT(s.get<double>(), 0.0);
  // The last timed iteration's output, the same as gate mode writes for the
  // same arguments: densefeed checks that what was timed is what was gated.
  const fs::path gated = dir_ / "gated";
  fs::create_directory(gated);
  auto args = small_case("partitioned", "tf32", "2");
  ASSERT_EQ(run(args, {{"DENSEFEED_SEED", "5"}, {"DENSEFEED_OUT", gated.string()}}).exit_code, 0);
  EXPECT_EQ(read_npy(out / "final_state.npy").data, read_npy(gated / "final_state.npy").data);
}

TEST_F(AffineChainHarness, BadInputExitsTwoWithOneLineNamingIt) {
  struct Bad {
    std::vector<std::string> args;  // replace or add to the small case
    std::map<std::string, std::string> vars;
    std::string expected;  // substring of the message
  };
  const std::vector<Bad> cases = {
      {{"--precision", "fp16"}, {}, "--precision: expected fp64, ieee, tf32, tf32-rn or tf32x3"},
      {{"--path", "sideways"}, {}, "--path: expected unpartitioned or partitioned"},
      {{"--shards", "3"}, {}, "--shards: expected a divisor of --T = 1024, got 3"},
      {{"--seq-lens", "300,700"}, {}, "--seq-lens: lengths sum to 1000, expected --T = 1024"},
      {{"--T", "-5"}, {}, "--T"},
      {{"--regime", "slow"}, {}, "--regime: expected long-memory or fast-decay"},
      {{"--heads", "two"}, {}, "--heads: expected a positive integer"},
      {{"--bogus", "1"}, {}, "--bogus"},
#if defined(AFFINE_CHAIN_HAS_CUDA)
      // Refused before any GPU is touched, so these hold on a machine without one.
      {{"--device", "cuda"}, {}, "--dim-k: --device cuda supports 128, got 32"},
      {{"--device", "cuda", "--dim-k", "128"}, {}, "--dim-v: --device cuda supports a multiple of 32, got 16"},
      {{"--device", "cuda", "--precision", "fp64"}, {}, "--precision fp64: runs on the CPU only"},
#else
      {{"--device", "cuda"}, {}, "--device cuda: CUDA path not built"},
#endif
      {{"--device", "gpu"}, {}, "--device: expected cpu or cuda, got 'gpu'"},
      {{"--mma-accumulate", "tensor-core"}, {}, "--mma-accumulate: applies to --device cuda only"},
      {{"--mma-accumulate", "bf16"}, {}, "--mma-accumulate: expected residual, fp32 or tensor-core, got 'bf16'"},
      {{"--seed", "-1"}, {}, "--seed: expected a decimal unsigned 64-bit integer"},
      {{}, {{"DENSEFEED_SEED", ""}}, "--seed: expected a seed (or DENSEFEED_SEED"},
      {{}, {{"DENSEFEED_MODE", "bench"}, {"DENSEFEED_ITERS", "many"}}, "DENSEFEED_ITERS='many'"},
      {{}, {{"DENSEFEED_MODE", "trace"}}, "DENSEFEED_MODE=trace"},
  };
  for (const Bad& bad : cases) {
    std::vector<std::string> args = small_case("partitioned", "tf32", "4");
    for (std::size_t i = 0; i < bad.args.size(); i += 2) {
      bool replaced = false;
      for (std::size_t j = 0; j + 1 < args.size(); j += 2) {
        if (args[j] == bad.args[i]) {
          args[j + 1] = bad.args[i + 1];
          replaced = true;
        }
      }
      if (!replaced) args.insert(args.end(), {bad.args[i], bad.args[i + 1]});
    }
    const fs::path out = dir_ / "bad";
    std::map<std::string, std::string> vars = {{"DENSEFEED_SEED", "1"},
                                               {"DENSEFEED_OUT", out.string()}};
    for (const auto& [k, v] : bad.vars) vars[k] = v;
    const Result r = run(args, vars);
    EXPECT_EQ(r.exit_code, 2) << bad.expected << "\n" << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(bad.expected), std::string::npos)
        << "expected '" << bad.expected << "' in: " << r.stderr_text;
    EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
    EXPECT_FALSE(fs::exists(out / "final_state.npy")) << bad.expected;
  }
}

TEST_F(AffineChainHarness, UnwritableOutputExitsThree) {
  std::ofstream(dir_ / "a_file") << "not a directory";
  std::vector<std::string> args = small_case("partitioned", "tf32", "4");
  args.insert(args.end(), {"--seed", "1", "--out", (dir_ / "a_file" / "out").string()});
  const Result r = run(args);
  EXPECT_EQ(r.exit_code, 3) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("affine_chain: internal failure"), std::string::npos)
      << r.stderr_text;
}

// The gate's reference lives in its own executable built only from frozen
// files; it must write exactly the bytes of the harness's own fp64 path.
TEST_F(AffineChainHarness, ReferenceExecutableWritesTheHarnessFp64BytesExactly) {
  const std::vector<std::vector<std::string>> layouts = {
      // The upstream CP test layout at full size.
      {"--T", "10240", "--seq-lens", "3000,4000,3240", "--regime", "long-memory"},
      {"--T", "1024", "--seq-lens", "300,724", "--heads", "2", "--dim-k", "32", "--dim-v", "16",
       "--regime", "long-memory"},
      // "--seq-lens=" (an empty templated value), a chunk that does not divide T.
      {"--T", "1000", "--seq-lens=", "--chunk", "48", "--dim-k", "24", "--dim-v", "40", "--heads",
       "3", "--regime", "fast-decay"},
      {"--T", "777", "--seq-lens", "1,700,76", "--dim-k", "16", "--dim-v", "8", "--regime",
       "long-memory"},
  };
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    const std::string seed = std::to_string(1000 + i);
    const fs::path ref = dir_ / ("reference" + std::to_string(i));
    const fs::path harness = dir_ / ("harness" + std::to_string(i));
    // The reference takes seed and output from the environment, the harness from flags.
    const Result r = run(layouts[i], {{"DENSEFEED_SEED", seed}, {"DENSEFEED_OUT", ref.string()}},
                         AFFINE_CHAIN_REFERENCE_EXE);
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    std::vector<std::string> args = {"--path", "unpartitioned", "--precision", "fp64"};
    args.insert(args.end(), layouts[i].begin(), layouts[i].end());
    args.insert(args.end(), {"--seed", seed, "--out", harness.string()});
    const Result h = run(args);
    ASSERT_EQ(h.exit_code, 0) << h.stderr_text;

    EXPECT_EQ(std::distance(fs::directory_iterator(ref), fs::directory_iterator()), 1);
    const Npy a = read_npy(ref / "final_state.npy");
    const Npy b = read_npy(harness / "final_state.npy");
    EXPECT_EQ(a.descr, "<f8");
    EXPECT_EQ(a.shape, b.shape) << i;
    ASSERT_FALSE(a.data.empty());
    // Byte for byte, header included.
    std::ifstream fa(ref / "final_state.npy", std::ios::binary);
    std::ifstream fb(harness / "final_state.npy", std::ios::binary);
    const std::string bytes_a((std::istreambuf_iterator<char>(fa)), {});
    const std::string bytes_b((std::istreambuf_iterator<char>(fb)), {});
    EXPECT_TRUE(bytes_a == bytes_b) << "layout " << i << ": final_state.npy differs";
  }
}

TEST_F(AffineChainHarness, ReferenceRejectsBadInputWithExitTwoNamingIt) {
  struct Bad {
    std::vector<std::string> args;  // added to the small case
    std::map<std::string, std::string> vars;
    std::string expected;  // substring of the message
  };
  const std::vector<Bad> cases = {
      {{"--bogus", "1"}, {}, "--bogus"},
      // The reference has no paths, precisions or shards to choose.
      {{"--path", "partitioned"}, {}, "--path"},
      {{"--precision", "tf32"}, {}, "--precision"},
      {{"--shards", "2"}, {}, "--shards"},
      {{"--T", "-5"}, {}, "--T: expected a positive integer, got '-5'"},
      {{"--seq-lens", "300,700"}, {}, "--seq-lens: lengths sum to 1000, expected --T = 1024"},
      {{"--regime", "slow"}, {}, "--regime: expected long-memory or fast-decay, got 'slow'"},
      {{"--seed", "x"}, {}, "--seed: expected a decimal unsigned 64-bit integer, got 'x'"},
      {{}, {{"DENSEFEED_SEED", ""}}, "--seed: expected a seed (or DENSEFEED_SEED"},
      {{},
       {{"DENSEFEED_MODE", "bench"}},
       "DENSEFEED_MODE=bench: affine_chain_reference supports gate only"},
      {{},
       {{"DENSEFEED_MODE", "trace"}},
       "DENSEFEED_MODE=trace: affine_chain_reference supports gate only"},
  };
  for (const Bad& bad : cases) {
    std::vector<std::string> args = {"--T",     "1024", "--seq-lens", "300,724",
                                     "--dim-k", "32",   "--dim-v",    "16",
                                     "--regime", "long-memory"};
    for (std::size_t i = 0; i < bad.args.size(); i += 2) {
      bool replaced = false;
      for (std::size_t j = 0; j + 1 < args.size(); j += 2) {
        if (args[j] == bad.args[i]) {
          args[j + 1] = bad.args[i + 1];
          replaced = true;
        }
      }
      if (!replaced) args.insert(args.end(), {bad.args[i], bad.args[i + 1]});
    }
    const fs::path out = dir_ / "bad";
    std::map<std::string, std::string> vars = {{"DENSEFEED_SEED", "1"},
                                               {"DENSEFEED_OUT", out.string()}};
    for (const auto& [k, v] : bad.vars) vars[k] = v;
    const Result r = run(args, vars, AFFINE_CHAIN_REFERENCE_EXE);
    EXPECT_EQ(r.exit_code, 2) << bad.expected << "\n" << r.stderr_text;
    EXPECT_EQ(r.stderr_text.rfind("affine_chain_reference: ", 0), 0u) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(bad.expected), std::string::npos)
        << "expected '" << bad.expected << "' in: " << r.stderr_text;
    EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
    EXPECT_FALSE(fs::exists(out / "final_state.npy")) << bad.expected;
  }
}

}  // namespace
