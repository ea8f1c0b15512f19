// densefeed CLI. Exit codes (STYLE.md): 0 green, 1 red, 2 bad input,
// 3 infrastructure error (or an `error` verdict: the reference failed).
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "error.h"
#include "experiment_runner.h"
#include "gate_lock.h"
#include "ledger.h"
#include "report.h"

namespace df = densefeed;

namespace {

int exit_code_for(df::Verdict v) {
  switch (v) {
    case df::Verdict::green: return 0;
    case df::Verdict::red: return 1;
    case df::Verdict::error: return 3;
  }
  return 3;
}

std::filesystem::path default_root() {
  if (const char* env = std::getenv("DENSEFEED_ROOT"); env && *env) return env;
  return DENSEFEED_SOURCE_DIR;
}

void print_error(bool json, const char* kind, const std::string& message, const nlohmann::ordered_json& details = {}) {
  if (json) {
    nlohmann::ordered_json doc = {{"verdict", kind}, {"error", message}};
    if (!details.is_null()) doc["details"] = details;
    std::cout << doc.dump(2) << "\n";
  }
  std::cerr << "densefeed: " << message << "\n";
}

void print_ledger_list(const nlohmann::ordered_json& rows) {
  std::cout << fmt::format("{:>4}  {:<32} {:<20} {:<8} {:<21} {}\n", "id", "experiment", "gate", "verdict", "submitted", "speedups / reason");
  for (const auto& r : rows) {
    std::string tail;
    for (const auto& s : r["speedups"]) {
      tail += fmt::format("{}{}: {:.3f}x ({:.3f}..{:.3f})", tail.empty() ? "" : "; ", s["case"].get<std::string>(),
                          s["speedup"].get<double>(), s["speedup_min"].get<double>(), s["speedup_max"].get<double>());
    }
    if (tail.empty()) tail = r["reason"].get<std::string>();
    std::cout << fmt::format("{:>4}  {:<32} {:<20} {:<8} {:<21} {}\n", r["id"].get<std::int64_t>(), r["name"].get<std::string>(),
                             r["gate"].get<std::string>(), r["verdict"].get<std::string>(), r["submitted_at"].get<std::string>(), tail);
  }
}

void print_ledger_show(const nlohmann::ordered_json& e) {
  std::cout << fmt::format("experiment {} '{}' by '{}', submitted {}\n", e["id"].get<std::int64_t>(), e["name"].get<std::string>(),
                           e["author"].get<std::string>(), e["submitted_at"].get<std::string>());
  std::cout << fmt::format("  manifest {} (sha256 {})\n  hypothesis: {}\n  predicted:  {}\n", e["manifest_path"].get<std::string>(),
                           e["manifest_sha256"].get<std::string>(), e["hypothesis"].get<std::string>(),
                           e["predicted_effect"].get<std::string>());
  std::cout << fmt::format("  candidate {} {}   base {} {}\n", e["candidate_revision"].get<std::string>(), e["candidate_params"].dump(),
                           e["base_revision"].get<std::string>(), e["base_params"].dump());
  const auto& g = e["gate_run"];
  if (g.is_null()) {
    std::cout << "  gate: no gate run recorded\n";
  } else {
    std::cout << fmt::format("  gate {} (sha256 {}), profile {}, seed {}: {}{}\n", g["gate"].get<std::string>(),
                             g["gate_sha256"].get<std::string>().substr(0, 16), g["profile"].get<std::string>(),
                             g["seed"].get<std::string>(), g["verdict"].get<std::string>(),
                             g["reason"].get<std::string>().empty() ? "" : " — " + g["reason"].get<std::string>());
    for (const auto& p : g["lock_problems"]) std::cout << "    lock: " << p.get<std::string>() << "\n";
    for (const auto& c : g["cases"]) {
      std::string metrics;
      for (const auto& m : c["metrics"]) {
        metrics += fmt::format(" {}.{}={} (bound {:.1e})", m["output"].get<std::string>(), m["metric"].get<std::string>(),
                               m["value"].is_null() ? "nan" : fmt::format("{:.2e}", m["value"].get<double>()), m["bound"].get<double>());
      }
      std::cout << fmt::format("    {:<6} {:<50}{}{}\n", c["verdict"].get<std::string>(), c["case_label"].get<std::string>(), metrics,
                               metrics.empty() ? " " + c["reason"].get<std::string>() : "");
    }
  }
  for (const auto& b : e["bench_cases"]) {
    std::cout << fmt::format("  bench {}: speedup {:.3f}x ({:.3f}..{:.3f} over {} rounds); base {:.3f} {}, candidate {:.3f} {}\n",
                             b["case_label"].get<std::string>(), b["speedup"].get<double>(), b["speedup_min"].get<double>(),
                             b["speedup_max"].get<double>(), b["rounds"].get<std::int64_t>(), b["base_median"].get<double>(),
                             b["unit"].get<std::string>(), b["candidate_median"].get<double>(), b["unit"].get<std::string>());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"densefeed: dense-feedback experiments for agent-driven kernel optimisation"};
  app.require_subcommand(1);
  std::string root_text = default_root().string();
  app.add_option("--root", root_text, "densefeed checkout holding gates/, schemas/ (env DENSEFEED_ROOT)")->capture_default_str();
  std::string ledger_text;
  bool json = false;

  auto* run = app.add_subcommand("run", "validate a manifest, run its gate, then (green only) its benchmark; record all in the ledger");
  std::string manifest;
  df::RunOptions options;
  std::uint64_t seed = 0;
  bool no_bench = false;
  run->add_option("MANIFEST", manifest, "experiment manifest (YAML)")->required();
  run->add_option("--ledger", ledger_text, "SQLite ledger (default ROOT/.densefeed/ledger.db)");
  run->add_option("--profile", options.profile, "gate profile")->check(CLI::IsMember({"quick", "full"}))->capture_default_str();
  auto* seed_opt = run->add_option("--seed", seed, "input seed (default: drawn fresh and recorded)");
  run->add_option("--jobs", options.jobs, "harness processes at once")->check(CLI::Range(1, 256))->capture_default_str();
  run->add_flag("--no-bench", no_bench, "stop after the gate");
  run->add_flag("--json", json, "print one JSON document");

  auto* ledger_cmd = app.add_subcommand("ledger", "read the ledger");
  ledger_cmd->require_subcommand(1);
  auto* ledger_list = ledger_cmd->add_subcommand("list", "every recorded experiment with its verdict");
  auto* ledger_show = ledger_cmd->add_subcommand("show", "everything recorded for one experiment");
  std::int64_t show_id = 0;
  ledger_show->add_option("ID", show_id, "experiment id")->required();
  for (auto* sub : {ledger_list, ledger_show}) {
    sub->add_option("--ledger", ledger_text, "SQLite ledger (default ROOT/.densefeed/ledger.db)");
    sub->add_flag("--json", json, "print JSON");
  }

  auto* gate_cmd = app.add_subcommand("gate", "frozen correctness gates");
  gate_cmd->require_subcommand(1);
  auto* gate_lock = gate_cmd->add_subcommand("lock", "re-lock gates (a person runs this): write gates/gates.lock and print what changed");
  std::vector<std::string> lock_names;
  gate_lock->add_option("NAME", lock_names, "gates to re-lock (default: all)");
  auto* gate_verify = gate_cmd->add_subcommand("verify", "check every gate against gates/gates.lock (for CI)");
  auto* gate_list = gate_cmd->add_subcommand("list", "list gates");
  for (auto* sub : {gate_verify, gate_list}) sub->add_flag("--json", json, "print JSON");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  const std::filesystem::path root = std::filesystem::absolute(root_text);
  const std::filesystem::path ledger_path = ledger_text.empty() ? root / ".densefeed" / "ledger.db" : std::filesystem::path(ledger_text);
  try {
    if (run->parsed()) {
      options.root = root;
      options.ledger_path = std::filesystem::absolute(ledger_path);
      if (seed_opt->count() > 0) options.seed = seed;
      options.bench = !no_bench;
      const df::ExperimentOutcome outcome = df::run_experiment(manifest, options);
      if (json) std::cout << df::report_json(outcome, options.ledger_path.string()).dump(2) << "\n";
      else std::cout << df::render_text_report(outcome);
      return exit_code_for(outcome.verdict);
    }
    if (ledger_list->parsed() || ledger_show->parsed()) {
      if (!std::filesystem::exists(ledger_path)) {
        throw df::InputError(ledger_path.string(), {}, "", "no ledger here yet (it is created by the first 'densefeed run')");
      }
      df::Ledger ledger(ledger_path);
      const auto doc = ledger_list->parsed() ? ledger.list() : ledger.show(show_id);
      if (json) std::cout << doc.dump(2) << "\n";
      else if (ledger_list->parsed()) print_ledger_list(doc);
      else print_ledger_show(doc);
      return 0;
    }
    if (gate_lock->parsed()) {
      const auto changes = df::write_lock(root, lock_names);
      if (changes.empty()) std::cout << "gates/gates.lock: unchanged\n";
      for (const auto& c : changes) std::cout << c << "\n";
      return 0;
    }
    if (gate_list->parsed()) {
      const auto names = df::list_gates(root);
      if (json) std::cout << nlohmann::json(names).dump(2) << "\n";
      else for (const auto& n : names) std::cout << n << "\n";
      return 0;
    }
    if (gate_verify->parsed()) {
      const auto lock = df::read_lock(root);
      nlohmann::ordered_json report = nlohmann::ordered_json::object();
      bool ok = true;
      for (const auto& name : df::list_gates(root)) {
        auto problems = df::check_locked_file(root, lock, "gates/" + name + ".yaml");
        if (problems.empty()) {
          auto frozen = df::check_frozen_files(root, lock, df::load_gate(root, name));
          problems.insert(problems.end(), frozen.begin(), frozen.end());
        }
        ok = ok && problems.empty();
        report[name] = problems;
        if (!json) {
          std::cout << fmt::format("{}: {}\n", name, problems.empty() ? "ok" : "NOT OK");
          for (const auto& p : problems) std::cout << "  " << p << "\n";
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
