#include "scheduler_accounting.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace densefeed {
namespace {

std::vector<std::string> split_bars(const std::string& line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto bar = line.find('|', start);
    out.push_back(line.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

bool all_digits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; }

}  // namespace

double parse_slurm_elapsed(std::string_view text) {
  std::string s(text);
  double days = 0;
  if (const auto dash = s.find('-'); dash != std::string::npos) {
    if (!all_digits(s.substr(0, dash))) return -1;
    days = std::atof(s.substr(0, dash).c_str());
    s = s.substr(dash + 1);
  }
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
  if (parts.size() < 2 || parts.size() > 3) return -1;
  double total = 0;
  for (const auto& p : parts) {
    const auto dot = p.find('.');
    if (!all_digits(p.substr(0, dot)) || (dot != std::string::npos && !all_digits(p.substr(dot + 1)))) return -1;
    total = total * 60 + std::atof(p.c_str());
  }
  return days * 86400 + total;
}

std::optional<long long> parse_slurm_memory(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::string s(text);
  double scale = 1024;  // sacct's MaxRSS without a unit is KiB
  switch (s.back()) {
    case 'K': scale = 1024.0, s.pop_back(); break;
    case 'M': scale = 1024.0 * 1024, s.pop_back(); break;
    case 'G': scale = 1024.0 * 1024 * 1024, s.pop_back(); break;
    case 'T': scale = 1024.0 * 1024 * 1024 * 1024, s.pop_back(); break;
    default: break;
  }
  const auto dot = s.find('.');
  if (!all_digits(s.substr(0, dot)) || (dot != std::string::npos && !all_digits(s.substr(dot + 1)))) return std::nullopt;
  return static_cast<long long>(std::llround(std::atof(s.c_str()) * scale));
}

std::vector<SchedulerAccounting> parse_sacct(std::string_view text, const std::string& source) {
  std::vector<SchedulerAccounting> jobs;
  std::stringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    const auto f = split_bars(line);
    if (f.size() < 6 || f[0].empty()) continue;
    const auto dot = f[0].find('.');
    const std::string job = f[0].substr(0, dot);
    const auto rss = parse_slurm_memory(f[4]);
    if (dot != std::string::npos) {
      // A step: its MaxRSS counts for its job.
      for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
        if (it->job != job) continue;
        if (rss && (!it->max_rss_bytes || *rss > *it->max_rss_bytes)) it->max_rss_bytes = rss;
        break;
      }
      continue;
    }
    SchedulerAccounting a;
    a.source = source;
    a.job = job;
    // "CANCELLED by 1000": the state is its first word.
    a.state = f[1].substr(0, f[1].find(' '));
    const auto colon = f[2].find(':');
    a.exit_code = std::atoi(f[2].substr(0, colon).c_str());
    a.signal = colon == std::string::npos ? 0 : std::atoi(f[2].substr(colon + 1).c_str());
    a.elapsed_s = std::max(0.0, parse_slurm_elapsed(f[3]));
    a.max_rss_bytes = rss;
    a.node = f[5];
    jobs.push_back(std::move(a));
  }
  return jobs;
}

nlohmann::ordered_json accounting_to_json(const SchedulerAccounting& a) {
  nlohmann::ordered_json j = {{"source", a.source}, {"job", a.job},       {"state", a.state},         {"exit_code", a.exit_code},
                              {"signal", a.signal}, {"elapsed_s", a.elapsed_s}, {"max_rss_bytes", nullptr}, {"node", a.node}};
  if (a.max_rss_bytes) j["max_rss_bytes"] = *a.max_rss_bytes;
  return j;
}

SchedulerAccounting accounting_from_json(const nlohmann::json& j) {
  SchedulerAccounting a;
  a.source = j.at("source").get<std::string>();
  a.job = j.at("job").get<std::string>();
  a.state = j.at("state").get<std::string>();
  a.exit_code = j.at("exit_code").get<int>();
  a.signal = j.at("signal").get<int>();
  a.elapsed_s = j.at("elapsed_s").get<double>();
  if (!j.at("max_rss_bytes").is_null()) a.max_rss_bytes = j.at("max_rss_bytes").get<long long>();
  a.node = j.at("node").get<std::string>();
  return a;
}

}  // namespace densefeed
