// kernels/common/driver.h, the trusted C++ benchmark driver's side: what it
// accepts from densefeed and where it finds the arm's library (in-process),
// and each bundled gate's driver as a real process against the arm's library
// from this build: its files, and its outputs the same bytes as the
// harness's gate mode writes for the seed (the driver prepares the inputs
// exactly as the harness does).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "driver.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::filesystem::path kBin = DENSEFEED_BIN_DIR;

class Scratch {
 public:
  Scratch() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("densefeed-driver-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~Scratch() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::filesystem::path operator/(const std::string& p) const { return path_ / p; }

 private:
  std::filesystem::path path_;
};

void touch(const std::filesystem::path& p) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << "x";
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

EnvLookup lookup(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    if (auto it = vars.find(name); it != vars.end()) return it->second;
    return std::nullopt;
  };
}

std::map<std::string, std::string> valid(const std::filesystem::path& out) {
  return {{"DENSEFEED_MODE", "bench"},
          {"DENSEFEED_SEED", "7"},
          {"DENSEFEED_OUT", out.string()},
          {"DENSEFEED_WARMUP", "1"},
          {"DENSEFEED_ITERS", "3"},
          {"DENSEFEED_KERNEL", R"({"library": "libk.so", "symbol": "k_run"})"},
          {"DENSEFEED_KERNEL_PATH", "/a/bin:/b/bin"},
          {"DENSEFEED_ARM_PROJECT", "/a"},
          {"DENSEFEED_PARAMS", R"({"mode": "x"})"}};
}

std::string env_error(std::map<std::string, std::string> vars) {
  try {
    (void)read_driver_env(lookup(std::move(vars)));
  } catch (const DriverError& e) {
    return e.what();
  }
  return "";
}

TEST(TimingDriverEnv, ReadsWhatDensefeedPasses) {
  const DriverEnv env = read_driver_env(lookup(valid("/o")));
  EXPECT_EQ(env.library, "libk.so");
  EXPECT_EQ(env.symbol, "k_run");
  EXPECT_EQ(env.kernel_path, (std::vector<std::filesystem::path>{"/a/bin", "/b/bin"}));
  EXPECT_EQ(env.arm_project, "/a");
  EXPECT_EQ(env.trusted_project, "/a");  // unset: the arm's own tree
  EXPECT_EQ(env.params["mode"], "x");
  EXPECT_EQ(*env.harness.seed, 7u);
  EXPECT_EQ(env.harness.iters, 3u);
}

TEST(TimingDriverEnv, RefusesALibraryThatIsAPathOrClimbsOut) {
  for (const std::string library : {"../libk.so", "sub/libk.so", "/usr/lib/libk.so", "..", "a..so", ""}) {
    auto vars = valid("/o");
    vars["DENSEFEED_KERNEL"] = J{{"library", library}, {"symbol", "k_run"}}.dump();
    const std::string e = env_error(vars);
    EXPECT_NE(e.find("DENSEFEED_KERNEL: library '" + library + "': a file name, without '/' or '..'"), std::string::npos)
        << library << ": " << e;
  }
}

TEST(TimingDriverEnv, RefusesWhatIsNotACEntryPointOrNotBenchMode) {
  auto vars = valid("/o");
  vars["DENSEFEED_KERNEL"] = R"({"module": "k", "function": "run"})";
  EXPECT_NE(env_error(vars).find("DENSEFEED_KERNEL: expected {\"library\": ..., \"symbol\": ...}"), std::string::npos);
  vars = valid("/o");
  vars["DENSEFEED_KERNEL"] = R"({"library": "libk.so", "symbol": "k-run"})";
  EXPECT_NE(env_error(vars).find("symbol 'k-run' is not a C identifier"), std::string::npos);
  vars = valid("/o");
  vars["DENSEFEED_MODE"] = "gate";
  EXPECT_NE(env_error(vars).find("DENSEFEED_MODE=gate: a benchmark driver runs in bench mode only"), std::string::npos);
  vars = valid("/o");
  vars.erase("DENSEFEED_KERNEL_PATH");
  EXPECT_NE(env_error(vars).find("DENSEFEED_KERNEL_PATH is empty"), std::string::npos);
  vars = valid("/o");
  vars["DENSEFEED_PARAMS"] = "[1]";
  EXPECT_NE(env_error(vars).find("DENSEFEED_PARAMS: expected a JSON object"), std::string::npos);
}

TEST(TimingDriverLibrary, TheFirstOfTheArmsBinFoldersHoldingItWins) {
  Scratch s;
  touch(s / "arm/build/bin/libk.so");
  touch(s / "arm/lib/libk.so");
  DriverEnv env = read_driver_env(lookup(valid("/o")));
  env.arm_project = s / "arm";
  env.trusted_project = s / "trusted";
  env.kernel_path = {s / "arm/none", s / "arm/build/bin", s / "arm/lib"};
  EXPECT_EQ(find_kernel_library(env), std::filesystem::canonical(s / "arm/build/bin/libk.so"));
  env.kernel_path = {s / "arm/none"};
  try {
    (void)find_kernel_library(env);
    ADD_FAILURE() << "found a library that is not there";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("library 'libk.so' is not in the arm's bin folders (" + (s / "arm/none").string() + ")"),
              std::string::npos)
        << e.what();
  }
}

TEST(TimingDriverLibrary, ALinkOutOfTheFolderOrALibraryInTheTrustedTreeIsRefused) {
  Scratch s;
  touch(s / "elsewhere/libk.so");
  std::filesystem::create_directories(s / "arm/bin");
  std::filesystem::create_symlink(s / "elsewhere/libk.so", s / "arm/bin/libk.so");
  DriverEnv env = read_driver_env(lookup(valid("/o")));
  env.arm_project = s / "arm";
  env.trusted_project = s / "arm/.densefeed/exports/main";
  env.kernel_path = {s / "arm/bin"};
  try {
    (void)find_kernel_library(env);
    ADD_FAILURE() << "followed a link out of the arm's folder";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("is a link to"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside the arm's folder"), std::string::npos) << e.what();
  }
  // The trusted export inside the arm's tree (a worktree holds the
  // workspace): its build is the trusted ref's, never the arm's kernel.
  touch(s / "arm/.densefeed/exports/main/bin/libk.so");
  env.kernel_path = {s / "arm/.densefeed/exports/main/bin"};
  try {
    (void)find_kernel_library(env);
    ADD_FAILURE() << "loaded the trusted tree's library as the arm's";
  } catch (const DriverError& e) {
    EXPECT_NE(std::string(e.what()).find("in the trusted tree"), std::string::npos) << e.what();
  }
  // --trust-worktree: the trusted tree is the arm's, and so is its library.
  env.trusted_project = env.arm_project;
  EXPECT_EQ(find_kernel_library(env), std::filesystem::canonical(s / "arm/.densefeed/exports/main/bin/libk.so"));
}

// Runs `argv` with `env` added to this process's environment; the exit code.
int run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env, const std::filesystem::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::freopen(log.c_str(), "w", stderr);
    std::freopen("/dev/null", "w", stdout);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct Bundled {
  std::string driver, library, symbol;
  std::vector<std::string> driver_args;
  std::string harness;
  std::vector<std::string> harness_args;
  J params;
  std::vector<std::string> outputs;
};

void PrintTo(const Bundled& b, std::ostream* os) { *os << b.driver; }

class TimingDriverBundled : public ::testing::TestWithParam<Bundled> {};

// The driver times the arm's library and records 3 iterations; its outputs
// are the bytes the harness writes in gate mode for the same seed and case.
TEST_P(TimingDriverBundled, TimesTheArmsLibraryAndRecordsWhatTheHarnessComputes) {
  const Bundled& b = GetParam();
  Scratch s;
  std::filesystem::create_directories(s / "out");
  std::filesystem::create_directories(s / "gate");
  std::map<std::string, std::string> env = {{"DENSEFEED_MODE", "bench"},
                                            {"DENSEFEED_SEED", "11"},
                                            {"DENSEFEED_OUT", (s / "out").string()},
                                            {"DENSEFEED_WARMUP", "1"},
                                            {"DENSEFEED_ITERS", "3"},
                                            {"DENSEFEED_KERNEL", J{{"library", b.library}, {"symbol", b.symbol}}.dump()},
                                            {"DENSEFEED_KERNEL_PATH", kBin.string()},
                                            {"DENSEFEED_ARM_PROJECT", kBin.parent_path().string()},
                                            {"DENSEFEED_PARAMS", b.params.dump()}};
  std::vector<std::string> argv = {(kBin / b.driver).string()};
  argv.insert(argv.end(), b.driver_args.begin(), b.driver_args.end());
  ASSERT_EQ(run(argv, env, s / "driver.log"), 0) << read(s / "driver.log");
  const J samples = J::parse(read(s / "out/samples.json"));
  EXPECT_EQ(samples["unit"], "ms");
  ASSERT_EQ(samples["samples"].size(), 3u);
  for (const auto& v : samples["samples"]) EXPECT_GT(v.get<double>(), 0);
  const J timed = J::parse(read(s / "out/timed.json"));
  ASSERT_EQ(timed["iterations"].size(), 3u);
  std::vector<std::string> files = {"samples.json", "timed", "timed.json"};
  for (const auto& name : b.outputs) {
    files.push_back(name + ".npy");
    EXPECT_EQ(timed["iterations"][0][name].get<std::string>().size(), 64u);
    // A deterministic kernel: every iteration the same bytes, one folder.
    EXPECT_EQ(timed["iterations"][2][name], timed["iterations"][0][name]);
    EXPECT_EQ(read(s / "out/timed/0" / (name + ".npy")), read(s / "out" / (name + ".npy")));
  }
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(s / "out")) found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(found, files);
  EXPECT_FALSE(std::filesystem::exists(s / "out/timed/1"));
  // The harness in gate mode, same seed and case: the same bytes.
  std::vector<std::string> hargv = {(kBin / b.harness).string()};
  hargv.insert(hargv.end(), b.harness_args.begin(), b.harness_args.end());
  ASSERT_EQ(run(hargv, {{"DENSEFEED_MODE", "gate"}, {"DENSEFEED_SEED", "11"}, {"DENSEFEED_OUT", (s / "gate").string()}},
                s / "harness.log"),
            0)
      << read(s / "harness.log");
  for (const auto& name : b.outputs) {
    EXPECT_EQ(read(s / "out" / (name + ".npy")), read(s / "gate" / (name + ".npy"))) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Gates, TimingDriverBundled,
    ::testing::Values(
        Bundled{"affine_chain_driver", "libaffine_chain_kernel.so", "densefeed_affine_chain_run",
                {"--T", "1000", "--seq-lens", "400,600", "--shards", "4", "--heads", "2", "--dim-k", "16", "--dim-v", "8",
                 "--chunk", "64", "--regime", "long-memory"},
                "affine_chain",
                {"--path", "partitioned", "--precision", "tf32x3", "--shards", "4", "--T", "1000", "--seq-lens", "400,600",
                 "--heads", "2", "--dim-k", "16", "--dim-v", "8", "--chunk", "64", "--regime", "long-memory"},
                {{"precision", "tf32x3"}, {"device", "cpu"}},
                {"final_state"}},
        Bundled{"kda_decode_driver", "libkda_decode_kernel.so", "densefeed_kda_decode_run",
                {"--batch", "3", "--heads", "4", "--dim", "32"},
                "kda_decode",
                {"--version", "v0", "--batch", "3", "--heads", "4", "--dim", "32"},
                {{"version", "v0"}, {"device", "cpu"}},
                {"o", "state"}},
        Bundled{"kv_overlap_driver", "libkv_overlap_kernel.so", "densefeed_kv_overlap_run",
                {"--chunks", "5", "--chunk-elems", "256", "--steps", "3", "--step-us", "200", "--host-us", "20",
                 "--switch-steps", "2", "--chunk-us", "100", "--submit-us", "30", "--window", "2"},
                "kv_overlap",
                {"--variant", "release", "--chunks", "5", "--chunk-elems", "256", "--steps", "3", "--step-us", "200",
                 "--host-us", "20", "--switch-steps", "2", "--chunk-us", "100", "--submit-us", "30", "--window", "2"},
                {{"variant", "release"}},
                {"kv"}}),
    [](const ::testing::TestParamInfo<Bundled>& info) {
      std::string name = info.param.driver;
      name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
      return name;
    });

}  // namespace
}  // namespace densefeed
