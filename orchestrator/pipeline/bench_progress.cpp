#include "bench_progress.h"

#include <cmath>
#include <deque>
#include <fstream>

#include <fmt/format.h>

#include "utc_time.h"

namespace densefeed {
namespace {

nlohmann::ordered_json number_or_null(double v) { return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); }

}  // namespace

nlohmann::ordered_json bench_progress_json(const BenchProgress& p) {
  nlohmann::ordered_json j = {{"at", utc_now()}, {"stage", "bench"}, {"case", p.case_label}, {"case_index", p.case_index},
                              {"cases", p.cases}, {"phase", p.phase}};
  if (p.phase == "warmup") {
    j["arm"] = p.arm;
    j["warmup_s"] = p.warmup_s;
  } else {
    j["rounds"] = p.rounds;
    j["verdict"] = to_string(p.decision.verdict);
    j["speedup"] = number_or_null(p.decision.speedup);
    const bool ci = std::isfinite(p.decision.speedup_ci.lo) && std::isfinite(p.decision.speedup_ci.hi);
    j["ci"] = ci ? nlohmann::ordered_json::array({p.decision.speedup_ci.lo, p.decision.speedup_ci.hi}) : nlohmann::ordered_json(nullptr);
    j["elapsed_s"] = p.elapsed_s;
    j["budget_s"] = p.budget_s;
    j["eta_s"] = p.eta_s >= 0 ? nlohmann::ordered_json(p.eta_s) : nlohmann::ordered_json(nullptr);
  }
  return j;
}

std::string bench_progress_line(const BenchProgress& p) {
  const std::string where = fmt::format("bench {}/{} {}", p.case_index + 1, p.cases, p.case_label);
  if (p.phase == "warmup") return fmt::format("{}: the {} arm warmed up in {:.1f} s (not counted in the budget)", where, p.arm, p.warmup_s);
  const Decision& d = p.decision;
  std::string interval = std::isfinite(d.speedup_ci.lo) ? fmt::format(" [{:.3f}, {:.3f}]", d.speedup_ci.lo, d.speedup_ci.hi) : "";
  std::string so_far = d.verdict == BenchVerdict::inconclusive ? "undecided" : std::string(to_string(d.verdict));
  std::string eta = p.eta_s >= 0 ? fmt::format(", about {:.0f} s to a verdict at this noise", p.eta_s) : "";
  return fmt::format("{}: round {}, speedup {:.3f}x{}, {}; {:.0f} s of {:g} s{}", where, p.rounds, d.speedup, interval, so_far,
                     p.elapsed_s, p.budget_s, eta);
}

void append_bench_progress(const std::filesystem::path& file, const BenchProgress& p) {
  std::ofstream out(file, std::ios::app);
  if (out) out << bench_progress_json(p).dump() << "\n";
}

nlohmann::ordered_json read_bench_progress(const std::filesystem::path& file, std::size_t n) {
  std::ifstream in(file);
  std::deque<nlohmann::ordered_json> last;
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::ordered_json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    last.push_back(std::move(j));
    if (last.size() > n) last.pop_front();
  }
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (auto& j : last) a.push_back(std::move(j));
  return a;
}

}  // namespace densefeed
