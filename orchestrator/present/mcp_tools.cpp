#include "mcp_tools.h"

#include "exit_code.h"

#include <signal.h>
#include <sys/wait.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ledger.h"
#include "process_runner.h"
#include "progress_display.h"
#include "status_wait.h"
#include "workspace.h"

namespace densefeed {

// The longest budget the narrow tool takes, s (an hour: the MCP call waits for it).
constexpr double kMaxNarrowBudgetS = 3600;
namespace {

using J = nlohmann::ordered_json;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What one CLI call gave back.
struct CliOutcome {
  ProcessResult process;
  std::string out, err;
  J doc;  // stdout parsed as JSON (null when it is not)
};

// The CLI's error document (main.cpp print_error): {verdict: bad-input |
// infrastructure-error, error, details}.
bool is_error_document(const J& doc) {
  return doc.is_object() && doc.contains("error") && doc.contains("verdict") &&
         (doc["verdict"] == "bad-input" || doc["verdict"] == "infrastructure-error");
}

// A JSON object (structuredContent must be one): arrays are wrapped under `key`.
J as_object(const J& doc, const std::string& key) { return doc.is_object() ? doc : J{{key, doc}}; }

std::string schema_text(const std::string& verb_schema) {
  return fmt::format(" The result is the CLI's --json document (schemas/{}).", verb_schema);
}

// The forms of the strings that reach the CLI's argv (JSON Schema
// `pattern`s, ECMA-262). None matches a word that starts with '-', so an
// argument can never be read as an option; McpServer refuses one that misses
// its pattern as invalid params before anything runs.
// A gate, profile or dtype name: schemas/gate-list.schema.json's gate name.
constexpr const char* kNamePattern = "^[A-Za-z0-9][A-Za-z0-9._-]*$";
// A verdict or state (ledger list --verdict): green, red, cancel_requested, ...
constexpr const char* kWordPattern = "^[a-z][a-z_]*$";
// A UTC ISO 8601 prefix (ledger list --since): 2026-11-29, 2026-11-29T20:00.
constexpr const char* kSincePattern = "^[0-9][0-9T:Z-]*$";
// A file path: anything that does not start with '-' (nor is empty).
constexpr const char* kPathPattern = "^[^-]";
// Characters: a name, and a path (Linux's PATH_MAX). Every pattern comes
// with a maxLength (McpServer refuses a longer string before matching it).
constexpr unsigned kNameMax = 128;
constexpr unsigned kPathMax = 4096;

J object_schema(J properties, std::vector<std::string> required) {
  return {{"$schema", "http://json-schema.org/draft-07/schema#"},
          {"type", "object"},
          {"properties", std::move(properties)},
          {"required", std::move(required)},
          {"additionalProperties", false}};
}

}  // namespace

struct DensefeedMcpTools::Impl {
  McpToolConfig config;
  std::filesystem::path scratch;  // LEDGER-mcp/
  std::mutex counter_mutex;
  std::uint64_t counter = 0;
  // run_queue's background worker.
  // In a process of its own (start_detached), not a thread of this server:
  // a server that crashes leaves it running its benchmark.
  std::mutex worker_mutex;
  pid_t worker_pid = 0;
  std::filesystem::path worker_log;

  // Call with worker_mutex held.
  bool worker_alive() {
    if (worker_pid <= 0) return false;
    int status = 0;
    const pid_t r = ::waitpid(worker_pid, &status, WNOHANG);  // this server's child unless it was re-parented
    if (r == worker_pid || (r < 0 && ::kill(worker_pid, 0) != 0)) {
      worker_pid = 0;
      return false;
    }
    return true;
  }

  std::string unique(const std::string& stem) {
    const std::lock_guard lock(counter_mutex);
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return fmt::format("{}-{}-{}-{}", stem, std::chrono::duration_cast<std::chrono::milliseconds>(now).count(), ::getpid(), ++counter);
  }

  // Runs `densefeed --project DIR ARGS...`; stdout and stderr go through files.
  CliOutcome cli(const std::vector<std::string>& args, std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) {
    const auto dir = scratch / "calls";
    std::filesystem::create_directories(dir);
    const auto tag = unique("call");
    ProcessSpec spec;
    spec.argv = {config.densefeed.string(), "--project", config.project.string()};
    if (config.trust_worktree) spec.argv.push_back("--trust-worktree");
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    spec.cwd = config.project;
    spec.stdout_path = dir / (tag + ".out");
    spec.stderr_path = dir / (tag + ".err");
    spec.timeout = timeout;
    spec.cancel = cancel;
    CliOutcome o;
    o.process = run_process(spec);
    o.out = read_text(spec.stdout_path);
    o.err = read_text(spec.stderr_path);
    std::error_code ec;
    std::filesystem::remove(spec.stdout_path, ec);
    std::filesystem::remove(spec.stderr_path, ec);
    o.doc = J::parse(o.out, nullptr, false);
    if (o.doc.is_discarded()) o.doc = nullptr;
    return o;
  }

  // The usual mapping of a CLI call onto a tool result: a document is a
  // result (a red verdict is a finding, not a failure); the CLI's error
  // document or no document at all is a tool error.
  static McpToolResult result_of(const std::string& verb, const CliOutcome& o, const std::string& wrap_key, const std::string& lead = "") {
    McpToolResult r;
    if (!o.process.started || o.process.timed_out || o.process.cancelled || o.process.signal != 0) {
      r.is_error = true;
      r.text = fmt::format("densefeed {} did not complete: {}.{}", verb, o.process.describe(),
                           o.err.empty() ? "" : " Its stderr: " + o.err.substr(0, 2000));
      return r;
    }
    if (is_error_document(o.doc)) {
      r.is_error = true;
      r.structured = o.doc;
      const bool bad_input = o.doc["verdict"] == "bad-input";
      r.text = fmt::format("densefeed {} refused ({}, exit {}): {}\n{}", verb, bad_input ? "bad input: change the arguments or the manifest as the message says" : "infrastructure error: densefeed or the machine failed, not the input",
                           o.process.exit_code, o.doc["error"].get<std::string>(), o.doc.dump(2));
      return r;
    }
    if (o.doc.is_null()) {
      r.is_error = true;
      r.text = fmt::format("densefeed {} printed no JSON document ({}).{}", verb, o.process.describe(),
                           o.err.empty() ? "" : " Its stderr: " + o.err.substr(0, 2000));
      return r;
    }
    r.structured = as_object(o.doc, wrap_key);
    r.text = (lead.empty() ? "" : lead + "\n") + o.doc.dump(2);
    return r;
  }

  // `verb` with the server's ledger and --json, then "--" and the operands:
  // an argument an agent sent (a name, an id, a path) is never read as an
  // option, whatever it holds. Option values go as --flag=VALUE for the same reason.
  std::vector<std::string> with_ledger(std::vector<std::string> verb, const std::vector<std::string>& operands = {}) const {
    if (config.service.empty()) verb.push_back("--ledger=" + config.ledger.string());
    return after_options(std::move(verb), operands);
  }
  static std::vector<std::string> after_options(std::vector<std::string> verb, const std::vector<std::string>& operands) {
    verb.push_back("--json");
    verb.push_back("--");
    verb.insert(verb.end(), operands.begin(), operands.end());
    return verb;
  }

  McpToolResult submit(const J& a, const std::atomic<bool>& cancel) {
    const auto dir = scratch / "manifests";
    std::filesystem::create_directories(dir);
    // Kept only when queued: the ledger records this path with the manifest's text.
    const auto path = dir / (unique("submitted") + ".yaml");
    {
      std::ofstream out(path, std::ios::binary);
      out << a["manifest"].get<std::string>();
      if (!out) return {J::object(), "cannot write the manifest to " + path.string(), true};
    }
    const auto o = cli(with_ledger({"submit"}, {path.string()}), std::chrono::minutes(5), &cancel);
    std::string lead;
    if (o.doc.is_object() && o.doc.contains("experiment_id") && !config.service.empty()) {
      lead = fmt::format("Queued as experiment {} with this project's densefeed service, whose worker runs it: call get_status "
                         "with experiment_id {} and wait_s.",
                         o.doc["experiment_id"].get<std::int64_t>(), o.doc["experiment_id"].get<std::int64_t>());
    } else if (o.doc.is_object() && o.doc.contains("experiment_id")) {
      lead = fmt::format("Queued as experiment {}. It runs when a worker takes it: call run_queue (or start `densefeed worker`), "
                         "then get_status with experiment_id {} and wait_s.",
                         o.doc["experiment_id"].dump(), o.doc["experiment_id"].dump());
    } else if (o.doc.is_object() && o.doc.contains("queued")) {
      lead = "Queued. Call run_queue (or start `densefeed worker`), then get_status for each id.";
    }
    auto r = result_of("submit", o, "queued", lead);
    if (r.is_error) {
      // Refused: nothing refers to it, so it is not kept.
      std::error_code ec;
      std::filesystem::remove(path, ec);
      r.text += "\n(Line and column numbers refer to the manifest text you sent.)";
    }
    return r;
  }

  McpToolResult narrow(const J& a, const std::atomic<bool>& cancel) {
    const std::string id = a["experiment_id"].dump();
    const double budget_s = a.contains("budget_s") ? a["budget_s"].get<double>() : 600;
    const auto o = cli(with_ledger({"narrow", "--budget", fmt::format("{}", budget_s)}, {id}),
                       std::chrono::milliseconds(static_cast<long long>(budget_s * 1000) + 120'000), &cancel);
    return result_of("narrow", o, "narrowing");
  }

  // While `status --wait` waits: each new event of the experiment's
  // progress.jsonl (run_progress.h, bench_progress.h) as a progress
  // notification, polled every 200 ms until `stop`.
  void watch_progress(const std::string& id, const McpProgress& progress, const std::atomic<bool>& stop) const {
    if (!progress || config.ledger.empty()) return;
    const auto file = Workspace{config.ledger}.runs() / id / "progress.jsonl";
    std::size_t seen = 0;
    // Read once more after `stop`: the events of a run that ended while the
    // call waited are all told before its answer.
    for (bool last = false; !last;) {
      last = stop;
      std::ifstream in(file);
      std::string line;
      std::size_t n = 0;
      while (std::getline(in, line)) {
        if (++n <= seen) continue;
        seen = n;
        progress(static_cast<double>(n), std::nullopt, progress_event_text(J::parse(line, nullptr, false)));
      }
      if (!last) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  McpToolResult status(const J& a, const std::atomic<bool>& cancel, const McpProgress& progress = {}) {
    const std::string id = a["experiment_id"].dump();
    const double wait_s = a.contains("wait_s") ? a["wait_s"].get<double>() : 0;
    if (wait_s > 0) {
      std::atomic<bool> stop{false};
      std::thread watcher([&] { watch_progress(id, progress, stop); });
      struct Join {
        std::atomic<bool>& stop;
        std::thread& t;
        ~Join() {
          stop = true;
          t.join();
        }
      } join{stop, watcher};
      const auto o = cli(with_ledger({"status", "--wait", fmt::format("--timeout={}", wait_s)}, {id}),
                         std::chrono::milliseconds(static_cast<long long>(wait_s * 1000) + 120'000), &cancel);
      auto r = result_of("status", o, "status");
      // Waited long enough (exit 4, not ended yet: exit_code.h): the status
      // as it is now is the answer, not an error.
      if (!r.is_error && o.process.exit_code == kExitNotEnded) {
        r.text = fmt::format("Still {} after {} s; call get_status again (is a worker running? run_queue starts one).\n{}",
                             r.structured.value("state", std::string("?")), wait_s, r.text);
      }
      return r;
    }
    return result_of("status", cli(with_ledger({"status"}, {id}), std::chrono::minutes(2), &cancel), "status");
  }

  // A file an agent names must lie in the project folder or next to the
  // ledger (its runs): the tools never read the rest of the machine for it.
  std::optional<McpToolResult> outside(const std::string& field, const std::string& text) const {
    std::filesystem::path p = text;
    if (p.is_relative()) p = config.project / p;
    std::error_code ec;
    const auto real = std::filesystem::weakly_canonical(p, ec).string();
    for (const auto& top : {config.project, config.ledger.parent_path()}) {
      const auto t = std::filesystem::weakly_canonical(top, ec).string();
      if (!ec && real.size() > t.size() && real.compare(0, t.size(), t) == 0 && real[t.size()] == '/') return std::nullopt;
    }
    return McpToolResult{J::object(),
                         fmt::format("{}: '{}' is outside the project folder ({}) and the ledger's folder ({}); the tools read "
                                     "only files there",
                                     field, text, config.project.string(), config.ledger.parent_path().string()),
                         true};
  }

  McpToolResult compare(const J& a, const std::atomic<bool>& cancel) {
    for (const char* f : {"reference", "candidate"}) {
      if (auto refused = outside(f, a[f].get<std::string>())) return *refused;
    }
    std::vector<std::string> args = {"compare"};
    for (const auto& [key, flag] : std::vector<std::pair<std::string, std::string>>{
             {"rel_l2", "--rel-l2"}, {"max_abs", "--max-abs"}, {"atol", "--atol"}, {"rtol", "--rtol"}, {"ulp", "--ulp"},
             {"max_violation_fraction", "--max-violation-fraction"}, {"partition_axis", "--partition-axis"},
             {"partition_parts", "--partition-parts"}, {"reference_tensor", "--ref-tensor"}, {"candidate_tensor", "--cand-tensor"},
             {"candidate_dtype", "--dtype"}}) {
      if (!a.contains(key)) continue;
      args.push_back(flag + "=" + (a[key].is_string() ? a[key].get<std::string>() : a[key].dump()));
    }
    return result_of("compare",
                     cli(after_options(args, {a["reference"].get<std::string>(), a["candidate"].get<std::string>()}),
                         std::chrono::minutes(10), &cancel),
                     "comparison");
  }

  McpToolResult analyze_trace(const J& a, const std::atomic<bool>& cancel) {
    if (!config.verbs.count("trace analyze")) {
      return {J::object(),
              "analyze_trace needs the `densefeed trace analyze` verb, which this densefeed build does not have (verbs: " +
                  fmt::format("{}", fmt::join(config.verbs, ", ")) +
                  "). Rebuild densefeed from a checkout that has it; the trace stage of an experiment is read with get_status "
                  "(stages.trace) meanwhile.",
              true};
    }
    if (auto refused = outside("path", a["path"].get<std::string>())) return *refused;
    return result_of("trace analyze", cli(after_options({"trace", "analyze"}, {a["path"].get<std::string>()}), std::chrono::minutes(10), &cancel),
                     "analysis");
  }

  McpToolResult run_queue(const J& a) {
    if (!config.service.empty()) {
      return {{{"started", false}, {"running", true}, {"service", config.service.string()}},
              fmt::format("This project's densefeed service ({}) runs the queue itself: call get_status with wait_s to follow "
                          "an experiment.",
                          config.service.string()),
              false};
    }
    const std::lock_guard lock(worker_mutex);
    if (worker_alive()) {
      return {{{"started", false}, {"running", true}, {"log", worker_log.string()}},
              fmt::format("A worker this server started is still running the queue (log: {}); call get_status to follow "
                          "an experiment.",
                          worker_log.string()),
              false};
    }
    const auto dir = scratch / "workers";
    std::filesystem::create_directories(dir);
    worker_log = dir / (unique("worker") + ".log");
    std::vector<std::string> argv = {config.densefeed.string(), "--project", config.project.string()};
    if (config.trust_worktree) argv.push_back("--trust-worktree");
    for (const std::string a : {"worker", "--once"}) argv.push_back(a);
    argv.push_back("--ledger=" + config.ledger.string());
    if (a.contains("profile")) argv.push_back("--profile=" + a["profile"].get<std::string>());
    worker_pid = start_detached(argv, config.project, worker_log, worker_log.string() + ".stderr");
    return {{{"started", true}, {"running", true}, {"log", worker_log.string()}},
            fmt::format("Started `densefeed worker --once`: it runs every queued experiment in submission order and exits when "
                        "the queue is empty (log: {}). Follow one with get_status (experiment_id, wait_s).",
                        worker_log.string()),
            false};
  }
};

DensefeedMcpTools::DensefeedMcpTools(McpToolConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->config = std::move(config);
  impl_->scratch = impl_->config.ledger.parent_path() / (impl_->config.ledger.stem().string() + "-mcp");
}

DensefeedMcpTools::~DensefeedMcpTools() {
  // The server ends on purpose (its input ended): its worker is stopped as
  // before, requeueing what it ran. Only a crash leaves the worker running.
  const std::lock_guard lock(impl_->worker_mutex);
  if (!impl_->worker_alive()) return;
  ::kill(impl_->worker_pid, SIGTERM);
  for (int i = 0; i < 3000 && impl_->worker_alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (impl_->worker_alive()) ::kill(impl_->worker_pid, SIGKILL);
}

std::vector<McpTool> DensefeedMcpTools::tools() {
  Impl* self = impl_.get();
  const J id_schema = {{"type", "integer"}, {"minimum", 1}, {"description", "experiment id (from submit_experiment or ledger_list)"}};
  std::vector<McpTool> t;
  t.push_back({"submit_experiment", "Submit an experiment",
               "Validate an experiment manifest (YAML text: experiment, hypothesis, predicted_effect, gate, candidate, base, and "
               "optionally predicted_speedup, risk, acceptance) and queue it. Returns its experiment_id at once; a worker runs it "
               "(run_queue). A manifest may set only the parameters its gate declares (show_gate). Bad input is a tool error naming "
               "the line and field." + schema_text("submit.schema.json"),
               object_schema({{"manifest", {{"type", "string"}, {"minLength", 1}, {"description", "the manifest's YAML text (schemas/experiment.schema.json)"}}}},
                             {"manifest"}),
               [self](const J& a, const std::atomic<bool>& c) { return self->submit(a, c); }});
  t.push_back({"run_queue", "Run the queue",
               "Start `densefeed worker --once` in the background: it runs every queued experiment in submission order (gate, "
               "then benchmark on a green gate) and exits when the queue is empty. Returns at once.",
               object_schema({{"profile", {{"type", "string"}, {"pattern", kNamePattern}, {"maxLength", kNameMax}, {"description", "gate profile (default quick; full runs every case)"}}}}, {}),
               [self](const J& a, const std::atomic<bool>&) { return self->run_queue(a); }});
  t.push_back({"get_status", "Get an experiment's verdict",
               "The experiment's state and verdict document: each stage's status, the red cases with output, metric, value, bound "
               "and worst index, trend tables, bench verdicts with intervals, failed trace checks, and `next`: the cheapest "
               "experiments that would narrow the cause. With wait_s, waits up to that long for it to end." +
                   schema_text("status.schema.json"),
               object_schema({{"experiment_id", id_schema},
                              {"wait_s", {{"type", "number"}, {"minimum", 0}, {"maximum", kMaxStatusWaitS}, {"description", "wait up to this many seconds for the experiment to end (0: answer now)"}}}},
                             {"experiment_id"}),
               nullptr,
               [self](const J& a, const std::atomic<bool>& c, const McpProgress& p) { return self->status(a, c, p); }});
  t.push_back({"narrow", "Narrow a red experiment down to the layer at fault",
               "densefeed runs, itself, the cheapest experiments that tell apart why a red experiment is red (densefeed narrow): "
               "reruns of its red cases with the same seed (nondeterminism: k of n reruns red), the precision swap its gate "
               "declares, a bisection of the commits between the last green revision (or the trusted ref) and the candidate, "
               "and of the partition key; each step is an experiment linked to it. Ends by naming the layer (precision of what "
               "partitioning adds, the partitioned algorithm, a commit, an input regime, nondeterminism, the algorithm or the "
               "inputs) with the experiments that show it, never past budget_s." +
                   schema_text("narrow.schema.json"),
               object_schema({{"experiment_id", id_schema},
                              {"budget_s", {{"type", "number"}, {"minimum", 1}, {"maximum", kMaxNarrowBudgetS}, {"description", "the most wall time it may take, s (default 600)"}}}},
                             {"experiment_id"}),
               [self](const J& a, const std::atomic<bool>& c) { return self->narrow(a, c); }});
  t.push_back({"list_gates", "List the gates", "The names of the frozen correctness gates (gates/*.yaml)." + schema_text("gate-list.schema.json"),
               object_schema(J::object(), {}),
               [self](const J&, const std::atomic<bool>& c) {
                 return self->result_of("gate list", self->cli(self->after_options({"gate", "list"}, {}), std::chrono::minutes(2), &c), "gates");
               }});
  t.push_back({"show_gate", "Show a gate",
               "What a gate runs, accepts, checks and freezes: its commands, the parameters a manifest may set (with types, allowed "
               "values, defaults), outputs with dtype, shape and tolerance, cases per profile, bench cases, frozen files, and "
               "whether it matches gates/gates.lock." + schema_text("gate-show.schema.json"),
               object_schema({{"name", {{"type", "string"}, {"pattern", kNamePattern}, {"maxLength", kNameMax}, {"description", "gate name (list_gates)"}}}}, {"name"}),
               [self](const J& a, const std::atomic<bool>& c) {
                 return self->result_of("gate show", self->cli(self->after_options({"gate", "show"}, {a["name"].get<std::string>()}), std::chrono::minutes(2), &c),
                                        "gate");
               }});
  const J bound = {{"type", "number"}, {"minimum", 0}};
  t.push_back({"compare_tensors", "Compare two tensor files",
               "Compare a candidate tensor file with a reference (.npy or .safetensors) with the gate's comparison engine: relative "
               "L2, max abs, elementwise atol + rtol*|ref|, ULP; worst element; per-slice errors along a partition axis. Bounds "
               "default to the candidate dtype's. A red comparison is a result, not a tool error." + schema_text("compare.schema.json"),
               object_schema({{"reference", {{"type", "string"}, {"pattern", kPathPattern}, {"maxLength", kPathMax}, {"description", "reference file path in the project folder or the ledger's folder (absolute, or relative to the project folder)"}}},
                              {"candidate", {{"type", "string"}, {"pattern", kPathPattern}, {"maxLength", kPathMax}, {"description", "candidate file path in the project folder or the ledger's folder (absolute, or relative to the project folder)"}}},
                              {"rel_l2", bound}, {"max_abs", bound}, {"atol", bound}, {"rtol", bound}, {"ulp", bound},
                              {"max_violation_fraction", {{"type", "number"}, {"minimum", 0}, {"maximum", 1}}},
                              {"partition_axis", {{"type", "integer"}, {"minimum", 0}}},
                              {"partition_parts", {{"type", "integer"}, {"minimum", 0}}},
                              {"reference_tensor", {{"type", "string"}}}, {"candidate_tensor", {{"type", "string"}}},
                              {"candidate_dtype", {{"type", "string"}, {"pattern", kNamePattern}, {"maxLength", kNameMax}}}},
                             {"reference", "candidate"}),
               [self](const J& a, const std::atomic<bool>& c) { return self->compare(a, c); }});
  t.push_back({"analyze_trace", "Analyse a trace file",
               "Analyse a trace (Chrome Trace Event JSON, or an nsys SQLite export) with `densefeed trace analyze --json`: where "
               "the time goes, per lane, and the overlap of intervals.",
               object_schema({{"path", {{"type", "string"}, {"pattern", kPathPattern}, {"maxLength", kPathMax}, {"description", "trace file path in the project folder or the ledger's folder (absolute, or relative to the project folder)"}}}}, {"path"}),
               [self](const J& a, const std::atomic<bool>& c) { return self->analyze_trace(a, c); }});
  t.push_back({"ledger_list", "List experiments",
               "Every recorded experiment with its state, gate verdict and speedups (read-only)." + schema_text("ledger-list.schema.json"),
               object_schema({{"gate", {{"type", "string"}, {"pattern", kNamePattern}, {"maxLength", kNameMax}, {"description", "gate name (list_gates)"}}},
                              {"verdict", {{"type", "string"}, {"pattern", kWordPattern}, {"maxLength", kNameMax}, {"description", "gate verdict (green, red, error, pending) or state (queued, started, finished, ...)"}}},
                              {"since", {{"type", "string"}, {"pattern", kSincePattern}, {"maxLength", kNameMax}, {"description", "UTC ISO 8601 prefix, e.g. 2026-11-29"}}}},
                             {}),
               [self](const J& a, const std::atomic<bool>& c) {
                 std::vector<std::string> args = {"ledger", "list"};
                 for (const char* k : {"gate", "verdict", "since"}) {
                   if (a.contains(k)) args.push_back(fmt::format("--{}={}", k, a[k].get<std::string>()));
                 }
                 return self->result_of("ledger list", self->cli(self->with_ledger(args), std::chrono::minutes(2), &c), "experiments");
               }});
  t.push_back({"ledger_show", "Show an experiment's record",
               "Everything the ledger recorded for one experiment: manifest, events, gate run with every case and metric, bench "
               "cases with rounds, trace findings, reviews, promotion, acceptance (read-only)." + schema_text("ledger-show.schema.json"),
               object_schema({{"experiment_id", id_schema}}, {"experiment_id"}),
               [self](const J& a, const std::atomic<bool>& c) {
                 return self->result_of("ledger show", self->cli(self->with_ledger({"ledger", "show"}, {a["experiment_id"].dump()}), std::chrono::minutes(2), &c),
                                        "experiment");
               }});
  t.push_back({"ledger_compare", "Compare two experiments",
               "Two recorded experiments side by side: only the fields that differ, with deltas and ratios (read-only)." +
                   schema_text("ledger-compare.schema.json"),
               object_schema({{"a", id_schema}, {"b", id_schema}}, {"a", "b"}),
               [self](const J& a, const std::atomic<bool>& c) {
                 return self->result_of("ledger compare",
                                        self->cli(self->with_ledger({"ledger", "compare"}, {a["a"].dump(), a["b"].dump()}), std::chrono::minutes(2), &c),
                                        "comparison");
               }});
  t.push_back({"write_report", "Write an experiment's HTML report",
               "Write one self-contained HTML page of a recorded experiment (charts and tables: the gate's error over its case "
               "grid with the bound, per-slice failures, bench samples and speedup interval, trace intervals, reviews) with "
               "`densefeed report ID -o FILE --json`, into the server's folder next to the ledger; returns its path for a "
               "person to open. The result is {kind, path, bytes, charts, notices, chain}.",
               object_schema({{"experiment_id", id_schema}}, {"experiment_id"}),
               [self](const J& a, const std::atomic<bool>& c) {
                 const auto dir = self->scratch / "reports";
                 std::filesystem::create_directories(dir);
                 const auto path = dir / fmt::format("experiment-{}.html", a["experiment_id"].get<std::int64_t>());
                 return self->result_of("report",
                                        self->cli(self->with_ledger({"report", "-o", path.string()}, {a["experiment_id"].dump()}), std::chrono::minutes(2), &c),
                                        "report", "Wrote " + path.string());
               }});
  return t;
}

std::vector<McpResource> DensefeedMcpTools::resources(const std::filesystem::path& data_dir, const std::filesystem::path& gate_dir,
                                                      const std::filesystem::path& experiments_dir) {
  std::vector<McpResource> out;
  const auto mime = [](const std::filesystem::path& p) {
    const auto ext = p.extension().string();
    if (ext == ".json") return "application/json";
    if (ext == ".yaml" || ext == ".yml") return "application/yaml";
    if (ext == ".md") return "text/markdown";
    if (ext == ".py") return "text/x-python";
    return "text/plain";
  };
  // Files of base/folder as densefeed://NAME/..., NAME the kind of resource.
  const auto add_folder = [&](const std::filesystem::path& base, const std::string& folder, const std::string& name,
                              const std::string& what, const std::string& where, bool recursive) {
    std::error_code ec;
    const auto top = base / folder;
    if (!std::filesystem::is_directory(top, ec)) return;
    std::vector<std::filesystem::path> files;
    if (recursive) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(top, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      for (const auto& e : std::filesystem::directory_iterator(top, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const auto rel = name + "/" + std::filesystem::relative(f, top).generic_string();
      out.push_back({"densefeed://" + rel, rel, fmt::format("{}: {}", what, f.filename().string()),
                     fmt::format("{} ({})", what, where), mime(f), f});
    }
  };
  add_folder(data_dir, "skills", "skills", "agent skill", "installed with densefeed", true);
  add_folder(data_dir, "schemas", "schemas", "schema", "installed with densefeed", false);
  add_folder(gate_dir, ".", "gates", "frozen gate", "the gate store", false);
  add_folder(experiments_dir, ".", "experiments", "experiment", "the project's experiments folder", false);
  return out;
}

std::string DensefeedMcpTools::instructions() {
  return "densefeed answers a kernel-optimisation hypothesis with a frozen correctness gate first, then (green only) a "
         "benchmark against the base, and records everything in an append-only ledger. Loop: read "
         "densefeed://skills/densefeed-optimization-loop/SKILL.md; write the hypothesis and predicted effect before any result; "
         "submit_experiment (YAML), run_queue, get_status with wait_s; act on the verdict document's `next`; change one "
         "thing and submit again. Gates, gates.lock and frozen files are never yours to change; risk categories are approved "
         "by a person.";
}

}  // namespace densefeed
