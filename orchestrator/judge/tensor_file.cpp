#include "tensor_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace densefeed {
namespace {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big);

// The order of kinds is the order of TensorFile::kind_ values.
enum class Kind : unsigned char { f64, f32, f16, bf16, e4m3, e5m2, i8, i16, i32, i64, u8, u16, u32, u64, boolean };

struct KindInfo {
  Kind kind;
  const char* name;         // densefeed's (NumPy's / ml_dtypes') name
  std::size_t bytes;
  const char* safetensors;  // the safetensors header's name
};

constexpr std::array<KindInfo, 15> kKinds = {{
    {Kind::f64, "float64", 8, "F64"},
    {Kind::f32, "float32", 4, "F32"},
    {Kind::f16, "float16", 2, "F16"},
    {Kind::bf16, "bfloat16", 2, "BF16"},
    {Kind::e4m3, "float8_e4m3fn", 1, "F8_E4M3"},
    {Kind::e5m2, "float8_e5m2", 1, "F8_E5M2"},
    {Kind::i8, "int8", 1, "I8"},
    {Kind::i16, "int16", 2, "I16"},
    {Kind::i32, "int32", 4, "I32"},
    {Kind::i64, "int64", 8, "I64"},
    {Kind::u8, "uint8", 1, "U8"},
    {Kind::u16, "uint16", 2, "U16"},
    {Kind::u32, "uint32", 4, "U32"},
    {Kind::u64, "uint64", 8, "U64"},
    {Kind::boolean, "bool", 1, "BOOL"},
}};

const KindInfo& info(Kind k) { return kKinds[static_cast<std::size_t>(k)]; }

const KindInfo* kind_by_name(std::string_view name) {
  for (const auto& k : kKinds)
    if (name == k.name) return &k;
  return nullptr;
}

const KindInfo* kind_by_safetensors_name(std::string_view name) {
  for (const auto& k : kKinds)
    if (name == k.safetensors) return &k;
  return nullptr;
}

// ---------------------------------------------------------------------------
// Element decoding. Each kind maps its raw bits (already in host byte order)
// to fp64 exactly.

// IEEE 754-2008 binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits.
// Built as a binary32 with selects rather than branches so that the loop
// vectorises; every binary16 value is exact in binary32.
inline double half_to_double(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t bits = static_cast<std::uint32_t>(h & 0x7fffu) << 13;  // exponent and fraction, binary32 place
  const std::uint32_t exponent = bits & 0x0f800000u;
  const std::uint32_t normal = bits + ((127u - 15u) << 23);                   // rebias
  const std::uint32_t special = bits | 0x7f800000u;                           // inf, NaN
  // Zero and subnormals, fraction x 2^-24: (1 + fraction x 2^-10) x 2^-14 - 2^-14, exact (Sterbenz).
  const float tiny = std::bit_cast<float>(bits + (113u << 23)) - std::bit_cast<float>(113u << 23);
  const std::uint32_t magnitude = exponent == 0 ? std::bit_cast<std::uint32_t>(tiny)
                                  : exponent == 0x0f800000u ? special
                                                            : normal;
  return std::bit_cast<float>(sign | magnitude);
}

constexpr double pow2(int e) {
  double r = 1.0;
  for (; e > 0; --e) r *= 2.0;
  for (; e < 0; ++e) r *= 0.5;
  return r;
}

// The two 8-bit formats of the OCP 8-bit Floating Point Specification (OFP8),
// revision 1.0 (Open Compute Project, 2023), which standardises the formats of
// Micikevicius et al., "FP8 Formats for Deep Learning" (arXiv:2209.05433),
// Table 1. 256 values each, so a table.
//
// E4M3 (float8_e4m3fn, safetensors F8_E4M3): bias 7, no infinities; S.1111.111
// is NaN, so the largest finite value is S.1111.110 = 1.75 x 2^8 = 448; the
// smallest subnormal is 2^-9.
constexpr std::array<double, 256> make_e4m3_table() {
  std::array<double, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 3) & 0xf, m = b & 0x7;
    if (e == 15 && m == 7) {
      t[b] = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    const double v = e == 0 ? m * pow2(1 - 7 - 3) : (8 + m) * pow2(e - 7 - 3);
    t[b] = (b & 0x80) ? -v : v;
  }
  return t;
}

// E5M2 (float8_e5m2, safetensors F8_E5M2): bias 15, IEEE-like: exponent 31 is
// inf (fraction 0) or NaN; largest finite 1.75 x 2^15 = 57344; smallest
// subnormal 2^-16.
constexpr std::array<double, 256> make_e5m2_table() {
  std::array<double, 256> t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 2) & 0x1f, m = b & 0x3;
    if (e == 31) {
      t[b] = m ? std::numeric_limits<double>::quiet_NaN()
               : ((b & 0x80) ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
      continue;
    }
    const double v = e == 0 ? m * pow2(1 - 15 - 2) : (4 + m) * pow2(e - 15 - 2);
    t[b] = (b & 0x80) ? -v : v;
  }
  return t;
}

constexpr std::array<double, 256> kE4m3 = make_e4m3_table();
constexpr std::array<double, 256> kE5m2 = make_e5m2_table();

template <Kind K>
struct Codec;
template <>
struct Codec<Kind::f64> {
  using Bits = std::uint64_t;
  static double decode(Bits b) { return std::bit_cast<double>(b); }
};
template <>
struct Codec<Kind::f32> {
  using Bits = std::uint32_t;
  static double decode(Bits b) { return std::bit_cast<float>(b); }
};
template <>
struct Codec<Kind::f16> {
  using Bits = std::uint16_t;
  static double decode(Bits b) { return half_to_double(b); }
};
// bfloat16 is the top half of a binary32.
template <>
struct Codec<Kind::bf16> {
  using Bits = std::uint16_t;
  static double decode(Bits b) { return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16); }
};
template <>
struct Codec<Kind::e4m3> {
  using Bits = std::uint8_t;
  static double decode(Bits b) { return kE4m3[b]; }
};
template <>
struct Codec<Kind::e5m2> {
  using Bits = std::uint8_t;
  static double decode(Bits b) { return kE5m2[b]; }
};
template <typename Int>
struct IntCodec {
  using Bits = std::make_unsigned_t<Int>;
  static double decode(Bits b) { return static_cast<double>(static_cast<Int>(b)); }
};
template <>
struct Codec<Kind::i8> : IntCodec<std::int8_t> {};
template <>
struct Codec<Kind::i16> : IntCodec<std::int16_t> {};
template <>
struct Codec<Kind::i32> : IntCodec<std::int32_t> {};
template <>
struct Codec<Kind::i64> : IntCodec<std::int64_t> {};
template <>
struct Codec<Kind::u8> : IntCodec<std::uint8_t> {};
template <>
struct Codec<Kind::u16> : IntCodec<std::uint16_t> {};
template <>
struct Codec<Kind::u32> : IntCodec<std::uint32_t> {};
template <>
struct Codec<Kind::u64> : IntCodec<std::uint64_t> {};
template <>
struct Codec<Kind::boolean> {
  using Bits = std::uint8_t;
  static double decode(Bits b) { return b != 0 ? 1.0 : 0.0; }
};

template <typename U>
U byteswap(U v) {
  if constexpr (sizeof(U) == 1) return v;
  else if constexpr (sizeof(U) == 2) return __builtin_bswap16(v);
  else if constexpr (sizeof(U) == 4) return __builtin_bswap32(v);
  else return __builtin_bswap64(v);
}

template <Kind K, bool Swap>
inline double decode_at(const unsigned char* p) {
  using Bits = typename Codec<K>::Bits;
  Bits b;
  std::memcpy(&b, p, sizeof b);  // files need not be aligned
  if constexpr (Swap) b = byteswap(b);
  return Codec<K>::decode(b);
}

// Contiguous storage: a loop the compiler vectorises for the common kinds.
template <Kind K, bool Swap>
void read_contiguous(const unsigned char* data, std::size_t begin, std::size_t count, double* out) {
  constexpr std::size_t w = sizeof(typename Codec<K>::Bits);
  const unsigned char* p = data + begin * w;
  for (std::size_t i = 0; i < count; ++i) out[i] = decode_at<K, Swap>(p + i * w);
}

// Fortran storage: element (i0, ..., in-1) sits at i0 + d0*(i1 + d1*(...)).
// Walks the C-order multi-index from `begin`, a run along the last axis at a
// time. Needs count > 0 (so every dimension is > 0) and ndim <= kMaxDims.
constexpr std::size_t kMaxDims = 64;  // NumPy 2's NPY_MAXDIMS

template <Kind K, bool Swap>
void read_fortran(const unsigned char* data, const std::vector<std::size_t>& shape, std::size_t begin,
                  std::size_t count, double* out) {
  constexpr std::size_t w = sizeof(typename Codec<K>::Bits);
  const std::size_t nd = shape.size();
  std::array<std::size_t, kMaxDims> index{}, stride{};
  stride[0] = 1;
  for (std::size_t d = 1; d < nd; ++d) stride[d] = stride[d - 1] * shape[d - 1];
  std::size_t rest = begin, offset = 0;
  for (std::size_t d = nd; d-- > 0;) {
    index[d] = rest % shape[d];
    rest /= shape[d];
    offset += index[d] * stride[d];
  }
  const std::size_t last = nd - 1, inner = shape[last], inner_stride = stride[last];
  for (std::size_t k = 0;;) {
    const std::size_t run = std::min(inner - index[last], count - k);
    for (std::size_t j = 0; j < run; ++j) out[k + j] = decode_at<K, Swap>(data + (offset + j * inner_stride) * w);
    k += run;
    if (k == count) return;
    offset -= index[last] * inner_stride;
    index[last] = 0;
    for (std::size_t d = last; d-- > 0;) {
      ++index[d];
      offset += stride[d];
      if (index[d] < shape[d]) break;
      offset -= index[d] * stride[d];
      index[d] = 0;
    }
  }
}

template <typename Fn>
void with_kind(Kind k, Fn&& fn) {
  switch (k) {
    case Kind::f64: return fn(std::integral_constant<Kind, Kind::f64>{});
    case Kind::f32: return fn(std::integral_constant<Kind, Kind::f32>{});
    case Kind::f16: return fn(std::integral_constant<Kind, Kind::f16>{});
    case Kind::bf16: return fn(std::integral_constant<Kind, Kind::bf16>{});
    case Kind::e4m3: return fn(std::integral_constant<Kind, Kind::e4m3>{});
    case Kind::e5m2: return fn(std::integral_constant<Kind, Kind::e5m2>{});
    case Kind::i8: return fn(std::integral_constant<Kind, Kind::i8>{});
    case Kind::i16: return fn(std::integral_constant<Kind, Kind::i16>{});
    case Kind::i32: return fn(std::integral_constant<Kind, Kind::i32>{});
    case Kind::i64: return fn(std::integral_constant<Kind, Kind::i64>{});
    case Kind::u8: return fn(std::integral_constant<Kind, Kind::u8>{});
    case Kind::u16: return fn(std::integral_constant<Kind, Kind::u16>{});
    case Kind::u32: return fn(std::integral_constant<Kind, Kind::u32>{});
    case Kind::u64: return fn(std::integral_constant<Kind, Kind::u64>{});
    case Kind::boolean: return fn(std::integral_constant<Kind, Kind::boolean>{});
  }
}

// ---------------------------------------------------------------------------
// Helpers for messages about untrusted bytes.

std::string format_shape(const std::vector<std::size_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Printable ASCII as is, anything else as \xNN; at most `limit` bytes shown.
std::string escaped(std::string_view bytes, std::size_t limit = 160) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c == '\\') out += "\\\\";
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else out += fmt::format("\\x{:02x}", c);
  }
  if (bytes.size() > limit) out += fmt::format("... ({} bytes)", bytes.size());
  return out;
}

// Element count and byte count of `shape`, or nullopt when either overflows.
std::optional<std::pair<std::size_t, std::size_t>> counts(const std::vector<std::size_t>& shape, std::size_t bytes) {
  std::size_t n = 1;
  for (const auto d : shape)
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  std::size_t b = 0;
  if (__builtin_mul_overflow(n, bytes, &b)) return std::nullopt;
  return std::pair{n, b};
}

std::string names_list(const std::vector<std::string>& names) {
  constexpr std::size_t kShown = 20;
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kShown; ++i)
    out += fmt::format("{}'{}'", i ? ", " : "", escaped(names[i], 80));
  if (names.size() > kShown) out += fmt::format(", ... ({} in all)", names.size());
  if (names.empty()) out = "no tensors";
  return out;
}

std::string kind_names_list() {
  std::vector<std::string> names;
  for (const auto& k : kKinds) names.push_back(k.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

const KindInfo& declared_kind(const std::filesystem::path& path, const std::string& declared) {
  const KindInfo* k = kind_by_name(declared);
  if (!k) throw TensorFileError(path, fmt::format("unknown declared dtype '{}' (expected one of {})", escaped(declared), kind_names_list()));
  return *k;
}

// ---------------------------------------------------------------------------
// .npy header: a Python literal dict, parsed strictly. NumPy reads it with
// ast.literal_eval; we accept the subset NumPy writes (numpy/lib/format.py,
// _write_array_header): string keys 'descr', 'fortran_order', 'shape' in any
// order, a string, True/False and a tuple of non-negative ints as values,
// optional trailing comma, whitespace around tokens.

constexpr std::size_t kMaxNpyHeader = 10000;  // numpy.lib.format._MAX_HEADER_SIZE

struct PyValue {
  enum class Type { string, boolean, integer, tuple } type = Type::string;
  std::string text;                // string
  bool flag = false;               // boolean
  std::size_t integer = 0;         // integer
  bool parenthesised = false;      // integer written as (3): not a tuple in Python
  std::vector<std::size_t> items;  // tuple
};

class NpyHeaderParser {
 public:
  NpyHeaderParser(const std::filesystem::path& path, std::string_view text, bool allow_long_suffix)
      : path_(path), text_(text), allow_long_(allow_long_suffix) {}

  std::vector<std::pair<std::string, PyValue>> parse_dict() {
    for (std::size_t i = 0; i < text_.size(); ++i)
      if (static_cast<unsigned char>(text_[i]) >= 0x80) {
        pos_ = i;
        fail(fmt::format("non-ASCII byte 0x{:02x} (only structured dtypes, which are not supported, have non-ASCII "
                         "names)",
                         static_cast<unsigned char>(text_[i])));
      }
    std::vector<std::pair<std::string, PyValue>> entries;
    skip_space();
    if (!eat('{')) fail("the header is not a dict: expected '{'");
    skip_space();
    while (!eat('}')) {
      if (peek() != '\'' && peek() != '"') fail("expected a quoted key or '}'");
      std::string key = parse_string();
      skip_space();
      if (!eat(':')) fail(fmt::format("expected ':' after key '{}'", escaped(key)));
      skip_space();
      entries.emplace_back(std::move(key), parse_value());
      skip_space();
      if (eat(',')) {
        skip_space();
      } else if (peek() != '}') {
        fail("expected ',' or '}' after a value");
      }
    }
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the header dict (only whitespace may follow '}')");
    return entries;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw TensorFileError(path_, fmt::format("bad .npy header at byte {}: {}; header: {}", pos_, what, escaped(text_)));
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }
  bool eat(char c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  // '...' or "...", without escapes (nothing NumPy writes needs one).
  std::string parse_string() {
    const char quote = text_[pos_++];
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const char c = text_[pos_];
      if (c == quote) break;
      if (c == '\\') fail("escape sequences are not supported in header strings");
      if (c == '\n' || c == '\r') fail("line break inside a string");
      out += c;
      ++pos_;
    }
    ++pos_;
    return out;
  }

  // A decimal int without sign or leading zeros (Python 3 syntax); Python 2's
  // long suffix 'L' in version 1.0 and 2.0 headers, as NumPy's _filter_header
  // accepts.
  std::size_t parse_integer() {
    const std::size_t start = pos_;
    std::size_t value = 0;
    while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (__builtin_mul_overflow(value, std::size_t{10}, &value) ||
          __builtin_add_overflow(value, static_cast<std::size_t>(text_[pos_] - '0'), &value))
        fail("integer too large for 64 bits");
      ++pos_;
    }
    if (pos_ == start) fail("expected a non-negative integer");
    if (pos_ - start > 1 && text_[start] == '0') {
      pos_ = start;
      fail("integer with a leading zero");
    }
    if (allow_long_ && (peek() == 'L' || peek() == 'l')) ++pos_;
    if (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_' || peek() == '.'))
      fail("expected a plain decimal integer");
    return value;
  }

  PyValue parse_value() {
    PyValue v;
    const char c = peek();
    if (c == '\'' || c == '"') {
      v.type = PyValue::Type::string;
      v.text = parse_string();
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      const std::size_t start = pos_;
      while (!at_end() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) ++pos_;
      const std::string_view word = text_.substr(start, pos_ - start);
      if (word != "True" && word != "False") {
        pos_ = start;
        fail(fmt::format("unexpected name '{}' (expected a string, True, False or a tuple)", escaped(word)));
      }
      v.type = PyValue::Type::boolean;
      v.flag = word == "True";
    } else if (c >= '0' && c <= '9') {
      v.type = PyValue::Type::integer;
      v.integer = parse_integer();
    } else if (c == '(') {
      ++pos_;
      skip_space();
      v.type = PyValue::Type::tuple;
      bool comma = false;
      while (!eat(')')) {
        v.items.push_back(parse_integer());
        skip_space();
        if (eat(',')) {
          comma = true;
          skip_space();
        } else if (peek() != ')') {
          fail("expected ',' or ')' in a tuple");
        }
      }
      if (v.items.size() == 1 && !comma) {
        v.type = PyValue::Type::integer;
        v.integer = v.items[0];
        v.parenthesised = true;
      }
    } else if (c == '[') {
      fail("a list is not accepted (structured dtypes are not supported; a shape is a tuple)");
    } else {
      fail("expected a value: a string, True, False or a tuple of ints");
    }
    return v;
  }

  const std::filesystem::path& path_;
  std::string_view text_;
  bool allow_long_;
  std::size_t pos_ = 0;
};

// What the descr says about the file's records.
struct NpyDescr {
  const KindInfo* kind = nullptr;  // nullptr for raw 'V' records
  std::size_t bytes = 0;
  bool big_endian = false;
};

NpyDescr parse_descr(const std::filesystem::path& path, const std::string& descr) {
  const auto unsupported = [&](const std::string& why) -> TensorFileError {
    return TensorFileError(
        path, fmt::format("unsupported dtype '{}'{}: expected one of '<f2', '<f4', '<f8', '<i1'..'<i8', '<u1'..'<u8', "
                          "'|b1' (byte order '<', '>', '|' or '='), or raw records '|V1'/'|V2' for a declared "
                          "float8/bfloat16",
                          escaped(descr), why));
  };
  if (descr.size() < 3) throw unsupported("");
  const char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    throw unsupported(" (it does not start with a byte-order character)");
  const std::string code = descr.substr(1);
  NpyDescr d;
  static const std::pair<const char*, Kind> known[] = {
      {"f2", Kind::f16}, {"f4", Kind::f32}, {"f8", Kind::f64}, {"i1", Kind::i8},  {"i2", Kind::i16},
      {"i4", Kind::i32}, {"i8", Kind::i64}, {"u1", Kind::u8},  {"u2", Kind::u16}, {"u4", Kind::u32},
      {"u8", Kind::u64}, {"b1", Kind::boolean}};
  for (const auto& [c, k] : known)
    if (code == c) d.kind = &info(k);
  if (d.kind) {
    d.bytes = d.kind->bytes;
    // '|' (not applicable) and '=' (native) mean the writer's byte order, as
    // in NumPy; one byte has no order.
    const bool big = order == '>' || (order != '<' && std::endian::native == std::endian::big);
    d.big_endian = d.bytes > 1 && big;
    return d;
  }
  // Raw void records (what np.save writes for ml_dtypes' bfloat16/float8, or
  // for a buffer viewed as 'V2'): bytes in the writer's memory order, which is
  // little-endian on every machine densefeed supports.
  if (code == "V1" || code == "V2") {
    d.bytes = code == "V1" ? 1 : 2;
    return d;
  }
  throw unsupported("");
}

struct NpyLayout {
  const KindInfo* kind = nullptr;
  std::vector<std::size_t> shape;
  bool fortran_order = false;
  bool big_endian = false;
  std::size_t data_offset = 0;
  std::size_t data_bytes = 0;
};

std::uint64_t read_le(const unsigned char* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

NpyLayout parse_npy(const std::filesystem::path& path, const unsigned char* bytes, std::size_t n,
                    const std::optional<std::string>& declared) {
  static constexpr unsigned char kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (n < sizeof kMagic || std::memcmp(bytes, kMagic, sizeof kMagic) != 0)
    throw TensorFileError(path, fmt::format("bad magic '{}': expected '\\x93NUMPY' (a .npy file)",
                                            escaped(std::string_view(reinterpret_cast<const char*>(bytes),
                                                                     std::min<std::size_t>(n, 6)))));
  if (n < 8) throw TensorFileError(path, fmt::format("truncated: {} bytes, the file ends inside the version", n));
  const unsigned major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    throw TensorFileError(path, fmt::format("unsupported .npy format version {}.{} (expected 1.0, 2.0 or 3.0)", major,
                                            minor));
  // Version 1.0 has a 2-byte header length, 2.0 and 3.0 a 4-byte one; 3.0's
  // header is utf-8 rather than latin-1 (NEP 1 / numpy/lib/format.py).
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t header_start = 8 + length_bytes;
  if (n < header_start)
    throw TensorFileError(path, fmt::format("truncated: {} bytes, the file ends inside the header length", n));
  const std::uint64_t header_length = read_le(bytes + 8, length_bytes);
  if (header_length > kMaxNpyHeader)
    throw TensorFileError(path, fmt::format("header too long: {} bytes (NumPy's own limit is {})", header_length,
                                            kMaxNpyHeader));
  if (header_start + header_length > n)
    throw TensorFileError(path, fmt::format("truncated: the header of {} bytes runs past the end of the file ({} bytes)",
                                            header_length, n));
  const std::string_view header(reinterpret_cast<const char*>(bytes + header_start), header_length);

  NpyHeaderParser parser(path, header, major <= 2);
  const auto entries = parser.parse_dict();
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& [key, value] : entries) {
    const PyValue** slot = key == "descr" ? &descr : key == "fortran_order" ? &fortran : key == "shape" ? &shape : nullptr;
    const std::string where = fmt::format("header {}", escaped(header));
    if (!slot)
      throw TensorFileError(path, fmt::format("unexpected key '{}' in the header dict (expected exactly 'descr', "
                                              "'fortran_order' and 'shape'); {}",
                                              escaped(key), where));
    if (*slot) throw TensorFileError(path, fmt::format("duplicate key '{}' in the header dict; {}", key, where));
    *slot = &value;
  }
  const std::pair<const char*, const PyValue*> required[] = {{"descr", descr}, {"fortran_order", fortran}, {"shape", shape}};
  for (const auto& [name, value] : required)
    if (!value)
      throw TensorFileError(path, fmt::format("missing key '{}' in the header dict (expected 'descr', "
                                              "'fortran_order' and 'shape'); header {}",
                                              name, escaped(header)));
  if (descr->type != PyValue::Type::string)
    throw TensorFileError(path, fmt::format("'descr' must be a dtype string such as '<f4'; header {}", escaped(header)));
  if (fortran->type != PyValue::Type::boolean)
    throw TensorFileError(path, fmt::format("'fortran_order' must be True or False; header {}", escaped(header)));
  if (shape->type == PyValue::Type::integer)
    throw TensorFileError(path, fmt::format("'shape' must be a tuple, got the int {}{}; header {}", shape->integer,
                                            shape->parenthesised ? " (a 1-d shape is written (N,))" : "",
                                            escaped(header)));
  if (shape->type != PyValue::Type::tuple)
    throw TensorFileError(path, fmt::format("'shape' must be a tuple of ints; header {}", escaped(header)));
  if (shape->items.size() > kMaxDims)
    throw TensorFileError(path, fmt::format("shape has {} dimensions (at most {})", shape->items.size(), kMaxDims));

  const NpyDescr d = parse_descr(path, descr->text);
  NpyLayout layout;
  layout.big_endian = d.big_endian;
  layout.kind = d.kind;
  if (declared) {
    const KindInfo& want = declared_kind(path, *declared);
    const bool raw_wanted = want.kind == Kind::bf16 || want.kind == Kind::e4m3 || want.kind == Kind::e5m2;
    if (raw_wanted) {
      // Raw records: the bits, stored as unsigned, signed or void of the size.
      const bool fits = d.bytes == want.bytes &&
                        (!d.kind || d.kind->kind == Kind::u8 || d.kind->kind == Kind::i8 ||
                         d.kind->kind == Kind::u16 || d.kind->kind == Kind::i16);
      if (!fits)
        throw TensorFileError(
            path, fmt::format("declared dtype {} but the file holds '{}'{}: expected raw {}-byte records ({})", want.name,
                              escaped(descr->text), d.kind ? fmt::format(" ({})", d.kind->name) : "", want.bytes,
                              want.bytes == 2 ? "'<u2', '<i2' or '|V2'" : "'|u1', '|i1' or '|V1'"));
      layout.kind = &want;
    } else if (d.kind != &want) {
      throw TensorFileError(path, fmt::format("declared dtype {} but the file holds '{}' ({})", want.name,
                                              escaped(descr->text), d.kind ? d.kind->name : "raw records"));
    }
  } else if (!d.kind) {
    throw TensorFileError(path, fmt::format("'{}' holds raw {}-byte records with no dtype: the gate must declare {}",
                                            escaped(descr->text), d.bytes,
                                            d.bytes == 2 ? "bfloat16" : "float8_e4m3fn or float8_e5m2"));
  }
  layout.shape = shape->items;
  layout.fortran_order = fortran->flag;
  const auto c = counts(layout.shape, layout.kind->bytes);
  if (!c)
    throw TensorFileError(path, fmt::format("shape {} {} does not fit in 64 bits of bytes", format_shape(layout.shape),
                                            layout.kind->name));
  layout.data_offset = header_start + header_length;
  layout.data_bytes = c->second;
  const std::size_t have = n - layout.data_offset;
  if (have != layout.data_bytes)
    throw TensorFileError(path, fmt::format("{}: shape {} {} needs {} bytes, file has {} (after its {}-byte header)",
                                            have < layout.data_bytes ? "data truncated" : "trailing bytes",
                                            format_shape(layout.shape), layout.kind->name, layout.data_bytes, have,
                                            layout.data_offset));
  return layout;
}

// ---------------------------------------------------------------------------
// .safetensors (huggingface/safetensors, README "Format"; the checks follow
// the reference implementation's Metadata::validate).

constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;  // safetensors' MAX_HEADER_SIZE
constexpr int kMaxJsonDepth = 16;                              // real headers nest 3 deep

struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  const KindInfo* kind = nullptr;  // nullptr: a dtype densefeed does not read
  std::vector<std::size_t> shape;
  std::uint64_t begin = 0, end = 0;
};

struct SafetensorsLayout {
  std::vector<SafetensorsEntry> tensors;  // in name order
  std::size_t buffer_offset = 0;          // 8 + header size
};

std::uint64_t json_offset(const std::filesystem::path& path, const std::string& name, const nlohmann::json& v,
                          const char* field) {
  if (!v.is_number_unsigned())
    throw TensorFileError(path, fmt::format("tensor '{}': {} holds {}, expected a non-negative integer", escaped(name),
                                            field, escaped(v.dump(), 60)));
  return v.get<std::uint64_t>();
}

// The size of the JSON header that follows the first 8 bytes (u64,
// little-endian), checked against the file and the format's limit.
std::uint64_t safetensors_header_size(const std::filesystem::path& path, const unsigned char* bytes, std::size_t n) {
  if (n < 8)
    throw TensorFileError(path, fmt::format("truncated: {} bytes, shorter than the 8-byte header size of a "
                                            ".safetensors file",
                                            n));
  const std::uint64_t header_size = read_le(bytes, 8);
  if (header_size > kMaxSafetensorsHeader)
    throw TensorFileError(path, fmt::format("header size {} bytes is too long (the limit is {} bytes)", header_size,
                                            kMaxSafetensorsHeader));
  if (8 + header_size > n)
    throw TensorFileError(path, fmt::format("header size {} bytes runs past the end of the file ({} bytes)",
                                            header_size, n));
  const char* header = reinterpret_cast<const char*>(bytes + 8);
  if (header_size == 0 || header[0] != '{')
    throw TensorFileError(path, fmt::format("the header does not start with '{{' (a JSON object): '{}'",
                                            escaped(std::string_view(header, header_size), 40)));
  return header_size;
}

// The header as JSON. Duplicate keys are refused (nlohmann would keep the
// last one silently), and so is deep nesting.
nlohmann::json safetensors_header_json(const std::filesystem::path& path, const char* header, std::uint64_t header_size) {
  std::vector<std::set<std::string>> open_objects;
  int depth = 0;
  const auto callback = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start || event == E::array_start) {
      if (++depth > kMaxJsonDepth)
        throw TensorFileError(path, fmt::format("header JSON nests deeper than {} levels", kMaxJsonDepth));
      if (event == E::object_start) open_objects.emplace_back();
    } else if (event == E::object_end || event == E::array_end) {
      --depth;
      if (event == E::object_end) open_objects.pop_back();
    } else if (event == E::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!open_objects.back().insert(key).second)
        throw TensorFileError(path, fmt::format("duplicate key '{}' in the header JSON", escaped(key, 80)));
    }
    return true;
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(header, header + header_size, callback);
  } catch (const nlohmann::json::exception& e) {
    throw TensorFileError(path, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!doc.is_object()) throw TensorFileError(path, "the header is not a JSON object");
  return doc;
}

// '__metadata__': null, or an object of strings.
void check_safetensors_metadata(const std::filesystem::path& path, const nlohmann::json& value) {
  if (value.is_null()) return;
  if (!value.is_object())
    throw TensorFileError(path, "'__metadata__' must be an object of string values, got " + escaped(value.dump(), 60));
  for (const auto& [k, v] : value.items())
    if (!v.is_string())
      throw TensorFileError(path, fmt::format("'__metadata__' value of '{}' must be a string, got {}", escaped(k, 80),
                                              escaped(v.dump(), 60)));
}

// One tensor's entry {dtype, shape, data_offsets}, its offsets inside a
// data buffer of `buffer_size` bytes and, for a dtype densefeed reads, its
// size matching its shape.
SafetensorsEntry safetensors_entry(const std::filesystem::path& path, const std::string& name, const nlohmann::json& value,
                                   std::size_t buffer_size) {
  const std::string what = fmt::format("tensor '{}'", escaped(name, 80));
  if (!value.is_object())
    throw TensorFileError(path, fmt::format("{}: expected an object {{dtype, shape, data_offsets}}, got {}", what,
                                            escaped(value.dump(), 60)));
  for (const auto& [k, v] : value.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      throw TensorFileError(path, fmt::format("{}: unexpected key '{}' (expected dtype, shape, data_offsets)", what,
                                              escaped(k, 80)));
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!value.contains(k)) throw TensorFileError(path, fmt::format("{}: missing '{}'", what, k));
  SafetensorsEntry t;
  t.name = name;
  const auto& dtype = value["dtype"];
  if (!dtype.is_string())
    throw TensorFileError(path, fmt::format("{}: dtype must be a string such as \"F32\", got {}", what,
                                            escaped(dtype.dump(), 60)));
  t.dtype = dtype.get<std::string>();
  t.kind = kind_by_safetensors_name(t.dtype);
  const auto& shape = value["shape"];
  if (!shape.is_array())
    throw TensorFileError(path, fmt::format("{}: shape must be an array of non-negative integers, got {}", what,
                                            escaped(shape.dump(), 60)));
  if (shape.size() > kMaxDims)
    throw TensorFileError(path, fmt::format("{}: shape has {} dimensions (at most {})", what, shape.size(), kMaxDims));
  for (const auto& d : shape) {
    if (!d.is_number_unsigned())
      throw TensorFileError(path, fmt::format("{}: shape must be an array of non-negative integers, got {}", what,
                                              escaped(shape.dump(), 60)));
    t.shape.push_back(d.get<std::uint64_t>());
  }
  const auto& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    throw TensorFileError(path, fmt::format("{}: data_offsets must be [begin, end], got {}", what,
                                            escaped(offsets.dump(), 60)));
  t.begin = json_offset(path, name, offsets[0], "data_offsets[0]");
  t.end = json_offset(path, name, offsets[1], "data_offsets[1]");
  if (t.begin > t.end)
    throw TensorFileError(path, fmt::format("{}: data_offsets [{}, {}] end before they begin", what, t.begin, t.end));
  if (t.end > buffer_size)
    throw TensorFileError(path, fmt::format("{}: data_offsets [{}, {}] run past the end of the {}-byte data buffer",
                                            what, t.begin, t.end, buffer_size));
  if (t.kind) {
    const auto c = counts(t.shape, t.kind->bytes);
    if (!c)
      throw TensorFileError(path, fmt::format("{}: shape {} {} does not fit in 64 bits of bytes", what,
                                              format_shape(t.shape), t.dtype));
    if (c->second != t.end - t.begin)
      throw TensorFileError(path, fmt::format("{}: shape {} {} needs {} bytes, data_offsets [{}, {}] hold {}", what,
                                              format_shape(t.shape), t.dtype, c->second, t.begin, t.end,
                                              t.end - t.begin));
  }
  return t;
}

// The tensors tile the buffer: sorted by offset, each begins where the
// previous one ended, and the last ends at the end of the file.
void check_safetensors_tiling(const std::filesystem::path& path, const SafetensorsLayout& layout, std::size_t buffer_size) {
  std::vector<const SafetensorsEntry*> sorted;
  for (const auto& t : layout.tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return std::tie(a->begin, a->end) < std::tie(b->begin, b->end); });
  std::uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const auto* t : sorted) {
    if (t->begin < covered)
      throw TensorFileError(path, fmt::format("tensors '{}' [{}, {}) and '{}' [{}, {}) overlap in the data buffer",
                                              escaped(previous->name, 80), previous->begin, previous->end,
                                              escaped(t->name, 80), t->begin, t->end));
    if (t->begin > covered)
      throw TensorFileError(path, fmt::format("bytes [{}, {}) of the data buffer belong to no tensor (the tensors "
                                              "must follow each other without gaps)",
                                              covered, t->begin));
    covered = t->end;
    previous = t;
  }
  if (covered != buffer_size)
    throw TensorFileError(path, fmt::format("trailing bytes: the tensors cover {} bytes, the data buffer has {}",
                                            covered, buffer_size));
}

SafetensorsLayout parse_safetensors(const std::filesystem::path& path, const unsigned char* bytes, std::size_t n) {
  const std::uint64_t header_size = safetensors_header_size(path, bytes, n);
  const nlohmann::json doc = safetensors_header_json(path, reinterpret_cast<const char*>(bytes + 8), header_size);
  SafetensorsLayout layout;
  layout.buffer_offset = 8 + header_size;
  const std::size_t buffer_size = n - layout.buffer_offset;
  for (const auto& [name, value] : doc.items()) {
    if (name == "__metadata__") {
      check_safetensors_metadata(path, value);
      continue;
    }
    layout.tensors.push_back(safetensors_entry(path, name, value, buffer_size));
  }
  check_safetensors_tiling(path, layout, buffer_size);
  return layout;
}

}  // namespace

// ---------------------------------------------------------------------------

TensorFileError::TensorFileError(const std::filesystem::path& path, const std::string& message)
    : std::runtime_error(path.string() + ": " + message), path_(path), message_(message) {}

// The whole file, memory-mapped (or, where mmap fails, read into memory).
struct TensorFile::Bytes {
  const unsigned char* data = nullptr;
  std::size_t size = 0;
  bool mapped = false;
  std::vector<unsigned char> copy;

  Bytes() = default;
  Bytes(const Bytes&) = delete;
  Bytes& operator=(const Bytes&) = delete;
  ~Bytes() {
    if (mapped) ::munmap(const_cast<unsigned char*>(data), size);
  }

  static std::unique_ptr<Bytes> load(const std::filesystem::path& path, const char* expected) {
    // O_NONBLOCK so that a FIFO planted in place of an output cannot block us.
    int fd;
    do fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      const int e = errno;
      if (e == ENOENT) throw TensorFileError(path, fmt::format("missing: no such file (expected {})", expected));
      throw TensorFileError(path, fmt::format("cannot open: {} (expected {})", std::strerror(e), expected));
    }
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st{};
    if (::fstat(fd, &st) != 0)
      throw TensorFileError(path, fmt::format("cannot stat: {} (expected {})", std::strerror(errno), expected));
    if (S_ISDIR(st.st_mode)) throw TensorFileError(path, fmt::format("is a directory, expected {}", expected));
    if (!S_ISREG(st.st_mode))
      throw TensorFileError(path, fmt::format("is not a regular file (a FIFO, socket or device), expected {}", expected));
    if (st.st_size == 0) throw TensorFileError(path, fmt::format("empty file (0 bytes), expected {}", expected));

    auto bytes = std::make_unique<Bytes>();
    bytes->size = static_cast<std::size_t>(st.st_size);
    void* p = ::mmap(nullptr, bytes->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      bytes->data = static_cast<const unsigned char*>(p);
      bytes->mapped = true;
      return bytes;
    }
    bytes->copy.resize(bytes->size);
    std::size_t done = 0;
    while (done < bytes->size) {
      const ssize_t r = ::pread(fd, bytes->copy.data() + done, bytes->size - done, static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw TensorFileError(path, fmt::format("cannot read: {}", std::strerror(errno)));
      if (r == 0)
        throw TensorFileError(path, fmt::format("the file shrank from {} to {} bytes while being read", bytes->size, done));
      done += static_cast<std::size_t>(r);
    }
    bytes->data = bytes->copy.data();
    return bytes;
  }

  // Sequential reads are the common case; the kernel may read ahead further.
  void advise_sequential() const {
    if (mapped) ::madvise(const_cast<unsigned char*>(data), size, MADV_SEQUENTIAL);
  }
};

TensorFile::TensorFile() = default;
// A moved-from TensorFile is empty (size 0), not a second view of the mapping.
TensorFile::TensorFile(TensorFile&& other) noexcept { *this = std::move(other); }
TensorFile& TensorFile::operator=(TensorFile&& other) noexcept {
  if (this != &other) {
    path_ = std::move(other.path_);
    dtype_ = std::move(other.dtype_);
    shape_ = std::exchange(other.shape_, {});
    size_ = std::exchange(other.size_, 0);
    element_bytes_ = std::exchange(other.element_bytes_, 0);
    fortran_order_ = std::exchange(other.fortran_order_, false);
    big_endian_ = std::exchange(other.big_endian_, false);
    kind_ = std::exchange(other.kind_, 0);
    bytes_ = std::move(other.bytes_);
    data_ = std::exchange(other.data_, nullptr);
  }
  return *this;
}
TensorFile::~TensorFile() = default;

const std::vector<std::string>& TensorFile::dtype_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& k : kKinds) v.push_back(k.name);
    return v;
  }();
  return names;
}

TensorFile TensorFile::open_npy(const std::filesystem::path& path, std::optional<std::string> declared_dtype) {
  TensorFile f;
  f.path_ = path;
  f.bytes_ = Bytes::load(path, "a .npy file");
  const NpyLayout layout = parse_npy(path, f.bytes_->data, f.bytes_->size, declared_dtype);
  f.kind_ = static_cast<unsigned char>(layout.kind->kind);
  f.dtype_ = layout.kind->name;
  f.element_bytes_ = layout.kind->bytes;
  f.shape_ = layout.shape;
  f.size_ = counts(f.shape_, 1)->first;
  f.fortran_order_ = layout.fortran_order;
  f.big_endian_ = layout.big_endian;
  f.data_ = f.bytes_->data + layout.data_offset;
  if (!f.fortran_order_ || f.shape_.size() < 2) f.bytes_->advise_sequential();
  return f;
}

TensorFile TensorFile::open_safetensors(const std::filesystem::path& path, const std::string& tensor_name) {
  TensorFile f;
  f.path_ = path;
  f.bytes_ = Bytes::load(path, "a .safetensors file");
  const SafetensorsLayout layout = parse_safetensors(path, f.bytes_->data, f.bytes_->size);
  const SafetensorsEntry* entry = nullptr;
  std::vector<std::string> names;
  for (const auto& t : layout.tensors) {
    names.push_back(t.name);
    if (t.name == tensor_name) entry = &t;
  }
  if (!entry) {
    std::sort(names.begin(), names.end());
    if (tensor_name.empty())
      throw TensorFileError(path, fmt::format("a tensor name is needed to read a .safetensors file; it holds {}",
                                              names_list(names)));
    throw TensorFileError(path, fmt::format("no tensor named '{}'; the file holds {}", escaped(tensor_name, 80),
                                            names_list(names)));
  }
  if (!entry->kind) {
    std::vector<std::string> supported;
    for (const auto& k : kKinds) supported.push_back(k.safetensors);
    throw TensorFileError(path, fmt::format("tensor '{}': unsupported dtype '{}' (expected one of {})",
                                            escaped(tensor_name, 80), escaped(entry->dtype, 40),
                                            fmt::join(supported, ", ")));
  }
  f.kind_ = static_cast<unsigned char>(entry->kind->kind);
  f.dtype_ = entry->kind->name;
  f.element_bytes_ = entry->kind->bytes;
  f.shape_ = entry->shape;
  f.size_ = counts(f.shape_, 1)->first;
  f.big_endian_ = false;  // safetensors is little-endian by definition
  f.data_ = f.bytes_->data + layout.buffer_offset + entry->begin;
  f.bytes_->advise_sequential();
  return f;
}

TensorFile TensorFile::open(const std::filesystem::path& path, const std::string& tensor_name,
                            std::optional<std::string> declared_dtype) {
  const std::string ext = path.extension().string();
  if (ext == ".npy") return open_npy(path, std::move(declared_dtype));
  if (ext == ".safetensors") {
    TensorFile f = open_safetensors(path, tensor_name);
    if (declared_dtype) {
      const KindInfo& want = declared_kind(path, *declared_dtype);
      if (f.dtype_ != want.name)
        throw TensorFileError(path, fmt::format("tensor '{}': declared dtype {} but the file holds {} ({})",
                                                escaped(tensor_name, 80), want.name, info(Kind(f.kind_)).safetensors,
                                                f.dtype_));
    }
    return f;
  }
  throw TensorFileError(path, fmt::format("unknown tensor file type '{}': expected NAME.npy or a .safetensors file",
                                          escaped(ext, 40)));
}

void TensorFile::read_doubles(std::size_t begin, std::size_t count, double* out) const {
  std::size_t end = 0;
  if (__builtin_add_overflow(begin, count, &end) || end > size_)
    throw std::out_of_range(fmt::format("{}: read_doubles of elements [{}, {} + {}) outside the {} elements",
                                        path_.string(), begin, begin, count, size_));
  if (count == 0) return;
  const bool swap = big_endian_ != (std::endian::native == std::endian::big);
  const bool fortran = fortran_order_ && shape_.size() > 1;
  with_kind(Kind(kind_), [&](auto kind) {
    constexpr Kind K = decltype(kind)::value;
    if (fortran) {
      if (swap) read_fortran<K, true>(data_, shape_, begin, count, out);
      else read_fortran<K, false>(data_, shape_, begin, count, out);
    } else {
      if (swap) read_contiguous<K, true>(data_, begin, count, out);
      else read_contiguous<K, false>(data_, begin, count, out);
    }
  });
}

}  // namespace densefeed
