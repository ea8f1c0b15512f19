// Read-only access to one tensor of a file written by an untrusted harness:
// NumPy .npy (format versions 1.0, 2.0 and 3.0, NEP 1 / numpy/lib/format.py)
// or one named tensor of a .safetensors file (huggingface/safetensors,
// README "Format"). The file is memory-mapped, so a 1 GiB output is never
// copied; elements are converted to fp64 block by block on request.
//
// Every byte of the file is checked before any element is read: a malformed,
// truncated or over-long file is a TensorFileError that names the file, what
// was wrong and what was expected, never a crash or an out-of-bounds read.
// The mapping assumes nobody truncates the file while it is open (the runner
// has killed the harness's process group before its outputs are read).
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace densefeed {

// what() is "PATH: MESSAGE".
class TensorFileError : public std::runtime_error {
 public:
  TensorFileError(const std::filesystem::path& path, const std::string& message);
  const std::filesystem::path& path() const { return path_; }
  const std::string& message() const { return message_; }

 private:
  std::filesystem::path path_;
  std::string message_;
};

// dtype names: "float64", "float32", "float16", "bfloat16", "float8_e4m3fn",
// "float8_e5m2", "int8", "int16", "int32", "int64", "uint8", "uint16",
// "uint32", "uint64", "bool".
class TensorFile {
 public:
  // NAME.npy. `declared_dtype` is the dtype the gate declares for the output:
  // - bfloat16, float8_e4m3fn, float8_e5m2 have no NumPy dtype, so harnesses
  //   store them as raw records: bfloat16 as '<u2', '<i2' or '|V2' (or '>u2',
  //   '>i2' byte-swapped), fp8 as '|u1', '|i1' or '|V1'. They are read as such
  //   only when declared; raw 'V' records without a declaration are refused.
  // - any other declared dtype must be the file's dtype.
  // Throws TensorFileError.
  static TensorFile open_npy(const std::filesystem::path& path, std::optional<std::string> declared_dtype = {});

  // Tensor `tensor_name` of a .safetensors file. The whole header is
  // validated as the reference implementation does (safetensors'
  // `Metadata::validate`): header size at most 100 MB and within the file, a
  // JSON object without duplicate keys, every tensor's data_offsets matching
  // dtype size x shape, and the tensors tiling the byte buffer exactly (no
  // overlap, no gap, no trailing bytes). Throws TensorFileError, for an
  // unknown name listing the names present.
  static TensorFile open_safetensors(const std::filesystem::path& path, const std::string& tensor_name);

  // Picks by extension: ".npy" (tensor_name unused) or ".safetensors"
  // (tensor_name required). A declared dtype is checked for both.
  static TensorFile open(const std::filesystem::path& path, const std::string& tensor_name,
                         std::optional<std::string> declared_dtype = {});

  TensorFile(TensorFile&&) noexcept;
  TensorFile& operator=(TensorFile&&) noexcept;
  TensorFile(const TensorFile&) = delete;
  TensorFile& operator=(const TensorFile&) = delete;
  ~TensorFile();  // unmaps

  const std::string& dtype() const { return dtype_; }
  const std::vector<std::size_t>& shape() const { return shape_; }  // C order; {} for a 0-d array
  std::size_t size() const { return size_; }                         // elements (1 for 0-d)
  const std::filesystem::path& path() const { return path_; }
  std::size_t element_bytes() const { return element_bytes_; }
  bool fortran_order() const { return fortran_order_; }  // as stored; reads are C order regardless
  bool big_endian() const { return big_endian_; }

  // Converts elements [begin, begin + count) in C (row-major) order to fp64
  // into out[0, count). Exact for every dtype except int64/uint64 beyond 2^53
  // (rounded to nearest). NaN stays NaN (payload not kept), bool is 0 or 1
  // (any non-zero byte is 1). Fortran order and big-endian storage are mapped
  // here. Little-endian C-order data is a straight vectorised loop.
  // Throws std::out_of_range when begin + count > size().
  void read_doubles(std::size_t begin, std::size_t count, double* out) const;

  // The dtype names above.
  static const std::vector<std::string>& dtype_names();

 private:
  struct Bytes;

  TensorFile();

  std::filesystem::path path_;
  std::string dtype_;
  std::vector<std::size_t> shape_;
  std::size_t size_ = 0;
  std::size_t element_bytes_ = 0;
  bool fortran_order_ = false;
  bool big_endian_ = false;
  unsigned char kind_ = 0;  // index into tensor_file.cpp's dtype table
  std::unique_ptr<Bytes> bytes_;  // the whole file
  const unsigned char* data_ = nullptr;  // first element inside bytes_
};

}  // namespace densefeed
