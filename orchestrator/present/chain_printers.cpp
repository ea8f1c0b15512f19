#include "chain_printers.h"

#include <fmt/format.h>

#include "printable.h"

namespace densefeed {

void print_chain_check(std::ostream& out, const std::filesystem::path& ledger, const ChainCheck& c, bool json) {
  if (json) {
    nlohmann::ordered_json doc = {{"ok", c.ok}, {"links", c.links}};
    if (!c.ok) {
      doc["first_broken"] = {{"seq", c.first_broken_seq}, {"table", c.table}, {"row_id", c.row_id}, {"experiment_id", c.experiment_id},
                             {"problem", c.problem}};
    }
    out << doc.dump(2) << "\n";
  } else if (c.ok) {
    out << fmt::format("{}: hash chain intact ({} links)\n", ledger.string(), c.links);
  } else {
    out << fmt::format("{}: hash chain BROKEN at link {}: {} row {}{}: {}\n", ledger.string(), c.first_broken_seq, c.table, c.row_id,
                       c.experiment_id ? fmt::format(" (experiment {})", c.experiment_id) : "", c.problem);
  }
}

void print_chain_head(std::ostream& out, const ChainHead& h, const std::string& key_fingerprint, bool json) {
  if (json) {
    out << nlohmann::ordered_json{{"head", h.text()}, {"seq", h.seq}, {"hash", h.hash}, {"key_fingerprint", key_fingerprint}}.dump(2) << "\n";
  } else {
    out << h.text() << "\n";
  }
}

void print_backup(std::ostream& out, const std::string& file, const std::filesystem::path& ledger, const ChainHead& h, bool json) {
  if (json) out << nlohmann::ordered_json{{"backup", file}, {"head", h.text()}}.dump(2) << "\n";
  else out << fmt::format("{}: backup of {} at head {}\n", file, ledger.string(), h.text());
}

void print_recovered(std::ostream& out, const std::filesystem::path& ledger, const std::filesystem::path& runs,
                     const std::vector<RecoveredRun>& recovered, bool json) {
  if (json) {
    nlohmann::ordered_json doc = {{"ledger", ledger.string()}, {"recovered", nlohmann::ordered_json::array()}};
    for (const auto& r : recovered) {
      nlohmann::ordered_json one = {{"experiment_id", r.experiment_id}, {"file", r.file}, {"outcome", r.outcome}, {"verdict", r.verdict},
                                    {"cases", r.cases}};
      if (r.refusal != PendingRefusal::none) {
        one["refusal"] = to_string(r.refusal);
        one["reason"] = r.reason;
      }
      doc["recovered"].push_back(one);
    }
    out << doc.dump(2) << "\n";
    return;
  }
  if (recovered.empty()) out << fmt::format("nothing to recover under {}\n", runs.string());
  for (const auto& r : recovered) {
    if (r.refusal != PendingRefusal::none) {
      out << fmt::format("experiment {}: REFUSED ({}): {}; the file is kept — {}\n", r.experiment_id, to_string(r.refusal), r.reason, r.file);
      continue;
    }
    out << fmt::format("experiment {}: {} ({} case(s)), verdict {} — from {}\n", r.experiment_id, r.outcome, r.cases, r.verdict, one_line(r.file));
  }
}

void print_tamper_acknowledged(std::ostream& out, std::int64_t id, const std::string& by, const std::string& note, bool json) {
  if (json) out << nlohmann::ordered_json{{"tamper_event", id}, {"acknowledged_by", by}, {"note", note}}.dump(2) << "\n";
  else out << fmt::format("tamper event {}: acknowledged by {}\n", id, by);
}

}  // namespace densefeed
