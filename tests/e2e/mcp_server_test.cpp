// `densefeed mcp` as a client sees it: a real process, raw JSON-RPC lines on
// its stdin, one response per line on its stdout. The lifecycle, every kind
// of malformed request (none stops the server), the tools through the real
// CLI into a real ledger, resources, and cancellation.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include <nlohmann/json.hpp>

#include "mcp_client.h"
#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;
// cheat_harness is the build's, named bare in the gate: on PATH for the
// server and the CLI calls (a worker) it starts.
const std::map<std::string, std::string> kEnv = testing::with_on_path(std::filesystem::path(kExe).parent_path());

const char* kGate = R"(gate: small
description: y_i = sin(seed / 1000 + i), float32 against a float64 reference.
reference:
  command: [cheat_harness, --role, reference, --n, "{case.n}", --seed, "{seed}", --out, "{out}"]
candidate:
  command: [cheat_harness, --role, candidate, --mode, "{param.mode}", --n, "{case.n}", --seed, "{seed}", --out, "{out}"]
params:
  mode: {type: string, enum: [honest, zeros], default: honest}
outputs:
  y:
    dtype: float32
    reference_dtype: float64
    shape: ["{case.n}"]
    tolerance: {rel_l2: 1.0e-5}
cases:
  grid:
    - {n: [64, 1000]}
profiles:
  quick: {}
  full: {}
timeout_s: 60
freezes: []
)";

// The server as a child process (tests/support/mcp_client.h) with this
// process's environment and kEnv's PATH; initialize() asserts the answer.
std::map<std::string, std::string> server_env() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view text(*e);
    if (const auto eq = text.find('='); eq != std::string_view::npos) env[std::string(text.substr(0, eq))] = std::string(text.substr(eq + 1));
  }
  env["PATH"] = kEnv.at("PATH");
  return env;
}

class McpProcess : public testing::McpClient {
 public:
  explicit McpProcess(std::vector<std::string> argv) : McpClient(std::move(argv), server_env()) {}
  void initialize() { ASSERT_TRUE(McpClient::initialize()) << "the server did not answer initialize"; }
};

class McpServerProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    // A project in a plain folder (no git): its gates are trusted as they are.
    root_ = dir_ / "root";
    testing::write_project(root_);
    testing::write_file(root_ / "gates" / "small.yaml", kGate);
    // A skill of the project's own: not densefeed's, so not a resource.
    testing::write_file(root_ / "skills" / "s" / "SKILL.md", "---\nname: s\ndescription: d\n---\nbody\n");
    ASSERT_EQ(testing::run_cli(kExe, {"--project", root_.string(), "--trust-worktree", "gate", "lock"}, dir_.path()).exit_code, 0);
    server_ = std::make_unique<McpProcess>(server_argv());
  }
  std::vector<std::string> server_argv() const {
    return {kExe, "--project", root_.string(), "--trust-worktree", "mcp", "--ledger", (dir_ / "l.db").string()};
  }
  std::string manifest(const std::string& name, const std::string& mode) const {
    return "experiment: " + name + "\nhypothesis: h\npredicted_effect: p\ngate: small\n"
           "candidate: {revision: WORKTREE, params: {mode: " + mode + "}}\nbase: {revision: WORKTREE, params: {mode: " +
           (mode == "zeros" ? "honest" : "zeros") + "}}\n";
  }
  static std::string text(const J& r) { return r["result"]["content"][0]["text"].get<std::string>(); }
  testing::TempDir dir_;
  std::filesystem::path root_;
  std::unique_ptr<McpProcess> server_;
};

TEST_F(McpServerProcess, NegotiatesTheProtocolVersionAndCapabilities) {
  EXPECT_EQ(server_->request("early", "tools/list")["error"]["code"], -32600);  // before initialize
  EXPECT_EQ(server_->request("p", "ping")["result"], J::object());             // ping is always answered
  const J r = server_->request(1, "initialize", {{"protocolVersion", "1999-01-01"}, {"capabilities", J::object()},
                                                 {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  ASSERT_TRUE(r.contains("result")) << r.dump();
  // An unknown version gets the server's latest (lifecycle: version negotiation).
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-11-25");
  EXPECT_EQ(r["result"]["capabilities"]["tools"]["listChanged"], false);
  EXPECT_EQ(r["result"]["capabilities"]["resources"]["subscribe"], false);
  EXPECT_FALSE(r["result"]["capabilities"].contains("prompts"));
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "densefeed");
  EXPECT_NE(r["result"]["instructions"].get<std::string>().find("SKILL.md"), std::string::npos);
  EXPECT_EQ(server_->request(2, "initialize", {{"protocolVersion", "2025-11-25"}})["error"]["code"], -32600);  // once only

  McpProcess older(server_argv());
  const J o = older.request(1, "initialize", {{"protocolVersion", "2025-06-18"}, {"capabilities", J::object()}});
  EXPECT_EQ(o["result"]["protocolVersion"], "2025-06-18");  // a version it speaks is kept
  EXPECT_EQ(older.request(2, "initialize", {{"protocolVersion", 7}})["error"]["code"], -32600);
  McpProcess bad_params(server_argv());
  EXPECT_EQ(bad_params.request(1, "initialize", {{"protocolVersion", 7}})["error"]["code"], -32602);
}

TEST_F(McpServerProcess, MalformedRequestsGetErrorsAndNeverStopTheServer) {
  server_->initialize();
  const auto next_error = [&] {
    const J m = J::parse(server_->line());
    return std::pair{m["id"], m["error"]["code"].get<int>()};
  };
  server_->send_line("{not json");
  EXPECT_EQ(next_error(), std::pair(J(nullptr), -32700));
  server_->send_line(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])");
  EXPECT_EQ(next_error(), std::pair(J(nullptr), -32600));  // no batches since 2025-06-18
  server_->send_line(R"("a string")");
  EXPECT_EQ(next_error(), std::pair(J(nullptr), -32600));
  server_->send_line(R"({"jsonrpc":"2.0","id":3})");
  EXPECT_EQ(next_error(), std::pair(J(3), -32600));  // missing method
  server_->send_line(R"({"jsonrpc":"2.0","id":4,"method":42})");
  EXPECT_EQ(next_error(), std::pair(J(4), -32600));
  server_->send_line(R"({"jsonrpc":"1.0","id":5,"method":"ping"})");
  EXPECT_EQ(next_error(), std::pair(J(5), -32600));
  server_->send_line(R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})");
  EXPECT_EQ(next_error(), std::pair(J(nullptr), -32600));  // an id must be a string or an integer
  server_->send_line(R"({"jsonrpc":"2.0","method":"notifications/unknown"})");  // a notification: no answer
  server_->send_line(R"({"jsonrpc":"2.0","method":"no/such/method","params":{}})");  // nor here
  EXPECT_EQ(server_->request(6, "no/such/method")["error"]["code"], -32601);
  EXPECT_EQ(server_->request(7, "tools/list", J::array({1}))["error"]["code"], -32602);
  EXPECT_EQ(server_->request(8, "tools/list", {{"cursor", "x"}})["error"]["code"], -32602);
  const J unknown = server_->call(9, "no_such_tool", J::object());
  EXPECT_EQ(unknown["error"]["code"], -32602);
  EXPECT_NE(unknown["error"]["message"].get<std::string>().find("submit_experiment"), std::string::npos);  // names the tools
  EXPECT_EQ(server_->request(10, "tools/call", {{"arguments", J::object()}})["error"]["code"], -32602);  // no name
  EXPECT_EQ(server_->request(11, "tools/call", {{"name", "get_status"}, {"arguments", J::array()}})["error"]["code"], -32602);
  // Wrong argument types are the model's to fix: a tool error that says what is expected.
  const J wrong = server_->call(12, "get_status", {{"experiment_id", "one"}});
  EXPECT_EQ(wrong["result"]["isError"], true);
  EXPECT_NE(text(wrong).find("/experiment_id"), std::string::npos) << text(wrong);
  const J extra = server_->call(13, "list_gates", {{"unexpected", 1}});
  EXPECT_EQ(extra["result"]["isError"], true);
  // A response from the client (to nothing we asked) is ignored.
  server_->send_line(R"({"jsonrpc":"2.0","id":99,"result":{}})");
  // Still serving.
  EXPECT_EQ(server_->request(14, "ping")["result"], J::object());
  const J list = server_->call(15, "list_gates", J::object());
  EXPECT_EQ(list["result"]["structuredContent"]["gates"], J::array({"small"}));
  const auto [rest, status] = server_->close_and_drain();
  EXPECT_TRUE(rest.empty()) << rest.front();
  EXPECT_EQ(status, 0);
}

TEST_F(McpServerProcess, ListsToolsWithSchemasAndReadsResources) {
  server_->initialize();
  const J tools = server_->request(1, "tools/list")["result"]["tools"];
  std::map<std::string, J> by_name;
  for (const auto& t : tools) {
    by_name[t["name"].get<std::string>()] = t;
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    EXPECT_FALSE(t["description"].get<std::string>().empty());
  }
  std::set<std::string> names;
  for (const auto& [name, t] : by_name) names.insert(name);
  EXPECT_EQ(names, (std::set<std::string>{"submit_experiment", "run_queue", "get_status", "narrow", "list_gates", "show_gate", "compare_tensors",
                                          "analyze_trace", "ledger_list", "ledger_show", "ledger_compare", "write_report"}));
  // write_report (issue 19) writes one experiment's page: its id is required.
  EXPECT_EQ(by_name["write_report"]["inputSchema"]["required"], J::array({"experiment_id"})) << by_name["write_report"].dump();
  const J resources = server_->request(2, "resources/list")["result"]["resources"];
  std::map<std::string, J> by_uri;
  for (const auto& r : resources) by_uri[r["uri"].get<std::string>()] = r;
  ASSERT_TRUE(by_uri.count("densefeed://gates/small.yaml"));
  ASSERT_TRUE(by_uri.count("densefeed://gates/gates.lock"));
  ASSERT_TRUE(by_uri.count("densefeed://schemas/status.schema.json"));
  EXPECT_TRUE(by_uri.count("densefeed://schemas/report.schema.json"));  // what write_report returns
  // The skill and the schemas are densefeed's installed ones, whatever the
  // project holds; the gates are the gate store's.
  ASSERT_TRUE(by_uri.count("densefeed://skills/densefeed-optimization-loop/SKILL.md"));
  EXPECT_FALSE(by_uri.count("densefeed://skills/s/SKILL.md"));
  EXPECT_EQ(by_uri["densefeed://schemas/status.schema.json"]["mimeType"], "application/json");
  const J read = server_->request(3, "resources/read", {{"uri", "densefeed://gates/small.yaml"}});
  EXPECT_EQ(read["result"]["contents"][0]["text"], kGate);
  EXPECT_EQ(read["result"]["contents"][0]["uri"], "densefeed://gates/small.yaml");
  const J skill = server_->request(7, "resources/read", {{"uri", "densefeed://skills/densefeed-optimization-loop/SKILL.md"}});
  EXPECT_EQ(skill["result"]["contents"][0]["text"],
            testing::read_file(kRoot / "skills" / "densefeed-optimization-loop" / "SKILL.md"));
  // Only listed resources: no path tricks.
  for (const char* uri : {"densefeed://gates/../gates/small.yaml", "file:///etc/passwd", "densefeed://ledger.db"}) {
    const J missing = server_->request(4, "resources/read", {{"uri", uri}});
    EXPECT_EQ(missing["error"]["code"], -32002) << uri;
    EXPECT_EQ(missing["error"]["data"]["uri"], uri);
  }
  EXPECT_EQ(server_->request(5, "resources/read", {{"uri", 3}})["error"]["code"], -32602);
  EXPECT_EQ(server_->request(6, "resources/templates/list")["result"]["resourceTemplates"], J::array());
}

TEST_F(McpServerProcess, SubmitsRunsAndReadsVerdictsThroughTheCli) {
  server_->initialize();
  // Bad input: a tool error naming the field, nothing queued.
  const J bad = server_->call(1, "submit_experiment", {{"manifest", manifest("sneaky", "honest") + "tolerance: 1\n"}});
  EXPECT_EQ(bad["result"]["isError"], true);
  EXPECT_NE(text(bad).find("bad input"), std::string::npos) << text(bad);
  EXPECT_NE(text(bad).find(":7:"), std::string::npos) << text(bad);  // line 7 of the saved manifest
  EXPECT_EQ(bad["result"]["structuredContent"]["verdict"], "bad-input");

  const J green = server_->call(2, "submit_experiment", {{"manifest", manifest("honest", "honest")}});
  ASSERT_EQ(green["result"]["isError"], false) << green.dump();
  EXPECT_EQ(green["result"]["structuredContent"]["experiment_id"], 1);
  EXPECT_NE(text(green).find("run_queue"), std::string::npos);
  const J red = server_->call(3, "submit_experiment", {{"manifest", manifest("zeros", "zeros")}});
  EXPECT_EQ(red["result"]["structuredContent"]["experiment_id"], 2);

  const J queued = server_->call(4, "get_status", {{"experiment_id", 2}});
  EXPECT_EQ(queued["result"]["structuredContent"]["state"], "queued");
  EXPECT_EQ(queued["result"]["structuredContent"]["next"][0]["kind"], "wait");
  // No worker yet: a wait that runs out is the status as it is then, not a
  // tool error (the CLI's exit 4, not ended yet; never its message parsed).
  const J waited = server_->call(40, "get_status", {{"experiment_id", 2}, {"wait_s", 0.5}});
  ASSERT_EQ(waited["result"]["isError"], false) << waited.dump();
  EXPECT_EQ(waited["result"]["structuredContent"]["state"], "queued") << waited.dump();
  EXPECT_EQ(text(waited).rfind("Still queued after 0.5 s", 0), 0u) << text(waited);

  const J worker = server_->call(5, "run_queue", J::object());
  EXPECT_EQ(worker["result"]["structuredContent"]["started"], true) << worker.dump();
  const J g = server_->call(6, "get_status", {{"experiment_id", 1}, {"wait_s", 300}});
  ASSERT_EQ(g["result"]["isError"], false) << g.dump();
  EXPECT_EQ(g["result"]["structuredContent"]["state"], "finished");
  EXPECT_EQ(g["result"]["structuredContent"]["gate_verdict"], "green");
  const J r = server_->call(7, "get_status", {{"experiment_id", 2}, {"wait_s", 300}});
  EXPECT_EQ(r["result"]["isError"], false);  // a red verdict is a result, not a tool failure
  EXPECT_EQ(r["result"]["structuredContent"]["gate_verdict"], "red");
  EXPECT_EQ(r["result"]["structuredContent"]["stages"]["gate"]["failing_cases"].size(), 2u);

  const J list = server_->call(8, "ledger_list", {{"verdict", "red"}});
  ASSERT_EQ(list["result"]["structuredContent"]["experiments"].size(), 1u) << list.dump();
  EXPECT_EQ(list["result"]["structuredContent"]["experiments"][0]["name"], "zeros");
  EXPECT_EQ(server_->call(9, "ledger_show", {{"experiment_id", 2}})["result"]["structuredContent"]["name"], "zeros");
  EXPECT_FALSE(server_->call(10, "ledger_compare", {{"a", 1}, {"b", 2}})["result"]["structuredContent"]["differences"].empty());
  EXPECT_EQ(server_->call(11, "ledger_show", {{"experiment_id", 99}})["result"]["isError"], true);
  const J gate = server_->call(12, "show_gate", {{"name", "small"}});
  EXPECT_EQ(gate["result"]["structuredContent"]["params"]["mode"]["enum"], J::array({"honest", "zeros"}));

  const auto runs = dir_ / "l-runs" / "2";
  const J cmp = server_->call(13, "compare_tensors", {{"reference", (runs / "reference-000" / "out" / "y.npy").string()},
                                                      {"candidate", (runs / "candidate-000" / "out" / "y.npy").string()},
                                                      {"rel_l2", 1e-5}});
  EXPECT_EQ(cmp["result"]["isError"], false) << cmp.dump();
  EXPECT_EQ(cmp["result"]["structuredContent"]["verdict"], "red");
  const J missing = server_->call(14, "compare_tensors", {{"reference", "/nonexistent.npy"}, {"candidate", "/nonexistent.npy"}});
  EXPECT_EQ(missing["result"]["isError"], true);
  EXPECT_NE(text(missing).find("/nonexistent.npy"), std::string::npos);

  const J trace = server_->call(15, "analyze_trace", {{"path", (dir_ / "none.json").string()}});
  EXPECT_EQ(trace["result"]["isError"], true);  // no such file, or (before issue 5) no such verb: either way it says so
  EXPECT_FALSE(text(trace).empty());
  EXPECT_EQ(server_->request(16, "ping")["result"], J::object());
}

// Issue 31: a client that waits on a run with a progressToken hears how far
// it has come (notifications/progress, the value only growing); one that
// sends no token hears nothing.
TEST_F(McpServerProcess, AWaitWithAProgressTokenGetsProgressNotifications) {
  server_->initialize();
  const J green = server_->call(1, "submit_experiment", {{"manifest", manifest("honest", "honest")}});
  ASSERT_EQ(green["result"]["isError"], false) << green.dump();
  const J quiet = server_->call(2, "get_status", {{"experiment_id", 1}, {"wait_s", 0.3}});
  ASSERT_EQ(quiet["result"]["isError"], false) << quiet.dump();
  EXPECT_TRUE(server_->notifications().empty()) << server_->notifications().size();
  ASSERT_EQ(server_->call(3, "run_queue", J::object())["result"]["structuredContent"]["started"], true);
  const J g = server_->request(4, "tools/call",
                               {{"name", "get_status"}, {"arguments", {{"experiment_id", 1}, {"wait_s", 300}}},
                                {"_meta", {{"progressToken", "run-1"}}}});
  ASSERT_EQ(g["result"]["isError"], false) << g.dump();
  ASSERT_EQ(g["result"]["structuredContent"]["state"], "finished") << g.dump();
  std::vector<J> progress;
  for (const auto& n : server_->notifications()) {
    if (n["method"] == "notifications/progress") progress.push_back(n["params"]);
  }
  ASSERT_FALSE(progress.empty()) << "no notifications/progress for a run that was waited on";
  double last = -1;
  bool started = false, ended = false;
  for (const auto& p : progress) {
    EXPECT_EQ(p["progressToken"], "run-1") << p.dump();
    EXPECT_GT(p["progress"].get<double>(), last) << p.dump();
    last = p["progress"].get<double>();
    const std::string m = p.value("message", "");
    started = started || m == "gate: 2 case(s): starting";
    ended = ended || m == "gate: green";
  }
  EXPECT_TRUE(started && ended) << J(progress).dump();
}

TEST_F(McpServerProcess, ACancelledCallIsEndedAndNotAnswered) {
  server_->initialize();
  ASSERT_EQ(server_->call(1, "submit_experiment", {{"manifest", manifest("waits", "honest")}})["result"]["isError"], false);
  // No worker: this call would wait ten minutes.
  server_->send({{"jsonrpc", "2.0"}, {"id", "long"}, {"method", "tools/call"},
                 {"params", {{"name", "get_status"}, {"arguments", {{"experiment_id", 1}, {"wait_s", 600}}}}}});
  // Other requests are answered meanwhile.
  EXPECT_EQ(server_->request(2, "ping")["result"], J::object());
  EXPECT_EQ(server_->call(3, "get_status", {{"experiment_id", 1}})["result"]["structuredContent"]["state"], "queued");
  server_->send({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", {{"requestId", "long"}, {"reason", "test"}}}});
  const auto [rest, status] = server_->close_and_drain();  // returns once the cancelled call has ended
  EXPECT_EQ(status, 0);
  for (const auto& l : rest) EXPECT_EQ(l.find("\"long\""), std::string::npos) << l;
}

}  // namespace
}  // namespace densefeed
