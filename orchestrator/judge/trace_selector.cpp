#include "trace_selector.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {
namespace {

const std::regex& communication_re() {
  static const std::regex re("nccl|rccl|gloo|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|send_?recv",
                             std::regex::ECMAScript | std::regex::icase | std::regex::optimize);
  return re;
}

const std::regex& host_transfer_re() {
  static const std::regex re("memcpy|memset|transfer|copy", std::regex::ECMAScript | std::regex::icase | std::regex::optimize);
  return re;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\n\r");
  if (b == std::string_view::npos) return "";
  const auto e = s.find_last_not_of(" \t\n\r");
  return std::string(s.substr(b, e - b + 1));
}

std::optional<LaneKind> lane_kind_named(std::string_view v) {
  if (v == "gpu") return LaneKind::gpu;
  if (v == "cpu") return LaneKind::cpu;
  if (v == "annotation") return LaneKind::annotation;
  if (v == "async") return LaneKind::async;
  return std::nullopt;
}

std::regex compile(const std::string& text, const std::string& where, const std::string& key) {
  try {
    return std::regex(text, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& e) {
    throw InputError(where, {}, key, fmt::format("'{}' is not a valid regular expression (ECMAScript): {}", text, e.what()));
  }
}

void set_term(SliceSelector& s, const std::string& key, const std::string& value, const std::string& where) {
  if (value.empty()) throw InputError(where, {}, key, "empty value");
  if (key == "name") {
    compile(value, where, key);
    s.name = value;
  } else if (key == "cat" || key == "category") {
    compile(value, where, "cat");
    s.category = value;
  } else if (key == "lane") {
    if (auto k = lane_kind_named(value)) {
      s.lane_kind = k;
    } else {
      compile(value, where, key);
      s.lane_label = value;
    }
  } else if (key == "class") {
    if (value == "compute") s.slice_class = SliceClass::compute;
    else if (value == "communication") s.slice_class = SliceClass::communication;
    else if (value == "transfer") s.slice_class = SliceClass::transfer;
    else if (value == "other") s.slice_class = SliceClass::other;
    else throw InputError(where, {}, key, fmt::format("expected compute, communication, transfer or other, got '{}'", value));
  } else if (key == "rank") {
    try {
      std::size_t used = 0;
      s.rank = std::stoll(value, &used);
      if (used != value.size()) throw std::invalid_argument(value);
    } catch (const std::exception&) {
      throw InputError(where, {}, key, fmt::format("expected an integer rank, got '{}'", value));
    }
  } else {
    throw InputError(where, {}, key, "unknown selector key: expected name, cat, lane, class or rank");
  }
}

void canonicalize(SliceSelector& s, const std::string& where) {
  std::vector<std::string> parts;
  if (s.name) parts.push_back("name=" + *s.name);
  if (s.category) parts.push_back("cat=" + *s.category);
  if (s.lane_kind) parts.push_back(fmt::format("lane={}", to_string(*s.lane_kind)));
  if (s.lane_label) parts.push_back("lane=" + *s.lane_label);
  if (s.slice_class) parts.push_back(fmt::format("class={}", to_string(*s.slice_class)));
  if (s.rank) parts.push_back(fmt::format("rank={}", *s.rank));
  if (parts.empty()) throw InputError(where, {}, "", "an empty selection: give name=, cat=, lane=, class= or rank=");
  s.text = fmt::format("{}", fmt::join(parts, ";"));
}

}  // namespace

SliceClass classify_slice(LaneKind kind, std::string_view name, std::string_view category) {
  if (std::regex_search(name.begin(), name.end(), communication_re())) return SliceClass::communication;
  if (kind == LaneKind::gpu) {
    const std::string cat = lower(category);
    if (cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" || cat == "memset" || name.starts_with("Memcpy") ||
        name.starts_with("Memset") || name.starts_with("dma")) {
      return SliceClass::transfer;
    }
    return SliceClass::compute;
  }
  if (kind == LaneKind::cpu && std::regex_search(name.begin(), name.end(), host_transfer_re())) return SliceClass::transfer;
  return SliceClass::other;
}

std::vector<SliceClass> classify_slices(const Timeline& t) {
  std::vector<SliceClass> out(t.slices.size());
  std::unordered_map<std::uint64_t, SliceClass> cache;
  for (std::size_t i = 0; i < t.slices.size(); ++i) {
    const Slice& s = t.slices[i];
    const LaneKind kind = t.lanes[s.lane].kind;
    const std::uint64_t key = (static_cast<std::uint64_t>(kind) << 62) | (static_cast<std::uint64_t>(s.category) << 31) | s.name;
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, classify_slice(kind, t.strings[s.name], t.strings[s.category])).first;
    out[i] = it->second;
  }
  return out;
}

SliceSelector SliceSelector::parse(std::string_view text, const std::string& where) {
  SliceSelector s;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t semi = text.find(';', pos);
    const std::string term = trim(text.substr(pos, semi == std::string_view::npos ? std::string_view::npos : semi - pos));
    pos = semi == std::string_view::npos ? text.size() + 1 : semi + 1;
    if (term.empty()) continue;
    const auto eq = term.find('=');
    std::string key = eq == std::string::npos ? "" : trim(term.substr(0, eq));
    static const std::vector<std::string> keys = {"name", "cat", "category", "lane", "class", "rank"};
    if (eq == std::string::npos || std::find(keys.begin(), keys.end(), key) == keys.end()) {
      set_term(s, "name", term, where);
    } else {
      set_term(s, key, trim(term.substr(eq + 1)), where);
    }
  }
  canonicalize(s, where);
  return s;
}

SliceSelector SliceSelector::from_json(const nlohmann::json& value, const std::string& where) {
  if (value.is_string()) return parse(value.get<std::string>(), where);
  if (!value.is_object()) throw InputError(where, {}, "", "expected a selector: a string or a mapping with name, cat, lane, class, rank");
  SliceSelector s;
  for (const auto& [key, v] : value.items()) {
    std::string text;
    if (v.is_string()) text = v.get<std::string>();
    else if (v.is_number_integer()) text = std::to_string(v.get<std::int64_t>());
    else throw InputError(where, {}, key, "expected a string");
    set_term(s, key, text, where);
  }
  canonicalize(s, where);
  return s;
}

SliceMatcher::SliceMatcher(const Timeline& timeline, const std::vector<SliceClass>& classes, const SliceSelector& selector)
    : t_(timeline), classes_(classes), sel_(selector) {
  if (sel_.name) name_re_ = std::regex(*sel_.name, std::regex::ECMAScript | std::regex::optimize);
  if (sel_.category) cat_re_ = std::regex(*sel_.category, std::regex::ECMAScript | std::regex::optimize);
  std::optional<std::regex> lane_re;
  if (sel_.lane_label) lane_re = std::regex(*sel_.lane_label, std::regex::ECMAScript | std::regex::optimize);
  lane_ok_.resize(t_.lanes.size());
  for (std::size_t l = 0; l < t_.lanes.size(); ++l) {
    const Lane& lane = t_.lanes[l];
    bool ok = true;
    if (sel_.lane_kind) ok = ok && lane.kind == *sel_.lane_kind;
    if (sel_.rank) ok = ok && lane.rank == *sel_.rank;
    if (lane_re) ok = ok && std::regex_search(lane.label(), *lane_re);
    lane_ok_[l] = ok;
  }
  name_cache_.assign(t_.strings.size(), -1);
  cat_cache_.assign(t_.strings.size(), -1);
}

bool SliceMatcher::cached(std::vector<std::int8_t>& cache, const std::optional<std::regex>& re, std::uint32_t id) const {
  if (!re) return true;
  if (cache[id] < 0) {
    const std::string& s = t_.strings[id];
    cache[id] = std::regex_search(s, *re) ? 1 : 0;
  }
  return cache[id] == 1;
}

bool SliceMatcher::matches(std::size_t i) const {
  const Slice& s = t_.slices[i];
  if (!lane_ok_[s.lane]) return false;
  if (sel_.slice_class && classes_[i] != *sel_.slice_class) return false;
  return cached(name_cache_, name_re_, s.name) && cached(cat_cache_, cat_re_, s.category);
}

}  // namespace densefeed
