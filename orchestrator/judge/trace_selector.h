// Which slices a question is about ("the NCCL kernels on GPU lanes", "the
// transfer thread's submissions"), and the class of every slice for "where
// the time went".
#pragma once

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace_timeline.h"

namespace densefeed {

// The class of a slice, from its lane kind, name and category:
// - communication: the name matches (any case) nccl|rccl|gloo|all_?reduce|
//   all_?gather|reduce_?scatter|all_?to_?all|send_?recv (a superset of
//   Holistic Trace Analysis's ^nccl.*Kernel, so that RCCL and custom
//   collectives count too);
// - transfer: on a GPU lane, category gpu_memcpy/gpu_memset/memcpy/memset or a
//   name starting with Memcpy, Memset or dma (HTA's memory kernels); on a CPU
//   lane, a name containing memcpy, memset, transfer or copy (any case);
// - compute: any other slice on a GPU lane (HTA's computation kernels);
// - other: any other slice (host work, runtime calls, annotations).
SliceClass classify_slice(LaneKind kind, std::string_view name, std::string_view category);

// The class of every slice of a timeline, by index into Timeline::slices.
std::vector<SliceClass> classify_slices(const Timeline& timeline);

// A selection of slices: every given criterion must hold.
// Text form: terms separated by ';', each KEY=VALUE with KEY one of
//   name=REGEX      the slice's name contains a match (ECMAScript, case-sensitive)
//   cat=REGEX       its category contains a match (also category=)
//   lane=gpu|cpu|annotation|async, or lane=REGEX on the lane's label
//                   ("rank 0 GPU 0 stream 7", "rank 0 pid 1 tid 2 (transfer)")
//   class=compute|communication|transfer|other
//   rank=N
// A term without a known KEY= is a name regex: "nccl" = "name=nccl".
// JSON/YAML form: an object with the same keys, or the text form as a string.
struct SliceSelector {
  std::string text;  // canonical text, for reports
  std::optional<std::string> name;
  std::optional<std::string> category;
  std::optional<LaneKind> lane_kind;
  std::optional<std::string> lane_label;
  std::optional<SliceClass> slice_class;
  std::optional<std::int64_t> rank;

  // Throws InputError(where) naming the bad term (unknown class, bad regex,
  // empty selection).
  static SliceSelector parse(std::string_view text, const std::string& where);
  static SliceSelector from_json(const nlohmann::json& value, const std::string& where);
};

// Matches slices of one timeline against a selector; regexes run once per
// distinct name, category and lane, not once per slice.
class SliceMatcher {
 public:
  SliceMatcher(const Timeline& timeline, const std::vector<SliceClass>& classes, const SliceSelector& selector);
  // slice: index into timeline.slices.
  bool matches(std::size_t slice) const;
  bool lane_possible(std::uint32_t lane) const { return lane_ok_[lane]; }

 private:
  bool cached(std::vector<std::int8_t>& cache, const std::optional<std::regex>& re, std::uint32_t id) const;
  const Timeline& t_;
  const std::vector<SliceClass>& classes_;
  const SliceSelector& sel_;
  std::optional<std::regex> name_re_, cat_re_;
  std::vector<bool> lane_ok_;
  mutable std::vector<std::int8_t> name_cache_, cat_cache_;
};

}  // namespace densefeed
