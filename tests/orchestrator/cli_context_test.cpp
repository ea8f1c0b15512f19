// The CLI's context (orchestrator/cli/cli.h): resolved once, in one order,
// so that no accessor changes what another returns; a real git repository
// whose trusted ref configures the project otherwise than its worktree does.
#include <cstdlib>
#include <stdexcept>

#include <gtest/gtest.h>

#include "cli.h"
#include "error.h"
#include "ledger.h"
#include "ledger_key.h"
#include "test_support.h"

namespace df = densefeed;
namespace testing_ = densefeed::testing;
using df::StoreUse;

namespace {

// Named as the struct it tests (ctest -R CliContext); outside densefeed's namespace so that the names do not meet.
class CliContext : public ::testing::Test {
 protected:
  void SetUp() override {
    // The ledger's chain key is made under XDG_CONFIG_HOME: the test's own.
    ::setenv("XDG_CONFIG_HOME", (dir_ / "config").c_str(), 1);
    testing_::write_file(repo_ / "densefeed.yaml", "experiments: trusted-experiments\n");
    testing_::write_file(repo_ / ".gitignore", ".densefeed/\n");
    testing_::write_file(repo_ / "gates" / "gates.lock", "");
    ASSERT_EQ(testing_::git_init_main(repo_), "");
    // An agent's branch configures the project otherwise; runs must not follow it.
    testing_::write_file(repo_ / "densefeed.yaml", "experiments: branch-experiments\n");
  }
  df::CliContext context(StoreUse use = StoreUse::always) {
    df::CliContext ctx;
    ctx.project_text = repo_.string();
    ctx.store_use = use;
    return ctx;
  }

  testing_::TempDir dir_;
  std::filesystem::path repo_ = dir_ / "project";
};

}  // namespace

// Before, project() read before store() was the worktree's densefeed.yaml and
// after it the trusted ref's: the answer depended on the order of the calls.
TEST_F(CliContext, ProjectIsTheTrustedRefsWhicheverAccessorComesFirst) {
  df::CliContext first_project = context();
  EXPECT_EQ(first_project.project().experiments, "trusted-experiments");
  const auto ledger = first_project.ledger_path();
  EXPECT_FALSE(first_project.store().worktree);
  EXPECT_EQ(first_project.project().experiments, "trusted-experiments");
  EXPECT_EQ(first_project.ledger_path(), ledger);

  df::CliContext first_store = context();
  EXPECT_FALSE(first_store.store().worktree);
  EXPECT_EQ(first_store.project().experiments, "trusted-experiments");
  EXPECT_EQ(first_store.ledger_path(), ledger);
  EXPECT_EQ(ledger, first_store.project().dir / ".densefeed" / "ledger.db");
}

TEST_F(CliContext, AVerbThatNeedsNoStoreNeitherExportsNorTrustsTheRef) {
  df::CliContext ctx = context(StoreUse::none);
  EXPECT_EQ(ctx.project().experiments, "branch-experiments");
  EXPECT_FALSE(ctx.store_opened());
  EXPECT_FALSE(std::filesystem::exists(ctx.workspace().exports()));
  EXPECT_THROW(ctx.store(), std::logic_error);
  EXPECT_EQ(ctx.project().experiments, "branch-experiments");
}

// A verb that asks for the store only sometimes (when_asked) may not read the
// project before: what it read would change under it.
TEST_F(CliContext, AStoreAskedForAfterTheProjectWasReadIsRefused) {
  df::CliContext ledger_first = context(StoreUse::when_asked);
  const auto ledger = ledger_first.ledger_path();
  EXPECT_FALSE(ledger_first.store().worktree);
  EXPECT_EQ(ledger_first.project().experiments, "trusted-experiments");
  EXPECT_EQ(ledger_first.ledger_path(), ledger);

  df::CliContext project_first = context(StoreUse::when_asked);
  EXPECT_EQ(project_first.project().experiments, "branch-experiments");
  EXPECT_THROW(project_first.store(), std::logic_error);
}

// gate verify checks an export only where one was made before.
TEST_F(CliContext, IfExportedOpensTheStoreOnlyWhenAnExportIsThere) {
  df::CliContext before = context(StoreUse::if_exported);
  EXPECT_FALSE(before.store_opened());
  EXPECT_FALSE(std::filesystem::exists(before.workspace().exports()));
  df::CliContext make = context();
  make.store();
  df::CliContext after = context(StoreUse::if_exported);
  EXPECT_TRUE(after.store_opened());
  EXPECT_EQ(after.project().experiments, "trusted-experiments");
}

TEST_F(CliContext, ALedgerOutsideAnyProjectNeedsNone) {
  df::CliContext ctx;
  ctx.project_text = (dir_ / "no-project").string();
  std::filesystem::create_directories(ctx.project_text);
  ctx.ledger_text = (dir_ / "bare.db").string();
  EXPECT_EQ(ctx.ledger_path(), dir_.path() / "bare.db");
  EXPECT_EQ(ctx.workspace().runs(), dir_.path() / "bare-runs");
  EXPECT_THROW(ctx.project(), df::InputError);
  EXPECT_THROW(ctx.store(), df::InputError);
  EXPECT_THROW(ctx.worktree(), df::InputError);
  EXPECT_EQ(ctx.ledger_path(), dir_.path() / "bare.db");
}

// An export altered after it was made is replaced and recorded in the
// ledger once, however often the store is asked for.
TEST_F(CliContext, AReplacedExportIsRecordedOnce) {
  std::filesystem::path exported;
  {
    df::CliContext make = context();
    exported = make.store().root;
  }
  // Bytes changed, mode kept.
  const auto file = exported / "densefeed.yaml";
  const auto mode = std::filesystem::status(file).permissions();
  std::filesystem::permissions(file, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  testing_::write_file(file, "experiments: planted\n");
  std::filesystem::permissions(file, mode);
  df::CliContext ctx = context();
  const auto ledger = ctx.ledger_path();
  EXPECT_EQ(ctx.store().tampered.size(), 1u);
  EXPECT_EQ(ctx.project().experiments, "trusted-experiments");
  ctx.store();
  ctx.project();
  const df::Ledger reader(ledger, df::Ledger::Mode::read_only);
  ASSERT_EQ(reader.tamper_events().size(), 1u);
  EXPECT_EQ(reader.tamper_events()[0].kind, "export_changed");
}

// The agent's branch names a chain key of its own in densefeed.yaml; the
// trusted ref names none. A verb that opens the store seals the ledger with
// the default key, never the branch's (a hostile trial's finding: the
// worktree's registration used to stay when the trusted ref named no key).
TEST_F(CliContext, TheChainKeyIsTheTrustedRefsEvenWhenItNamesNone) {
  const auto agent_key = dir_ / "agent" / "k";
  testing_::write_file(repo_ / "densefeed.yaml", "experiments: branch-experiments\nledger_key: " + agent_key.string() + "\n");
  df::CliContext ctx = context();
  const auto ledger = ctx.ledger_path();
  EXPECT_FALSE(ctx.store().worktree);
  const std::string fingerprint(64, 'a');
  EXPECT_NE(df::ledger_key_file(ledger, fingerprint), agent_key);
  EXPECT_EQ(df::ledger_key_file(ledger, fingerprint), dir_ / "config" / "densefeed" / "keys" / (std::string(32, 'a') + ".key"));
}
