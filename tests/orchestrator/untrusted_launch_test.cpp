// The one path for untrusted commands, checked on the source: every file of
// orchestrator/ that starts a process is listed here with why it may, and
// every stage that runs a manifest's or a revision's command starts it
// through launch_untrusted. A new run_process/ProcessSpec/capture_output
// user, or a stage that goes back to run_process, fails this test. Then the
// printable() escapes and the MCP server's limits, in process.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mcp_server.h"
#include "printable.h"

namespace densefeed {
namespace {

const std::filesystem::path kOrchestrator = std::filesystem::path(DENSEFEED_SOURCE_DIR) / "orchestrator";

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A source file of orchestrator/ by its name, in whichever layer's folder it
// lies (names are unique across layers: tests/orchestrator/layers_test.cpp).
std::filesystem::path source(const std::string& name) {
  for (const auto& e : std::filesystem::recursive_directory_iterator(kOrchestrator)) {
    if (e.path().filename() == name) return e.path();
  }
  ADD_FAILURE() << "no " << name << " under " << kOrchestrator.string();
  return kOrchestrator / name;
}

// Files that may start processes, and why none of them runs what a manifest
// or a candidate supplies.
const std::map<std::string, std::string> kMayStartProcesses = {
    {"process_runner.cpp", "the runner itself"},
    {"untrusted_launch.cpp", "the one launcher of untrusted commands"},
    {"sandbox.cpp", "the bwrap probe: runs `true`"},
    {"revision.cpp", "git and tar on the trusted side"},
    {"export_verify.cpp", "git ls-tree of the trusted ref's commit, on the trusted side"},
    {"project.cpp", "git rev-parse, and the configured interpreter importing numpy (never one in the project folder)"},
    {"trusted_paths.cpp", "the trusted interpreter (outside the project folder, or the trusted ref's export) importing numpy"},
    {"project_init.cpp", "git, for densefeed init"},
    {"environment.cpp", "nvidia-smi and nvcc --version"},
    {"worker_slot.cpp", "densefeed worker-run (densefeed itself), one per claimed experiment"},
    {"worker.cpp", "nvidia-smi, to list this host's GPUs"},
    {"mcp_tools.cpp", "densefeed itself, per tool call, and its detached worker"},
    {"tool_run.cpp", "git and tar on the trusted side (the service's clone of a repository, a worktree snapshot): densefeed's own commands"},
    {"service_server.cpp", "densefeed itself, on the service's clone, per request and as its worker"},
    {"slurm_executor.cpp", "sbatch, squeue and scancel: densefeed's own commands to the scheduler"},
    {"machine_ceilings.cpp", "densefeed-gpu-ceilings, densefeed's own program installed beside it"},
    {"rank_group.cpp", "the ranks of one multi-rank command, inside the sandbox launch_untrusted made for them (densefeed rank-group)"},
};
// Stages that run a manifest's or a revision's commands.
const std::vector<std::string> kUntrustedStages = {"gate_runner.cpp", "bench_runner.cpp", "trace_stage.cpp", "acceptance_runner.cpp",
                                                   "revision_build.cpp"};

TEST(UntrustedLaunch, OnlyListedFilesStartProcesses) {
  const std::regex starts(
      R"(\b(run_process|capture_output|start_detached|launch_trusted|execv|execve|execvp|posix_spawn|popen|system|fork|vfork)\s*\(|\bProcessSpec\b|bp::child\b)");
  std::set<std::string> seen;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kOrchestrator)) {
    if (e.path().extension() != ".cpp") continue;
    const auto name = e.path().filename().string();
    const std::string text = read(e.path());
    if (std::regex_search(text, starts)) {
      seen.insert(name);
      EXPECT_TRUE(kMayStartProcesses.count(name)) << name << " starts a process outside untrusted_launch.h; untrusted commands must go "
                                                  << "through launch_untrusted (or list the file here with why it is trusted)";
    }
  }
  // The list is not stale: each listed file does start processes.
  for (const auto& [name, why] : kMayStartProcesses) EXPECT_TRUE(seen.count(name)) << name << " (" << why << ") starts nothing now";
}

TEST(UntrustedLaunch, EveryStageStartsItsCommandsThroughTheExecutor) {
  for (const auto& name : kUntrustedStages) {
    const std::string text = read(source(name));
    // A stage hands its commands to the executor (executor.h), one path
    // whatever runs them: run_launch, or an allocation's run.
    EXPECT_TRUE(text.find("run_launch(") != std::string::npos || text.find("allocation->run(") != std::string::npos) << name;
    EXPECT_EQ(text.find("launch_untrusted("), std::string::npos) << name << " starts its commands beside the executor";
    EXPECT_EQ(text.find("run_process("), std::string::npos) << name << " starts a process without the launcher";
    EXPECT_EQ(text.find("sandbox_argv("), std::string::npos) << name << " builds its own sandbox";
  }
  // There is no launch beside the sandboxed one: the reference, trusted
  // code, runs through launch_untrusted too (issue 25).
  const std::string gate = read(source("gate_runner.cpp"));
  EXPECT_EQ(gate.find("launch.trusted"), std::string::npos);
  // ...and both ways of running a job build their launch there.
  std::size_t uses = 0;
  for (std::size_t at = gate.find("job_launch("); at != std::string::npos; at = gate.find("job_launch(", at + 1)) ++uses;
  EXPECT_EQ(uses, 3u) << "job_launch's definition, run_job and run_job_in_session";
  // Every executor ends in untrusted_launch.h: the local one here, the
  // Slurm one on the compute node through the local one (slurm-serve).
  const std::string local = read(source("local_executor.cpp"));
  EXPECT_NE(local.find("launch_untrusted("), std::string::npos);
  EXPECT_EQ(local.find("launch_trusted("), std::string::npos);
  const std::string serve = read(source("slurm_serve.cpp"));
  EXPECT_NE(serve.find("make_local_executor()"), std::string::npos);
}

TEST(Printable, EscapesControlCharactersBidiMarksAndBadUtf8) {
  EXPECT_EQ(printable("red\x1b[2K\rGREEN"), "red\\x1b[2K\\x0dGREEN");
  EXPECT_EQ(printable("a\nb\tc"), "a\nb\tc");
  EXPECT_EQ(printable("a\nb", false), "a\\x0ab");
  EXPECT_EQ(printable("x\x7fy\x07"), "x\\x7fy\\x07");
  EXPECT_EQ(printable("\xe2\x80\xae" "evil" "\xe2\x81\xa6" "\xe2\x80\x8f"), "\\u202eevil\\u2066\\u200f");
  EXPECT_EQ(printable("\xc2\x85" "next"), "\\u0085next");  // C1 NEL
  EXPECT_EQ(printable("\xff\xc3"), "\\xff\\xc3");
  EXPECT_EQ(printable("µs, 1.71×, 日本"), "µs, 1.71×, 日本");
  EXPECT_EQ(printable("\xe0\x80\xaf"), "\\xe0\\x80\\xaf");  // overlong '/'
}

TEST(Printable, StreamFilterEscapesWhatIsWritten) {
  std::ostringstream out;
  {
    PrintableStream guard(out);
    out << "ok \x1b[32mgreen\r\n" << "tail\xe2\x80\xae";
  }
  EXPECT_EQ(out.str(), "ok \\x1b[32mgreen\\x0d\ntail\\u202e");
}

// The server on hostile lines, in process: a crash here fails the test binary.
class McpLimits : public ::testing::Test {
 protected:
  std::vector<nlohmann::json> serve(const std::string& input, McpServerOptions options = {}) {
    McpTool slow{"slow", "slow", "waits", {{"type", "object"}}, [this](const nlohmann::ordered_json&, const std::atomic<bool>&) {
                   ++started_;
                   std::this_thread::sleep_for(std::chrono::milliseconds(50));
                   running_max_ = std::max<int>(running_max_, started_ - finished_);
                   ++finished_;
                   return McpToolResult{{}, "done \x1b[31m", false};
                 }};
    options.tools.push_back(slow);
    std::istringstream in(input);
    std::ostringstream out;
    serve_mcp(options, in, out);
    std::vector<nlohmann::json> lines;
    std::istringstream o(out.str());
    for (std::string l; std::getline(o, l);) lines.push_back(nlohmann::json::parse(l));
    return lines;
  }
  static std::string init() {
    return R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25"}})" "\n";
  }
  static std::string ping(int id) { return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":"ping"})" "\n"; }
  std::atomic<int> started_{0}, finished_{0}, running_max_{0};
};

TEST_F(McpLimits, DeepNestingIsRefusedAndPingStillAnswers) {
  const std::string deep = std::string(400000, '[') + std::string(400000, ']');
  const auto lines = serve(init() + deep + "\n" + R"({"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":)" +
                           std::string(129, '[') + std::string(129, ']') + "}}\n" + ping(7));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[1]["error"]["code"], -32600);
  EXPECT_NE(lines[1]["error"]["message"].get<std::string>().find("deeper than 128"), std::string::npos);
  EXPECT_EQ(lines[2]["error"]["code"], -32600);  // 131 levels inside a valid request
  EXPECT_EQ(lines[3]["id"], 7);
  EXPECT_TRUE(lines[3]["result"].is_object());
  // 127 levels are fine.
  const auto ok = serve(init() + R"({"jsonrpc":"2.0","id":5,"method":"ping","params":{"a":)" + std::string(126, '[') +
                        std::string(126, ']') + "}}\n");
  ASSERT_EQ(ok.size(), 2u);
  EXPECT_TRUE(ok[1]["result"].is_object()) << ok[1].dump();
}

TEST_F(McpLimits, ALongLineIsDroppedAndPingStillAnswers) {
  McpServerOptions options;
  options.max_line_bytes = 1 << 20;
  const std::string huge = R"({"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":")" + std::string(3 << 20, 'a') + "\"}}";
  const auto lines = serve(init() + huge + "\n" + ping(2), options);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[1]["id"].is_null());
  EXPECT_EQ(lines[1]["error"]["code"], -32600);
  EXPECT_NE(lines[1]["error"]["message"].get<std::string>().find("dropped"), std::string::npos);
  EXPECT_EQ(lines[2]["id"], 2);
  // At the limit it is read.
  const std::string fits = R"({"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":")";
  const auto at = serve(init() + fits + std::string((1 << 20) - fits.size() - 3, 'a') + "\"}}\n", options);
  ASSERT_EQ(at.size(), 2u);
  EXPECT_EQ(at[1]["id"], 3) << at[1].dump();
}

TEST_F(McpLimits, AFloodOfToolCallsIsQueuedAndBoundedAndItsTextEscaped) {
  McpServerOptions options;
  options.max_running_calls = 3;
  options.max_queued_calls = 10;
  std::string input = init();
  for (int i = 1; i <= 40; ++i) input += R"({"jsonrpc":"2.0","id":)" + std::to_string(i) + R"(,"method":"tools/call","params":{"name":"slow"}})" "\n";
  input += ping(100);
  const auto lines = serve(input, options);
  int results = 0, busy = 0;
  bool pinged = false;
  for (const auto& l : lines) {
    if (l["id"] == 100) pinged = true;
    if (l.contains("result") && l["result"].contains("content")) {
      ++results;
      EXPECT_EQ(l["result"]["content"][0]["text"], "done \\x1b[31m");
    }
    if (l.contains("error") && l["error"]["message"].get<std::string>().find("busy") != std::string::npos) ++busy;
  }
  EXPECT_TRUE(pinged);
  EXPECT_EQ(results + busy, 40);
  EXPECT_GE(results, 13);  // 3 running + 10 queued at the least
  EXPECT_GT(busy, 0);
  EXPECT_LE(running_max_, 3);
}

}  // namespace
}  // namespace densefeed
