// Issue 25, the sandbox's side of trusted ground, through the real CLI on
// projects of their own, each test written as the attack:
//   - ranks write only their own shard: in a `rank_outputs: per_rank` gate,
//     rank 0 computing the whole answer and writing every rank-K/ folder
//     gets a write error (each rank is a sandbox of its own), and the rank
//     that wrote nothing makes the case red, named;
//   - no channels: a second ledger in the project tree (README's CI layout,
//     ci/ledger.db, with its runs and exports) and a stray runs folder are
//     unreadable by a candidate; a unix socket in the tree stops the launch
//     (exit 3, naming it) and nothing connects to it; the candidate's and the
//     base's WORKTREE arms get compile caches of their own, per experiment,
//     and the reference never sees what the candidate wrote into its own;
//   - /bin/sh as a trace command's argv[0] runs in the sandbox;
//   - a hidden folder removed as the sandbox starts is densefeed's failure
//     (exit 3), never the arm's.
// Each attack is also run where it works (outside the sandbox), so that a
// check that can never fail is caught.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

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
const std::filesystem::path kRankHarness = std::filesystem::path(DENSEFEED_SOURCE_DIR) / "tests/support/multirank_harness.py";

// A trace command for the init project's WORKTREE arms: it reports on its
// compile cache (XDG_CACHE_HOME) and leaves a poison file there, tries to
// read each path it is given (a file: any byte of it; a folder: any name in
// it), writes probe.txt ("CACHE PATH [names]", "LEAK PATH" or "HIDDEN PATH:
// why") and a small trace into DENSEFEED_OUT, and exits 0, so that the
// stage reads the trace and the test reads probe.txt.
const char* kProbe = R"PY(
import json, os, sys, uuid
out = os.environ.get("DENSEFEED_OUT", ".")
lines = []
cache = os.environ.get("XDG_CACHE_HOME", "")
if cache:
    lines.append("CACHE %s [%s]" % (cache, ",".join(sorted(os.listdir(cache)))))
    open(os.path.join(cache, "poison-" + uuid.uuid4().hex), "w").write("what the candidate left")
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            names = os.listdir(path)
            lines.append(("LEAK %s [%s]" % (path, ",".join(names))) if names else "HIDDEN %s: empty" % path)
        else:
            data = open(path, "rb").read()
            lines.append(("LEAK %s (%d bytes)" % (path, len(data))) if data else "HIDDEN %s: no bytes" % path)
    except OSError as e:
        lines.append("HIDDEN %s: %s" % (path, e))
open(os.path.join(out, "probe.txt"), "w").write("\n".join(lines) + "\n")
events = [{"name": "gemm", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1, "cat": "kernel"},
          {"name": "copy", "ph": "X", "ts": 10, "dur": 90, "pid": 1, "tid": 1, "cat": "kernel"}]
json.dump({"traceEvents": events}, open(os.path.join(out, "trace.json"), "w"))
print("\n".join(lines), file=sys.stderr)
)PY";

// The init project's reference, which also says (on stderr, its log) what
// its compile cache holds: a trusted command must never see the candidate's.
const char* kReferenceCacheReport = R"PY(
import os as _os, sys as _sys
_c = _os.environ.get("XDG_CACHE_HOME", "")
print("REFCACHE %s [%s]" % (_c, ",".join(sorted(_os.listdir(_c))) if _c and _os.path.isdir(_c) else ""), file=_sys.stderr)
)PY";

// Multi-rank gates on tests/support/multirank_harness.py (the scan of
// issue 20): `scanrk` has per-rank outputs.
std::string rank_gate(const std::string& name, const std::string& extra) {
  return "gate: " + name + "\ndescription: a chunked scan sharded across ranks\n"
         "reference:\n  command: [python3, \"{project}/mr.py\", --reference, --T, \"{case.T}\", --D, \"{case.D}\"]\n"
         "candidate:\n  command: [python3, \"{project}/mr.py\", --T, \"{case.T}\", --D, \"{case.D}\", --mode, \"{param.mode}\", "
         "--bad, \"{param.bad}\"]\n"
         "params:\n  mode: {type: string, enum: [honest, grab, silent], default: honest}\n"
         "  bad: {type: integer, default: 1}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}, partition: {axis: 0, parts: \"{case.ranks}\"}}\n"
         "  final: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
         "cases:\n  grid:\n    - {T: [64], D: [8], ranks: [2, 4]}\nprofiles: {quick: {}, full: {}}\n"
         "timeout_s: 8\nfreezes: [mr.py]\n" + extra;
}

class TrustedGround : public ::testing::Test {
 protected:
  std::map<std::string, std::string> env() const {
    return {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", (dir_ / "home").string()}};
  }
  testing::CliResult densefeed(const std::vector<std::string>& args) const { return testing::run_cli(kExe, args, repo_, env()); }
  void git(const std::vector<std::string>& args) const {
    std::vector<std::string> a = {"git", "-C", repo_.string()};
    a.insert(a.end(), args.begin(), args.end());
    const auto r = testing::run_cli("/usr/bin/env", a, repo_, env());
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  // A project made by `densefeed init` (gate scan-sharded), with probe.py
  // committed and the reference reporting its compile cache, re-locked.
  void init_project() {
    std::filesystem::create_directories(repo_);
    git({"init", "-q", "-b", "main"});
    git({"config", "user.email", "t@example.org"});
    git({"config", "user.name", "T"});
    testing::write_file(repo_ / "README.md", "x\n");
    git({"add", "-A"});
    git({"commit", "-qm", "init"});
    ASSERT_EQ(densefeed({"init", repo_.string()}).exit_code, 0);
    testing::write_file(repo_ / "probe.py", kProbe);
    const auto ref = repo_ / "harness" / "scan_reference.py";
    testing::write_file(ref, testing::read_file(ref) + kReferenceCacheReport);
    git({"add", "-A"});
    git({"commit", "-qm", "densefeed"});
    const auto lock = densefeed({"gate", "lock"});
    ASSERT_EQ(lock.exit_code, 0) << lock.out << lock.err;
    git({"commit", "-qam", "lock"});
  }
  // A manifest of scan-sharded whose trace section runs `command` (a YAML
  // flow list) for `arms`.
  std::filesystem::path trace_manifest(const std::string& name, const std::string& command, const std::string& arms = "[candidate]") const {
    const auto p = dir_ / (name + ".yaml");
    testing::write_file(p, "experiment: " + name + "\nhypothesis: h\npredicted_effect: p\ngate: scan-sharded\n"
                           "candidate: {revision: WORKTREE, params: {merge_dtype: float32}}\n"
                           "base: {revision: WORKTREE, params: {merge_dtype: float16}}\n"
                           "trace:\n  command: " + command + "\n  arms: " + arms +
                           "\n  checks:\n    - share: {name: gemm, max_fraction: 0.5}\n");
    return p;
  }
  static std::string probe_command(const std::vector<std::filesystem::path>& paths) {
    std::string s = "[python3, \"{project}/probe.py\"";
    for (const auto& p : paths) s += ", " + J(p.string()).dump();
    return s + "]";
  }
  // What the trace command of `arm` in experiment `id` wrote into probe.txt.
  std::string probe(int id, const std::string& arm) const {
    return testing::read_file(repo_ / ".densefeed" / "ledger-runs" / std::to_string(id) / ("trace-" + arm) / "out" / "probe.txt");
  }
  // The multi-rank project (gate scanrk, per-rank outputs).
  void rank_project() {
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::locked_project(repo_,
                                      {{"mr.py", testing::read_file(kRankHarness)},
                                       {"gates/scanrk.yaml", rank_gate("scanrk", "ranks: \"{case.ranks}\"\nrank_outputs: per_rank\n")}},
                                      kExe, testing::project_env(dir_ / "home")),
              "");
  }
  std::pair<int, J> run_ranks(const std::string& mode, int bad, bool sandbox = true) {
    const auto m = dir_ / fmt::format("scanrk-{}-{}.yaml", mode, bad);
    testing::write_file(m, fmt::format("experiment: scanrk-{}\nhypothesis: h\npredicted_effect: p\ngate: scanrk\n"
                                       "candidate: {{revision: WORKTREE, params: {{mode: {}, bad: {}}}}}\nbase: {{revision: WORKTREE, params: {{bad: 7}}}}\n",
                                       mode, mode, bad));
    std::vector<std::string> args = {"run", m.string(), "--json", "--jobs", "2", "--no-bench"};
    if (!sandbox) args.push_back("--no-sandbox");
    const auto r = testing::run_cli(kExe, args, repo_, testing::project_env(dir_ / "home"));
    J doc = J::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
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
  // The text of every rank-K.stderr.log of experiment `id`'s candidate cases.
  std::vector<std::string> rank_logs(int id, int rank) const {
    std::vector<std::string> found;
    for (const auto& e : std::filesystem::recursive_directory_iterator(repo_ / ".densefeed" / "ledger-runs" / std::to_string(id))) {
      if (e.path().filename() == fmt::format("rank-{}.stderr.log", rank)) found.push_back(testing::read_file(e.path()));
    }
    return found;
  }

  testing::TempDir dir_;
  std::filesystem::path repo_ = dir_ / "project";
};

// The issue's attack: rank 0 computes the whole sequence (every rank draws
// all of the input) and writes each rank's shard into each rank-K/ folder,
// while the other ranks exit 0 having computed nothing. Without the sandbox
// the shards are right and the case is green (no such guarantee there);
// in it, rank 0's writes into rank-K/ fail and rank K, which wrote
// nothing, makes the case red, named.
TEST_F(TrustedGround, RankZeroWritingEveryRanksShardGetsAWriteErrorAndTheRankThatWroteNothingIsRed) {
  rank_project();
  const auto [bare_code, bare] = run_ranks("grab", 0, /*sandbox=*/false);
  EXPECT_EQ(bare_code, 0) << "without the sandbox the attack works (the test's premise): " << bare.dump(1).substr(0, 3000);

  const auto [code, r] = run_ranks("grab", 0);
  EXPECT_EQ(code, 1) << r.dump(1).substr(0, 4000);
  for (int ranks : {2, 4}) {
    const J& c = case_with(r, ranks);
    EXPECT_EQ(c["verdict"], "red") << c.dump(1).substr(0, 3000);
    const std::string reason = c["reason"];
    EXPECT_NE(reason.find(fmt::format("(rank 1 of {})", ranks)), std::string::npos) << reason;
    EXPECT_NE(reason.find("missing: the rank exited 0 without writing it"), std::string::npos) << reason;
    EXPECT_EQ(c["failure"]["kind"], "missing_output") << c["failure"];
  }
  // Experiment 2 (the sandboxed one): rank 0 wrote its own folder and was
  // refused every other.
  const auto logs = rank_logs(2, 0);
  ASSERT_EQ(logs.size(), 2u);
  for (const auto& text : logs) {
    EXPECT_NE(text.find("GRAB rank-0 wrote"), std::string::npos) << text;
    EXPECT_EQ(text.find("GRAB rank-1 wrote"), std::string::npos) << text;
    EXPECT_NE(text.find("GRAB rank-1 refused: [Errno 30] Read-only file system"), std::string::npos) << text;
  }
}

// A rank that takes part in the exchange and exits 0 without writing
// anything into its folder is red, named (rank_outputs.h).
TEST_F(TrustedGround, ARankThatWritesNothingIsRedNamingIt) {
  rank_project();
  const auto [code, r] = run_ranks("silent", 1);
  EXPECT_EQ(code, 1) << r.dump(1).substr(0, 4000);
  for (int ranks : {2, 4}) {
    const J& c = case_with(r, ranks);
    EXPECT_EQ(c["verdict"], "red") << c.dump(1).substr(0, 3000);
    const std::string reason = c["reason"];
    EXPECT_NE(reason.find(fmt::format("candidate output (rank 1 of {})", ranks)), std::string::npos) << reason;
    EXPECT_NE(reason.find("missing: the rank exited 0 without writing it"), std::string::npos) << reason;
    EXPECT_EQ(c["failure"]["rank"], 1) << c["failure"];
  }
  const auto [honest_code, honest] = run_ranks("honest", 1);
  EXPECT_EQ(honest_code, 0) << honest.dump(1).substr(0, 3000);
}

// README's CI layout: a second ledger, ci/ledger.db, with its runs (the
// reference's outputs) and exports, inside the project tree; and a runs
// folder left behind by a ledger since removed. A candidate's trace command
// reads none of them; run outside the sandbox, the same probe reads them all.
TEST_F(TrustedGround, ACandidateCannotReadASecondLedgerInTheTreeNorItsRunsAndExports) {
  init_project();
  const auto ci = repo_ / "ci";
  const auto first = densefeed({"run", trace_manifest("ci", probe_command({})).string(), "--json", "--no-bench", "--ledger",
                                (ci / "ledger.db").string()});
  ASSERT_EQ(first.exit_code, 0) << first.out.substr(0, 3000) << first.err;
  const auto ref_out = ci / "ledger-runs" / "1" / "reference-000" / "out" / "final_state.npy";
  ASSERT_TRUE(std::filesystem::exists(ref_out)) << "the second ledger's run holds a reference output";
  ASSERT_TRUE(std::filesystem::is_directory(ci / "ledger-exports"));
  const auto stray = repo_ / "old" / "ledger-runs" / "7" / "reference-000" / "out" / "final_state.npy";
  testing::write_file(stray, "a reference output whose ledger is gone");
  testing::write_file(repo_ / "ci" / "ledger.db-wal", "the second ledger's journal");
  // A third ledger not named *.db (the hostile trial read one): found by its
  // workspace folders beside it.
  const auto other = repo_ / "other" / "results.sqlite";
  const auto third = densefeed({"run", trace_manifest("other", probe_command({})).string(), "--json", "--no-bench", "--ledger",
                                other.string()});
  ASSERT_EQ(third.exit_code, 0) << third.out.substr(0, 3000) << third.err;
  ASSERT_TRUE(std::filesystem::is_directory(repo_ / "other" / "results-runs"));
  const std::vector<std::filesystem::path> targets = {ci / "ledger.db", ci / "ledger.db-wal", ci / "ledger-runs", ref_out,
                                                      ci / "ledger-exports", stray, repo_ / "old" / "ledger-runs", other,
                                                      repo_ / "other" / "results-runs"};

  // The premise: outside the sandbox every one of them can be read.
  std::vector<std::string> argv = {(repo_ / "probe.py").string()};
  for (const auto& t : targets) argv.push_back(t.string());
  auto host_env = env();
  host_env["DENSEFEED_OUT"] = dir_.path().string();
  ASSERT_EQ(testing::run_cli("/usr/bin/python3", argv, dir_.path(), host_env).exit_code, 0);
  const std::string on_host = testing::read_file(dir_ / "probe.txt");
  for (const auto& t : targets) EXPECT_NE(on_host.find("LEAK " + t.string()), std::string::npos) << on_host;

  const auto r = densefeed({"run", trace_manifest("reader", probe_command(targets)).string(), "--json", "--no-bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out.substr(0, 3000) << r.err;
  const std::string seen = probe(1, "candidate");
  for (const auto& t : targets) {
    EXPECT_NE(seen.find("HIDDEN " + t.string()), std::string::npos) << t << " in: " << seen;
    EXPECT_EQ(seen.find("LEAK " + t.string()), std::string::npos) << seen;
  }
}

// Another ledger's folder in the shown tree, removed by its own run after
// the sandbox's options were made and before bwrap mounted over it (seen in
// CI: a test's project under the build tree went while the skill test's
// candidate started; "bwrap: Can't mkdir parents for ...-caches"): the
// launch never reached the command, so the experiment is densefeed's
// failure (exit 3, naming the folder), never a red case of the arm. The race
// is made certain by a bwrap on PATH that removes the folder when its argv
// names it, then runs the real one.
TEST_F(TrustedGround, AHiddenFolderRemovedAsTheSandboxStartsIsDensefeedsFailureNotTheArms) {
  init_project();
  const auto victim = repo_ / "ci" / "ledger-caches";
  std::filesystem::create_directories(victim / "triton");
  const auto real = testing::run_cli("/usr/bin/env", {"sh", "-c", "command -v bwrap"}, dir_.path(), env());
  ASSERT_EQ(real.exit_code, 0) << "bwrap is not installed";
  const auto bin = dir_ / "racing-bin";
  const std::string victim_q = J(victim.string()).dump();
  testing::write_file(bin / "bwrap", "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = " + victim_q + " ] && rm -rf " + victim_q +
                                         "; done\nexec " + real.out.substr(0, real.out.find('\n')) + " \"$@\"\n");
  std::filesystem::permissions(bin / "bwrap", std::filesystem::perms::owner_all);
  auto racing = env();
  racing["PATH"] = bin.string() + ":" + racing["PATH"];
  const auto r = testing::run_cli(kExe, {"run", trace_manifest("race", probe_command({})).string(), "--no-bench"}, repo_, racing);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find(victim.string() + ": removed while the sandbox of"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not counted as the command's"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(victim)) << "the racing bwrap never ran: the test proves nothing";
  const auto list = densefeed({"ledger", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.out << list.err;
  for (const auto& e : J::parse(list.out)) EXPECT_NE(e["verdict"], "red") << list.out;
  // The premise: with the folder back and nothing racing, the same
  // experiment runs through the sandbox.
  std::filesystem::create_directories(victim);
  const auto again = densefeed({"run", (dir_ / "race.yaml").string(), "--no-bench"});
  EXPECT_NE(again.exit_code, 3) << again.out << again.err;
}

// A server listening on a unix socket inside the project tree (the agent
// left it there; a sandboxed command could connect to it whatever its
// namespaces): the launch refuses, exit 3 naming the socket, and nothing
// connected.
TEST_F(TrustedGround, AUnixSocketInTheTreeStopsTheLaunchNamingItAndNothingConnects) {
  init_project();
  const auto path = repo_ / "tools" / "run" / "agent.sock";
  std::filesystem::create_directories(path.parent_path());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  ASSERT_LT(path.string().size(), sizeof a.sun_path);
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  const std::string client = "import socket, sys\ns = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(sys.argv[1])\n";
  // In the worktree, where the candidate's own commands are shown.
  testing::write_file(repo_ / "client.py", client);
  const auto r = densefeed({"run", trace_manifest("socket", "[python3, \"{project}/client.py\", " + J(path.string()).dump() + "]").string(),
                            "--no-bench"});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find(path.string() + ": a unix socket inside " + repo_.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing was run"), std::string::npos) << r.err;
  EXPECT_LT(::accept(fd, nullptr, nullptr), 0) << "something connected to the socket";
  // The premise: the socket answers a client outside the sandbox.
  EXPECT_EQ(testing::run_cli("/usr/bin/python3", {(repo_ / "client.py").string(), path.string()}, dir_.path()).exit_code, 0);
  EXPECT_GE(::accept(fd, nullptr, nullptr), 0);
  ::close(fd);
  // With the socket gone the same experiment runs.
  std::filesystem::remove(path);
  testing::write_file(repo_ / "client.py", "print('no socket')\n");
  const auto again = densefeed({"run", (dir_ / "socket.yaml").string(), "--no-bench"});
  EXPECT_NE(again.exit_code, 3) << again.out << again.err;
}

// `/bin/sh` as argv[0] (its folder /bin a link to usr/bin on a merged-/usr
// system) failed in the sandbox with "bwrap: Can't make symlink at /bin";
// /sbin and /usr/bin programs too.
TEST_F(TrustedGround, BinShAndOtherSystemProgramsRunAsATraceCommandInTheSandbox) {
  init_project();
  const std::string command = "[/bin/sh, -c, \"/usr/bin/env python3 \\\"$0\\\"\", \"{project}/probe.py\"]";
  const auto r = densefeed({"run", trace_manifest("sh", command).string(), "--json", "--no-bench"});
  ASSERT_EQ(r.exit_code, 0) << r.out.substr(0, 3000) << r.err;
  const J doc = J::parse(r.out);
  EXPECT_EQ(doc["stages"]["trace"]["status"], "green") << doc["stages"]["trace"].dump(1);
  EXPECT_EQ(doc["stages"]["trace"]["arms"][0]["ran"], true) << doc["stages"]["trace"].dump(1);
  EXPECT_EQ(doc["sandbox"]["stages"]["trace"], "on") << doc["sandbox"].dump();
  EXPECT_NE(probe(1, "candidate").find("CACHE "), std::string::npos);
  if (std::filesystem::exists("/sbin/ldconfig")) {
    const auto s = densefeed({"run", trace_manifest("sbin", "[/sbin/ldconfig, -p]").string(), "--json", "--no-bench"});
    const J d = J::parse(s.out);
    // It ran (and wrote no trace, which is the stage's red), not refused by bwrap.
    const std::string reason = d["stages"]["trace"]["reason"];
    EXPECT_EQ(reason.find("bwrap"), std::string::npos) << reason;
    EXPECT_NE(reason.find("trace"), std::string::npos) << reason;
  }
}

// The candidate's and the base's WORKTREE arms write compile caches of
// their own, per experiment: what the candidate leaves in its cache is
// seen neither by the base, nor by the next experiment's candidate, nor by
// the reference (a trusted command, with a cache of the trusted ref's own).
TEST_F(TrustedGround, TheCandidateAndTheBaseGetCachesOfTheirOwnAndTheReferenceNeverSeesTheCandidates) {
  init_project();
  const std::regex cache_line(R"(CACHE (\S+) \[([^\]]*)\])");
  const auto cache_of = [&](const std::string& text) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(text, m, cache_line)) << text;
    return std::pair<std::string, std::string>{m[1], m[2]};
  };
  std::set<std::string> dirs;
  for (int id : {1, 2}) {
    const auto r = densefeed({"run", trace_manifest(fmt::format("cache-{}", id), probe_command({}), "[candidate, base]").string(),
                              "--json", "--no-bench"});
    ASSERT_EQ(r.exit_code, 0) << r.out.substr(0, 3000) << r.err;
    const auto [cand_dir, cand_seen] = cache_of(probe(id, "candidate"));
    const auto [base_dir, base_seen] = cache_of(probe(id, "base"));
    EXPECT_NE(cand_dir, base_dir);
    // Each found its cache as it was made for it: empty of poison, so
    // nothing a candidate (or a base) left earlier, in this run or before.
    EXPECT_EQ(cand_seen.find("poison-"), std::string::npos) << id << ": " << cand_seen;
    EXPECT_EQ(base_seen.find("poison-"), std::string::npos) << id << ": " << base_seen;
    dirs.insert(cand_dir);
    dirs.insert(base_dir);
    // The reference's cache: neither arm's, and without their poison.
    std::string ref_log;
    for (const auto& e : std::filesystem::recursive_directory_iterator(repo_ / ".densefeed" / "ledger-runs" / std::to_string(id))) {
      if (e.path().filename() == "stderr.log" && e.path().parent_path().filename().string().rfind("reference-", 0) == 0) {
        ref_log += testing::read_file(e.path());
      }
    }
    const std::regex ref_line(R"(REFCACHE (\S+) \[([^\]]*)\])");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(ref_log, m, ref_line)) << ref_log;
    EXPECT_NE(m[1], cand_dir);
    EXPECT_NE(m[1], base_dir);
    EXPECT_EQ(m[2].str().find("poison-"), std::string::npos) << m[2];
  }
  EXPECT_EQ(dirs.size(), 4u) << "two experiments, two arms each: four caches";
  // The poison is there, where each arm left it (the check can fail).
  for (const auto& d : dirs) {
    bool poisoned = false;
    for (const auto& e : std::filesystem::directory_iterator(d)) poisoned = poisoned || e.path().filename().string().rfind("poison-", 0) == 0;
    EXPECT_TRUE(poisoned) << d;
  }
}

// The bench driver is trusted code that loads the arm's kernel: whatever
// the kernel writes into the driver's compile cache must never reach the
// reference (its cache was the reference's before issue 25). The worktree's
// kernel module writes a poison file into every cache it is given; after a
// benchmark, the next experiment's reference sees none, and the poison lies
// in the drivers' own caches, one per arm.
TEST_F(TrustedGround, AKernelLoadedByTheBenchDriverNeverWritesTheReferencesCache) {
  init_project();
  const auto kernel = repo_ / "harness" / "scan.py";
  testing::write_file(kernel, "import os as _o, uuid as _u\n_c = _o.environ.get('XDG_CACHE_HOME', '')\n"
                              "if _c and _o.path.isdir(_c): open(_o.path.join(_c, 'poison-' + _u.uuid4().hex), 'w').write('x')\n" +
                                  testing::read_file(kernel));
  const auto bench = densefeed({"run", trace_manifest("bench", probe_command({})).string(), "--json"});
  ASSERT_NE(bench.exit_code, 2) << bench.out.substr(0, 3000) << bench.err;
  ASSERT_NE(bench.exit_code, 3) << bench.out.substr(0, 3000) << bench.err;
  std::set<std::string> driver_caches;
  for (const auto& e : std::filesystem::directory_iterator(repo_ / ".densefeed" / "ledger-caches")) {
    const std::string name = e.path().filename().string();
    if (name.size() > 7 && name.compare(name.size() - 7, 7, "-driver") == 0) {
      for (const auto& f : std::filesystem::directory_iterator(e.path() / "xdg")) {
        if (f.path().filename().string().rfind("poison-", 0) == 0) driver_caches.insert(name);
      }
    }
  }
  EXPECT_EQ(driver_caches, (std::set<std::string>{"worktree-1-candidate-driver", "worktree-1-base-driver"}))
      << "the driver ran the arms' kernels, each in a cache of its own";
  for (const auto& e : std::filesystem::directory_iterator(repo_ / ".densefeed" / "ledger-caches")) {
    if (e.path().filename().string().rfind("trusted-", 0) != 0) continue;
    for (const auto& f : std::filesystem::recursive_directory_iterator(e.path())) {
      EXPECT_NE(f.path().filename().string().rfind("poison-", 0), 0u) << f.path() << ": the arm's kernel wrote the reference's cache";
    }
  }
  const auto next = densefeed({"run", trace_manifest("after", probe_command({})).string(), "--json", "--no-bench"});
  ASSERT_EQ(next.exit_code, 0) << next.out.substr(0, 3000) << next.err;
  std::string ref_log;
  for (const auto& e : std::filesystem::recursive_directory_iterator(repo_ / ".densefeed" / "ledger-runs" / "2")) {
    if (e.path().filename() == "stderr.log" && e.path().parent_path().filename().string().rfind("reference-", 0) == 0) {
      ref_log += testing::read_file(e.path());
    }
  }
  ASSERT_NE(ref_log.find("REFCACHE "), std::string::npos) << ref_log;
  EXPECT_EQ(ref_log.find("poison-"), std::string::npos) << ref_log;
}

}  // namespace
}  // namespace densefeed
