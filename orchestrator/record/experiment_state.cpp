#include "experiment_state.h"

// ExperimentState's first values are ExperimentEvent's, in the same order.
static_assert(static_cast<int>(densefeed::ExperimentState::rejected) == static_cast<int>(densefeed::ExperimentEvent::rejected));

namespace densefeed {

const char* to_string(ExperimentEvent e) {
  switch (e) {
    case ExperimentEvent::queued: return "queued";
    case ExperimentEvent::started: return "started";
    case ExperimentEvent::requeued: return "requeued";
    case ExperimentEvent::interrupted: return "interrupted";
    case ExperimentEvent::finished: return "finished";
    case ExperimentEvent::cancel_requested: return "cancel_requested";
    case ExperimentEvent::cancelled: return "cancelled";
    case ExperimentEvent::rejected: return "rejected";
  }
  return "?";
}

ExperimentState state_after(ExperimentEvent e) { return static_cast<ExperimentState>(static_cast<int>(e)); }

const char* to_string(ExperimentState s) {
  if (s == ExperimentState::recorded) return "recorded";
  return to_string(static_cast<ExperimentEvent>(static_cast<int>(s)));
}

std::optional<ExperimentState> experiment_state_from(const std::string& text) {
  for (int i = 0; i <= static_cast<int>(ExperimentState::recorded); ++i) {
    if (text == to_string(static_cast<ExperimentState>(i))) return static_cast<ExperimentState>(i);
  }
  return std::nullopt;
}

bool is_running(ExperimentState s) {
  return s == ExperimentState::queued || s == ExperimentState::requeued || s == ExperimentState::started ||
         s == ExperimentState::cancel_requested;
}

}  // namespace densefeed
