// Issue 17, harness sessions (protocol: session), through the real CLI on a
// project of its own (a git repository on main): a session harness is judged
// as a process harness is, and each way a session can misbehave (a crash, a
// hang, an answer for another request, garbage on stdout, an exit mid-case,
// an answer before the outputs, a harness that never answers, one that does
// not speak sessions at all) makes that case red naming what happened, while
// the later cases of the same run are still judged and recorded.
//
//   gate `five`  cases n = 10 .. 50; the candidate misbehaves at n = 30 only
//   gate `one`   one case, for a session that never answers
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;
const std::string kExe = DENSEFEED_EXE;

// s.py: a session harness with its own serve loop, so that it can break
// the protocol in each way --mode says (at case n = 30 only).
const char* kHarness = R"(import json, os, signal, sys, time
import numpy as np
mode = sys.argv[sys.argv.index('--mode') + 1]
answers = os.fdopen(os.dup(1), 'w', buffering=1)
sys.stdout = sys.stderr
if mode == 'nosession':
    sys.exit(0)  # a harness of the one-process-per-case protocol, started without a case
def answer(i):
    answers.write(json.dumps({'id': i, 'status': 'ok'}) + '\n')
for line in sys.stdin:
    r = json.loads(line)
    n = r['case']['n']
    if mode == 'keyed' and sorted(r['case']) != ['n']:
        sys.exit(9)  # a reference whose case_keys are [n] gets n alone
    if mode == 'silent':
        continue
    def write():
        x = np.random.default_rng(int(r['seed']) + n).standard_normal(n)
        np.save(os.path.join(r['out'], 'y.npy'), 2 * x)
    bad = n == 30
    if bad and mode == 'crash':
        os.kill(os.getpid(), signal.SIGSEGV)
    if bad and mode == 'hang':
        time.sleep(3600)
    if bad and mode == 'exit':
        sys.exit(3)
    if bad and mode == 'late':
        # wrong outputs at the answer, a file kept open, put right afterwards
        x = np.random.default_rng(int(r['seed']) + n).standard_normal(n)
        f = open(os.path.join(r['out'], 'y.npy'), 'wb')
        np.save(f, 3 * x); f.flush()
        answer(r['id'])
        time.sleep(0.2)
        f.seek(0); np.save(f, 2 * x); f.close()
        continue
    if bad and mode == 'early':
        answer(r['id'])
        time.sleep(0.3)
        write()
        continue
    write()
    if bad and mode == 'wrongid':
        answers.write(json.dumps({'id': r['id'] + 7, 'status': 'ok'}) + '\n')
    elif bad and mode == 'garbage':
        answers.write('hello from the harness\n')
    elif bad and mode == 'badutf8':
        answers.flush()  # an answer with bytes that are not UTF-8
        os.write(answers.fileno(), b'{"id": %d, "status": "ok", "m": "\xff\xfe"}\n' % r['id'])
    else:
        answer(r['id'])
)";

std::string gate(const std::string& name, const std::string& grid, double timeout_s) {
  return "gate: " + name + "\ndescription: y = 2 x\nprotocol: session\n"
         "reference:\n  command: [python3, \"{project}/s.py\", --mode, honest]\n"
         "candidate:\n  command: [python3, \"{project}/s.py\", --mode, \"{param.mode}\"]\n"
         "params:\n  mode: {type: string, enum: [honest, steady, late, crash, hang, wrongid, garbage, badutf8, exit, early, silent, nosession], default: honest}\n"
         "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
         "cases:\n  grid:\n    - {n: " + grid + "}\nprofiles: {quick: {}, full: {}}\n"
         "timeout_s: " + std::to_string(timeout_s) + "\nfreezes: [s.py]\n";
}

class Session : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "project";
    std::filesystem::create_directories(repo_);
    ASSERT_EQ(testing::locked_project(repo_,
                                      {{"s.py", kHarness},
                                       {"gates/five.yaml", gate("five", "[10, 20, 30, 40, 50]", 10)},
                                       {"gates/one.yaml", gate("one", "[10]", 3)},
                                       {"b.py", "import os, sys, threading, time\nimport numpy as np\nfrom densefeed_harness import serve\n"
                                                "mode = sys.argv[1] if len(sys.argv) > 1 else 'honest'\n"
                                                // every SIGCONT it gets is logged in its exchange folder
                                                "import signal\nlog = []\n"
                                                "signal.signal(signal.SIGCONT, lambda *a: log and open(log[0], 'a').write('cont\\n'))\n"
                                                "def handle(h):\n"
                                                "    log[:] = [os.path.join(os.path.dirname(str(h.out)), 'cont.log')]\n"
                                                // and the cgroup (v2) it is in at each request
                                                "    v2 = [l for l in open('/proc/self/cgroup').read().splitlines() if l.startswith('0::')]\n"
                                                "    open(os.path.join(os.path.dirname(str(h.out)), 'cgroup.log'), 'a').write((v2 or ['none'])[0] + '\\n')\n"
                                                "    x = h.rng().standard_normal(int(h.case['n']))\n"
                                                "    if h.mode == 'bench':\n"
                                                "        h.write_samples(h.time_iterations(lambda: time.sleep(0.002)))\n"
                                                "    if h.mode == 'bench' and mode == 'latefix':\n"
                                                // wrong at the answer, through a file kept open; put right 0.3 s later
                                                "        f = open(os.path.join(str(h.out), 'y.npy'), 'wb')\n"
                                                "        np.save(f, 3 * x); f.flush()\n"
                                                "        def fix():\n"
                                                "            time.sleep(0.3); f.seek(0); np.save(f, 2 * x); f.close()\n"
                                                "        threading.Thread(target=fix).start()\n"
                                                "        return\n"
                                                "    h.write_output('y', 2 * x)\n"
                                                "serve(handle)\n"},
                                       {"gates/bench.yaml",
                                        "gate: bench\ndescription: y = 2 x, benchmarked through sessions\nprotocol: session\n"
                                        "reference:\n  command: [python3, \"{project}/b.py\"]\n"
                                        "candidate:\n  command: [python3, \"{project}/b.py\", \"{param.mode}\"]\n"
                                        "params:\n  mode: {type: string, enum: [honest, steady, latefix], default: honest}\n"
                                        "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                                        "cases:\n  grid:\n    - {n: [10, 20]}\nprofiles: {quick: {}, full: {}}\n"
                                        "bench:\n  warmup: 1\n  iters: 3\n  max_seconds_per_case: 60\n  cases:\n    - {n: 20}\n"
                                        "timeout_s: 30\nfreezes: [b.py]\n"},
                                       {"c.py", "import os, subprocess, sys\nfrom densefeed_harness import serve\n"
                                                "def handle(h):\n"
                                                "    os.write(1, b'progress on descriptor 1\\n')\n"  // as a C extension would
                                                "    subprocess.run(['echo', 'a child on stdout'], check=True)\n"
                                                "    print('print goes to stderr')\n"
                                                "    h.write_output('y', 2 * h.rng().standard_normal(int(h.case['n'])))\n"
                                                "serve(handle)\n"},
                                       {"gates/chat.yaml",
                                        "gate: chat\ndescription: y = 2 x by a harness that writes on stdout\nprotocol: session\n"
                                        "reference:\n  command: [python3, \"{project}/c.py\"]\n"
                                        "candidate:\n  command: [python3, \"{project}/c.py\", \"{param.mode}\"]\n"
                                        "params:\n  mode: {type: string, enum: [honest, steady], default: honest}\n"
                                        "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                                        "cases:\n  grid:\n    - {n: [10, 20, 30]}\nprofiles: {quick: {}, full: {}}\n"
                                        "timeout_s: 30\nfreezes: [c.py]\n"},
                                       {"gates/keyed.yaml",
                                        "gate: keyed\ndescription: y = 2 x; k changes nothing the reference computes\n"
                                        "protocol: session\nreference:\n  command: [python3, \"{project}/s.py\", --mode, keyed]\n"
                                        "  case_keys: [n]\n"
                                        "candidate:\n  command: [python3, \"{project}/s.py\", --mode, \"{param.mode}\"]\n"
                                        "params:\n  mode: {type: string, enum: [honest, steady], default: honest}\n"
                                        "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                                        "cases:\n  grid:\n    - {n: [10, 20], k: [1, 2, 3]}\nprofiles: {quick: {}, full: {}}\n"
                                        "timeout_s: 10\nfreezes: [s.py]\n"},
                                       {"p.py", "import os\nfrom densefeed_harness import serve\n"
                                                "for fd in range(3, 64):\n"  // whatever densefeed's caller left open
                                                "    try: os.write(fd, b'LEAK from a harness\\n')\n"
                                                "    except OSError: pass\n"
                                                "def handle(h):\n"
                                                "    h.write_output('y', 2 * h.rng().standard_normal(int(h.case['n'])))\n"
                                                "serve(handle)\n"},
                                       {"gates/serveproc.yaml",
                                        "gate: serveproc\ndescription: y = 2 x, one process per case, the case from DENSEFEED_CASE\n"
                                        "reference:\n  command: [python3, \"{project}/p.py\"]\n"
                                        "candidate:\n  command: [python3, \"{project}/p.py\", \"{param.mode}\"]\n"
                                        "params:\n  mode: {type: string, enum: [honest, steady], default: honest}\n"
                                        "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                                        "cases:\n  grid:\n    - {n: [10, 20, 30]}\nprofiles: {quick: {}, full: {}}\n"
                                        "timeout_s: 30\nfreezes: [p.py]\n"},
                                       {"gates/cpp.yaml",
                                        "gate: cpp\ndescription: y = 2 x by a C++ session harness\nprotocol: session\n"
                                        "reference:\n  command: [\"" SESSION_HARNESS_EXE "\"]\n"
                                        "candidate:\n  command: [\"" SESSION_HARNESS_EXE "\", --fail-at, \"{param.fail_at}\", --exit-at, "
                                        "\"{param.exit_at}\", --chatty, \"{param.chatty}\"]\n"
                                        "params:\n  fail_at: {type: integer, default: -1}\n  exit_at: {type: integer, default: -1}\n"
                                        "  chatty: {type: integer, default: 0}\n"
                                        "outputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                                        "cases:\n  grid:\n    - {n: [10, 20, 30, 40, 50]}\nprofiles: {quick: {}, full: {}}\n"
                                        "timeout_s: 10\nfreezes: [s.py]\n"}},
                                      kExe, testing::project_env(dir_ / "home")),
              "");
  }
  // Runs gate `g` with the candidate in `mode` (--jobs 1: one session per
  // arm, so the cases after the bad one are served by its successor).
  std::pair<int, J> run(const std::string& g, const std::string& mode) {
    const auto m = dir_ / (g + "-" + mode + ".yaml");
    testing::write_file(m, "experiment: " + g + "-" + mode + "\nhypothesis: h\npredicted_effect: p\ngate: " + g +
                               "\ncandidate: {revision: WORKTREE, params: {mode: " + mode + "}}\nbase: {revision: WORKTREE}\n");
    const auto r = testing::run_cli(kExe, {"run", m.string(), "--json", "--jobs", "1", "--no-bench"}, repo_,
                                    testing::project_env(dir_ / "home"));
    J doc = J::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
    return {r.exit_code, doc};
  }
  // n -> verdict of a report's cases.
  static std::map<int, std::string> verdicts(const J& r) {
    std::map<int, std::string> v;
    for (const auto& c : r["stages"]["gate"]["cases"]) v[c["values"]["n"].get<int>()] = c["verdict"];
    return v;
  }
  static std::string reason_at(const J& r, int n) {
    for (const auto& c : r["stages"]["gate"]["cases"]) {
      if (c["values"]["n"] == n) return c["reason"];
    }
    return "";
  }
  // The bad case is red with `text` in its reason and the case named; every
  // other case green, and the ledger holds all five.
  void only_case_30_red(const std::string& mode, const std::string& text, const std::string& kind) {
    const auto [code, r] = run("five", mode);
    EXPECT_EQ(code, 1) << r.dump(1).substr(0, 3000);
    const std::map<int, std::string> want = {{10, "green"}, {20, "green"}, {30, "red"}, {40, "green"}, {50, "green"}};
    EXPECT_EQ(verdicts(r), want) << mode;
    const std::string reason = reason_at(r, 30);
    EXPECT_NE(reason.find("the candidate's session " + text), std::string::npos) << mode << ": " << reason;
    EXPECT_NE(reason.find("during case n=30"), std::string::npos) << reason;
    EXPECT_EQ(r["record"]["stages"]["gate"]["failure"]["kind"], kind) << r["record"].dump(1);
    const auto q = testing::run_cli("/usr/bin/sqlite3", {(repo_ / ".densefeed" / "ledger.db").string(),
                                                        "SELECT COUNT(*) FROM gate_cases JOIN gate_runs ON gate_runs.id = gate_cases.gate_run_id "
                                                        "WHERE gate_runs.experiment_id = " + std::to_string(r["experiment_id"].get<int>())},
                                    repo_);
    EXPECT_EQ(q.out, "5\n") << q.err;
  }

  testing::TempDir dir_;
  std::filesystem::path repo_;
};

TEST_F(Session, AnHonestSessionIsGreenWithOneSessionPerArmAndItsMemoryPerRequest) {
  const auto [code, r] = run("five", "steady");  // honest too: the base is the default mode
  ASSERT_EQ(code, 0) << r.dump(1).substr(0, 3000);
  int request = 0;
  for (const auto& c : r["stages"]["gate"]["cases"]) {
    EXPECT_EQ(c["verdict"], "green");
    const auto& s = c["candidate_session"];
    ASSERT_TRUE(s.is_object()) << c.dump(1);
    EXPECT_EQ(s["session"], 1);  // one session served every case
    EXPECT_EQ(s["request"], request++);
    EXPECT_GT(s["rss_bytes"].get<std::uint64_t>(), 1u << 20);
    EXPECT_EQ(c["reference_session"]["session"], 1);
  }
}

TEST_F(Session, ASessionThatCrashesMidCaseIsRedForThatCaseOnly) {
  only_case_30_red("crash", "was killed by signal 11 (SIGSEGV) before it answered", "crash");
}

TEST_F(Session, ASessionThatHangsPastTheTimeoutIsRedForThatCaseOnly) {
  only_case_30_red("hang", "did not answer within 10 s and was killed", "timeout");
}

TEST_F(Session, ASessionThatAnswersForAnotherRequestIsRed) {
  only_case_30_red("wrongid", "answered for request 9 while request 2 was asked", "malformed_output");
}

TEST_F(Session, ASessionThatWritesGarbageOnStdoutIsRed) {
  only_case_30_red("garbage", "wrote 'hello from the harness' on stdout, which is not an answer", "malformed_output");
}

TEST_F(Session, AnAnswerWithBytesThatAreNotUtf8IsRedAndRecordedNotACrash) {
  // The reason quotes what it wrote, escaped: the report and the ledger stay
  // valid UTF-8 (this run used to end in an internal error, nothing recorded).
  only_case_30_red("badutf8", "wrote '{\"id\": 2, \"status\": \"ok\", \"m\": \"\\xff\\xfe\"}' on stdout, which is not an answer",
                   "malformed_output");
}

TEST_F(Session, ASessionThatExitsMidCaseIsRed) {
  only_case_30_red("exit", "exited with code 3 before it answered", "exit_code");
}

TEST_F(Session, AnAnswerBeforeTheOutputsAreWrittenIsRedMissingOutput) {
  const auto [code, r] = run("five", "early");
  EXPECT_EQ(code, 1);
  EXPECT_EQ(verdicts(r)[30], "red");
  EXPECT_EQ(verdicts(r)[50], "green");
  EXPECT_NE(reason_at(r, 30).find("missing"), std::string::npos) << reason_at(r, 30);
}

TEST_F(Session, ASessionThatRewritesAnAnsweredCasesOutputsThroughAnOpenFileIsRed) {
  const auto [code, r] = run("five", "late");
  EXPECT_EQ(code, 1);
  const std::map<int, std::string> want = {{10, "green"}, {20, "green"}, {30, "red"}, {40, "green"}, {50, "green"}};
  EXPECT_EQ(verdicts(r), want);
  EXPECT_EQ(r["record"]["stages"]["gate"]["failure"]["kind"], "malformed_output") << r["record"].dump(1);
  EXPECT_NE(reason_at(r, 30).find("changed its outputs of case n=30 after it answered"), std::string::npos) << reason_at(r, 30);
}

TEST_F(Session, ASessionThatNeverAnswersItsFirstRequestIsRedAfterTheTimeout) {
  const auto [code, r] = run("one", "silent");
  EXPECT_EQ(code, 1) << r.dump(1).substr(0, 2000);
  EXPECT_NE(reason_at(r, 10).find("the candidate's session did not answer within 3 s"), std::string::npos) << reason_at(r, 10);
}

TEST_F(Session, AHarnessThatDoesNotSpeakSessionsIsToldSoAtTheFirstCase) {
  const auto [code, r] = run("one", "nosession");
  EXPECT_EQ(code, 1);
  const std::string reason = reason_at(r, 10);
  EXPECT_NE(reason.find("exited with code 0 before it answered: does its harness speak the session protocol"), std::string::npos)
      << reason;
}

TEST_F(Session, ACppSessionHarnessServesEveryCaseAndAnErrorAnswerFailsOnlyItsCase) {
  const auto m = dir_ / "cpp.yaml";
  testing::write_file(m, "experiment: cpp\nhypothesis: h\npredicted_effect: p\ngate: cpp\n"
                         "candidate: {revision: WORKTREE, params: {fail_at: 30}}\nbase: {revision: WORKTREE}\n");
  const auto r = testing::run_cli(kExe, {"run", m.string(), "--json", "--jobs", "1", "--no-bench"}, repo_,
                                  testing::project_env(dir_ / "home"));
  const J doc = J::parse(r.out, nullptr, false);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const std::map<int, std::string> want = {{10, "green"}, {20, "green"}, {30, "red"}, {40, "green"}, {50, "green"}};
  EXPECT_EQ(verdicts(doc), want);
  EXPECT_NE(reason_at(doc, 30).find("the candidate's session reported an error: no kernel for n = 30"), std::string::npos)
      << reason_at(doc, 30);
  // An error answer does not end the session: one session served all five.
  for (const auto& c : doc["stages"]["gate"]["cases"]) EXPECT_EQ(c["candidate_session"]["session"], 1) << c.dump(1);
  // An exit does: the next case is served by a new one.
  testing::write_file(m, "experiment: cpp\nhypothesis: h\npredicted_effect: p\ngate: cpp\n"
                         "candidate: {revision: WORKTREE, params: {exit_at: 20}}\nbase: {revision: WORKTREE}\n");
  const auto r2 = testing::run_cli(kExe, {"run", m.string(), "--json", "--jobs", "1", "--no-bench"}, repo_,
                                   testing::project_env(dir_ / "home"));
  const J doc2 = J::parse(r2.out, nullptr, false);
  EXPECT_EQ(verdicts(doc2)[20], "red");
  EXPECT_EQ(verdicts(doc2)[30], "green");
  EXPECT_EQ(doc2["stages"]["gate"]["cases"][2]["candidate_session"]["session"], 2) << doc2["stages"]["gate"]["cases"][2].dump(1);
}

// densefeed_harness.serve also serves one process per case, from
// DENSEFEED_CASE. A reference whose command names no case key can learn its
// case nowhere else: it runs once per case with the whole case, never once
// for all cases with {} (a new user's first try: KeyError 'rows', or worse,
// a default size taken for every case).
TEST_F(Session, AProcessReferenceThatNamesNoCaseKeyGetsEachCaseWhole) {
  const auto [code, r] = run("serveproc", "steady");
  EXPECT_EQ(code, 0) << r.dump(1).substr(0, 3000);
  const std::map<int, std::string> want = {{10, "green"}, {20, "green"}, {30, "green"}};
  EXPECT_EQ(verdicts(r), want);
  const auto runs = repo_ / ".densefeed" / "ledger-runs" / std::to_string(r["experiment_id"].get<int>());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::filesystem::exists(runs / fmt::format("reference-{:03}", i) / "out" / "y.npy")) << i;
}

// Descriptors densefeed inherits (a CI job's pipes, a file its caller opened
// for appending) never reach a harness: p.py writes to every descriptor from
// 3 to 63 it finds open, and the file densefeed's caller held as fd 7 stays
// as it was (a hostile candidate wrote 20 lines through it before).
TEST_F(Session, DescriptorsDensefeedInheritsNeverReachAHarness) {
  const auto target = dir_ / "outside.txt";
  testing::write_file(target, "untouched\n");
  const auto m = dir_ / "leak.yaml";
  testing::write_file(m, "experiment: leak\nhypothesis: h\npredicted_effect: p\ngate: serveproc\n"
                         "candidate: {revision: WORKTREE, params: {mode: steady}}\nbase: {revision: WORKTREE}\n");
  const auto r = testing::run_cli("/bin/bash", {"-c", "exec 7>>\"$0\"; exec \"$1\" run \"$2\" --json --no-bench",
                                                target.string(), kExe, m.string()},
                                  repo_, testing::project_env(dir_ / "home"));
  EXPECT_EQ(r.exit_code, 0) << r.out.substr(0, 2000) << r.err;
  EXPECT_EQ(testing::read_file(target), "untouched\n");
}

TEST_F(Session, ASessionsCommandMayNotTakeTheCase) {
  testing::write_file(repo_ / "gates" / "bad.yaml",
                      "gate: bad\ndescription: d\nprotocol: session\nreference:\n  command: [python3, s.py, --n, \"{case.n}\"]\n"
                      "candidate:\n  command: [python3, s.py]\noutputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                      "cases:\n  grid:\n    - {n: [1]}\nprofiles: {quick: {}, full: {}}\nfreezes: [s.py]\n");
  const auto r = testing::run_cli(kExe, {"--trust-worktree", "gate", "show", "bad"}, repo_, testing::project_env(dir_ / "home"));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("field 'reference.command'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("may not use '{case.n}'"), std::string::npos) << r.err;
}

TEST_F(Session, CasesThatAgreeOnTheReferencesCaseKeysShareOneReferenceRequestHoldingOnlyThem) {
  // Six cases (n x k), a reference that depends on n alone: two reference
  // requests, each case compared with the one of its n; the reference
  // exits 9 (error) if its request's case holds more than n.
  const auto [code, r] = run("keyed", "steady");
  ASSERT_EQ(code, 0) << r.dump(1).substr(0, 3000);
  const auto& cases = r["stages"]["gate"]["cases"];
  ASSERT_EQ(cases.size(), 6u);
  std::map<int, std::set<int>> request_of_n;
  std::set<int> candidate_requests;
  for (const auto& c : cases) {
    EXPECT_EQ(c["verdict"], "green") << c.dump(1);
    request_of_n[c["values"]["n"].get<int>()].insert(c["reference_session"]["request"].get<int>());
    candidate_requests.insert(c["candidate_session"]["request"].get<int>());
  }
  EXPECT_EQ(request_of_n, (std::map<int, std::set<int>>{{10, {0}}, {20, {1}}}));
  EXPECT_EQ(candidate_requests.size(), 6u);
}

TEST_F(Session, WhatAHarnessWritesOnDescriptorOneGoesToStderrNotIntoTheAnswers) {
  // Python (densefeed_harness.serve): os.write(1, ...) as a C extension
  // does, a child process's stdout, print(); one session serves all three
  // cases and the lines are in its stderr log.
  const auto [code, r] = run("chat", "steady");
  ASSERT_EQ(code, 0) << r.dump(1).substr(0, 3000);
  for (const auto& c : r["stages"]["gate"]["cases"]) {
    EXPECT_EQ(c["verdict"], "green") << c.dump(1);
    EXPECT_EQ(c["candidate_session"]["session"], 1) << c.dump(1);
  }
  const auto log = testing::read_file(std::filesystem::path(r["work_dir"].get<std::string>()) / "session-candidate-0-0" / "stderr.log");
  EXPECT_NE(log.find("progress on descriptor 1"), std::string::npos) << log;
  EXPECT_NE(log.find("a child on stdout"), std::string::npos) << log;
  EXPECT_NE(log.find("print goes to stderr"), std::string::npos) << log;
  // C++ (densefeed::serve): printf and std::cout in every case.
  const auto m = dir_ / "cpp-chatty.yaml";
  testing::write_file(m, "experiment: cpp-chatty\nhypothesis: h\npredicted_effect: p\ngate: cpp\n"
                         "candidate: {revision: WORKTREE, params: {chatty: 1}}\nbase: {revision: WORKTREE}\n");
  const auto c = testing::run_cli(kExe, {"run", m.string(), "--json", "--jobs", "1", "--no-bench"}, repo_,
                                  testing::project_env(dir_ / "home"));
  const J doc = J::parse(c.out, nullptr, false);
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  for (const auto& k : doc["stages"]["gate"]["cases"]) EXPECT_EQ(k["candidate_session"]["session"], 1) << k.dump(1);
  const auto cpp_log =
      testing::read_file(std::filesystem::path(doc["work_dir"].get<std::string>()) / "session-candidate-0-0" / "stderr.log");
  EXPECT_NE(cpp_log.find("printf: case n = 50"), std::string::npos) << cpp_log;
  EXPECT_NE(cpp_log.find("cout: case n = 50"), std::string::npos) << cpp_log;
}

TEST_F(Session, ABenchmarkGoesThroughOneSessionPerArmAndEveryRoundIsGated) {
  const auto bench = [&](const std::string& mode) {
    const auto m = dir_ / ("bench-" + mode + ".yaml");
    testing::write_file(m, "experiment: bench-" + mode + "\nhypothesis: h\npredicted_effect: p\ngate: bench\n"
                               "candidate: {revision: WORKTREE, params: {mode: " + mode + "}}\nbase: {revision: WORKTREE}\n");
    const auto r = testing::run_cli(kExe, {"run", m.string(), "--json", "--jobs", "1"}, repo_, testing::project_env(dir_ / "home"));
    J doc = J::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << r.out << r.err;
    return doc;
  };
  // Honest: every round of both arms is a request to the same two sessions
  // (no process start inside a round).
  const J honest = bench("steady");
  ASSERT_EQ(honest["stages"]["bench"]["status"], "measured") << honest["stages"]["bench"].dump(1);
  const std::filesystem::path work = honest["work_dir"].get<std::string>();
  std::vector<std::string> sessions;
  for (const auto& e : std::filesystem::directory_iterator(work)) {
    const auto name = e.path().filename().string();
    if (name.rfind("bench-session-", 0) == 0) sessions.push_back(name);
  }
  std::sort(sessions.begin(), sessions.end());
  EXPECT_EQ(sessions, (std::vector<std::string>{"bench-session-base-0", "bench-session-candidate-0"}));
  // While one arm's round is timed the other arm's session is held still:
  // by the cgroup v2 freezer where densefeed can make a cgroup, else stopped
  // (SIGSTOP) and let go on (SIGCONT) before its own round (each session
  // logged the SIGCONTs it got, one per round after another arm's). Before
  // sessions were held still, neither happened. With the freezer each
  // session is born in a densefeed-* cgroup of its own (ProcessFreezer::
  // join_fd) and never moved: every request sees the same cgroup, the root
  // of the cgroup namespace the sandbox made after it joined ("0::/"), or
  // without one the densefeed-* folder itself. A session moved in at the
  // first pause (what a fast-forking tree could outrun, stop 37) would see
  // a densefeed-* folder below its namespace's root from then on.
  const std::string freeze = honest["stages"]["bench"]["cases"][0]["timing_checks"].value("freeze", "");
  std::set<std::string> cgroups;
  for (const auto& arm : sessions) {
    if (freeze == "cgroup v2 freezer") {
      std::istringstream lines(testing::read_file(work / arm / "exchange" / "cgroup.log"));
      std::vector<std::string> seen;
      for (std::string line; std::getline(lines, line);) seen.push_back(line);
      ASSERT_GE(seen.size(), 3u) << arm;
      const bool own_namespace = seen.front() == "0::/";
      EXPECT_TRUE(own_namespace || seen.front().find("/densefeed-") != std::string::npos) << arm << ": " << seen.front();
      for (const auto& line : seen) EXPECT_EQ(line, seen.front()) << arm << ": moved between requests";
      if (!own_namespace) cgroups.insert(seen.front());
      continue;
    }
    EXPECT_EQ(freeze.rfind("signals", 0), 0u) << freeze;
    std::size_t conts = 0;
    const auto log = work / arm / "exchange" / "cont.log";
    if (std::filesystem::exists(log)) {
      const std::string text = testing::read_file(log);
      conts = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
    }
    EXPECT_GE(conts, 2u) << arm;
  }
  if (freeze == "cgroup v2 freezer" && !cgroups.empty()) EXPECT_EQ(cgroups.size(), 2u) << "one cgroup per arm's session";
  // Outputs wrong at the answer and put right afterwards through a file it
  // kept open: what is compared is what it answered with, red.
  const J late = bench("latefix");
  EXPECT_EQ(late["stages"]["gate"]["verdict"], "green") << late["stages"]["gate"].dump(1).substr(0, 2000);
  EXPECT_EQ(late["stages"]["bench"]["status"], "red") << late["stages"]["bench"].dump(1);
  EXPECT_NE(late["stages"]["bench"].value("reason", "").find("what was timed is not what was gated"), std::string::npos)
      << late["stages"]["bench"].dump(1);
}

TEST_F(Session, AReferenceCaseKeyThatNoCaseDefinesIsRefusedNamingTheField) {
  testing::write_file(repo_ / "gates" / "bad.yaml",
                      "gate: bad\ndescription: d\nprotocol: session\nreference:\n  command: [python3, s.py]\n"
                      "  case_keys: [n, m]\n"
                      "candidate:\n  command: [python3, s.py]\noutputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                      "cases:\n  grid:\n    - {n: [1]}\nprofiles: {quick: {}, full: {}}\nfreezes: [s.py]\n");
  const auto r = testing::run_cli(kExe, {"--trust-worktree", "gate", "show", "bad"}, repo_, testing::project_env(dir_ / "home"));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("reference.case_keys"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("case key 'm' is not defined by case 'n=1'"), std::string::npos) << r.err;
  // Not a list of names: the schema says so.
  testing::write_file(repo_ / "gates" / "bad.yaml",
                      "gate: bad\ndescription: d\nprotocol: session\nreference:\n  command: [python3, s.py]\n"
                      "  case_keys: n\n"
                      "candidate:\n  command: [python3, s.py]\noutputs:\n  y: {dtype: float64, tolerance: {rel_l2: 1.0e-12}}\n"
                      "cases:\n  grid:\n    - {n: [1]}\nprofiles: {quick: {}, full: {}}\nfreezes: [s.py]\n");
  const auto s = testing::run_cli(kExe, {"--trust-worktree", "gate", "show", "bad"}, repo_, testing::project_env(dir_ / "home"));
  EXPECT_EQ(s.exit_code, 2) << s.out << s.err;
  EXPECT_NE(s.err.find("case_keys"), std::string::npos) << s.err;
}

}  // namespace
}  // namespace densefeed
