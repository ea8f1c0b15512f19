// What a gate says about the computation it tests (issue 30), so that hints
// and `densefeed narrow` reason on the structure before numeric coincidence:
// which case key counts the parts the work is cut into (or that the
// candidate reports how its library cut it), which candidate params set the
// precision or choose the algorithm, and which outputs are states handed
// between parts.
//
// Gate file:
//   structure:
//     partition: {key: shards}          # or {parts: reported}
//     trend: {max_exponent: 1.0}        # or false; default on along partition.key
//     precision: [precision]            # candidate params
//     algorithm: [method]
//     states: [final_state]             # outputs
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "param_spec.h"

namespace densefeed {

class YamlDocument;

// How the work of a case is partitioned. `key`: a numeric case key whose
// value is the number of parts (1 = the unpartitioned computation). Else
// `reported`: the candidate's harness writes DENSEFEED_OUT/meta.json
// {"parts": N} with the parts its library chose (fla's planner); that is
// the candidate's word, used for advice (hints, narrow, printed trend lines)
// and never to judge a case.
struct PartitionSpec {
  std::string key;
  bool reported = false;
};

struct GateStructure {
  std::optional<PartitionSpec> partition;
  // The error-growth trend bound along partition.key that every output gets
  // unless the gate turns it off (trend: false) or bounds that key itself:
  // rel_l2 ~ parts^e with e <= max_exponent, fitted over the partitioned
  // cases only (parts > 1). Default 1.0: a sound split-and-merge adds at most
  // one rounding of the state per part, so its error grows at most linearly
  // with the parts (a random walk grows as parts^0.5).
  bool default_trend = true;
  double trend_max_exponent = 1.0;
  std::vector<std::string> precision;  // candidate params that set the precision of its products
  std::vector<std::string> algorithm;  // candidate params that choose its algorithm
  std::vector<std::string> states;     // outputs that are states handed between parts
  bool declared = false;               // the gate has a structure section
};

// Reads `structure` of a gate document (already schema-checked). Checks that
// partition.key is a case key, precision/algorithm name declared params and
// states name outputs: `case_keys`, `params`, `outputs` are the gate's.
// Throws InputError (YamlDocument::fail: file, line, field) otherwise.
GateStructure read_gate_structure(const YamlDocument& doc, const nlohmann::ordered_json& gate,
                                  const std::vector<std::string>& case_keys, const std::vector<std::string>& params,
                                  const std::vector<std::string>& outputs);

// A candidate param value that computes in exact (non-reduced) precision,
// where the candidate ran with another: setting it separates a precision
// defect from an algorithmic one. Over the gate's `precision` params: the
// first enum value that names an exact precision (ieee, fp32, float32,
// fp64, float64, double, highest, exact), else the param's default; a gate
// that declares none: any param whose enum has such a value. nullopt: none.
struct PrecisionSwap {
  std::string param;
  nlohmann::ordered_json value;
};
std::optional<PrecisionSwap> exact_precision_swap(const GateStructure& s, const std::vector<ParamSpec>& params,
                                                  const nlohmann::ordered_json& candidate_params);

// Parts of a case: the partition key's value (rounded; >= 1), else the
// `reported` count; nullopt when the gate declares no partition or neither
// is known.
std::optional<std::int64_t> case_parts(const GateStructure& s, const nlohmann::ordered_json& case_values,
                                       std::optional<std::int64_t> reported);

// The candidate's DENSEFEED_OUT/meta.json "parts": a whole number 1..2^20;
// nullopt when the file is absent, over 4 KiB, not a JSON object, or the
// value is not such a number (meta.json is advice; it never fails a case).
std::optional<std::int64_t> read_reported_parts(const std::filesystem::path& out_dir);

}  // namespace densefeed
