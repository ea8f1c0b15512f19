#include "npy_writer.h"

#include <bit>
#include <cstdint>
#include <fstream>
#include <limits>

#include <fmt/format.h>

namespace densefeed {
namespace {

// The data is written as the host lays it out; "<f4"/"<f8" promise little-endian.
static_assert(std::endian::native == std::endian::little,
              "npy_writer writes host byte order and declares it little-endian");

constexpr char kMagic[] = "\x93NUMPY";             // 6 bytes, then major/minor version.
constexpr std::size_t kPreambleBytes = 6 + 2 + 2;  // magic, version, u16 header length.
constexpr std::size_t kAlignment = 64;

std::string shape_tuple(std::span<const std::size_t> shape) {
  // Python tuple syntax: "()", "(5,)", "(2, 3)".
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}", shape[i]);
  }
  if (shape.size() == 1) out += ",";
  out += ")";
  return out;
}

template <typename T>
void write_npy_impl(const std::filesystem::path& path, std::span<const T> data,
                    std::span<const std::size_t> shape, const std::string& descr) {
  std::size_t count = 1;
  for (std::size_t d : shape) {
    if (d != 0 && count > std::numeric_limits<std::size_t>::max() / d) {
      throw NpyWriteError(
          fmt::format("{}: shape {} overflows size_t", path.string(), shape_tuple(shape)));
    }
    count *= d;
  }
  if (count != data.size()) {
    throw NpyWriteError(fmt::format("{}: shape {} holds {} elements but {} were given",
                                    path.string(), shape_tuple(shape), count, data.size()));
  }
  const std::string header = npy_header(descr, shape);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    throw NpyWriteError(fmt::format("{}: cannot open for writing", path.string()));
  }
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size_bytes()));
  out.close();
  if (!out) {
    throw NpyWriteError(fmt::format("{}: write failed", path.string()));
  }
}

}  // namespace

std::string npy_header(const std::string& descr, std::span<const std::size_t> shape) {
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr,
                                 shape_tuple(shape));
  // Pad with spaces so that preamble + dict + '\n' is a multiple of 64 bytes.
  const std::size_t unpadded = kPreambleBytes + dict.size() + 1;
  const std::size_t padded = (unpadded + kAlignment - 1) / kAlignment * kAlignment;
  dict.append(padded - unpadded, ' ');
  dict.push_back('\n');
  if (dict.size() > std::numeric_limits<std::uint16_t>::max()) {
    throw NpyWriteError(
        fmt::format("npy header of {} bytes exceeds format 1.0's limit", dict.size()));
  }
  std::string header(kMagic, 6);
  header.push_back('\x01');  // major version
  header.push_back('\x00');  // minor version
  const auto len = static_cast<std::uint16_t>(dict.size());
  header.push_back(static_cast<char>(len & 0xFF));
  header.push_back(static_cast<char>(len >> 8));
  header += dict;
  return header;
}

void write_npy(const std::filesystem::path& path, std::span<const float> data,
               std::span<const std::size_t> shape) {
  static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559);
  write_npy_impl(path, data, shape, "<f4");
}

void write_npy(const std::filesystem::path& path, std::span<const double> data,
               std::span<const std::size_t> shape) {
  static_assert(sizeof(double) == 8 && std::numeric_limits<double>::is_iec559);
  write_npy_impl(path, data, shape, "<f8");
}

}  // namespace densefeed
