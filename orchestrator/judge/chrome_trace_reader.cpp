#include "chrome_trace_reader.h"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "error.h"
#include "trace_time.h"

namespace densefeed {
namespace {

constexpr std::size_t initial_buffer = 4u << 20;

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Up to n bytes into dst; 0 at the end. Throws InputError on a read error.
  virtual std::size_t read(char* dst, std::size_t n) = 0;
};

class PlainSource : public ByteSource {
 public:
  PlainSource(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}
  ~PlainSource() override { std::fclose(f_); }
  std::size_t read(char* dst, std::size_t n) override {
    const std::size_t got = std::fread(dst, 1, n, f_);
    if (got == 0 && std::ferror(f_)) throw InputError(path_, {}, "", fmt::format("cannot read: {}", std::strerror(errno)));
    return got;
  }

 private:
  std::FILE* f_;
  std::string path_;
};

class GzipSource : public ByteSource {
 public:
  GzipSource(gzFile g, std::string path) : g_(g), path_(std::move(path)) { gzbuffer(g_, 1u << 18); }
  ~GzipSource() override { gzclose(g_); }
  std::size_t read(char* dst, std::size_t n) override {
    const int got = gzread(g_, dst, static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30)));
    if (got < 0) {
      int code = 0;
      const char* msg = gzerror(g_, &code);
      throw InputError(path_, {}, "", fmt::format("gzip stream is corrupt: {}", msg ? msg : "unknown error"));
    }
    // A stream cut short reads as a clean end; zlib reports it through gzerror.
    if (got == 0) {
      int code = 0;
      const char* msg = gzerror(g_, &code);
      if (code != Z_OK && code != Z_STREAM_END) {
        throw InputError(path_, {}, "", fmt::format("gzip stream is corrupt or truncated: {}", msg ? msg : "unknown error"));
      }
    }
    return static_cast<std::size_t>(got);
  }

 private:
  gzFile g_;
  std::string path_;
};

struct Str {
  std::string_view raw;  // between the quotes (or the bare token), escapes undecoded
  bool escaped = false;
  bool quoted = false;
};

// The fields of one event the analyses use; views into the read buffer, valid
// while the event is handled.
struct RawEvent {
  Str ph, name, cat, ts, dur, pid, tid, id, id2, scope;
  Str arg_name, arg_labels;
  bool has_ts = false, has_dur = false, has_pid = false, has_tid = false;
  bool has_stream = false, has_device = false, has_correlation = false;
  std::int64_t stream = 0, device = 0, correlation = -1;
  std::uint32_t keys = 0;
  std::uint32_t control_chars = 0;
  std::uint32_t extra_commas = 0;
};

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
inline bool is_delim(char c) { return c == ',' || c == '}' || c == ']' || c == ':' || is_ws(c); }

// After the opening quote; returns the closing quote, or nullptr when the
// buffer ends first.
inline const char* scan_string(const char* p, const char* end, bool& escaped, std::uint32_t& control) {
  while (p < end) {
    const auto c = static_cast<unsigned char>(*p);
    if (c == '"') return p;
    if (c == '\\') {
      escaped = true;
      p += 2;
      continue;
    }
    if (c < 0x20) ++control;
    ++p;
  }
  return nullptr;
}

bool parse_int(std::string_view s, std::int64_t& out) {
  if (s.empty()) return false;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc()) return false;
  // "7.0" and the like: the integer part is the id.
  return ptr == s.data() + s.size() || *ptr == '.';
}

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int hex4(std::string_view s, std::size_t i) {
  if (i + 4 > s.size()) return -1;
  int v = 0;
  for (std::size_t k = i; k < i + 4; ++k) {
    const char c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else return -1;
  }
  return v;
}

// The text of a string; an unknown or broken escape is kept as written.
std::string_view decode(const Str& s, std::string& scratch) {
  if (!s.escaped) return s.raw;
  scratch.clear();
  const std::string_view r = s.raw;
  for (std::size_t i = 0; i < r.size(); ++i) {
    if (r[i] != '\\' || i + 1 >= r.size()) {
      scratch.push_back(r[i]);
      continue;
    }
    const char e = r[++i];
    switch (e) {
      case '"': scratch.push_back('"'); break;
      case '\\': scratch.push_back('\\'); break;
      case '/': scratch.push_back('/'); break;
      case 'b': scratch.push_back('\b'); break;
      case 'f': scratch.push_back('\f'); break;
      case 'n': scratch.push_back('\n'); break;
      case 'r': scratch.push_back('\r'); break;
      case 't': scratch.push_back('\t'); break;
      case 'u': {
        int cp = hex4(r, i + 1);
        if (cp < 0) {
          scratch += "\\u";
          break;
        }
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 2 < r.size() && r[i + 1] == '\\' && r[i + 2] == 'u') {
          const int lo = hex4(r, i + 3);
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;  // a lone surrogate is no character: U+FFFD, as JSON parsers do
        append_utf8(scratch, static_cast<unsigned>(cp));
        break;
      }
      default:
        scratch.push_back('\\');
        scratch.push_back(e);
    }
  }
  return scratch;
}

// A value quoted in an error message: at most 40 bytes, control and
// non-ASCII bytes as \xNN, so that the message is printable and valid UTF-8.
std::string printable(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < 40; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
    else out.push_back(static_cast<char>(c));
  }
  if (s.size() > 40) out += "...";
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

LaneKind lane_kind_for(std::string_view category, bool has_stream) {
  const std::string cat = lower(category);
  if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" || cat == "memset") return LaneKind::gpu;
  if (cat.find("annotation") != std::string::npos) return LaneKind::annotation;
  if (has_stream) {
    const bool host = cat.starts_with("cuda_") || cat.find("cpu") != std::string::npos ||
                      cat.find("python") != std::string::npos || cat.find("runtime") != std::string::npos ||
                      cat.find("driver") != std::string::npos || cat.find("user") != std::string::npos;
    if (!host) return LaneKind::gpu;
  }
  return LaneKind::cpu;
}

std::optional<std::int64_t> number_in(std::string_view s) {
  std::int64_t v = 0;
  if (parse_int(s, v)) return v;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (parse_int(s.substr(i, j - i), v)) return v;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

class ChromeReader {
 public:
  ChromeReader(const std::filesystem::path& path, TimelineBuilder& builder, std::optional<std::int64_t> rank)
      : path_(path.string()), b_(builder), rank_(rank) {}

  void run();

 private:
  // --- buffer ---
  bool fill();
  std::uint64_t offset_of(const char* p) const { return buf_offset_ + static_cast<std::uint64_t>(p - buf_.data()); }
  std::uint64_t offset_at(std::size_t i) const { return buf_offset_ + i; }
  bool skip_ws();  // refills; false at the end of the file
  [[noreturn]] void fail(std::uint64_t offset, const std::string& message, std::optional<std::uint64_t> event = std::nullopt) const;
  template <class F>
  const char* complete(F&& parse, const char* what);

  // --- in-buffer parsing; nullptr: the buffer ended first ---
  const char* read_string(const char* p, const char* end, Str& out, std::uint32_t& control);
  const char* read_scalar(const char* p, const char* end, Str& out, std::uint32_t& control);
  const char* skip_value(const char* p, const char* end, std::uint32_t& control);
  const char* parse_args(const char* p, const char* end, RawEvent& ev);
  const char* parse_event(const char* p, const char* end, RawEvent& ev);

  // --- structure ---
  void parse_top_object();
  void parse_event_array();
  void skip_value_streaming();
  void handle(const RawEvent& ev, std::uint64_t index, std::uint64_t offset);
  // handle()'s steps. An event with a timestamp, where it is in the file,
  // its category and its process.
  struct TimedEvent {
    std::uint64_t index = 0, offset = 0;
    std::uint32_t event32 = 0;
    std::int64_t ts = 0;
    bool zero = false;  // ts 0: unknown on a far clock (TimelineBuilder drops it)
    std::uint32_t cat = 0;
    std::string_view pid;
  };
  // Counts an event that makes no slice (instants, counters, flows, others;
  // metadata names processes and threads); false for the phases that do
  // (X, B, E and async b, e, S, F).
  bool count_unsliced(const RawEvent& ev, char ph);
  void name_from_metadata(const RawEvent& ev);
  std::uint32_t category_of(const RawEvent& ev);
  void add_async_event(const RawEvent& ev, char ph, const TimedEvent& at);
  void add_thread_event(const RawEvent& ev, char ph, const TimedEvent& at);
  bool time_of(const Str& ts, std::uint64_t index, std::uint64_t offset, std::int64_t& out, bool& zero);

  std::string path_;
  TimelineBuilder& b_;
  std::optional<std::int64_t> rank_;
  int file_ = 0;
  std::unique_ptr<ByteSource> src_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  std::uint64_t buf_offset_ = 0;
  bool eof_ = false;
  std::uint64_t event_index_ = 0;
  std::optional<std::int64_t> distributed_rank_;
  std::string scratch_, scratch2_;
  // Category -> lane kind, [has_stream][category id]; -1 unknown.
  std::vector<std::int8_t> kind_cache_[2];
  std::string last_cat_;
  std::uint32_t last_cat_id_ = 0;
  bool have_last_cat_ = false;
  const char* cur_event_ = nullptr;
};

bool ChromeReader::fill() {
  if (eof_) return false;
  if (pos_ > 0) {
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    buf_offset_ += pos_;
    end_ -= pos_;
    pos_ = 0;
  }
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // one event larger than the buffer
  const std::size_t got = src_->read(buf_.data() + end_, buf_.size() - end_);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool ChromeReader::skip_ws() {
  for (;;) {
    while (pos_ < end_ && is_ws(buf_[pos_])) ++pos_;
    if (pos_ < end_) return true;
    if (!fill()) return false;
  }
}

void ChromeReader::fail(std::uint64_t offset, const std::string& message, std::optional<std::uint64_t> event) const {
  const std::string field = event ? fmt::format("event {}", *event) : std::string();
  throw InputError(path_, {}, field, fmt::format("at byte {}: {}", offset, message));
}

template <class F>
const char* ChromeReader::complete(F&& parse, const char* what) {
  for (;;) {
    const char* r = parse(buf_.data() + pos_, buf_.data() + end_);
    if (r) return r;
    if (!fill()) fail(offset_at(pos_), fmt::format("the file ends inside {}", what), event_index_);
  }
}

const char* ChromeReader::read_string(const char* p, const char* end, Str& out, std::uint32_t& control) {
  // p is at the opening quote.
  bool escaped = false;
  const char* q = scan_string(p + 1, end, escaped, control);
  if (!q) return nullptr;
  out.raw = std::string_view(p + 1, static_cast<std::size_t>(q - p - 1));
  out.escaped = escaped;
  out.quoted = true;
  return q + 1;
}

const char* ChromeReader::read_scalar(const char* p, const char* end, Str& out, std::uint32_t& control) {
  if (*p == '"') return read_string(p, end, out, control);
  if (*p == '{' || *p == '[') {
    // Not a scalar: keep its raw text (e.g. id2 {"local": "0x1"}).
    const char* q = skip_value(p, end, control);
    if (!q) return nullptr;
    out.raw = std::string_view(p, static_cast<std::size_t>(q - p));
    out.escaped = false;
    out.quoted = false;
    return q;
  }
  const char* q = p;
  while (q < end && !is_delim(*q)) ++q;
  if (q >= end) return nullptr;
  if (q == p) fail(offset_of(p), "expected a value", event_index_);
  out.raw = std::string_view(p, static_cast<std::size_t>(q - p));
  out.escaped = false;
  out.quoted = false;
  return q;
}

const char* ChromeReader::skip_value(const char* p, const char* end, std::uint32_t& control) {
  if (p >= end) return nullptr;
  if (*p == '"') {
    bool escaped = false;
    const char* q = scan_string(p + 1, end, escaped, control);
    return q ? q + 1 : nullptr;
  }
  if (*p == '{' || *p == '[') {
    int depth = 0;
    while (p < end) {
      const char c = *p;
      if (c == '"') {
        bool escaped = false;
        const char* q = scan_string(p + 1, end, escaped, control);
        if (!q) return nullptr;
        p = q + 1;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') {
        if (--depth == 0) return p + 1;
      }
      ++p;
    }
    return nullptr;
  }
  const char* q = p;
  while (q < end && !is_delim(*q)) ++q;
  if (q >= end) return nullptr;
  if (q == p) fail(offset_of(p), "expected a value", event_index_);
  return q;
}

#define DF_NEED(ptr) \
  if ((ptr) >= end) return nullptr

const char* ChromeReader::parse_args(const char* p, const char* end, RawEvent& ev) {
  if (*p != '{') return skip_value(p, end, ev.control_chars);
  ++p;
  bool need_sep = false;
  for (;;) {
    while (p < end && is_ws(*p)) ++p;
    DF_NEED(p);
    if (need_sep) {
      if (*p == '}') return p + 1;
      if (*p != ',') fail(offset_of(p), "expected ',' or '}' in args", event_index_);
      need_sep = false;
      ++p;
      continue;
    }
    if (*p == '}') {
      ++ev.extra_commas;
      return p + 1;
    }
    if (*p == ',') {
      ++ev.extra_commas;
      ++p;
      continue;
    }
    if (*p != '"') fail(offset_of(p), "expected a key string in args", event_index_);
    Str key;
    p = read_string(p, end, key, ev.control_chars);
    if (!p) return nullptr;
    while (p < end && is_ws(*p)) ++p;
    DF_NEED(p);
    if (*p != ':') fail(offset_of(p), "expected ':' after a key in args", event_index_);
    ++p;
    while (p < end && is_ws(*p)) ++p;
    DF_NEED(p);
    const std::string_view k = key.raw;
    Str v;
    std::int64_t* target = nullptr;
    bool* flag = nullptr;
    if (k == "stream") target = &ev.stream, flag = &ev.has_stream;
    else if (k == "device") target = &ev.device, flag = &ev.has_device;
    else if (k == "correlation") target = &ev.correlation, flag = &ev.has_correlation;
    if (target) {
      p = read_scalar(p, end, v, ev.control_chars);
      if (!p) return nullptr;
      if (parse_int(v.raw, *target)) *flag = true;
    } else if (k == "name" && *p == '"') {
      p = read_string(p, end, ev.arg_name, ev.control_chars);
      if (!p) return nullptr;
    } else if (k == "labels" && *p == '"') {
      p = read_string(p, end, ev.arg_labels, ev.control_chars);
      if (!p) return nullptr;
    } else {
      p = skip_value(p, end, ev.control_chars);
      if (!p) return nullptr;
    }
    need_sep = true;
  }
}

const char* ChromeReader::parse_event(const char* p, const char* end, RawEvent& ev) {
  ev = RawEvent{};
  ++p;  // '{'
  bool need_sep = false;
  for (;;) {
    while (p < end && is_ws(*p)) ++p;
    DF_NEED(p);
    if (need_sep) {
      if (*p == '}') return p + 1;
      if (*p != ',') fail(offset_of(p), "expected ',' or '}' between the fields of an event", event_index_);
      need_sep = false;
      ++p;
      continue;
    }
    if (*p == '}') {
      if (ev.keys > 0) ++ev.extra_commas;
      return p + 1;
    }
    if (*p == ',') {
      ++ev.extra_commas;
      ++p;
      continue;
    }
    if (*p != '"') fail(offset_of(p), "expected a key string in an event", event_index_);
    Str key;
    p = read_string(p, end, key, ev.control_chars);
    if (!p) return nullptr;
    while (p < end && is_ws(*p)) ++p;
    DF_NEED(p);
    if (*p != ':') fail(offset_of(p), "expected ':' after a key", event_index_);
    ++p;
    while (p < end && is_ws(*p)) ++p;
    DF_NEED(p);
    ++ev.keys;
    const std::string_view k = key.raw;
    Str* target = nullptr;
    switch (k.size()) {
      case 1:
        if (k[0] == 's') target = &ev.scope;
        break;
      case 2:
        if (k == "ph") target = &ev.ph;
        else if (k == "ts") target = &ev.ts, ev.has_ts = true;
        else if (k == "id") target = &ev.id;
        break;
      case 3:
        if (k == "cat") target = &ev.cat;
        else if (k == "dur") target = &ev.dur, ev.has_dur = true;
        else if (k == "pid") target = &ev.pid, ev.has_pid = true;
        else if (k == "tid") target = &ev.tid, ev.has_tid = true;
        else if (k == "id2") target = &ev.id2;
        break;
      case 4:
        if (k == "name") target = &ev.name;
        else if (k == "args") {
          p = parse_args(p, end, ev);
          if (!p) return nullptr;
          need_sep = true;
          continue;
        }
        break;
      default: break;
    }
    if (target) p = read_scalar(p, end, *target, ev.control_chars);
    else p = skip_value(p, end, ev.control_chars);
    if (!p) return nullptr;
    need_sep = true;
  }
}

#undef DF_NEED

void ChromeReader::skip_value_streaming() {
  // A top-level member we do not use (deviceProperties, stackFrames, ...),
  // possibly large: skipped without holding it.
  if (!skip_ws()) return;
  const char c0 = buf_[pos_];
  if (c0 != '{' && c0 != '[' && c0 != '"') {
    std::uint32_t control = 0;
    pos_ = static_cast<std::size_t>(complete([&](const char* p, const char* e) { return skip_value(p, e, control); }, "a value") -
                                    buf_.data());
    return;
  }
  int depth = 0;
  bool in_string = false, escape = false;
  for (;;) {
    while (pos_ < end_) {
      const char c = buf_[pos_++];
      if (in_string) {
        if (escape) escape = false;
        else if (c == '\\') escape = true;
        else if (c == '"') {
          in_string = false;
          if (depth == 0) return;
        }
        continue;
      }
      if (c == '"') in_string = true;
      else if (c == '{' || c == '[') ++depth;
      else if (c == '}' || c == ']') {
        if (--depth == 0) return;
      }
    }
    if (!fill()) fail(offset_at(pos_), "the file ends inside a top-level value");
  }
}

bool ChromeReader::time_of(const Str& ts, std::uint64_t index, std::uint64_t offset, std::int64_t& out, bool& zero) {
  DecimalMicros t;
  if (!parse_decimal_micros(ts.raw, t)) fail(offset, fmt::format("'ts' is not a number of microseconds: '{}'", printable(ts.raw)), index);
  const std::int64_t base = b_.base_micros(t.micros);
  if (!micros_to_relative_ns(t, base, out)) {
    fail(offset, fmt::format("'ts' {} us is too far from the trace's first timestamp ({} us) for int64 ns", printable(ts.raw), base),
         index);
  }
  zero = t.micros == 0 && t.nanos == 0;
  return true;
}

// null is JSON for "no value": missing, not malformed.
bool is_null(const Str& v) { return !v.quoted && v.raw == "null"; }

bool ChromeReader::count_unsliced(const RawEvent& ev, char ph) {
  auto& counts = b_.counts();
  switch (ph) {
    case 'X':
    case 'B':
    case 'E':
    case 'b':
    case 'e':
    case 'S':
    case 'F': return false;
    case 'i':
    case 'I':
    case 'R':
    case 'n':
    case 'T': ++counts.instants; return true;
    case 'C': ++counts.counters; return true;
    case 's':
    case 't':
    case 'f': ++counts.flows; return true;
    case 'M': {
      ++counts.metadata;
      name_from_metadata(ev);
      return true;
    }
    default: ++counts.ignored; return true;
  }
}

void ChromeReader::name_from_metadata(const RawEvent& ev) {
  const std::string what(decode(ev.name, scratch_));
  const std::string_view pid = decode(ev.pid, scratch2_);
  std::string arg;
  if (what == "process_name" || what == "thread_name") arg = std::string(decode(ev.arg_name, scratch_));
  else if (what == "process_labels") arg = std::string(decode(ev.arg_labels, scratch_));
  else return;
  const std::string pid_text(pid);
  if (what == "process_name") b_.set_process_name(file_, pid_text, arg);
  else if (what == "process_labels") b_.set_process_labels(file_, pid_text, arg);
  else b_.set_thread_name(file_, pid_text, std::string(decode(ev.tid, scratch2_)), arg);
}

// Category: interned once per distinct text (events of a file share few).
std::uint32_t ChromeReader::category_of(const RawEvent& ev) {
  std::uint32_t cat = 0;
  if (!ev.cat.raw.empty()) {
    if (have_last_cat_ && !ev.cat.escaped && ev.cat.raw == last_cat_) {
      cat = last_cat_id_;
    } else {
      cat = b_.intern(decode(ev.cat, scratch_));
      if (!ev.cat.escaped) {
        last_cat_.assign(ev.cat.raw);
        last_cat_id_ = cat;
        have_last_cat_ = true;
      }
    }
  }
  return cat;
}

void ChromeReader::add_async_event(const RawEvent& ev, char ph, const TimedEvent& at) {
  const std::uint32_t cat = at.cat;
  const bool begin = ph == 'b' || ph == 'S';
  std::string key = fmt::format("{}\x1f{}\x1f{}\x1f{}", b_.text(cat), ev.id.raw, ev.id2.raw, ev.scope.raw);
  const std::uint32_t lane = b_.lane(file_, LaneKind::async, at.pid, fmt::format("async {}", b_.text(cat)));
  b_.add_async(begin, lane, key, at.ts, b_.intern(decode(ev.name, scratch_)), cat, at.event32, at.offset);
}

void ChromeReader::add_thread_event(const RawEvent& ev, char ph, const TimedEvent& at) {
  const std::uint32_t cat = at.cat;
  const std::string_view pid = at.pid;
  const std::int64_t ts = at.ts;
  const std::uint64_t index = at.index, offset = at.offset;
  const std::uint32_t event32 = at.event32;
  auto& cache = kind_cache_[ev.has_stream ? 1 : 0];
  if (cache.size() <= cat) cache.resize(cat + 1, -1);
  if (cache[cat] < 0) cache[cat] = static_cast<std::int8_t>(lane_kind_for(b_.text(cat), ev.has_stream));
  const auto kind = static_cast<LaneKind>(cache[cat]);
  std::string tid_text;
  const std::string_view tid = ev.tid.escaped ? std::string_view(tid_text = std::string(decode(ev.tid, scratch_))) : ev.tid.raw;
  const std::uint32_t lane = b_.lane(file_, kind, pid, tid);
  if (kind == LaneKind::gpu) {
    Lane& l = b_.lane_info(lane);
    if (!l.device) l.device = ev.has_device ? std::optional<std::int64_t>(ev.device) : number_in(pid);
    if (!l.stream) l.stream = ev.has_stream ? std::optional<std::int64_t>(ev.stream) : number_in(tid);
  }
  const std::uint32_t name = ev.name.raw.empty() ? 0 : b_.intern(decode(ev.name, scratch_));
  const std::int64_t correlation = ev.has_correlation ? ev.correlation : -1;

  if (ph == 'B' || ph == 'E') {
    // An 'E' often has no category, so it closes the innermost 'B' of its
    // thread whatever lane that 'B' went to.
    const std::uint32_t thread = kind == LaneKind::cpu ? lane : b_.lane(file_, LaneKind::cpu, pid, tid);
    if (ph == 'B') b_.add_begin(lane, thread, ts, name, cat, event32, offset, correlation, at.zero);
    else b_.add_end(thread, ts, name, event32, offset);
    return;
  }
  // X
  if (!ev.has_dur || is_null(ev.dur)) {
    b_.repair(file_, Repair::missing_duration, index, offset);
    return;
  }
  std::int64_t dur = 0;
  if (!parse_duration_ns(ev.dur.raw, dur)) fail(offset, fmt::format("'dur' is not a number of microseconds: '{}'", printable(ev.dur.raw)), index);
  if (dur < 0) {
    b_.repair(file_, Repair::negative_duration, index, offset);
    return;
  }
  std::int64_t end = 0;
  if (__builtin_add_overflow(ts, dur, &end)) fail(offset, "'ts' + 'dur' does not fit int64 ns", index);
  b_.add_slice({ts, end, correlation, name, cat, lane, event32}, at.zero);
}

void ChromeReader::handle(const RawEvent& ev, std::uint64_t index, std::uint64_t offset) {
  auto& counts = b_.counts();
  ++counts.events;
  if (ev.control_chars > 0) b_.repair(file_, Repair::control_characters, index, offset, ev.control_chars);
  if (ev.extra_commas > 0) b_.repair(file_, Repair::extra_comma, index, offset, ev.extra_commas);
  if (ev.keys == 0) {
    b_.repair(file_, Repair::empty_event, index, offset);
    return;
  }
  if (ev.ph.raw.empty()) {
    b_.repair(file_, Repair::no_phase, index, offset);
    return;
  }
  const char ph = ev.ph.raw[0];
  if (count_unsliced(ev, ph)) return;
  if (!ev.has_ts || is_null(ev.ts)) {
    b_.repair(file_, Repair::missing_timestamp, index, offset);
    return;
  }
  TimedEvent at;
  at.index = index;
  at.offset = offset;
  at.event32 = static_cast<std::uint32_t>(std::min<std::uint64_t>(index, UINT32_MAX));
  time_of(ev.ts, index, offset, at.ts, at.zero);
  at.cat = category_of(ev);
  at.pid = ev.pid.escaped ? std::string_view(scratch2_ = std::string(decode(ev.pid, scratch_))) : ev.pid.raw;
  if (ph == 'b' || ph == 'e' || ph == 'S' || ph == 'F') add_async_event(ev, ph, at);
  else add_thread_event(ev, ph, at);
}

void ChromeReader::parse_event_array() {
  // At '['.
  ++pos_;
  bool need_sep = false, after_comma = false;
  RawEvent ev;
  for (;;) {
    if (!skip_ws()) {
      b_.repair(file_, Repair::missing_closing_bracket, event_index_, offset_at(pos_));
      return;
    }
    const char c = buf_[pos_];
    if (c == ',') {
      if (!need_sep) b_.repair(file_, Repair::extra_comma, event_index_, offset_at(pos_));
      need_sep = false;
      after_comma = true;
      ++pos_;
      continue;
    }
    if (c == ']') {
      if (after_comma && !need_sep) b_.repair(file_, Repair::extra_comma, event_index_, offset_at(pos_));
      ++pos_;
      return;
    }
    if (c != '{') fail(offset_at(pos_), fmt::format("expected an event object '{{' or ']', found '{}'", printable({&c, 1})), event_index_);
    if (need_sep) b_.repair(file_, Repair::missing_comma, event_index_, offset_at(pos_));
    const std::uint64_t offset = offset_at(pos_);
    const char* after = complete([&](const char* p, const char* e) { return parse_event(p, e, ev); }, "an event");
    pos_ = static_cast<std::size_t>(after - buf_.data());
    handle(ev, event_index_, offset);
    ++event_index_;
    ++b_.file(file_).events;
    need_sep = true;
    after_comma = false;
  }
}

void ChromeReader::parse_top_object() {
  ++pos_;  // '{'
  bool need_sep = false, saw_events = false;
  for (;;) {
    if (!skip_ws()) {
      if (!saw_events) fail(offset_at(pos_), "the file ends before any 'traceEvents'");
      // "}" missing after the events: as with the array form, tolerated.
      b_.repair(file_, Repair::missing_closing_bracket, event_index_, offset_at(pos_));
      return;
    }
    const char c = buf_[pos_];
    if (need_sep) {
      if (c == '}') {
        ++pos_;
        if (!saw_events) fail(offset_at(pos_), "the object form has no 'traceEvents' array");
        return;
      }
      if (c != ',') fail(offset_at(pos_), "expected ',' or '}' between top-level members");
      need_sep = false;
      ++pos_;
      continue;
    }
    if (c == '}') {
      ++pos_;
      if (!saw_events) fail(offset_at(pos_), "the object form has no 'traceEvents' array");
      return;
    }
    if (c == ',') {
      b_.repair(file_, Repair::extra_comma, event_index_, offset_at(pos_));
      ++pos_;
      continue;
    }
    if (c != '"') fail(offset_at(pos_), "expected a key string at the top level");
    Str key;
    std::uint32_t control = 0;
    const char* after = complete([&](const char* p, const char* e) { return read_string(p, e, key, control); }, "a key");
    const std::string key_text(key.raw);
    pos_ = static_cast<std::size_t>(after - buf_.data());
    if (!skip_ws() || buf_[pos_] != ':') fail(offset_at(pos_), fmt::format("expected ':' after '{}'", printable(key_text)));
    ++pos_;
    if (!skip_ws()) fail(offset_at(pos_), fmt::format("the file ends before the value of '{}'", printable(key_text)));
    if (key_text == "traceEvents") {
      if (buf_[pos_] != '[') fail(offset_at(pos_), "'traceEvents' must be an array");
      saw_events = true;
      parse_event_array();
      if (eof_ && pos_ >= end_) return;  // its repair covers the object's missing '}' too
    } else if (key_text == "displayTimeUnit" || key_text == "distributedInfo") {
      const std::size_t start = pos_;
      after = complete([&](const char* p, const char* e) { return skip_value(p, e, control); }, key_text.c_str());
      const std::string raw(static_cast<const char*>(buf_.data() + start), after);
      pos_ = static_cast<std::size_t>(after - buf_.data());
      const auto value = nlohmann::json::parse(raw, nullptr, false);
      if (key_text == "displayTimeUnit") {
        if (value.is_string()) b_.file(file_).display_time_unit = value.get<std::string>();
        const auto& u = b_.file(file_).display_time_unit;
        if (u != "ms" && u != "ns") b_.repair_note(file_, Repair::unknown_display_time_unit, fmt::format("displayTimeUnit {}", raw));
      } else if (value.is_object() && value.contains("rank")) {
        const auto& r = value["rank"];
        std::int64_t v = 0;
        if (r.is_number_integer()) distributed_rank_ = r.get<std::int64_t>();
        else if (r.is_string() && parse_int(r.get<std::string>(), v)) distributed_rank_ = v;
      }
    } else {
      skip_value_streaming();
    }
    need_sep = true;
  }
}

void ChromeReader::run() {
  std::FILE* f = std::fopen(path_.c_str(), "rb");
  if (!f) throw InputError(path_, {}, "", fmt::format("cannot open the trace: {}", std::strerror(errno)));
  unsigned char magic[2] = {0, 0};
  const std::size_t got = std::fread(magic, 1, 2, f);
  const bool gzip = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  TraceFileInfo info;
  info.path = path_;
  info.format = gzip ? "chrome-json-gzip" : "chrome-json";
  file_ = b_.add_file(std::move(info));
  if (gzip) {
    std::fclose(f);
    gzFile g = gzopen(path_.c_str(), "rb");
    if (!g) throw InputError(path_, {}, "", "cannot open the gzip trace");
    src_ = std::make_unique<GzipSource>(g, path_);
  } else {
    std::rewind(f);
    src_ = std::make_unique<PlainSource>(f, path_);
  }
  buf_.resize(initial_buffer);
  fill();
  // UTF-8 byte order mark.
  if (end_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
  if (!skip_ws()) fail(offset_at(pos_), "the file is empty: expected '[' (array form) or '{' (object form)");
  if (buf_[pos_] == '[') parse_event_array();
  else if (buf_[pos_] == '{') parse_top_object();
  else fail(offset_at(pos_), fmt::format("expected '[' (array form) or '{{' (object form), found '{}'", printable({&buf_[pos_], 1})));
  if (skip_ws()) fail(offset_at(pos_), "unexpected text after the trace");

  auto& file = b_.file(file_);
  file.bytes = buf_offset_ + end_;
  if (distributed_rank_) {
    file.rank = *distributed_rank_;
    file.rank_source = "distributedInfo.rank";
  } else {
    file.rank = rank_.value_or(0);
    file.rank_source = rank_ ? "file order" : "default (single file)";
  }
}

}  // namespace

void read_chrome_trace(const std::filesystem::path& path, TimelineBuilder& builder, std::optional<std::int64_t> rank) {
  ChromeReader(path, builder, rank).run();
}

}  // namespace densefeed
