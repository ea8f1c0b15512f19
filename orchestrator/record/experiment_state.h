// An experiment's events (experiment_events.event) and its state, which is
// its latest event (DESIGN.md, the queue): queued -> started -> finished, with
// requeued, interrupted, cancel_requested, cancelled and rejected on the way.
// A value from where the ledger reads it to where it is printed; the text is
// the ledger's column value and the JSON's.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace densefeed {

enum class ExperimentEvent { queued, started, requeued, interrupted, finished, cancel_requested, cancelled, rejected };
const char* to_string(ExperimentEvent e);

// The state: the latest event's name, or `recorded` for an experiment of a
// version-1 ledger, recorded whole with no event.
enum class ExperimentState { queued, started, requeued, interrupted, finished, cancel_requested, cancelled, rejected, recorded };
const char* to_string(ExperimentState s);
// The inverse of to_string; nullopt for any other text.
std::optional<ExperimentState> experiment_state_from(const std::string& text);
// The state an event leaves the experiment in (the same name).
ExperimentState state_after(ExperimentEvent e);

// In JSON a state and an event are their names, never their numbers.
NLOHMANN_JSON_SERIALIZE_ENUM(ExperimentEvent, {{ExperimentEvent::queued, "queued"},
                                               {ExperimentEvent::started, "started"},
                                               {ExperimentEvent::requeued, "requeued"},
                                               {ExperimentEvent::interrupted, "interrupted"},
                                               {ExperimentEvent::finished, "finished"},
                                               {ExperimentEvent::cancel_requested, "cancel_requested"},
                                               {ExperimentEvent::cancelled, "cancelled"},
                                               {ExperimentEvent::rejected, "rejected"}})
NLOHMANN_JSON_SERIALIZE_ENUM(ExperimentState, {{ExperimentState::queued, "queued"},
                                               {ExperimentState::started, "started"},
                                               {ExperimentState::requeued, "requeued"},
                                               {ExperimentState::interrupted, "interrupted"},
                                               {ExperimentState::finished, "finished"},
                                               {ExperimentState::cancel_requested, "cancel_requested"},
                                               {ExperimentState::cancelled, "cancelled"},
                                               {ExperimentState::rejected, "rejected"},
                                               {ExperimentState::recorded, "recorded"}})

// Waiting for or holding a process: queued, requeued, started, cancel_requested.
bool is_running(ExperimentState s);
// Ended: finished, interrupted, cancelled, rejected, recorded (no event follows).
inline bool has_ended(ExperimentState s) { return !is_running(s); }

}  // namespace densefeed
