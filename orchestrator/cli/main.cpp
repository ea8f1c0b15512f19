// densefeed CLI. Exit codes (STYLE.md): 0 green, 1 red, 2 bad input,
// 3 infrastructure error (or an `error` verdict: the reference failed).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "calibration.h"
#include "densefeed_version.h"
#include "cli.h"
#include "printable.h"
#include "arm_context.h"
#include "trusted_arm.h"
#include "environment.h"
#include "error.h"
#include "sha256.h"
#include "experiment_runner.h"
#include "gate_lock.h"
#include "project_init.h"
#include "process_runner.h"
#include "process_tree.h"
#include "ledger.h"
#include "report.h"
#include "tensor_compare.h"
#include "tensor_file.h"
#include "trace_analysis.h"
#include "trace_checks.h"
#include "trace_loader.h"
#include "trace_report.h"
#include "arms.h"

namespace df = densefeed;
using df::parse_unsigned;

namespace {

void print_error(bool json, const char* kind, const std::string& message, const nlohmann::ordered_json& details = {}) {
  if (json) {
    nlohmann::ordered_json doc = {{"verdict", kind}, {"error", message}};
    if (!details.is_null()) doc["details"] = details;
    // A message may quote bytes of a bad input file that are not UTF-8.
    std::cout << doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  }
  std::cerr << "densefeed: " << message << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  df::kill_children_on_termination();
  df::adopt_orphans();
  CLI::App app{"densefeed: dense-feedback experiments for agent-driven kernel optimisation"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "densefeed " DENSEFEED_VERSION " (commit " DENSEFEED_COMMIT ")");
  df::CliContext ctx;
  app.add_option("--project", ctx.project_text,
                 "the project folder holding densefeed.yaml (default: the first folder from here upwards that has one)");
  app.add_flag("--trust-worktree", ctx.trust_worktree,
               "read gates, gates.lock and frozen files from the project folder as it is instead of the trusted ref "
               "(recorded in provenance)");
  std::string& ledger_text = ctx.ledger_text;
  bool& json = ctx.json;
  std::vector<df::CliVerb> verbs;
  for (auto&& family : {df::add_ledger_verbs(app, ctx), df::add_review_verbs(app, ctx), df::add_queue_verbs(app, ctx), df::add_report_verbs(app, ctx), df::add_machine_verbs(app, ctx), df::add_mcp_verbs(app, ctx)}) {
    verbs.insert(verbs.end(), family.begin(), family.end());
  }

  auto* run = app.add_subcommand("run", "validate a manifest, run its gate, then (green only) its benchmark; record all in the ledger");
  std::string manifest;
  df::RunOptions options;
  std::string seed_text;
  bool no_bench = false;
  run->add_option("MANIFEST", manifest, "experiment manifest (YAML)")->required();
  run->add_option("--ledger", ledger_text, "SQLite ledger (default: the project's, .densefeed/ledger.db)");
  run->add_option("--profile", options.profile, "gate profile (quick, full, or one the gate names)")->capture_default_str();
  auto* seed_opt = run->add_option("--seed", seed_text, "input seed, 0..2^64-1 (default: drawn fresh and recorded)");
  options.jobs = static_cast<int>(std::max(1u, std::min(256u, std::thread::hardware_concurrency())));
  run->add_option("--jobs", options.jobs, "harness processes at once (default: the machine's cores)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  run->add_flag("--no-bench", no_bench, "stop after the gate");
  bool no_sandbox = false;
  run->add_flag("--no-sandbox", no_sandbox, "run candidate and base commands without bwrap (recorded in the report)");
  run->add_flag("--json", json, "print one JSON document");
  std::string executor_name = "local";
  df::add_executor_option(run, executor_name);

  auto* init_cmd = app.add_subcommand("init", "make this git repository a densefeed project: densefeed.yaml, a sample gate "
                                               "with a Python/numpy harness pair, two sample experiments");
  std::string init_dir = ".";
  init_cmd->add_option("DIR", init_dir, "the project folder (default: the current one)")->capture_default_str();
  init_cmd->add_flag("--json", json, "print JSON");

  auto* gate_cmd = app.add_subcommand("gate", "frozen correctness gates");
  gate_cmd->require_subcommand(1);
  auto* gate_lock = gate_cmd->add_subcommand(
      "lock", "re-lock gates (a person runs this, after committing them on the trusted ref): write gates.lock and print what changed");
  std::vector<std::string> lock_names;
  gate_lock->add_option("NAME", lock_names, "gates to re-lock (default: all)");
  auto* gate_verify = gate_cmd->add_subcommand("verify", "check every gate of the project folder against its gates.lock (for CI)");
  auto* gate_list = gate_cmd->add_subcommand("list", "list gates");
  auto* gate_show = gate_cmd->add_subcommand("show", "what a gate runs, accepts, checks and freezes");
  std::string show_gate;
  gate_show->add_option("NAME", show_gate, "gate name")->required();
  for (auto* sub : {gate_verify, gate_list, gate_show}) sub->add_flag("--json", json, "print JSON");

  auto* bench_cmd = app.add_subcommand("bench", "benchmark calibration");
  bench_cmd->require_subcommand(1);
  auto* calibrate_cmd = bench_cmd->add_subcommand("calibrate", "run a gate's base against itself and record this machine's noise floor");
  std::string calibrate_gate;
  int comparisons = 10;
  std::vector<std::string> calibrate_params;
  calibrate_cmd->add_option("GATE", calibrate_gate, "gate name")->required();
  calibrate_cmd->add_option("--comparisons", comparisons, "A/A comparisons")->check(CLI::Range(1, 1000))->capture_default_str();
  calibrate_cmd->add_option("--param", calibrate_params, "NAME=VALUE (a YAML scalar) for a gate parameter; default: the gate's defaults");
  calibrate_cmd->add_option("--ledger", ledger_text, "SQLite ledger (default: the project's)");
  calibrate_cmd->add_flag("--json", json, "print JSON");

  auto* compare = app.add_subcommand("compare", "compare two tensor files (.npy or .safetensors) with the gate's engine");
  std::string compare_ref, compare_cand, ref_tensor, cand_tensor, cand_dtype;
  df::Tolerance compare_tol;
  std::size_t partition_axis = 0, partition_parts = 0;
  compare->add_option("REF", compare_ref, "reference tensor file")->required();
  compare->add_option("CAND", compare_cand, "candidate tensor file")->required();
  compare->add_option("--ref-tensor", ref_tensor, "tensor name in a .safetensors reference");
  compare->add_option("--cand-tensor", cand_tensor, "tensor name in a .safetensors candidate");
  compare->add_option("--dtype", cand_dtype, "declared candidate dtype (needed for bfloat16/fp8 stored as raw records in .npy)");
  compare->add_option("--rel-l2", compare_tol.rel_l2, "bound on ||c - r|| / ||r||");
  compare->add_option("--max-abs", compare_tol.max_abs, "bound on max |c - r|");
  compare->add_option("--atol", compare_tol.atol, "elementwise |c - r| <= atol + rtol |r|");
  compare->add_option("--rtol", compare_tol.rtol, "elementwise |c - r| <= atol + rtol |r|");
  compare->add_option("--max-violation-fraction", compare_tol.max_violation_fraction, "elements allowed to break the elementwise bound")
      ->check(CLI::Range(0.0, 1.0));
  compare->add_option("--ulp", compare_tol.max_ulp, "bound on the ULP distance in the candidate's dtype");
  auto* axis_opt = compare->add_option("--partition-axis", partition_axis, "report each slice along this axis");
  compare->add_option("--partition-parts", partition_parts, "number of equal slices (default: one per position)");
  compare->add_flag("--json", json, "print JSON");

  auto* trace_cmd = app.add_subcommand("trace", "execution traces: where the time went, what overlapped what");
  trace_cmd->require_subcommand(1);
  auto* trace_analyze = trace_cmd->add_subcommand(
      "analyze", "lanes, where the time went, overlaps, top names, launch delay (Chrome JSON, .json.gz, nsys .sqlite)");
  std::vector<std::string> trace_files, trace_overlap;
  std::string trace_window, trace_checks;
  std::size_t trace_top = 10;
  trace_analyze->add_option("FILE", trace_files, "trace file(s), one per rank, or a folder of them")->required();
  auto* trace_window_opt = trace_analyze->add_option("--window", trace_window, "analyse only the span of the slice(s) with this name");
  trace_analyze->add_option("--overlap", trace_overlap, "A B: overlap of selection A with selection B, e.g. 'name=nccl;lane=gpu' "
                                                        "'class=compute' (repeatable)")
      ->expected(2)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  trace_analyze->add_option("--top", trace_top, "names per lane kind by exclusive time")->check(CLI::Range(1, 100000))->capture_default_str();
  auto* trace_checks_opt = trace_analyze->add_option(
      "--checks", trace_checks, "YAML file: a list of checks (overlap, exposed, share), or a manifest's trace.checks; red (exit 1) if one fails");
  trace_analyze->add_flag("--json", json, "print one JSON document (schemas/trace-report.schema.json)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Agents asked for JSON get JSON even when the command line is wrong.
    bool wants_json = false;
    for (int i = 1; i < argc; ++i) wants_json = wants_json || std::string(argv[i]) == "--json";
    if (wants_json) {
      print_error(true, "bad-input", e.what(), {{"field", "command line"}, {"message", e.what()}});
      return 2;
    }
    app.exit(e);
    return 2;
  }

  // Everything printed passes through printable() (control characters and
  // direction marks escaped), but ledger export's CSV and the MCP protocol.
  bool raw_output = false;
  for (const auto& verb : verbs) {
    raw_output = raw_output || (verb.app->parsed() && (verb.app->get_name() == "export" || verb.app->get_name() == "mcp"));
  }
  std::optional<df::PrintableStream> safe_out, safe_err;
  if (!raw_output) {
    safe_out.emplace(std::cout);
    safe_err.emplace(std::cerr);
  }
  try {
    for (const auto& verb : verbs) {
      if (verb.app->parsed()) return verb.run();
    }
    if (run->parsed()) {
      const auto profile = options.profile;
      const auto jobs = options.jobs;
      options = df::run_options(ctx);
      options.profile = profile;
      options.jobs = jobs;
      if (seed_opt->count() > 0) options.seed = parse_unsigned("--seed", seed_text, UINT64_MAX);
      options.bench = !no_bench;
      options.sandbox = !no_sandbox;
      options.executor = df::make_executor(executor_name);
      const df::ExperimentOutcome outcome = df::run_experiment(manifest, options);
      if (json) std::cout << df::report_json(outcome, options.workspace.ledger.string()).dump(2) << "\n";
      else std::cout << df::render_text_report(outcome);
      return outcome.record ? df::exit_code_of(outcome.record->summary) : df::exit_code_of(outcome.verdict);
    }
    if (trace_analyze->parsed()) {
      df::AnalysisOptions analysis_options;
      if (trace_window_opt->count() > 0) analysis_options.window = trace_window;
      analysis_options.top = trace_top;
      if (trace_overlap.size() % 2 != 0) {
        throw df::InputError("command line", {}, "--overlap", "expected two selectors, A and B, after each --overlap");
      }
      for (std::size_t i = 0; i + 1 < trace_overlap.size(); i += 2) {
        analysis_options.overlaps.emplace_back(df::SliceSelector::parse(trace_overlap[i], "--overlap"),
                                               df::SliceSelector::parse(trace_overlap[i + 1], "--overlap"));
      }
      std::vector<df::TraceCheck> checks;
      if (trace_checks_opt->count() > 0) {
        const auto doc = df::load_yaml_file(trace_checks);
        std::string pointer;
        if (doc.value.is_object() && doc.value.contains("trace")) pointer = "/trace/checks";
        else if (doc.value.is_object() && doc.value.contains("checks")) pointer = "/checks";
        checks = df::parse_trace_checks(doc, pointer);
      }
      const std::vector<std::filesystem::path> files(trace_files.begin(), trace_files.end());
      const df::Timeline timeline = df::load_trace(files);
      const df::TraceAnalysis analysis = df::analyze_trace(timeline, analysis_options);
      // An overlap of nothing is no figure: refuse the query rather than print 0 %.
      for (const auto& o : analysis.overlaps) {
        if (o.a_slices == 0) throw df::InputError("command line", {}, "--overlap", o.notes.front());
      }
      const auto results = df::run_trace_checks(timeline, checks, analysis_options.list_limit);
      const auto* with_checks = trace_checks_opt->count() > 0 ? &results : nullptr;
      // Names come from the trace as written, UTF-8 or not.
      if (json) std::cout << df::trace_analysis_json(analysis, with_checks).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
      else std::cout << df::render_trace_analysis_text(analysis, with_checks);
      const bool red = std::any_of(results.begin(), results.end(), [](const df::TraceCheckResult& r) { return !r.passed; });
      return red ? 1 : 0;
    }
    if (init_cmd->parsed()) {
      const auto r = df::init_project(init_dir);
      if (json) {
        std::cout << nlohmann::ordered_json{{"project", r.dir.string()}, {"trusted_ref", r.trusted_ref}, {"written", r.written}}.dump(2)
                  << "\n";
        return 0;
      }
      std::cout << fmt::format("densefeed init: a project in {} (trusted ref: {})\n", r.dir.string(), r.trusted_ref);
      for (const auto& f : r.written) std::cout << "  wrote " << f << "\n";
      std::cout << fmt::format(
          "next: commit it on {0} (runs read gates from there), then run the samples:\n"
          "  git add densefeed.yaml gates harness experiments .densefeed/.gitignore && git commit -m 'densefeed: sample gate'\n"
          "  densefeed run experiments/scan-merge-float16.yaml   # red: the error grows with the shard count\n"
          "  densefeed run experiments/scan-merge-float32.yaml   # green, then a benchmark against float16\n",
          r.trusted_ref);
      return 0;
    }
    if (gate_lock->parsed()) {
      const df::GateStore worktree = ctx.worktree();
      if (!ctx.trust_worktree) {
        // Only what a person committed on the trusted ref can be locked:
        // the runs read the gate store from there, not from this folder.
        const df::GateStore& trusted = ctx.store();
        const auto files = df::files_to_lock(worktree, lock_names);
        const auto differ = df::worktree_differences(ctx.project(), trusted, files);
        if (!differ.empty()) {
          throw df::InputError(
              worktree.path(worktree.lock_rel()).string(), {}, "",
              fmt::format("not locking: {} {} not committed on the trusted ref ({}) as {} in the project folder; commit "
                          "{} on {} first (git add {} && git commit), then run densefeed gate lock again",
                          fmt::join(differ, ", "), differ.size() == 1 ? "is" : "are", trusted.describe(),
                          differ.size() == 1 ? "it is" : "they are", differ.size() == 1 ? "it" : "them", trusted.ref,
                          fmt::join(differ, " ")));
        }
      }
      const auto changes = df::write_lock(worktree, lock_names);
      if (changes.empty()) std::cout << worktree.lock_rel() << ": unchanged\n";
      for (const auto& c : changes) std::cout << c << "\n";
      if (!changes.empty() && !ctx.trust_worktree) {
        std::cout << fmt::format("commit {} on {} so that runs use it\n", worktree.lock_rel(), ctx.project().trusted_ref);
      }
      return 0;
    }
    if (gate_list->parsed()) {
      const auto names = df::list_gates(ctx.store());
      if (json) std::cout << nlohmann::json(names).dump(2) << "\n";
      else for (const auto& n : names) std::cout << n << "\n";
      return 0;
    }
    if (calibrate_cmd->parsed()) {
      const df::GateStore& store = ctx.store();
      const auto lock = df::read_lock(store);
      auto problems = df::check_locked_file(store, lock, store.gate_rel(calibrate_gate));
      if (!problems.empty()) throw df::InputError(problems.front(), {}, "", "the gate does not match its lock; not calibrating");
      const auto gate = df::load_gate(store, calibrate_gate);
      problems = df::check_frozen_files(store, lock, gate);
      if (!problems.empty()) throw df::InputError(problems.front(), {}, "", "the gate does not match its lock; not calibrating");
      if (gate.bench.cases.empty()) throw df::InputError(gate.file.string(), {}, "bench", "the gate declares no bench cases");
      // --param NAME=VALUE, read as a one-line YAML manifest arm so that
      // types and enums are checked exactly as for an experiment.
      std::string yaml = "experiment: calibrate\nhypothesis: noise floor\npredicted_effect: same\ngate: " + calibrate_gate +
                         "\ncandidate: {revision: WORKTREE, params: {";
      for (std::size_t i = 0; i < calibrate_params.size(); ++i) {
        const auto eq = calibrate_params[i].find('=');
        if (eq == std::string::npos) throw df::InputError("command line", {}, "--param", "expected NAME=VALUE, got '" + calibrate_params[i] + "'");
        yaml += (i ? ", " : "") + calibrate_params[i].substr(0, eq) + ": " + calibrate_params[i].substr(eq + 1);
      }
      yaml += "}}\nbase: {revision: WORKTREE}\n";
      df::Manifest m;
      m.doc = df::parse_yaml(yaml, "--param");
      m.candidate = df::Arm{"WORKTREE", m.doc.value["candidate"]["params"]};
      const auto params = df::resolve_params(m, "candidate", m.candidate, gate);
      const auto started = std::chrono::system_clock::now().time_since_epoch().count();
      const auto ledger_path = ctx.ledger_path();
      const auto work = ctx.workspace().calibrations() / std::to_string(started);
      if (comparisons < 20) {
        std::cerr << fmt::format("densefeed: warning: {} comparison(s) give a rough noise floor (its 95th percentile needs "
                                 "about 20 or more); it is recorded and used all the same\n", comparisons);
      }
      const bool python_driver = gate.bench.driver && df::is_python_command(gate.bench.driver->command);
      const auto python = df::is_python_command(gate.candidate_command) || python_driver ? df::harness_python(ctx.project())
                                                                                         : std::filesystem::path();
      // The driver is the trusted ref's (trusted_arm.h), built from it where it must be.
      auto trusted = df::trusted_arm(gate, ctx.project(), store, python);
      if (const auto problem = df::build_trusted_arm(trusted, gate, ctx.project(), store, ctx.workspace(), true); !problem.empty()) {
        throw df::InfraError(problem);
      }
      const auto result = df::calibrate(gate, params, comparisons, work, static_cast<std::uint64_t>(started),
                                        df::worktree_context(ctx.project(), store, python), trusted);
      if (result.verdict != df::Verdict::green) throw df::InfraError(result.reason);
      df::Ledger ledger(ledger_path);
      const auto env = df::collect_environment();
      nlohmann::ordered_json doc = {{"gate", gate.name}, {"host", env.host}, {"params", params}, {"comparisons", comparisons},
                                    {"cases", nlohmann::ordered_json::array()}};
      for (const auto& c : result.cases) {
        nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
        for (std::size_t k = 0; k < c.verdicts.size(); ++k) {
          verdicts.push_back({{"verdict", df::to_string(c.verdicts[k])}, {"speedup", c.speedups[k]}});
        }
        ledger.record_calibration({gate.name, df::sha256_file(gate.file), c.case_label, env.host, params, comparisons,
                                   c.noise_floor, c.false_verdict_rate, verdicts});
        doc["cases"].push_back({{"case", c.case_label}, {"noise_floor", c.noise_floor},
                                {"false_verdict_rate", c.false_verdict_rate}, {"comparisons", verdicts}});
        if (!json) {
          std::cout << fmt::format("{}: noise floor {:.2f}% (95th percentile of |speedup - 1| over {} A/A comparisons), "
                                   "false verdicts {:.0f}%\n",
                                   c.case_label, 100 * c.noise_floor, comparisons, 100 * c.false_verdict_rate);
        }
      }
      if (json) std::cout << doc.dump(2) << "\n";
      return 0;
    }
    if (gate_show->parsed()) {
      const df::GateStore& store = ctx.store();
      if (!std::filesystem::is_regular_file(store.path(store.gate_rel(show_gate)))) {
        const auto names = df::list_gates(store);
        throw df::InputError("command line", {}, "NAME",
                             fmt::format("no gate named '{}' in {} (available: {})", show_gate, store.describe(),
                                         names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
      }
      const auto gate = df::load_gate(store, show_gate);
      const auto lock = df::read_lock(store);
      auto problems = df::check_locked_file(store, lock, store.gate_rel(show_gate));
      const auto frozen = df::check_frozen_files(store, lock, gate);
      problems.insert(problems.end(), frozen.begin(), frozen.end());
      // Whether the gate could fail is learnt from its recorded runs: a
      // ledger that cannot be read leaves it unknown, and says why.
      std::optional<df::BlindSpots> blind;
      std::string blind_note;
      try {
        const auto ledger_path = ctx.ledger_path();
        if (std::filesystem::is_regular_file(ledger_path)) {
          df::Ledger ledger(ledger_path, df::Ledger::Mode::read_only);
          blind = ledger.blind_spots(show_gate);
        } else {
          blind_note = "no ledger yet";
        }
      } catch (const std::exception& e) {
        blind_note = std::string("the ledger could not be read: ") + e.what();
      }
      const auto doc = df::gate_json(gate, problems, blind ? &*blind : nullptr, blind_note);
      std::cout << (json ? doc.dump(2) + "\n" : df::render_gate_text(doc));
      return 0;
    }
    if (compare->parsed()) {
      std::optional<std::string> declared;
      if (!cand_dtype.empty()) declared = cand_dtype;
      const auto open = [&](const std::string& path, const std::string& tensor, std::optional<std::string> dtype) {
        try {
          return df::TensorFile::open(path, tensor, dtype);
        } catch (const df::TensorFileError& e) {
          throw df::InputError(path, {}, "", e.message());
        } catch (const std::runtime_error& e) {
          throw df::InputError(path, {}, "", e.what());
        }
      };
      for (const auto& [flag, bound] : {std::pair{"--rel-l2", compare_tol.rel_l2}, std::pair{"--max-abs", compare_tol.max_abs},
                                        std::pair{"--atol", compare_tol.atol}, std::pair{"--rtol", compare_tol.rtol},
                                        std::pair{"--ulp", compare_tol.max_ulp}}) {
        if (bound && !(std::isfinite(*bound) && *bound >= 0)) {
          throw df::InputError("command line", {}, flag, fmt::format("expected a finite bound >= 0, got {}", *bound));
        }
      }
      const auto cand = open(compare_cand, cand_tensor, declared);
      // The reference's defects are errors, as in the gate (compare_output in
      // gate_runner.cpp): a reference file that is there but cannot be read as
      // a tensor is verdict error (exit 3) naming it; one that is not there at
      // all is a mistake on the command line (bad input, exit 2).
      std::optional<df::TensorFile> ref;
      std::string ref_problem;
      {
        std::error_code ec;
        if (!std::filesystem::exists(compare_ref, ec)) {
          throw df::InputError(compare_ref, {}, "", "no such file (the reference to compare against)");
        }
        try {
          ref = df::TensorFile::open(compare_ref, ref_tensor, std::nullopt);
        } catch (const df::TensorFileError& e) {
          ref_problem = e.message();
        } catch (const std::runtime_error& e) {
          ref_problem = e.what();
        }
      }
      df::CompareOptions options;
      options.candidate_dtype = cand.dtype();
      if (axis_opt->count() > 0) {
        if (partition_axis >= cand.shape().size()) {
          throw df::InputError("command line", {}, "--partition-axis",
                               fmt::format("the tensors have {} dimension(s), so the axis must be below that; got {}",
                                           cand.shape().size(), partition_axis));
        }
        options.partition = df::Partition{partition_axis, partition_parts};
      }
      df::Tolerance tol = compare_tol;
      if (tol.empty()) tol = df::default_tolerance(cand.dtype());
      if (tol.max_ulp && !df::ulp_dtype(cand.dtype())) {
        throw df::InputError(compare_cand, {}, "", "--ulp applies to float32, float16 and bfloat16 candidates, not " + cand.dtype());
      }
      df::Comparison result;
      if (ref) {
        try {
          result = df::compare_tensor_files(*ref, cand, tol, options);
        } catch (const df::TensorFileError& e) {
          // Read while comparing: the reference's is an error, the candidate's bad input.
          if (e.path() != ref->path()) throw df::InputError(compare_cand, {}, "", e.message());
          ref_problem = e.message();
        }
      }
      if (!ref_problem.empty()) {
        result = df::Comparison{};
        result.verdict = df::Verdict::error;
        result.reason = fmt::format("the reference {} cannot be read as a tensor: {}", compare_ref, ref_problem);
      }
      if (json) {
        auto doc = df::comparison_json(result);
        doc["reference"] = compare_ref;
        doc["candidate"] = compare_cand;
        doc["tolerance"] = df::tolerance_to_json(tol);
        std::cout << doc.dump(2) << "\n";
      } else {
        std::cout << compare_cand << " against " << compare_ref << ": " << df::render_comparison_text(result);
      }
      return df::exit_code_of(result.verdict);
    }
    if (gate_verify->parsed()) {
      const df::GateStore store = ctx.worktree();
      const auto lock = df::read_lock(store);
      nlohmann::ordered_json report = nlohmann::ordered_json::object();
      bool ok = true;
      const auto names = df::list_gates(store);
      if (names.empty()) {
        throw df::InputError(store.gate_dir().string(), {}, "",
                             fmt::format("no gates (*.yaml) in the project's gates folder ({} in {})", store.gates,
                                         ctx.project().config_file().string()));
      }
      for (const auto& name : names) {
        auto problems = df::check_locked_file(store, lock, store.gate_rel(name));
        if (problems.empty()) {
          auto frozen = df::check_frozen_files(store, lock, df::load_gate(store, name));
          problems.insert(problems.end(), frozen.begin(), frozen.end());
        }
        ok = ok && problems.empty();
        report[name] = problems;
        if (!json) {
          std::cout << fmt::format("{}: {}\n", name, problems.empty() ? "ok" : "NOT OK");
          for (const auto& p : problems) std::cout << "  " << p << "\n";
        }
      }
      // The trusted ref's export that runs use, when there is one: verified
      // against its commit (ctx.store() replaces an altered one and records
      // what differed), and an alteration is a failure here too.
      if (!ctx.trust_worktree && ctx.project().in_git() && std::filesystem::is_directory(ctx.workspace().exports())) {
        const df::GateStore& trusted = ctx.store();
        std::vector<std::string> tampered;
        for (const auto& e : trusted.tampered) {
          tampered.push_back(fmt::format("{}: {}: {} (commit {})", df::to_string(e.kind), e.path, e.detail, e.commit.substr(0, 12)));
          if (!json) std::cout << fmt::format("export of {}: TAMPERED ({}): {}: {}\n", trusted.describe(), df::to_string(e.kind), e.path, e.detail);
        }
        if (!trusted.tampered.empty()) {
          ok = false;
          report["trusted ref export"] = tampered;  // no gate has a space in its name
        }
      }
      if (json) std::cout << report.dump(2) << "\n";
      return ok ? 0 : 1;
    }
  } catch (const df::InputError& e) {
    print_error(json, "bad-input", e.what(),
                {{"file", e.file()}, {"line", e.mark().line}, {"column", e.mark().column}, {"field", e.field()}, {"message", e.message()}});
    return 2;
  } catch (const df::InfraError& e) {
    print_error(json, "infrastructure-error", e.what());
    return 3;
  } catch (const std::exception& e) {
    print_error(json, "infrastructure-error", std::string("internal error: ") + e.what());
    return 3;
  }
  return 2;
}
