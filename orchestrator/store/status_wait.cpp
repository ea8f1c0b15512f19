#include "status_wait.h"

#include <chrono>
#include <thread>

#include "ledger.h"

namespace densefeed {

StatusRead read_status(const Ledger& ledger, std::int64_t id, bool wait, double timeout_s, std::chrono::steady_clock::time_point start) {
  StatusRead s;
  while (true) {
    s.record = ledger.record(id);
    if (!wait || has_ended(s.record.summary.state)) break;
    if (timeout_s > 0 && std::chrono::steady_clock::now() - start > std::chrono::duration<double>(timeout_s)) {
      s.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return s;
}

}  // namespace densefeed
