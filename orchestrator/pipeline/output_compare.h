// One declared output of one gate case judged: the reference's and the
// candidate's files opened (no links followed), their dtype and shape checked
// against the gate, then compared under the output's tolerance
// (tensor_compare.h). The gate stage and the gathered rank outputs
// (rank_outputs.h) both judge through it.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "gate_result.h"
#include "gate_spec.h"

namespace densefeed {

// Opens NAME.npy (or tensor NAME of one .safetensors file) in each folder and
// compares the candidate's with the reference's under the output's dtype,
// shape rule and tolerance: red for the candidate's defects, error for the
// reference's.
OutputResult compare_output(const OutputSpec& out, const nlohmann::ordered_json& case_values,
                            const std::filesystem::path& ref_dir, const std::filesystem::path& cand_dir);

}  // namespace densefeed
