#include "driver_cuda.h"

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace densefeed {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw DriverError(fmt::format("{}: {}", what, cudaGetErrorString(err)));
}

cudaEvent_t event(void* e) { return static_cast<cudaEvent_t>(e); }

}  // namespace

CudaEventTimer::CudaEventTimer() {
  check(cudaSetDevice(0), "cudaSetDevice(0)");
  check(cudaFree(nullptr), "cudaFree(0) (creating the device's context)");
  cudaEvent_t a = nullptr, b = nullptr;
  check(cudaEventCreate(&a), "cudaEventCreate");
  start_ = a;
  check(cudaEventCreate(&b), "cudaEventCreate");
  stop_ = b;
  check(cudaMalloc(&scratch_, 1), "cudaMalloc (the empty call's byte)");
  // One timed empty region, so that the first real sample pays nothing the
  // events or the synchronisation set up lazily.
  start();
  empty_call();
  (void)stop_ms();
}

CudaEventTimer::~CudaEventTimer() {
  if (start_ != nullptr) cudaEventDestroy(event(start_));
  if (stop_ != nullptr) cudaEventDestroy(event(stop_));
  if (scratch_ != nullptr) cudaFree(scratch_);
}

void CudaEventTimer::settle() { check(cudaDeviceSynchronize(), "the work before the call (cudaDeviceSynchronize)"); }

void CudaEventTimer::empty_call() { check(cudaMemsetAsync(scratch_, 0, 1, nullptr), "cudaMemsetAsync (the empty call)"); }

void CudaEventTimer::start() { check(cudaEventRecord(event(start_), nullptr), "cudaEventRecord (start)"); }

double CudaEventTimer::stop_ms() {
  check(cudaEventRecord(event(stop_), nullptr), "cudaEventRecord (stop)");
  check(cudaDeviceSynchronize(), "the kernel's work (cudaDeviceSynchronize)");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, event(start_), event(stop_)), "cudaEventElapsedTime");
  return ms;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  check(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() { cudaFree(ptr_); }

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes > bytes_) throw DriverError(fmt::format("upload of {} bytes into a device buffer of {}", bytes, bytes_));
  check(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
}

void DeviceBuffer::download(void* host, std::size_t bytes) const {
  if (bytes > bytes_) throw DriverError(fmt::format("download of {} bytes from a device buffer of {}", bytes, bytes_));
  check(cudaMemcpy(host, ptr_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
}

void DeviceBuffer::poison() { check(cudaMemset(ptr_, 0xFF, bytes_), "cudaMemset (poisoning outputs)"); }

L2Flush::L2Flush() {
  int l2 = 0;
  check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "cudaDeviceGetAttribute(L2 cache size)");
  buffer_ = std::make_unique<DeviceBuffer>(2 * static_cast<std::size_t>(l2 > 0 ? l2 : 1));
}

void L2Flush::operator()() {
  check(cudaMemset(buffer_->get(), static_cast<int>(++calls_ & 0xFF), buffer_->bytes()), "cudaMemset (L2 flush)");
}

}  // namespace densefeed
