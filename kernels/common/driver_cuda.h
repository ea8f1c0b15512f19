// The GPU side of a trusted C++ benchmark driver (driver.h), built only with
// CUDA: the device timer and the device memory a driver prepares for the
// arm's kernel. Plain C++ over the CUDA runtime API (no kernels of its own);
// the runtime is the shared libcudart, one instance for the driver and the
// kernel library it loads.
#pragma once

#include <cstddef>
#include <memory>

#include "driver.h"

namespace densefeed {

// Times a call on device 0 with CUDA events on the legacy default stream:
// start recorded before the call, stop after it, then cudaDeviceSynchronize,
// so a sample is the device time from the first of the call's work to the
// last on any stream that synchronises with the legacy one (the default
// stream, per-thread default streams, streams created without
// cudaStreamNonBlocking). Work on a non-blocking stream is outside the
// events but inside the synchronisation: densefeed's wall-time fit sees it
// (timing_checks.h). A CUDA error of the call (a fault, a failed launch)
// throws DriverError naming it. The constructor creates device 0's primary
// context; construct it before Driver::load_kernel() so that the context's
// threads are the driver's.
class CudaEventTimer : public CallTimer {
 public:
  CudaEventTimer();
  ~CudaEventTimer() override;
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;
  void start() override;
  double stop_ms() override;
  // A 1-byte cudaMemsetAsync on the legacy default stream: one device
  // operation's launch and completion, as the least a kernel call costs.
  void empty_call() override;
  // cudaDeviceSynchronize: the flush and uploads before a call end before
  // densefeed's bracket opens (the events never saw them; the bracket did,
  // 20 us of each 40 to 60 us iteration of kda-decode on the H200).
  void settle() override;

 private:
  void* start_ = nullptr;  // cudaEvent_t
  void* stop_ = nullptr;
  void* scratch_ = nullptr;  // 1 byte of device memory
};

// cudaMalloc'd memory of device 0, freed with it. Throws DriverError naming
// the call on any CUDA failure.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  void upload(const void* host, std::size_t bytes);
  void download(void* host, std::size_t bytes) const;
  // Every byte 0xFF: every float32 / float64 element a NaN.
  void poison();

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Writes twice device 0's L2 cache size before a timed call (outside the
// timed region), so that the call reads its inputs from device memory, as
// the harnesses' own CUDA benchmarks do (kernels/kda_decode/cuda_path.h).
class L2Flush {
 public:
  L2Flush();
  void operator()();

 private:
  std::unique_ptr<DeviceBuffer> buffer_;
  unsigned calls_ = 0;
};

}  // namespace densefeed
