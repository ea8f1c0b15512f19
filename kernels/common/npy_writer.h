// Writes NumPy .npy files (format version 1.0), the gate outputs of the harness
// protocol. Format: https://numpy.org/devdocs/reference/generated/numpy.lib.format.html
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>

namespace densefeed {

// Thrown when a .npy file cannot be written or its shape does not match its data.
// The message names the file.
class NpyWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds the complete .npy v1.0 header (magic, version, header length, dict,
// space padding, '\n') for a C-order array of dtype `descr` ("<f4", "<f8") and
// `shape`. Its length is a multiple of 64 bytes, as the format asks so that the
// data is aligned when the file is memory-mapped.
// Throws NpyWriteError if the dict does not fit v1.0's 16-bit header length.
std::string npy_header(const std::string& descr, std::span<const std::size_t> shape);

// Writes `data` (C order, little-endian float32 "<f4") with `shape` to `path`,
// replacing the file. data.size() must equal the product of `shape` (1 for an
// empty shape, i.e. a 0-d array).
// Throws NpyWriteError naming `path` on a size mismatch or any I/O failure.
void write_npy(const std::filesystem::path& path, std::span<const float> data,
               std::span<const std::size_t> shape);

// Same for float64 ("<f8").
void write_npy(const std::filesystem::path& path, std::span<const double> data,
               std::span<const std::size_t> shape);

}  // namespace densefeed
