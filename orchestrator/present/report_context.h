// What every report (HTML page, markdown summary) states about where a
// result came from and what it ran on, in one line each: the gate run's
// provenance (provenance.h provenance_json as the ledger recorded it) and the
// benchmark's environment (environments row: host, CPU, GPUs, CUDA,
// compiler, SM clocks). Shared by report_html.cpp and report_markdown.cpp so
// that both say the same as the text report (report.cpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "experiment_record.h"

namespace densefeed {

struct ProvenanceLine {
  bool known = false;  // the gate run recorded a provenance
  bool clean = true;   // false: the text is a WARNING
  std::string text;    // "P at commit C; gates from S" or "WARNING (P; gates from S): notes"; untrusted parts as recorded
};

// From GateRunRow::provenance ({project, commit, clean, gate_store, notes});
// null, not an object or without "clean": known false, text "not recorded".
ProvenanceLine provenance_line(const nlohmann::ordered_json& provenance);

// "host H; CPU M; GPU NAME (driver D) x2; CUDA V; compiler C (FLAGS); SM clocks base 1980 MHz, candidate 1980 MHz";
// fields the row left empty are left out; no environment: "not recorded (no benchmark ran)".
std::string environment_line(const ExperimentRecord& record);

}  // namespace densefeed
