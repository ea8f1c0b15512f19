// Now, in UTC, as the ledger and every record write it (ISO 8601).
#pragma once

#include <string>

namespace densefeed {

// Current time as ISO 8601 UTC ("2026-11-29T19:05:57Z").
std::string utc_now();
// The same with milliseconds ("2026-11-29T19:05:57.123Z"), as heartbeats keep it.
std::string utc_now_ms();

}  // namespace densefeed
