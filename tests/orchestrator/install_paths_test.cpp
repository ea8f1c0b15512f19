// densefeed's data is found next to the running executable (build/bin ->
// build/share/densefeed here, as PREFIX/bin -> PREFIX/share/densefeed when
// installed), and is a copy of the source tree's files, not the files themselves.
#include <functional>

#include <gtest/gtest.h>

#include "error.h"
#include "install_paths.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;

std::string infra_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InfraError& e) {
    return e.what();
  }
  return "(no InfraError)";
}

TEST(InstallPaths, DataDirIsShareDensefeedBesideTheExecutablesFolder) {
  const auto exe = running_executable();
  EXPECT_EQ(exe.filename(), "install_paths_test");
  EXPECT_EQ(data_dir(), exe.parent_path().parent_path() / "share" / "densefeed");
  EXPECT_EQ(schemas_dir(), data_dir() / "schemas");
  EXPECT_EQ(schema_path("gate.schema.json"), data_dir() / "schemas" / "gate.schema.json");
  EXPECT_EQ(skill_dir(), data_dir() / "skills" / "densefeed-optimization-loop");
  EXPECT_EQ(python_module_dir(), data_dir() / "python");
}

TEST(InstallPaths, BuildFolderHoldsCopiesOfEverySchemaSkillFileAndTheHarnessModule) {
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> pairs;  // source, staged
  for (const auto& e : std::filesystem::directory_iterator(kRoot / "schemas")) {
    pairs.emplace_back(e.path(), schema_path(e.path().filename().string()));
  }
  const auto skill_src = kRoot / "skills" / "densefeed-optimization-loop";
  for (const auto& e : std::filesystem::recursive_directory_iterator(skill_src)) {
    if (e.is_regular_file()) pairs.emplace_back(e.path(), skill_dir() / std::filesystem::relative(e.path(), skill_src));
  }
  pairs.emplace_back(kRoot / "kernels" / "python" / "densefeed_harness.py", python_module_dir() / "densefeed_harness.py");
  EXPECT_GE(pairs.size(), 20u);
  for (const auto& [src, staged] : pairs) {
    EXPECT_FALSE(std::filesystem::equivalent(src, staged)) << staged;
    EXPECT_TRUE(testing::read_file(staged) == testing::read_file(src)) << staged << " is not a copy of " << src;
  }
  EXPECT_TRUE(std::filesystem::exists(schemas_dir() / "ledger.md"));
  EXPECT_TRUE(std::filesystem::exists(skill_dir() / "reference" / "gate-cheats.md"));
  // The skill's resource name is its path under the data folder.
  EXPECT_EQ(std::filesystem::relative(skill_dir() / "SKILL.md", data_dir()).generic_string(),
            "skills/densefeed-optimization-loop/SKILL.md");
}

TEST(InstallPaths, MissingDataFolderIsAnInfraErrorNamingThePathLookedAt) {
  testing::TempDir dir;
  const auto exe = dir / "prefix" / "bin" / "densefeed";
  std::filesystem::create_directories(exe.parent_path());
  const auto expected = (dir / "prefix" / "share" / "densefeed").string();
  const auto message = infra_error_of([&] { data_dir_of(exe); });
  EXPECT_NE(message.find("the data folder " + expected + " does not exist"), std::string::npos) << message;

  std::filesystem::create_directories(expected);
  EXPECT_EQ(data_dir_of(exe), expected);
  // Relative parts are resolved lexically, so the path named is the one a person finds.
  EXPECT_EQ(data_dir_of(dir / "prefix" / "bin" / "." / "densefeed"), expected);
}

TEST(InstallPaths, SchemaPathTakesABareNameOfAnExistingSchema) {
  const auto missing = (schemas_dir() / "no-such.schema.json").string();
  const auto message = infra_error_of([] { schema_path("no-such.schema.json"); });
  EXPECT_NE(message.find("the JSON Schema " + missing + " does not exist"), std::string::npos) << message;
  for (const char* name : {"../schemas/gate.schema.json", "", "..", ".", "/etc/passwd", "sub/gate.schema.json"}) {
    EXPECT_NE(infra_error_of([&] { schema_path(name); }).find("is not a bare file name"), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace densefeed
