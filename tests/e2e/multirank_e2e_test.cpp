// Issue 20, cases that span several ranks, through the real CLI on a
// project of its own, with the sandbox on: a chunked scan sharded across 2
// and 4 ranks that exchange their shard states over loopback TCP
// (tests/support/multirank_harness.py) against the one-process sequential
// scan. A correct run is green; a rank that crashes, hangs, exits early and
// leaves the others waiting, computes a wrong shard, loses its output
// folder or writes into another rank's folder makes the case red naming the
// rank, and nothing of the arm is left running. On a worker, multi-rank
// cases wait for whole sets of GPUs and no GPU ever serves two processes at
// once; a case that needs more GPUs than the run holds is refused.
//
//   gate `scan`    rank_outputs: gathered (rank 0 writes y and final)
//   gate `scanrk`  rank_outputs: per_rank (rank K writes out/rank-K)
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;
const std::filesystem::path kHarness = std::filesystem::path(DENSEFEED_SOURCE_DIR) / "tests/support/multirank_harness.py";

std::string gate(const std::string& name, const std::string& extra, const std::string& grid = "{T: [64], D: [8], ranks: [2, 4]}") {
  return "gate: " + name + "\ndescription: a chunked scan sharded across ranks\n"
         "reference:\n  command: [python3, \"{project}/mr.py\", --reference, --T, \"{case.T}\", --D, \"{case.D}\"]\n"
         "candidate:\n  command: [python3, \"{project}/mr.py\", --T, \"{case.T}\", --D, \"{case.D}\", --mode, \"{param.mode}\", "
         "--bad, \"{param.bad}\"]\n"
         "params:\n  mode: {type: string, enum: [honest, crash, hang, early, wrong, norank, escape, forge, lopsided, ptrace], default: honest}\n"
         "  bad: {type: integer, default: 1}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}, partition: {axis: 0, parts: \"{case.ranks}\"}}\n"
         "  final: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
         "cases:\n  grid:\n    - " + grid + "\nprofiles: {quick: {}, full: {}}\n"
         "timeout_s: 8\nfreezes: [mr.py]\n" + extra;
}

class MultiRank : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "project";
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::locked_project(repo_,
                                      {{"mr.py", testing::read_file(kHarness)},
                                       {"gates/scan.yaml", gate("scan", "ranks: \"{case.ranks}\"\n")},
                                       {"gates/scanrk.yaml", gate("scanrk", "ranks: \"{case.ranks}\"\nrank_outputs: per_rank\n")},
                                       {"gates/wide.yaml", gate("wide", "ranks: \"{case.ranks}\"\n",
                                                                "{T: [64, 96], D: [8], ranks: [2, 4]}")},
                                       {"gates/one.yaml", gate("one", "ranks: \"{case.ranks}\"\n", "{T: [64], D: [8], ranks: [1, 2]}")}},
                                      kExe, testing::project_env(dir_ / "home")),
              "");
  }
  std::filesystem::path manifest(const std::string& g, const std::string& mode, int bad) {
    const auto m = dir_ / fmt::format("{}-{}-{}.yaml", g, mode, bad);
    testing::write_file(m, fmt::format("experiment: {}-{}\nhypothesis: h\npredicted_effect: p\ngate: {}\n"
                                       "candidate: {{revision: WORKTREE, params: {{mode: {}, bad: {}}}}}\nbase: {{revision: WORKTREE, params: {{bad: 7}}}}\n",
                                       g, mode, g, mode, bad));
    return m;
  }
  std::pair<int, J> run(const std::string& g, const std::string& mode, int bad = 1) {
    const auto r = testing::run_cli(kExe, {"run", manifest(g, mode, bad).string(), "--json", "--jobs", "2", "--no-bench"}, repo_,
                                    testing::project_env(dir_ / "home"));
    J doc = J::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
    // Nothing of either arm outlives the run.
    EXPECT_EQ(testing::processes_left_mentioning(repo_.string() + "/mr.py"), std::vector<int>{});
    return {r.exit_code, doc};
  }
  static const J& case_with(const J& r, int ranks) {
    for (const auto& c : r["stages"]["gate"]["cases"]) {
      if (c["values"]["ranks"] == ranks) return c;
    }
    static const J none;
    return none;
  }
  // Every file under the workspace called `name`.
  std::vector<std::filesystem::path> files_named(const std::string& name) {
    std::vector<std::filesystem::path> found;
    for (const auto& e : std::filesystem::recursive_directory_iterator(repo_ / ".densefeed")) {
      if (e.path().filename() == name) found.push_back(e.path());
    }
    return found;
  }
  void expect_red(const std::string& g, const std::string& mode, const std::string& text, const std::string& kind) {
    const auto [code, r] = run(g, mode);
    EXPECT_EQ(code, 1) << r.dump(1).substr(0, 4000);
    for (int ranks : {2, 4}) {
      const J& c = case_with(r, ranks);
      EXPECT_EQ(c["verdict"], "red") << mode << " " << ranks << ": " << c.dump(1);
      const std::string reason = c["reason"];
      const std::string want = std::regex_replace(text, std::regex("WORLD"), std::to_string(ranks));
      EXPECT_NE(reason.find(want), std::string::npos) << mode << " " << ranks << ": " << reason;
    }
    EXPECT_EQ(r["record"]["stages"]["gate"]["failure"]["kind"], kind) << r["record"].dump(1).substr(0, 3000);
  }

  testing::TempDir dir_;
  std::filesystem::path repo_;
};

// The unpartitioned point of a ranks sweep (ranks: 1) is rank 0 of 1, with
// the same variables as every other point (a new user's harness read
// DENSEFEED_RANK and went red on it with a KeyError).
TEST_F(MultiRank, AOneRankCaseOfARanksGateIsRankZeroOfOne) {
  const auto [code, r] = run("one", "honest");
  ASSERT_EQ(code, 0) << r.dump(1).substr(0, 4000);
  EXPECT_EQ(case_with(r, 1)["verdict"], "green") << case_with(r, 1).dump(1);
  EXPECT_EQ(case_with(r, 2)["verdict"], "green") << case_with(r, 2).dump(1);
}

// Per-rank shards are each rank's own: rank 0 writing the whole sequence
// and rank 1 an empty shard concatenates to the right answer, but rank 1
// computed nothing (a hostile trial recorded this green). When the gate cuts
// the axis into one part per rank, each rank's length is its part's.
TEST_F(MultiRank, ARankWritingAnotherRanksShardIsRedNotGreen) {
  const auto [code, r] = run("scanrk", "lopsided");
  EXPECT_EQ(code, 1) << r.dump(1).substr(0, 4000);
  for (int ranks : {2, 4}) {
    const J& c = case_with(r, ranks);
    EXPECT_EQ(c["verdict"], "red") << ranks << ": " << c.dump(1).substr(0, 3000);
    EXPECT_NE(c["reason"].get<std::string>().find("each rank writes its own shard"), std::string::npos) << c["reason"];
  }
}

// The group's launcher decides from its own children's exit statuses; a
// rank (the same user) cannot ptrace it to change them, nor a sibling rank:
// each rank has a PID namespace of its own (issue 25), in which it sees only
// itself and its sandbox's init (bwrap's, no more privileged than the rank).
TEST_F(MultiRank, ARankCannotPtraceTheGroupsLauncher) {
  const auto [code, r] = run("scan", "ptrace");
  EXPECT_EQ(code, 0) << r.dump(1).substr(0, 4000);
  std::size_t tried = 0;
  const std::regex sees(R"(PTRACE sees 1,(\d+) \(itself (\d+)\))");
  for (const auto& log : files_named("rank-1.stderr.log")) {
    const std::string text = testing::read_file(log);
    if (text.find("PTRACE sees") == std::string::npos) continue;
    ++tried;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, sees)) << log << ": the rank sees more than itself and its init: " << text;
    EXPECT_EQ(m[1], m[2]) << text;
    EXPECT_EQ(text.find("PTRACE attach pid"), std::string::npos) << log << ": " << text;
  }
  EXPECT_EQ(tried, 2u) << "rank 1 of both cases tried";
}

TEST_F(MultiRank, TwoAndFourRanksExchangingOverLoopbackInTheSandboxAreGreen) {
  const auto [code, r] = run("scan", "honest");
  ASSERT_EQ(code, 0) << r.dump(1).substr(0, 4000);
  ASSERT_EQ(r["stages"]["gate"]["cases"].size(), 2u);
  for (int ranks : {2, 4}) {
    const J& c = case_with(r, ranks);
    EXPECT_EQ(c["verdict"], "green") << c.dump(1);
  }
  EXPECT_EQ(r["sandbox"]["stages"]["gate"], "on") << r["sandbox"].dump();
  // Every rank of an arm in one network namespace (their loopback shared),
  // not the host's; every rank with the run's seed.
  const std::string host = std::filesystem::read_symlink("/proc/self/ns/net").string();
  const std::regex line(R"(MRLOG (\S+) \S+ \S+ \S+ (\S+) (\S+))");
  for (const std::string arm : {"candidate-000", "candidate-001"}) {
    std::set<std::string> netns, ranks, seeds;
    for (const auto& log : files_named("ranks")) {
      if (log.parent_path().filename() != arm) continue;
      for (const auto& e : std::filesystem::directory_iterator(log)) {
        const std::string text = testing::read_file(e.path());
        for (std::sregex_iterator m(text.begin(), text.end(), line), end; m != end; ++m) {
          ranks.insert((*m)[1]), netns.insert((*m)[2]), seeds.insert((*m)[3]);
        }
      }
    }
    EXPECT_EQ(ranks.size(), arm == "candidate-000" ? 2u : 4u) << arm;
    EXPECT_EQ(netns.size(), 1u) << arm;
    EXPECT_FALSE(netns.count(host)) << arm << " ran in the host's network namespace";
    EXPECT_EQ(seeds, std::set<std::string>{r["seed"].get<std::string>()}) << arm;
  }
}

TEST_F(MultiRank, GateShowSaysTheRanksAndWhereTheirOutputsGo) {
  const auto r = testing::run_cli(kExe, {"gate", "show", "scanrk", "--json"}, repo_, testing::project_env(dir_ / "home"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const J d = J::parse(r.out);
  EXPECT_EQ(d["ranks"], "{case.ranks}");
  EXPECT_EQ(d["rank_outputs"], "per_rank");
  EXPECT_EQ(d["gpus"], 1);  // each rank's own, the default when ranks > 1
  const auto text = testing::run_cli(kExe, {"gate", "show", "scanrk"}, repo_, testing::project_env(dir_ / "home"));
  EXPECT_NE(text.out.find("ranks per candidate: {case.ranks} (per_rank outputs)"), std::string::npos) << text.out;
}

TEST_F(MultiRank, PerRankOutputsAreGatheredAlongThePartitionAxisAndGreen) {
  const auto [code, r] = run("scanrk", "honest");
  ASSERT_EQ(code, 0) << r.dump(1).substr(0, 4000);
  for (int ranks : {2, 4}) EXPECT_EQ(case_with(r, ranks)["verdict"], "green");
  // y gathered from the ranks' shards (T = 64 rows), final compared per rank.
  const auto gathered = files_named("gathered");
  ASSERT_EQ(gathered.size(), 2u);
  for (const auto& g : gathered) EXPECT_TRUE(std::filesystem::exists(g / "y.npy")) << g;
}

// --no-sandbox (a person's choice): the same group and verdicts, and still
// nothing of the arm outlives it.
TEST_F(MultiRank, WithoutTheSandboxRanksAreGreenAndACrashIsStillRedWithNothingLeft) {
  for (const auto& [mode, want] : {std::pair<std::string, int>{"honest", 0}, {"crash", 1}}) {
    const auto r = testing::run_cli(kExe, {"run", manifest("scan", mode, 1).string(), "--json", "--jobs", "2", "--no-bench", "--no-sandbox"},
                                    repo_, testing::project_env(dir_ / "home"));
    EXPECT_EQ(r.exit_code, want) << mode << ": " << r.out.substr(0, 3000) << r.err;
    EXPECT_EQ(testing::processes_left_mentioning(repo_.string() + "/mr.py"), std::vector<int>{}) << mode;
    const J doc = J::parse(r.out, nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << r.out;
    EXPECT_EQ(doc["sandbox"]["mode"], "off");
    if (mode == "crash") {
      EXPECT_NE(case_with(doc, 4)["reason"].get<std::string>().find("rank 1 of 4 was killed by signal 11 (SIGSEGV)"), std::string::npos)
          << case_with(doc, 4)["reason"];
    }
  }
}

TEST_F(MultiRank, ACrashingRankIsRedNamingItAndTheOtherRanksAreEndedWithIt) {
  expect_red("scan", "crash", "the candidate's rank 1 of WORLD was killed by signal 11 (SIGSEGV); rank", "crash");
  const auto [code, r] = run("scan", "crash");
  const std::string reason = case_with(r, 2)["reason"];
  EXPECT_NE(reason.find("rank 0 was ended with it"), std::string::npos) << reason;
  // The rank as a value, beside the kind and signal.
  const J want = {{"kind", "crash"}, {"who", "candidate"}, {"signal", 11}, {"rank", 1}};
  EXPECT_EQ(case_with(r, 4)["failure"], want) << case_with(r, 4).dump(1).substr(0, 3000);
  EXPECT_EQ(case_with(r, 4)["candidate_ranks"], 4);
}

TEST_F(MultiRank, AHangingRankTimesOutAndNoRankIsLeftRunning) {
  expect_red("scan", "hang", "of WORLD timed out after 8 s", "timeout");
}

TEST_F(MultiRank, ARankThatExitsEarlyLeavesTheOthersWaitingUntilTheTimeoutThenAllEnd) {
  expect_red("scan", "early", "timed out after 8 s", "timeout");
  const auto [code, r] = run("scan", "early");
  const std::string reason = case_with(r, 4)["reason"];
  EXPECT_NE(reason.find("rank 1 had exited 0"), std::string::npos) << reason;
}

TEST_F(MultiRank, ARankThatComputesItsShardWrongIsRed) {
  expect_red("scanrk", "wrong", "> bound 1.0e-12", "tolerance");
}

// In the sandbox a rank's folder is a mount point of its own sandbox and
// cannot be removed: what it can do is leave it empty (issue 25). Without
// the sandbox it can remove it. Either is red naming the rank.
TEST_F(MultiRank, APerRankCaseWhoseRankLeavesNoFolderIsRedNamingTheRank) {
  expect_red("scanrk", "norank", "(rank 1 of WORLD)", "missing_output");
  const auto [code, r] = run("scanrk", "norank");
  EXPECT_NE(case_with(r, 2)["reason"].get<std::string>().find("missing: the rank exited 0 without writing it"), std::string::npos)
      << case_with(r, 2)["reason"];
  const auto bare = testing::run_cli(kExe, {"run", manifest("scanrk", "norank", 1).string(), "--json", "--jobs", "2", "--no-bench", "--no-sandbox"},
                                     repo_, testing::project_env(dir_ / "home"));
  EXPECT_EQ(bare.exit_code, 1) << bare.out.substr(0, 3000) << bare.err;
  const J doc = J::parse(bare.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << bare.out;
  EXPECT_NE(case_with(doc, 2)["reason"].get<std::string>().find("rank-1: missing"), std::string::npos) << case_with(doc, 2)["reason"];
}

TEST_F(MultiRank, AHostileRankCannotReachTheReferenceAndWhatItWritesIntoAnotherRanksFolderIsCaught) {
  const auto [code, r] = run("scanrk", "escape");
  EXPECT_EQ(code, 1) << r.dump(1).substr(0, 4000);
  for (int ranks : {2, 4}) {
    const J& c = case_with(r, ranks);
    EXPECT_EQ(c["verdict"], "red") << c.dump(1);
    EXPECT_EQ(c["reason"].get<std::string>().find("reference's output"), std::string::npos) << c["reason"];
    // Rank 0's folder is read-only in rank 1's own sandbox (issue 25): the
    // write fails, and so does the rank.
    EXPECT_NE(c["reason"].get<std::string>().find(fmt::format("rank 1 of {} exited with code 1", ranks)), std::string::npos) << c["reason"];
    EXPECT_NE(c["reason"].get<std::string>().find("Read-only file system"), std::string::npos) << c["reason"];
  }
  const auto logs = files_named("rank-1.stderr.log");
  ASSERT_EQ(logs.size(), 2u);
  for (const auto& l : logs) {
    const std::string text = testing::read_file(l);
    EXPECT_NE(text.find("CONTAINED"), std::string::npos) << text;
    EXPECT_EQ(text.find("ESCAPED"), std::string::npos) << text;
  }
}

// The group's report goes to densefeed rank-group's stdout, which a rank
// can reach (/proc/PPID/fd/1): a forged all-ok report before the real one
// changes nothing, and whether the group passed is its exit status anyway.
TEST_F(MultiRank, ARankThatForgesTheGroupsReportIsStillRedNamingItsExit) {
  expect_red("scan", "forge", "the candidate's rank 1 of WORLD exited with code 5", "exit_code");
  // The attack ran: it wrote its report onto the launcher's stdout, or (the
  // launcher not being dumpable, its /proc/PID/fd closed to the ranks)
  // could not open it; either way the rank's own exit decides.
  bool tried = false;
  for (const auto& l : files_named("rank-1.stderr.log")) {
    const std::string text = testing::read_file(l);
    tried = tried || text.find("FORGED") != std::string::npos || text.find("could not forge") != std::string::npos;
  }
  EXPECT_TRUE(tried) << "the attack did not run, so it tests nothing";
}

// One bad gate in a project of its own: `densefeed gate lock` refuses it
// (exit 2) naming the file, the field and what was expected.
void expect_refused(const std::filesystem::path& dir, const std::string& extra, const std::string& grid, const std::string& text) {
  std::filesystem::create_directories(dir);
  testing::write_file(dir / "densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n");
  testing::write_file(dir / "mr.py", "");
  testing::write_file(dir / "gates" / "bad.yaml", gate("bad", extra, grid));
  testing::write_file(dir / "gates" / "gates.lock", "");
  ASSERT_EQ(testing::git_init_main(dir, "gates"), "");
  const auto r = testing::run_cli(kExe, {"gate", "lock"}, dir, testing::project_env(dir / "home"));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("bad.yaml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
}

TEST_F(MultiRank, BadRanksAreRefusedNamingTheGateFileAndField) {
  expect_refused(dir_ / "zero", "ranks: 0\n", "{T: [64], D: [8], ranks: [2]}", "ranks");
  expect_refused(dir_ / "half", "ranks: \"{case.ranks}\"\n", "{T: [64], D: [8], ranks: [1.5]}",
                 "must give ranks as an integer from 1 to 64; it gives 1.5");
  expect_refused(dir_ / "nokey", "ranks: \"{case.world}\"\n", "{T: [64], D: [8], ranks: [2]}", "it gives nothing");
  expect_refused(dir_ / "text", "ranks: two\n", "{T: [64], D: [8], ranks: [2]}", "ranks");
  expect_refused(dir_ / "rk", "rank_outputs: per_rank\n", "{T: [64], D: [8], ranks: [2]}", "rank_outputs needs ranks");
  expect_refused(dir_ / "bench", "ranks: \"{case.ranks}\"\nbench:\n  cases: [{T: 64, D: 8, ranks: 2}]\n",
                 "{T: [64], D: [8], ranks: [2]}", "multi-rank benchmarks are not supported");
}

TEST_F(MultiRank, RanksWithASessionGateAreRefused) {
  const auto dir = dir_ / "session";
  std::filesystem::create_directories(dir);
  testing::write_file(dir / "densefeed.yaml", "gates: gates\nexperiments: experiments\nledger: .densefeed/ledger.db\n");
  testing::write_file(dir / "s.py", "");
  testing::write_file(dir / "gates" / "bad.yaml",
                      "gate: bad\ndescription: d\nprotocol: session\nranks: 2\n"
                      "reference:\n  command: [python3, \"{project}/s.py\"]\ncandidate:\n  command: [python3, \"{project}/s.py\"]\n"
                      "outputs:\n  y: {dtype: float64}\ncases:\n  grid:\n    - {n: [10]}\nprofiles: {quick: {}, full: {}}\nfreezes: [s.py]\n");
  testing::write_file(dir / "gates" / "gates.lock", "");
  ASSERT_EQ(testing::git_init_main(dir, "gates"), "");
  const auto r = testing::run_cli(kExe, {"gate", "lock"}, dir, testing::project_env(dir / "home"));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("bad.yaml"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not supported with protocol: session"), std::string::npos) << r.err;
}

// A worker of 4 (fake) GPUs: the candidates of 2 and 4 ranks and the
// references (one GPU each) wait for whole sets; from every process's own
// record of CUDA_VISIBLE_DEVICES and wall clock, no GPU served two at once.
TEST_F(MultiRank, OnAWorkerMultiRankCasesQueueForWholeSetsOfGpusAndNoGpuServesTwoProcessesAtOnce) {
  const auto env = testing::project_env(dir_ / "home");
  const auto sub = testing::run_cli(kExe, {"submit", manifest("wide", "honest", 1).string(), "--json"}, repo_, env);
  ASSERT_EQ(sub.exit_code, 0) << sub.out << sub.err;
  const auto worker = testing::run_cli(kExe, {"worker", "--gpus", "0,1,2,3", "--slots", "1", "--once"}, repo_, env);
  ASSERT_EQ(worker.exit_code, 0) << worker.out << worker.err;
  const auto status = testing::run_cli(kExe, {"status", "1", "--json"}, repo_, env);
  const J s = J::parse(status.out, nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << status.out << status.err;
  EXPECT_EQ(s["stages"]["gate"]["verdict"], "green") << s.dump(1).substr(0, 4000);
  struct Held {
    std::string gpu;
    double start, end;
    std::string who;
  };
  std::vector<Held> held;
  const std::regex line(R"(MRLOG (\S+) (\S+) ([0-9.]+) ([0-9.]+))");
  for (const auto& e : std::filesystem::recursive_directory_iterator(repo_ / ".densefeed")) {
    const auto name = e.path().filename().string();
    if (name.size() < 10 || name.compare(name.size() - 10, 10, "stderr.log") != 0) continue;
    const std::string text = testing::read_file(e.path());
    for (std::sregex_iterator m(text.begin(), text.end(), line), end; m != end; ++m) {
      held.push_back({(*m)[2], std::stod((*m)[3]), std::stod((*m)[4]), e.path().string() + " rank " + (*m)[1].str()});
    }
  }
  // 2 references (T = 64, 96) + 2 x 2 + 2 x 4 candidate ranks, in the gate
  // stage (the bench of a green experiment runs one process per arm).
  ASSERT_EQ(held.size(), 14u);
  for (const auto& h : held) EXPECT_NE(h.gpu, "-") << h.who << " ran without a GPU of its own";
  // The ranks of one arm: as many GPUs as ranks, one each.
  std::map<std::string, std::set<std::string>> arm_gpus;
  std::map<std::string, std::size_t> arm_ranks;
  for (const auto& h : held) {
    const auto at = h.who.find("/ranks/");
    if (at == std::string::npos) continue;
    arm_gpus[h.who.substr(0, at)].insert(h.gpu);
    ++arm_ranks[h.who.substr(0, at)];
  }
  EXPECT_EQ(arm_ranks.size(), 4u);
  for (const auto& [arm, n] : arm_ranks) EXPECT_EQ(arm_gpus[arm].size(), n) << arm;
  for (std::size_t i = 0; i < held.size(); ++i) {
    for (std::size_t j = i + 1; j < held.size(); ++j) {
      if (held[i].gpu != held[j].gpu) continue;
      EXPECT_TRUE(held[i].end <= held[j].start || held[j].end <= held[i].start)
          << "GPU " << held[i].gpu << " served " << held[i].who << " and " << held[j].who << " at once";
    }
  }
}

TEST_F(MultiRank, ACaseNeedingMoreGpusThanTheWorkerHoldsIsRefusedNamingBoth) {
  const auto env = testing::project_env(dir_ / "home");
  ASSERT_EQ(testing::run_cli(kExe, {"submit", manifest("scan", "honest", 1).string()}, repo_, env).exit_code, 0);
  testing::run_cli(kExe, {"worker", "--gpus", "0,1", "--slots", "1", "--once"}, repo_, env);
  const auto status = testing::run_cli(kExe, {"status", "1", "--json"}, repo_, env);
  EXPECT_NE(status.out.find("needs 4 GPUs (4 ranks x 1 GPU(s) each) but this run holds 2 (GPUs 0,1)"), std::string::npos)
      << status.out << status.err;
  EXPECT_EQ(testing::processes_left_mentioning(repo_.string() + "/mr.py"), std::vector<int>{});
}

}  // namespace
}  // namespace densefeed
