// Issue 28, densefeed as a service the agent cannot reach around: a real
// `densefeed serve` on a real unix socket, a project repository of its own
// (`densefeed init`'s sample, not densefeed's), agents' checkouts cloned
// from it, clients that talk to the service with `--service SOCKET`.
// Service.* run the service and the client as this test's user (the peer
// uid the kernel names is then the service's own, and the configuration's
// `people:` decides); ServiceE2E.* run the client as another uid (CI runs
// as root: a test user is made and the client dropped to it with setpriv;
// skipped, saying why, where that cannot be done).
#include <gtest/gtest.h>

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "service_wire.h"
#include "sha256.h"
#include "test_support.h"
#include "unix_socket.h"

namespace densefeed {
namespace {

namespace fs = std::filesystem;
const std::string kExe = DENSEFEED_EXE;

std::string sed_base(const std::string& manifest, const std::string& base) {
  std::string out;
  std::istringstream in(manifest);
  for (std::string line; std::getline(in, line);) out += (line.rfind("base:", 0) == 0 ? base : line) + "\n";
  return out;
}

// The id `submit --json` printed (schemas/submit.schema.json: one manifest's
// experiment_id, or each one's under queued).
int queued_id(const nlohmann::json& doc) {
  return doc.contains("queued") ? doc["queued"][0]["experiment_id"].get<int>() : doc["experiment_id"].get<int>();
}

class Service : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "repo";
    fs::create_directories(repo_);
    env_ = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", (dir_ / "home").string()}};
    ASSERT_EQ(testing::git(repo_, {"init", "-q", "-b", "main"}).exit_code, 0);
    const auto init = testing::run_cli(kExe, {"init"}, repo_, env_);
    ASSERT_EQ(init.exit_code, 0) << init.out << init.err;
    ASSERT_EQ(testing::git_commit_all(repo_, "densefeed: sample gate"), "");
    agent_ = clone("agent");
    // The base is a commit the service fetches (main), never the agent's tree.
    for (const std::string name : {"scan-merge-float16", "scan-merge-float32"}) {
      const auto path = agent_ / "experiments" / (name + ".yaml");
      const std::string other = name == "scan-merge-float16" ? "float32" : "float16";
      testing::write_file(path, sed_base(testing::read_file(path), "base: {revision: main, params: {merge_dtype: " + other + "}}"));
    }
    socket_ = dir_ / "run" / "p.sock";
    fs::create_directories(socket_.parent_path());
    state_ = dir_ / "state";
    write_config("people: []\n");
  }
  void TearDown() override { stop(); }

  fs::path clone(const std::string& name) {
    const fs::path to = dir_ / name;
    EXPECT_EQ(testing::git(dir_.path(), {"clone", "-q", repo_.string(), to.string()}).exit_code, 0);
    return to;
  }
  void write_config(const std::string& extra) {
    testing::write_file(dir_ / "service.yaml", "repository: " + repo_.string() + "\ntrusted_ref: main\nstate: " + state_.string() +
                                                   "\nsocket: " + socket_.string() +
                                                   "\nworker: {slots: 1, profile: quick, gpus: none}\n" + extra);
  }

  // Starts `densefeed serve` in a process group of its own; waits for its socket.
  void start() {
    fs::remove(socket_);
    server_ = ::fork();
    ASSERT_GE(server_, 0);
    if (server_ == 0) {
      ::setpgid(0, 0);
      const int log = ::open((dir_ / "serve.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
      ::setenv("HOME", (dir_ / "service-home").c_str(), 1);
      ::execl(kExe.c_str(), kExe.c_str(), "serve", "--config", (dir_ / "service.yaml").c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 500 && !fs::exists(socket_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(fs::exists(socket_)) << testing::read_file(dir_ / "serve.log");
  }
  // Ends the service (SIGTERM, or `sig`) and reaps it.
  void stop(int sig = SIGTERM) {
    if (server_ <= 0) return;
    ::kill(server_, sig);
    int status = 0;
    ::waitpid(server_, &status, 0);
    server_ = 0;
  }

  testing::CliResult agent(std::vector<std::string> args, const fs::path& cwd = {}) {
    args.insert(args.begin(), {"--service", socket_.string()});
    return testing::run_cli(kExe, args, cwd.empty() ? agent_ : cwd, env_);
  }
  // Waits for experiment `id` through the service; returns its status document.
  nlohmann::json wait_for(int id) {
    const auto r = agent({"status", std::to_string(id), "--wait", "--timeout", "300", "--json"});
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out << r.err;
    try {
      return nlohmann::json::parse(r.out);
    } catch (const std::exception&) {
      ADD_FAILURE() << r.out << r.err;
      return {};
    }
  }
  int submit(const std::string& manifest) {
    const auto r = agent({"submit", "experiments/" + manifest, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    try {
      return queued_id(nlohmann::json::parse(r.out));
    } catch (const std::exception&) {
      ADD_FAILURE() << r.out << r.err;
      return 0;
    }
  }

  testing::TempDir dir_;
  fs::path repo_, agent_, socket_, state_;
  std::map<std::string, std::string> env_;
  pid_t server_ = 0;
};

TEST_F(Service, AConfigThatWouldPutTheSocketInsideTheStateOrUseRelativePathsIsRefusedNamingTheField) {
  const auto config = dir_ / "bad.yaml";
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"repository: " + repo_.string() + "\ntrusted_ref: main\nstate: " + state_.string() + "\nsocket: " + (state_ / "s.sock").string() + "\n",
            "socket"},
           {"repository: " + repo_.string() + "\ntrusted_ref: main\nstate: relative/state\nsocket: " + socket_.string() + "\n", "state"},
           {"repository: " + repo_.string() + "\ntrusted_ref: main\nstate: " + state_.string() + "\nsocket: " + socket_.string() +
                "\npeople: [no-such-login-densefeed]\n",
            "people"},
           {"repository: " + repo_.string() + "\ntrusted_ref: main\nstate: " + state_.string() + "\nsocket: " + socket_.string() +
                "\nworkers: 2\n",
            "workers"}}) {
    testing::write_file(config, text);
    const auto r = testing::run_cli(kExe, {"serve", "--config", config.string()}, dir_.path(), env_);
    EXPECT_EQ(r.exit_code, 2) << text << r.out << r.err;
    EXPECT_NE(r.err.find(config.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(field), std::string::npos) << field << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(state_)) << "nothing is made for a configuration that is refused";
}

TEST_F(Service, TheStateFolderIsTheServicesAloneAndTheSocketIsItsGroups) {
  start();
  struct stat st {};
  ASSERT_EQ(::stat(state_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, ::geteuid());
  ASSERT_EQ(::stat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  // The key is made inside the state folder, never in the agent's home.
  const int id = submit("scan-merge-float16.yaml");
  EXPECT_EQ(wait_for(id)["verdict"], "red");
  EXPECT_TRUE(fs::exists(state_ / "ledger.db"));
  EXPECT_FALSE(fs::exists(dir_ / "home" / ".config" / "densefeed")) << "the agent's home holds no key";
  EXPECT_FALSE(fs::exists(agent_ / ".densefeed" / "ledger.db")) << "the agent's checkout holds no ledger";
  bool key = false;
  for (const auto& e : fs::recursive_directory_iterator(state_ / "config")) key = key || e.is_regular_file();
  EXPECT_TRUE(key) << "the ledger's key is under the state folder's config";
}

TEST_F(Service, AnAgentIsRefusedEveryPersonsVerbAndOptionNamingIt) {
  start();
  const int id = submit("scan-merge-float32.yaml");
  EXPECT_EQ(wait_for(id)["verdict"], "green");
  const std::string sid = std::to_string(id);
  const std::vector<std::pair<std::vector<std::string>, std::string>> attempts = {
      {{"gate", "lock", "scan-sharded"}, "`densefeed gate lock`"},
      {{"review", "approve", sid, "--by", "alice", "--category", "numerics"}, "`densefeed review approve`"},
      {{"review", "reject", sid, "--by", "alice", "--category", "numerics"}, "`densefeed review reject`"},
      {{"promote", sid}, "`densefeed promote`"},
      {{"ledger", "recover"}, "`densefeed ledger recover`"},
      {{"audit", "acknowledge", "1", "--by", "alice", "--note", "n"}, "`densefeed audit acknowledge`"},
      {{"--trust-worktree", "status", sid}, "--trust-worktree"},
      {{"audit", "--allow-untrusted-gates"}, "--allow-untrusted-gates"},
      {{"audit", "--allow-unsandboxed"}, "--allow-unsandboxed"},
      {{"status", sid, "--ledger", (dir_ / "mine.db").string()}, "--ledger"},
      {{"audit", "--head-file", (dir_ / "head").string()}, "--head-file"},
  };
  for (const auto& [args, named] : attempts) {
    const auto r = agent(args);
    EXPECT_EQ(r.exit_code, 2) << named << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    if (named.front() == '`' || named == "--trust-worktree" || named.rfind("--allow", 0) == 0) {
      EXPECT_NE(r.err.find(fmt::format("uid {}", ::geteuid())), std::string::npos) << "names who asked: " << r.err;
    }
  }
  // Verbs that run here, not through a service, are refused by the client.
  for (const std::vector<std::string> args : {std::vector<std::string>{"run", "experiments/scan-merge-float16.yaml"},
                                              std::vector<std::string>{"worker", "--once"}}) {
    const auto r = agent(args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("is not served"), std::string::npos) << r.err;
  }
  // Each attempt left its trace in the service's request log.
  const std::string log = testing::read_file(state_ / "requests.log");
  EXPECT_NE(log.find("`densefeed gate lock` is not served to you"), std::string::npos) << log;
  EXPECT_NE(log.find("--trust-worktree is not served to you"), std::string::npos) << log;
  // Nothing was recorded by any of them: no review, no promotion.
  const auto show = agent({"ledger", "show", sid, "--json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  const auto doc = nlohmann::json::parse(show.out);
  EXPECT_TRUE(doc["reviews"].empty()) << doc["reviews"].dump();
  EXPECT_TRUE(doc["promotion"].is_null()) << doc["promotion"].dump();
}

// densefeed.yaml's `service:` sends the served verbs there without --service;
// a verb that is not served runs here.
TEST_F(Service, AProjectThatNamesItsServiceSendsTheServedVerbsThere) {
  const auto config = agent_ / "densefeed.yaml";
  testing::write_file(config, testing::read_file(config) + "service: " + socket_.string() + "\n");
  start();
  const auto submitted = testing::run_cli(kExe, {"submit", "experiments/scan-merge-float16.yaml", "--json"}, agent_, env_);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  const auto doc = nlohmann::json::parse(submitted.out);
  EXPECT_EQ(doc["ledger"], (state_ / "ledger.db").string()) << doc.dump(1);
  const auto status = testing::run_cli(kExe, {"status", std::to_string(queued_id(doc)), "--wait", "--timeout", "300", "--json"}, agent_, env_);
  EXPECT_EQ(status.exit_code, 1) << status.out << status.err;
  const auto lock = testing::run_cli(kExe, {"gate", "lock"}, agent_, env_);
  EXPECT_EQ(lock.exit_code, 2) << lock.out << lock.err;
  EXPECT_NE(lock.err.find("`densefeed gate lock` is not served to you"), std::string::npos) << lock.err;
  EXPECT_FALSE(fs::exists(agent_ / ".densefeed" / "ledger.db")) << "nothing ran in the agent's checkout";
}

// densefeed mcp in a project that names its service: the tools' verbs go to
// the service (no --ledger of its own), and run_queue leaves the queue to it.
TEST_F(Service, TheMcpServerOfAProjectWithAServiceSpeaksToIt) {
  const auto config = agent_ / "densefeed.yaml";
  testing::write_file(config, testing::read_file(config) + "service: " + socket_.string() + "\n");
  start();
  const nlohmann::json manifest = testing::read_file(agent_ / "experiments" / "scan-merge-float16.yaml");
  std::string lines;
  for (const nlohmann::json& m : {nlohmann::json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
                                                 {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", nlohmann::json::object()},
                                                             {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}},
                                  nlohmann::json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
                                  nlohmann::json{{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/call"},
                                                 {"params", {{"name", "submit_experiment"}, {"arguments", {{"manifest", manifest}}}}}},
                                  nlohmann::json{{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tools/call"},
                                                 {"params", {{"name", "run_queue"}, {"arguments", nlohmann::json::object()}}}}}) {
    lines += m.dump() + "\n";
  }
  testing::write_file(dir_ / "mcp.in", lines);
  const auto mcp = testing::run_cli("/bin/sh", {"-c", "exec '" + kExe + "' mcp < '" + (dir_ / "mcp.in").string() + "'"}, agent_, env_);
  ASSERT_EQ(mcp.exit_code, 0) << mcp.out << mcp.err;
  std::map<int, nlohmann::json> answers;
  std::istringstream in(mcp.out);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    if (j.contains("id") && j["id"].is_number()) answers[j["id"].get<int>()] = j;
  }
  ASSERT_TRUE(answers.count(2) && answers.count(3)) << mcp.out;
  EXPECT_FALSE(answers[2]["result"].value("isError", false)) << answers[2].dump(1).substr(0, 3000);
  EXPECT_NE(answers[3].dump().find("densefeed service"), std::string::npos) << answers[3].dump(1);
  // Queued in the service's ledger and run by its worker.
  EXPECT_EQ(wait_for(1)["verdict"], "red");
  EXPECT_FALSE(fs::exists(agent_ / ".densefeed" / "ledger.db")) << "nothing ran in the agent's checkout";
}

// The read verbs through the service, with the files they read uploaded and
// the files they write sent back; the head witness is told every new head.
TEST_F(Service, EveryReadVerbWorksThroughItWithTheFilesItReadsAndWrites) {
  const auto witnessed = dir_ / "witnessed";
  write_config("people: []\nhead_witness: [/bin/sh, -c, 'echo \"$0\" >> " + witnessed.string() + "']\n");
  start();
  const int id = submit("scan-merge-float16.yaml");
  EXPECT_EQ(wait_for(id)["verdict"], "red");
  const std::string sid = std::to_string(id);
  auto r = agent({"report", sid, "-o", "page.html"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(testing::read_file(agent_ / "page.html").find("<html"), std::string::npos) << "the page came back";
  r = agent({"ledger", "export", "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NO_THROW((void)nlohmann::json::parse(r.out));
  r = agent({"ledger", "compare", sid, sid, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = agent({"ledger", "verify"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = agent({"cancel", sid});
  EXPECT_EQ(r.err.find("not served"), std::string::npos) << r.err;
  // compare and trace analyze read the agent's files, uploaded with the request.
  ASSERT_EQ(std::system(fmt::format("cd '{}' && /usr/bin/python3 -c \"import numpy as n; n.save('a.npy', n.arange(8, dtype=n.float32)); "
                                    "n.save('b.npy', n.arange(8, dtype=n.float32) + n.float32(1e-3))\"",
                                    agent_.string())
                            .c_str()),
            0);
  r = agent({"compare", "a.npy", "b.npy", "--json"});
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out << r.err;
  EXPECT_NE(r.out.find("max_abs"), std::string::npos) << r.out;
  testing::write_file(agent_ / "t.json", R"({"traceEvents": [{"name": "k", "ph": "X", "ts": 0, "dur": 5, "pid": 1, "tid": 7, "cat": "kernel"}]})");
  r = agent({"trace", "analyze", "t.json", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  // The witness got the heads, the last one the service logged.
  for (int i = 0; i < 50 && !fs::exists(witnessed); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  std::string head = testing::read_file(state_ / "head");
  head = head.substr(0, head.find('\n'));
  const std::string told = testing::read_file(witnessed);
  EXPECT_NE(told.find(head), std::string::npos) << "told: " << told << " head: " << head;
}

TEST_F(Service, ASnapshotSubmissionGetsTheVerdictsOfALocalRunAndRecordsWhoSubmitted) {
  start();
  const int red = submit("scan-merge-float16.yaml");
  const int green = submit("scan-merge-float32.yaml");
  const auto r = wait_for(red), g = wait_for(green);
  EXPECT_EQ(r["verdict"], "red") << r.dump(1);
  EXPECT_EQ(g["verdict"], "green") << g.dump(1);
  // The same manifests run locally in the agent's checkout: the same verdicts, case by case.
  for (const auto& [manifest, remote] : {std::pair{"scan-merge-float16.yaml", r}, std::pair{"scan-merge-float32.yaml", g}}) {
    const auto local = testing::run_cli(kExe, {"run", std::string("experiments/") + manifest, "--profile", "quick", "--no-bench", "--json",
                                               "--ledger", (dir_ / "local.db").string()},
                                        agent_, env_);
    ASSERT_TRUE(local.exit_code == 0 || local.exit_code == 1) << local.err;
    const auto doc = nlohmann::json::parse(local.out);
    EXPECT_EQ(doc["stages"]["gate"]["verdict"], remote["stages"]["gate"]["verdict"]) << manifest;
    EXPECT_EQ(doc["stages"]["gate"]["failing_cases"].size(), remote["stages"]["gate"]["failing_cases"].size()) << manifest;
  }
  // The candidate ran from the snapshot the service committed, never from the checkout.
  const auto show = agent({"ledger", "show", std::to_string(red), "--json"});
  const auto doc = nlohmann::json::parse(show.out);
  EXPECT_EQ(doc["candidate_revision"].get<std::string>().size(), 40u) << doc["candidate_revision"];
  bool by_peer = false;
  for (const auto& e : doc["events"]) by_peer = by_peer || (e["event"] == "queued" && e["owner"].get<std::string>().find(fmt::format("(uid {})", ::geteuid())) != std::string::npos);
  EXPECT_TRUE(by_peer) << doc["events"].dump(1);
  const std::string log = testing::read_file(state_ / "requests.log");
  EXPECT_NE(log.find("\"args\":[\"submit\""), std::string::npos) << log;
}

TEST_F(Service, ACommitSubmissionRunsTheServicesFetchNeverTheAgentsCheckout) {
  // The agent commits a correct float32 merge on a branch and pushes it; its
  // checkout then breaks the harness. A candidate at the branch runs what
  // the service fetched.
  ASSERT_EQ(testing::git(agent_, {"checkout", "-q", "-b", "fix"}).exit_code, 0);
  ASSERT_EQ(testing::git_commit_all(agent_, "base main"), "");
  ASSERT_EQ(testing::git(agent_, {"push", "-q", "origin", "fix"}).exit_code, 0);
  for (const auto& e : fs::recursive_directory_iterator(agent_ / "harness")) {
    if (e.path().extension() == ".py") testing::write_file(e.path(), "raise SystemExit(9)\n");
  }
  const auto manifest = agent_ / "experiments" / "by-commit.yaml";
  std::string text = testing::read_file(agent_ / "experiments" / "scan-merge-float32.yaml");
  text.replace(text.find("revision: WORKTREE"), std::string("revision: WORKTREE").size(), "revision: fix");
  testing::write_file(manifest, text);
  start();
  const int id = submit("by-commit.yaml");
  const auto doc = wait_for(id);
  EXPECT_EQ(doc["verdict"], "green") << doc.dump(1);
}

TEST_F(Service, AHeadThatDoesNotExtendTheLoggedOneFailsTheAudit) {
  start();
  const int first = submit("scan-merge-float16.yaml");
  wait_for(first);
  stop();
  // A copy of the ledger as it is now (the service's user could make one).
  const auto backup = dir_ / "old.db";
  const auto b = testing::run_cli(kExe, {"ledger", "backup", backup.string(), "--ledger", (state_ / "ledger.db").string()}, dir_.path(),
                                  {{"PATH", env_["PATH"]}, {"XDG_CONFIG_HOME", (state_ / "config").string()}});
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  start();
  const int second = submit("scan-merge-float32.yaml");
  wait_for(second);
  // The head log follows every write.
  for (int i = 0; i < 50 && testing::read_file(state_ / "head.log").find('\n') == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::string head_before = testing::read_file(state_ / "head");
  EXPECT_FALSE(head_before.empty());
  auto audit = agent({"audit"});
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;
  // The tail cut off: the older copy put back, every link valid under the key.
  stop();
  for (const std::string suffix : {"", "-wal", "-shm"}) fs::remove(state_ / ("ledger.db" + suffix));
  fs::copy_file(backup, state_ / "ledger.db");
  start();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(testing::read_file(state_ / "head"), head_before) << "the head audits check never goes back";
  EXPECT_NE(testing::read_file(state_ / "head.log").find("REFUSED"), std::string::npos) << testing::read_file(state_ / "head.log");
  audit = agent({"audit"});
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("the chain has no link"), std::string::npos) << audit.out;
  // The old copy sealed anew in place with the service's own key: other
  // experiments recorded into it past the logged head's link, every link
  // valid under the key. Its history is not the logged one.
  stop();
  const std::map<std::string, std::string> with_key = {{"PATH", env_["PATH"]}, {"HOME", (dir_ / "home").string()},
                                                       {"XDG_CONFIG_HOME", (state_ / "config").string()}};
  const std::string live = (state_ / "ledger.db").string();
  for (int i = 0; i < 2; ++i) {
    const auto forged = testing::run_cli(kExe, {"run", "experiments/scan-merge-float32.yaml", "--no-bench", "--ledger", live}, repo_, with_key);
    ASSERT_TRUE(forged.exit_code == 0 || forged.exit_code == 1) << forged.out << forged.err;
  }
  const auto verified = testing::run_cli(kExe, {"ledger", "verify", "--ledger", live}, dir_.path(), with_key);
  ASSERT_EQ(verified.exit_code, 0) << "the re-sealed copy verifies under the key: " << verified.out << verified.err;
  start();
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  EXPECT_EQ(testing::read_file(state_ / "head"), head_before) << "the head audits check never follows a rewritten history";
  audit = agent({"audit"});
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("the history was rewritten"), std::string::npos) << audit.out;
}

// Without a service, results are same-user: audit says so, --strict wants a
// head recorded earlier, and require_service: true fails them. Through the
// service (its head log, experiments submitted by a peer) the same audit passes.
TEST_F(Service, ALedgerWrittenWithoutTheServiceIsSameUserAndAStrictAuditWantsAHead) {
  const auto config = repo_ / "densefeed.yaml";
  testing::write_file(config, testing::read_file(config) + "require_service: true\n");
  ASSERT_EQ(testing::git_commit_all(repo_, "agents go through the service"), "");
  const auto ledger = (dir_ / "mine.db").string();
  const auto ran = testing::run_cli(kExe, {"run", "experiments/scan-merge-float16.yaml", "--no-bench", "--ledger", ledger}, repo_, env_);
  ASSERT_EQ(ran.exit_code, 1) << ran.out << ran.err;
  auto audit = testing::run_cli(kExe, {"audit", "--ledger", ledger}, repo_, env_);
  EXPECT_EQ(audit.exit_code, 1) << audit.out << audit.err;
  EXPECT_NE(audit.out.find("note same-user: experiment(s) 1 were recorded without a densefeed service"), std::string::npos) << audit.out;
  EXPECT_NE(audit.out.find("FAIL every experiment was submitted through a densefeed service (require_service: true)"), std::string::npos)
      << audit.out;
  EXPECT_EQ(audit.out.find("FAIL the chain extends a head"), std::string::npos) << "not strict: " << audit.out;
  audit = testing::run_cli(kExe, {"audit", "--ledger", ledger, "--strict", "--json"}, repo_, env_);
  EXPECT_EQ(audit.exit_code, 1);
  const auto doc = nlohmann::json::parse(audit.out);
  EXPECT_EQ(doc["same_user"], nlohmann::json::array({1})) << doc.dump(1);
  bool no_head = false;
  for (const auto& c : doc["checks"]) no_head = no_head || (!c["ok"].get<bool>() && c["failures"][0].get<std::string>().find("no head was ever recorded") != std::string::npos);
  EXPECT_TRUE(no_head) << doc.dump(1);
  // Through the service: every experiment a peer's, the head its head log's.
  start();
  wait_for(submit("scan-merge-float16.yaml"));
  for (int i = 0; i < 50 && !fs::exists(state_ / "head"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  audit = agent({"audit", "--strict"});
  EXPECT_EQ(audit.exit_code, 0) << audit.out << audit.err;
  EXPECT_EQ(audit.out.find("same-user"), std::string::npos) << audit.out;
}

// A tag an agent pushed, named like the trusted ref, with loosened gates:
// git resolves refs/tags/main before refs/heads/main, so the service keeps
// tags out of refs/tags (a hostile trial got a float16 merge green this way).
TEST_F(Service, ATagNamedLikeTheTrustedRefIsNeverTrusted) {
  const auto pusher = clone("pusher");
  ASSERT_EQ(testing::git(pusher, {"checkout", "-q", "-b", "loose"}).exit_code, 0);
  const auto gate = pusher / "gates" / "scan-sharded.yaml";
  std::string text = testing::read_file(gate);
  for (std::size_t at = text.find("rel_l2: "); at != std::string::npos; at = text.find("rel_l2: ", at + 1)) {
    const auto end = text.find_first_of(",}\n", at);
    text.replace(at, end - at, "rel_l2: 0.5");
  }
  testing::write_file(gate, text);
  const auto lock = testing::run_cli(kExe, {"--trust-worktree", "gate", "lock"}, pusher, env_);
  ASSERT_EQ(lock.exit_code, 0) << lock.out << lock.err;
  ASSERT_EQ(testing::git_commit_all(pusher, "looser"), "");
  ASSERT_EQ(testing::git(pusher, {"tag", "main"}).exit_code, 0);
  ASSERT_EQ(testing::git(pusher, {"push", "-q", "origin", "refs/tags/main"}).exit_code, 0);
  start();
  const auto shown = agent({"gate", "show", "scan-sharded", "--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(shown.out.find("0.5"), std::string::npos) << "the tag's gate is not the trusted one: " << shown.out.substr(0, 2000);
  const auto doc = wait_for(submit("scan-merge-float16.yaml"));
  EXPECT_EQ(doc["verdict"], "red") << doc.dump(1);
}

// The service's side of the wire, as a client other than densefeed's could
// speak it: the child runs what the service parsed (never the request's own
// words), a snapshot holding anything but files, folders and links is
// refused, and idle connections past the limit leave it serving.
TEST_F(Service, ARequestsOwnWordsAndOddSnapshotsNeverReachTheChild) {
  start();
  const auto call = [&](const WireRequest& request) {
    const Fd fd = connect_unix(socket_);
    send_request(fd.get(), request);
    return receive_response(fd.get());
  };
  WireRequest peer;
  peer.args = {"--peer=root (uid 0)", "ledger", "list"};
  auto r = call(peer);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--peer is the service's"), std::string::npos) << r.err;
  // A FIFO in the snapshot's tar.
  const auto tree = dir_ / "odd";
  fs::create_directories(tree);
  ASSERT_EQ(::mkfifo((tree / "pipe").c_str(), 0600), 0);
  testing::write_file(tree / "f.txt", "x\n");
  ASSERT_EQ(std::system(fmt::format("tar -c -f '{}' -C '{}' pipe f.txt", (dir_ / "odd.tar").string(), tree.string()).c_str()), 0);
  WireRequest odd;
  odd.args = {"submit", "--", "m.yaml"};
  odd.inputs = {{"m.yaml", testing::read_file(agent_ / "experiments" / "scan-merge-float16.yaml")}};
  odd.snapshot = WireSnapshot{testing::read_file(dir_ / "odd.tar"), "", ""};
  odd.snapshot->sha256 = sha256_hex(odd.snapshot->tar);
  r = call(odd);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("has a member that is not a file, a folder or a link"), std::string::npos) << r.err;
  // A compressed archive, which GNU tar would inflate on its own (a 1 MB
  // upload became 1 GB on the service's disk in a hostile trial).
  ASSERT_EQ(std::system(fmt::format("tar -c -z -f '{}' -C '{}' f.txt", (dir_ / "odd.tgz").string(), tree.string()).c_str()), 0);
  odd.snapshot = WireSnapshot{testing::read_file(dir_ / "odd.tgz"), "", ""};
  odd.snapshot->sha256 = sha256_hex(odd.snapshot->tar);
  r = call(odd);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("is not an uncompressed tar archive"), std::string::npos) << r.err;
  // An anchor the pin overwrites, so that the alias would name another
  // anchor's WORKTREE once queued (a hostile trial got a WORKTREE base
  // queued this way): what is queued must parse to the pinned commits.
  WireRequest alias;
  alias.args = {"submit", "--", "m.yaml"};
  alias.inputs = {{"m.yaml", "experiment: alias-trick\nauthor: a\nhypothesis: &r WORKTREE\npredicted_effect: &r main\ngate: scan-sharded\n"
                              "candidate: {revision: main, params: {merge_dtype: float16}}\n"
                              "base: {revision: *r, params: {merge_dtype: float32}}\n"}};
  r = call(alias);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("anchors, aliases and tags are not served"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("queued"), std::string::npos) << r.out;
  // Nothing of the requests is left in the state folder but the log.
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(state_ / "requests")) ++left;
  EXPECT_EQ(left, 0u) << "request folders are removed once answered";
  // Idle connections up to the limit and past it: the service answers
  // "busy" beyond it and serves again once they are gone.
  std::vector<Fd> idle;
  for (int i = 0; i < 70; ++i) idle.push_back(connect_unix(socket_));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto busy = agent({"ledger", "list"});
  EXPECT_EQ(busy.exit_code, 3) << busy.out << busy.err;
  EXPECT_NE(busy.err.find("busy"), std::string::npos) << busy.err;
  idle.clear();
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    served = agent({"ledger", "list"}).exit_code == 0;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(served) << "the service serves again once the idle connections are gone";
}

TEST_F(Service, KilledOutrightAndRestartedItLosesNoExperimentAndLeavesNoProcess) {
  // A candidate that takes its time: its harness (not a frozen file) sleeps before it answers.
  const auto harness = agent_ / "harness" / "scan.py";
  ASSERT_TRUE(fs::exists(harness));
  testing::write_file(harness, "import time as _densefeed_slow\n_densefeed_slow.sleep(3)\n" + testing::read_file(harness));
  start();
  const int id = submit("scan-merge-float16.yaml");
  // Running: then the service, and only it, is killed outright.
  for (int i = 0; i < 200; ++i) {
    const auto s = agent({"status", std::to_string(id), "--json"});
    if (s.out.find("\"started\"") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop(SIGKILL);
  // Nothing it started outlives it: its children end with it (PR_SET_PDEATHSIG).
  EXPECT_EQ(testing::processes_left_mentioning(state_.string()), std::vector<int>{});
  start();
  const auto doc = wait_for(id);
  EXPECT_EQ(doc["verdict"], "red") << "requeued and run to its verdict: " << doc.dump(1);
  const auto show = nlohmann::json::parse(agent({"ledger", "show", std::to_string(id), "--json"}).out);
  std::string events;
  for (const auto& e : show["events"]) events += e["event"].get<std::string>() + " ";
  EXPECT_NE(events.find("requeued"), std::string::npos) << events;
}

TEST_F(Service, APersonsDecisionIsRecordedUnderTheirOwnLogin) {
  const struct passwd* me = ::getpwuid(::geteuid());
  ASSERT_NE(me, nullptr);
  write_config(fmt::format("people: [{}]\n", ::geteuid()));
  const auto manifest = agent_ / "experiments" / "scan-merge-float32.yaml";
  testing::write_file(manifest, testing::read_file(manifest) + "risk: [numerics]\n");
  start();
  const int id = submit("scan-merge-float32.yaml");
  EXPECT_EQ(wait_for(id)["verdict"], "green");
  const std::string sid = std::to_string(id);
  auto r = agent({"review", "approve", sid, "--by", "someone-else", "--category", "numerics"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--by 'someone-else' is not you"), std::string::npos) << r.err;
  r = agent({"review", "approve", sid, "--by", me->pw_name, "--category", "numerics", "--note", "looked at the tables"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto doc = nlohmann::json::parse(agent({"ledger", "show", sid, "--json"}).out);
  ASSERT_EQ(doc["reviews"].size(), 1u) << doc.dump(1);
  EXPECT_EQ(doc["reviews"][0]["reviewer"], fmt::format("{} (uid {})", me->pw_name, ::geteuid())) << "name and uid, as the kernel named them";
}

// The client as another uid: CI runs as root, which can make a user and a
// group and drop to them (setpriv, util-linux).
class ServiceE2E : public Service {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "not root: cannot make a test user to run the agent as";
    if (!fs::exists("/usr/sbin/useradd") || !fs::exists("/usr/bin/setpriv")) GTEST_SKIP() << "no useradd or setpriv here";
    if (::getgrnam(kGroup) == nullptr) ASSERT_EQ(std::system(fmt::format("groupadd -f {}", kGroup).c_str()), 0);
    if (::getpwnam(kUser) == nullptr) {
      ASSERT_EQ(std::system(fmt::format("useradd -M -N -g {} -s /usr/sbin/nologin -d /nonexistent {}", kGroup, kUser).c_str()), 0);
    }
    Service::SetUp();
    write_config(fmt::format("socket_group: {}\npeople: [0]\n", kGroup));
    // The agent's own checkout, its own home.
    ASSERT_EQ(std::system(fmt::format("chown -R {}:{} '{}'", kUser, kGroup, agent_.string()).c_str()), 0);
    fs::create_directories(dir_ / "agent-home");
    ASSERT_EQ(std::system(fmt::format("chown {}:{} '{}'", kUser, kGroup, (dir_ / "agent-home").string()).c_str()), 0);
    fs::permissions(dir_.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                                     fs::perms::others_exec);
  }
  testing::CliResult as_agent(std::vector<std::string> argv) {
    const struct passwd* pw = ::getpwnam(kUser);
    std::vector<std::string> args = {"--reuid", std::to_string(pw->pw_uid), "--regid", std::to_string(pw->pw_gid), "--init-groups", "--"};
    args.insert(args.end(), argv.begin(), argv.end());
    return testing::run_cli("/usr/bin/setpriv", args, agent_,
                            {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", (dir_ / "agent-home").string()}});
  }
  static constexpr const char* kUser = "densefeed-test-agent";
  static constexpr const char* kGroup = "densefeed-test-agents";
};

TEST_F(ServiceE2E, AnAgentOfAnotherUidCanSubmitButNotReadTheStateNorTheKeyNorDecide) {
  start();
  const auto submitted = as_agent({kExe, "--service", socket_.string(), "submit", "experiments/scan-merge-float16.yaml", "--json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
  const int id = queued_id(nlohmann::json::parse(submitted.out));
  const auto status = as_agent({kExe, "--service", socket_.string(), "status", std::to_string(id), "--wait", "--timeout", "300", "--json"});
  EXPECT_EQ(status.exit_code, 1) << status.out << status.err;
  EXPECT_EQ(nlohmann::json::parse(status.out)["verdict"], "red");
  // The state folder, the ledger and the key are out of its reach.
  for (const auto& path : {state_ / "ledger.db", state_ / "head.log", state_ / "config"}) {
    const auto r = as_agent({"/bin/ls", "-la", path.string()});
    EXPECT_NE(r.exit_code, 0) << path << ": " << r.out;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  }
  const auto copy = as_agent({"/bin/cp", (state_ / "ledger.db").string(), (dir_ / "agent-home" / "copy.db").string()});
  EXPECT_NE(copy.exit_code, 0);
  // It is not one of the people: every person's verb is refused, naming its uid.
  const struct passwd* pw = ::getpwnam(kUser);
  for (const std::vector<std::string> verb : {std::vector<std::string>{"gate", "lock", "scan-sharded"},
                                              std::vector<std::string>{"review", "approve", std::to_string(id), "--by", kUser, "--category", "x"},
                                              std::vector<std::string>{"promote", std::to_string(id)},
                                              std::vector<std::string>{"ledger", "recover"},
                                              std::vector<std::string>{"--trust-worktree", "status", std::to_string(id)}}) {
    std::vector<std::string> argv = {kExe, "--service", socket_.string()};
    argv.insert(argv.end(), verb.begin(), verb.end());
    const auto r = as_agent(argv);
    EXPECT_EQ(r.exit_code, 2) << verb[0] << r.out << r.err;
    EXPECT_NE(r.err.find(fmt::format("uid {}", pw->pw_uid)), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("not served to you"), std::string::npos) << r.err;
  }
  // Its submission is recorded under its uid.
  const auto show = nlohmann::json::parse(agent({"ledger", "show", std::to_string(id), "--json"}).out);
  bool by_agent = false;
  for (const auto& e : show["events"]) by_agent = by_agent || e["owner"].get<std::string>() == fmt::format("submit by {} (uid {})", kUser, pw->pw_uid);
  EXPECT_TRUE(by_agent) << show["events"].dump(1);
}

}  // namespace
}  // namespace densefeed
