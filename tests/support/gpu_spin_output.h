// The .npy output of gpu_spin_harness, behind a C++17 interface: the CUDA
// source is compiled as C++17, npy_writer's C++20 header is not.
#pragma once

#include <cstddef>
#include <string>

// Writes a 1-d float32 / float64 array of n elements to `path` (NumPy .npy).
void write_vector_npy(const std::string& path, const float* data, std::size_t n);
void write_vector_npy(const std::string& path, const double* data, std::size_t n);
