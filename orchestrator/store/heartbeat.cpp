#include "heartbeat.h"

#include <chrono>

#include "ledger.h"

namespace densefeed {

Heartbeat::Heartbeat(const std::filesystem::path& ledger, std::int64_t heartbeat_id, double interval_s)
    : id_(heartbeat_id), interval_s_(interval_s) {
  if (id_ == 0) return;
  ledger_ = std::make_unique<Ledger>(ledger);
  ledger_->set_lock_wait(interval_s_);
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::run() {
  const auto interval = std::chrono::duration<double>(interval_s_);
  bool at_once = false;  // the last beat found the lock held
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      if (!at_once) wake_.wait_for(lock, interval, [this] { return stop_; });
      if (stop_) return;
    }
    at_once = false;
    try {
      if (!ledger_->beat(id_)) {
        lost_ = true;
        return;
      }
    } catch (const LedgerBusy&) {
      at_once = true;
    } catch (const std::exception&) {
      // A failing write (a full disk, a damaged file) is the owner's to
      // report when it records its results; the beat tries again later.
    }
  }
}

}  // namespace densefeed
