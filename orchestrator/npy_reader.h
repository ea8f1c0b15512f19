// Reads NumPy .npy files (format versions 1.0, 2.0 and 3.0, as specified in
// numpy/lib/format.py / NEP 1) written by untrusted harnesses: every header
// field is checked and the data size must match the shape exactly.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace densefeed {

// A tensor read into fp64 (exact for float16/32/64 and for integers up to 2^53).
struct Tensor {
  std::string dtype;               // NumPy name: float16, float32, float64, int32, int64, uint8, bool, ...
  std::vector<std::size_t> shape;  // C order
  std::vector<double> data;        // product(shape) elements
};

// Throws std::runtime_error with a message naming the file and what was wrong
// (bad magic, unsupported dtype, Fortran order, truncated data, trailing bytes).
Tensor read_npy(const std::filesystem::path& path);

// "[4, 1, 128, 128]".
std::string shape_text(const std::vector<std::size_t>& shape);

}  // namespace densefeed
