#include "gpu_spin_output.h"

#include <span>
#include <vector>

#include "npy_writer.h"

void write_vector_npy(const std::string& path, const float* data, std::size_t n) {
  densefeed::write_npy(path, std::span<const float>(data, n), std::vector<std::size_t>{n});
}

void write_vector_npy(const std::string& path, const double* data, std::size_t n) {
  densefeed::write_npy(path, std::span<const double>(data, n), std::vector<std::size_t>{n});
}
