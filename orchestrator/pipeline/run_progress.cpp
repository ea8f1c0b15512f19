#include "run_progress.h"

#include <fstream>

#include <fmt/format.h>

#include "utc_time.h"

namespace densefeed {

nlohmann::ordered_json run_progress_json(const RunProgress& p) {
  nlohmann::ordered_json j = {{"at", utc_now()}, {"stage", p.stage}, {"phase", p.phase}, {"experiment_id", p.experiment_id},
                              {"done", p.done}, {"total", p.total}};
  if (p.references > 0) {
    j["references_done"] = p.references_done;
    j["references"] = p.references;
  }
  if (!p.case_label.empty()) j["case"] = p.case_label;
  if (!p.arm.empty()) j["arm"] = p.arm;
  if (!p.verdict.empty()) j["verdict"] = p.verdict;
  j["elapsed_s"] = p.elapsed_s;
  j["eta_s"] = p.eta_s >= 0 ? nlohmann::ordered_json(p.eta_s) : nlohmann::ordered_json(nullptr);
  return j;
}

std::string run_progress_line(const RunProgress& p) {
  if (p.phase == "start") return fmt::format("{}: {} case(s): starting", p.stage, p.total);
  if (p.phase == "end") return fmt::format("{}: {} after {:.1f} s", p.stage, p.verdict.empty() ? "ended" : p.verdict, p.elapsed_s);
  std::string refs = p.references > 0 && p.references_done < p.references
                         ? fmt::format(", reference {} of {}", p.references_done, p.references)
                         : "";
  std::string eta = p.eta_s >= 0 ? fmt::format(", about {:.0f} s left", p.eta_s) : "";
  return fmt::format("{}: case {} of {}{}{}, {:.1f} s{}", p.stage, p.done, p.total, refs,
                     p.case_label.empty() ? "" : " (last: " + p.arm + " " + p.case_label + ")", p.elapsed_s, eta);
}

void append_run_progress(const std::filesystem::path& file, const RunProgress& p) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);  // a stage's first event comes before its first process's folder
  std::ofstream out(file, std::ios::app);
  if (out) out << run_progress_json(p).dump() << "\n";
}

}  // namespace densefeed
