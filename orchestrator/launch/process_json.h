// One ProcessResult as JSON, every field: what a launch's result file
// (launch_json.h) and a rank group's report (rank_group.h) carry across a
// process or a machine.
#pragma once

#include <nlohmann/json.hpp>

#include "process_runner.h"

namespace densefeed {

nlohmann::json process_result_to_json(const ProcessResult& p);
// Throws nlohmann::json::exception when a field is missing or of the wrong type.
ProcessResult process_result_from_json(const nlohmann::json& j);

}  // namespace densefeed
