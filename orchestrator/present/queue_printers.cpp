#include "queue_printers.h"

#include "progress_display.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report.h"
#include "printable.h"

namespace densefeed {

void print_queued_text(std::ostream& out, const QueuedExperiment& q) {
  out << fmt::format("experiment {} queued ({}); follow it with: densefeed status {} --wait\n", q.id, one_line(q.name), q.id);
}

void print_submission_json(std::ostream& out, const Submission& s) {
  nlohmann::ordered_json queued = nlohmann::ordered_json::array();
  for (const auto& q : s.queued) queued.push_back({{"experiment_id", q.id}, {"experiment", q.name}, {"manifest", q.manifest}, {"state", "queued"}});
  auto doc = queued.size() == 1 ? queued[0] : nlohmann::ordered_json{{"queued", queued}};
  doc["ledger"] = s.ledger.string();
  out << doc.dump(2) << "\n";
}

void print_status(std::ostream& out, const ExperimentRecord& e, const nlohmann::ordered_json& document, bool json) {
  if (json) {
    out << document.dump(2) << "\n";
    return;
  }
  const ExperimentSummary& r = e.summary;
  out << fmt::format("experiment {} ({}): {}; verdict {}{}{}\n", r.id, one_line(r.name), to_string(r.state), one_line(r.verdict),
                     r.verdict_stage.empty() ? "" : " (" + one_line(r.verdict_stage) + ")", r.reason.empty() ? "" : " — " + one_line(r.reason));
  for (const auto& b : e.bench_cases) {
    out << fmt::format("  bench {}: {} {:.3f}x [{:.3f}, {:.3f}]\n", one_line(b.label), one_line(b.verdict), b.speedup, b.lo, b.hi);
  }
  if (!e.events.empty() && !e.events.back().detail.empty()) out << "  " << one_line(e.events.back().detail) << "\n";
  // While it runs: how far it has come.
  if (is_running(r.state) && document.contains("progress") && !document["progress"].empty()) {
    out << "  progress: " << one_line(progress_event_text(document["progress"].back())) << "\n";
  }
  out << render_next_steps_text(document["next"]);
}

void print_cancellation(std::ostream& out, const Cancellation& c, bool json) {
  if (json) {
    out << nlohmann::ordered_json{{"experiment_id", c.id}, {"state", to_string(c.state)}, {"slurm_jobs_cancelled", c.slurm_jobs_cancelled}}.dump(2)
        << "\n";
  } else {
    out << fmt::format("experiment {}: {}{}\n", c.id, to_string(c.state),
                       c.slurm_jobs_cancelled.empty() ? "" : fmt::format("; scancelled its Slurm job(s) {}", fmt::join(c.slurm_jobs_cancelled, ", ")));
  }
}

}  // namespace densefeed
