#include "npy_reader.h"

#include <bit>
#include <cmath>
#include <map>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace densefeed {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw std::runtime_error(fmt::format("{}: {}", path.string(), what));
}

double half_to_double(std::uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double value;
  if (exponent == 0) value = std::ldexp(mantissa, -24);
  else if (exponent == 31) value = mantissa ? std::nan("") : INFINITY;
  else value = std::ldexp(mantissa + 1024, exponent - 25);
  return sign ? -value : value;
}

struct Dtype {
  std::string name;
  std::size_t size;
};

// descr like '<f4', '|u1', '<i8'. Big-endian data is refused rather than
// swapped: no harness we know writes it.
Dtype parse_descr(const std::filesystem::path& path, const std::string& descr) {
  if (descr.size() < 3) fail(path, fmt::format("unsupported dtype descr '{}'", descr));
  const char order = descr[0];
  const std::string kind_size = descr.substr(1);
  if (order == '>') fail(path, fmt::format("big-endian dtype '{}' is not supported", descr));
  if (order != '<' && order != '|' && order != '=') fail(path, fmt::format("bad byte order in descr '{}'", descr));
  static const std::map<std::string, Dtype> known = {
      {"f2", {"float16", 2}}, {"f4", {"float32", 4}}, {"f8", {"float64", 8}}, {"i1", {"int8", 1}},
      {"i2", {"int16", 2}},   {"i4", {"int32", 4}},   {"i8", {"int64", 8}},   {"u1", {"uint8", 1}},
      {"u2", {"uint16", 2}},  {"u4", {"uint32", 4}},  {"u8", {"uint64", 8}},  {"b1", {"bool", 1}}};
  auto it = known.find(kind_size);
  if (it == known.end()) fail(path, fmt::format("unsupported dtype descr '{}'", descr));
  return it->second;
}

template <typename T>
void convert(const std::vector<char>& raw, std::vector<double>& out) {
  const std::size_t n = raw.size() / sizeof(T);
  out.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
}

}  // namespace

std::string shape_text(const std::vector<std::size_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Tensor read_npy(const std::filesystem::path& path) {
  static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian host");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "missing or unreadable (the harness did not write it)");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  std::uint32_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) fail(path, "truncated header");
    header_len = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) fail(path, "truncated header");
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
  } else {
    fail(path, fmt::format("unsupported .npy format version {}", major));
  }
  if (header_len > (1u << 20)) fail(path, "header longer than 1 MiB");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail(path, "truncated header");

  static const std::regex descr_re("'descr'\\s*:\\s*'([^']*)'");
  static const std::regex fortran_re("'fortran_order'\\s*:\\s*(True|False)");
  static const std::regex shape_re("'shape'\\s*:\\s*\\(([^)]*)\\)");
  std::smatch m;
  if (!std::regex_search(header, m, descr_re)) fail(path, "header has no simple 'descr' (structured dtypes are not supported)");
  const Dtype dtype = parse_descr(path, m[1].str());
  if (!std::regex_search(header, m, fortran_re)) fail(path, "header has no 'fortran_order'");
  if (m[1].str() == "True") fail(path, "Fortran-ordered arrays are not supported; write C order");
  if (!std::regex_search(header, m, shape_re)) fail(path, "header has no 'shape'");

  Tensor t;
  t.dtype = dtype.name;
  const std::string dims = m[1].str();
  std::size_t count = 1;
  static const std::regex dim_re("\\s*([0-9]+)\\s*(,|$)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), dim_re); it != std::sregex_iterator(); ++it) {
    const std::size_t d = std::stoull((*it)[1].str());
    if (d != 0 && count > (std::size_t{1} << 40) / d) fail(path, "shape too large");
    t.shape.push_back(d);
    count *= d;
  }
  const std::size_t bytes = count * dtype.size;
  std::vector<char> raw(bytes);
  if (bytes > 0 && !in.read(raw.data(), static_cast<std::streamsize>(bytes))) {
    fail(path, fmt::format("data truncated: shape {} {} needs {} bytes", shape_text(t.shape), t.dtype, bytes));
  }
  if (in.peek() != std::char_traits<char>::eof()) fail(path, "trailing bytes after the data");

  if (dtype.name == "float16") {
    t.data.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      std::uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      t.data[i] = half_to_double(h);
    }
  } else if (dtype.name == "float32") convert<float>(raw, t.data);
  else if (dtype.name == "float64") convert<double>(raw, t.data);
  else if (dtype.name == "int8") convert<std::int8_t>(raw, t.data);
  else if (dtype.name == "int16") convert<std::int16_t>(raw, t.data);
  else if (dtype.name == "int32") convert<std::int32_t>(raw, t.data);
  else if (dtype.name == "int64") convert<std::int64_t>(raw, t.data);
  else if (dtype.name == "uint8" || dtype.name == "bool") convert<std::uint8_t>(raw, t.data);
  else if (dtype.name == "uint16") convert<std::uint16_t>(raw, t.data);
  else if (dtype.name == "uint32") convert<std::uint32_t>(raw, t.data);
  else if (dtype.name == "uint64") convert<std::uint64_t>(raw, t.data);
  return t;
}

}  // namespace densefeed
