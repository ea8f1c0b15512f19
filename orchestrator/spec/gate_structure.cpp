#include "gate_structure.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

#include <fmt/format.h>

#include "yaml_document.h"

namespace densefeed {
namespace {

using J = nlohmann::ordered_json;

std::vector<std::string> names_at(const YamlDocument& doc, const J& s, const char* field, const std::vector<std::string>& known,
                                  const char* what) {
  std::vector<std::string> out;
  if (!s.contains(field)) return out;
  for (std::size_t i = 0; i < s[field].size(); ++i) {
    const std::string n = s[field][i].get<std::string>();
    if (std::find(known.begin(), known.end(), n) == known.end()) {
      doc.fail(fmt::format("/structure/{}/{}", field, i),
               fmt::format("'{}' is not one of the gate's {} ({})", n, what, fmt::join(known, ", ")));
    }
    out.push_back(n);
  }
  return out;
}

}  // namespace

GateStructure read_gate_structure(const YamlDocument& doc, const J& gate, const std::vector<std::string>& case_keys,
                                  const std::vector<std::string>& params, const std::vector<std::string>& outputs) {
  GateStructure s;
  if (!gate.contains("structure")) return s;
  const J& v = gate["structure"];
  s.declared = true;
  if (v.contains("partition")) {
    PartitionSpec p;
    if (v["partition"].contains("key")) {
      p.key = v["partition"]["key"].get<std::string>();
      if (std::find(case_keys.begin(), case_keys.end(), p.key) == case_keys.end()) {
        doc.fail("/structure/partition/key",
                 fmt::format("'{}' is not a key of the gate's cases ({})", p.key, fmt::join(case_keys, ", ")));
      }
    } else {
      p.reported = true;
    }
    s.partition = p;
  }
  if (v.contains("trend")) {
    if (v["trend"].is_boolean()) s.default_trend = v["trend"].get<bool>();
    else s.trend_max_exponent = v["trend"].value("max_exponent", s.trend_max_exponent);
  }
  s.precision = names_at(doc, v, "precision", params, "params");
  s.algorithm = names_at(doc, v, "algorithm", params, "params");
  s.states = names_at(doc, v, "states", outputs, "outputs");
  return s;
}

std::optional<PrecisionSwap> exact_precision_swap(const GateStructure& s, const std::vector<ParamSpec>& params,
                                                  const J& candidate_params) {
  static const std::set<std::string> exact = {"ieee", "fp32", "float32", "fp64", "float64", "double", "highest", "exact"};
  const auto as_run = [&](const ParamSpec& p) {
    if (candidate_params.is_object() && candidate_params.contains(p.name)) return candidate_params[p.name];
    return p.default_value;
  };
  for (const auto& p : params) {
    const bool declared = std::find(s.precision.begin(), s.precision.end(), p.name) != s.precision.end();
    if (!s.precision.empty() && !declared) continue;
    const J current = as_run(p);
    if (current.is_string() && exact.count(current.get<std::string>())) continue;  // already exact
    if (p.enum_values.is_array()) {
      for (const auto& v : p.enum_values) {
        if (v.is_string() && exact.count(v.get<std::string>()) && v != current) return PrecisionSwap{p.name, v};
      }
    }
    if (declared && !p.default_value.is_null() && p.default_value != current) return PrecisionSwap{p.name, p.default_value};
  }
  return std::nullopt;
}

std::optional<std::int64_t> case_parts(const GateStructure& s, const J& case_values, std::optional<std::int64_t> reported) {
  if (!s.partition) return std::nullopt;
  if (!s.partition->key.empty()) {
    if (!case_values.contains(s.partition->key) || !case_values[s.partition->key].is_number()) return std::nullopt;
    const double v = case_values[s.partition->key].get<double>();
    if (!std::isfinite(v)) return std::nullopt;
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::llround(v)));
  }
  return reported;
}

std::optional<std::int64_t> read_reported_parts(const std::filesystem::path& out_dir) {
  // The candidate wrote it: never followed through a link, never blocking
  // (a FIFO), at most 4 KiB read whatever the file says its size is.
  const auto path = out_dir / "meta.json";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[4097];
    ssize_t n = 0, got = 0;
    while (got < static_cast<ssize_t>(sizeof buf) && (n = ::read(fd, buf + got, sizeof buf - static_cast<std::size_t>(got))) > 0) got += n;
    if (got > 0) text.assign(buf, static_cast<std::size_t>(got));
  }
  ::close(fd);
  if (text.size() > 4096) return std::nullopt;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("parts") || !j["parts"].is_number_integer()) return std::nullopt;
  const auto parts = j["parts"].get<std::int64_t>();
  if (parts < 1 || parts > (std::int64_t{1} << 20)) return std::nullopt;
  return parts;
}

}  // namespace densefeed
