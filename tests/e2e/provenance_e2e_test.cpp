// Provenance of a trusted program that the trusted ref does not hold: a
// compiled reference lives in a build folder (harness_path) that git ignores,
// so the trusted ref's export has no copy and the worktree's build runs. The
// run says so in its provenance (not clean), since nothing ties that program
// to the frozen sources and whoever can write the worktree can replace it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;

TEST(ProvenanceE2E, AReferenceProgramThatIsTheWorktreesBuildIsSaidSo) {
  testing::TempDir dir;
  const auto repo = dir / "project";
  const auto env = testing::project_env(dir / "home");
  const std::string writer = "import os, numpy as np\nnp.save(os.path.join(os.environ['DENSEFEED_OUT'], 'y.npy'), np.arange(4.0))\n";
  ASSERT_EQ(testing::locked_project(
                repo,
                {{"densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\nharness_path: [bin]\n"},
                 {".gitignore", ".densefeed/\nbin/\n"},
                 {"c.py", writer},
                 {"gates/g.yaml", "gate: g\ndescription: d\nreference:\n  command: [ref]\n"
                                  "candidate:\n  command: [python3, \"{project}/c.py\", \"{param.m}\"]\n"
                                  "params:\n  m: {type: string, enum: [a, b], default: a}\n"
                                  "outputs:\n  y: {dtype: float64, tolerance: {max_abs: 0}}\n"
                                  "cases:\n  grid:\n    - {n: [1]}\nprofiles: {quick: {}, full: {}}\nfreezes: [c.py]\n"}},
                kExe, env),
            "");
  // The build output, ignored by git: the trusted ref has no bin/ref.
  testing::write_file(repo / "bin" / "ref", "#!/usr/bin/env python3\n" + writer);
  std::filesystem::permissions(repo / "bin" / "ref", std::filesystem::perms::owner_all);
  testing::write_file(dir / "m.yaml", "experiment: m\nhypothesis: h\npredicted_effect: p\ngate: g\n"
                                      "candidate: {revision: WORKTREE, params: {m: b}}\nbase: {revision: WORKTREE}\n");
  const auto r = testing::run_cli(kExe, {"run", (dir / "m.yaml").string(), "--json", "--no-bench"}, repo, env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const J doc = J::parse(r.out);
  const auto& prov = doc["stages"]["gate"]["provenance"];
  EXPECT_FALSE(prov["clean"].get<bool>()) << prov.dump(1);
  bool said = false;
  for (const auto& n : prov["notes"]) {
    said = said || n.get<std::string>().find("the reference's program bin/ref is not in the trusted ref: it is the worktree's "
                                             "build") != std::string::npos;
  }
  EXPECT_TRUE(said) << prov.dump(1);
  // (A reference the trusted ref holds, a committed script, is not said to
  // be: ProjectE2E.InitLockRunRedAndGreenFromASubfolder finds its
  // provenance clean.)
  const auto text = testing::run_cli(kExe, {"run", (dir / "m.yaml").string(), "--no-bench"}, repo, env);
  EXPECT_NE(text.out.find("provenance: WARNING"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("bin/ref is not in the trusted ref"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace densefeed
