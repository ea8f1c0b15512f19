// status --wait: an experiment's record, read again until it has ended.
#pragma once

#include <chrono>
#include <cstdint>

#include "experiment_record.h"

namespace densefeed {

class Ledger;

// The longest wait `status --wait --timeout` and MCP's get_status wait_s
// accept, in seconds (a day): a finite bound, so that no caller waits for ever
// by accident.
constexpr double kMaxStatusWaitS = 86400;

struct StatusRead {
  ExperimentRecord record;  // the latest committed one
  bool timed_out = false;   // the wait ran past its timeout before the experiment ended
};

// Reads experiment `id`'s record from `ledger` (one connection for the whole
// wait: opening runs an integrity check of the file, which a 200 ms poll must
// not repeat; each read sees the latest committed state, WAL). With `wait`,
// reads every 200 ms until it has ended (finished, interrupted, cancelled or
// rejected), or until `timeout_s` seconds have passed since `start` (0:
// never; the verb's start, before the ledger was opened). Throws InputError
// for an unknown id.
StatusRead read_status(const Ledger& ledger, std::int64_t id, bool wait, double timeout_s, std::chrono::steady_clock::time_point start);

}  // namespace densefeed
