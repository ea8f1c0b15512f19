/* The C entry point of the kda-decode gate's kernel: what the gate's frozen
 * benchmark driver (kda_decode_driver, driver_main.cpp) loads from the arm's
 * libkda_decode_kernel.so and times (README, "Timings the candidate cannot
 * forge"). The gate freezes this header.
 *
 * The driver draws the batch with the frozen input generator (inputs.h,
 * batch_inputs) as the harness does; on "cpu" it passes host pointers to
 * those buffers, on "cuda" device pointers (device 0) to copies it uploaded
 * once, as the harness's CUDA path does (cuda_path.h). Before every call,
 * outside the timed region, it fills o and state_out with NaN and, on
 * "cuda", flushes the L2 cache. Plain C. */
#ifndef DENSEFEED_KDA_DECODE_KERNEL_H
#define DENSEFEED_KDA_DECODE_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change of the struct below; the kernel refuses another. */
#define DENSEFEED_KDA_DECODE_ABI 1

/* One decode step of a batch (inputs.h gives the meaning of every array).
 * Row-major throughout; bf16 arrays are raw bits (uint16_t). */
typedef struct densefeed_kda_decode_problem {
  uint32_t abi;         /* DENSEFEED_KDA_DECODE_ABI */
  const char* version;  /* the arm's parameter: "v0" | "v3" */
  const char* device;   /* the arm's parameter: "cpu" (host pointers) | "cuda" (device pointers) */
  uint64_t batch;       /* B */
  uint64_t heads;       /* H */
  uint64_t dim_k;       /* K */
  uint64_t dim_v;       /* V */
  const uint16_t* q;      /* [B, H, K] */
  const uint16_t* k;      /* [B, H, K] */
  const uint16_t* g_raw;  /* [B, H, K] */
  const uint16_t* v;      /* [B, H, V] */
  const uint16_t* beta;   /* [B, H] */
  const float* a_log;     /* [H] */
  const float* dt_bias;   /* [H, K] */
  const float* state_in;  /* [B, H, K, V] fp32 */
  float* o;               /* out: [B, H, V] fp32 */
  float* state_out;       /* out: [B, H, K, V] fp32, the state after the step */
  char* error;            /* out: a NUL-terminated message when the call fails */
  size_t error_size;
} densefeed_kda_decode_problem;

/* Computes o and state_out. Returns 0, or non-zero with a message in
 * `error`. On "cuda" it launches on the legacy default stream and need not
 * synchronise: the driver records CUDA events around the call on that
 * stream and synchronises the device after it. */
typedef int densefeed_kda_decode_fn(const densefeed_kda_decode_problem* problem);
int densefeed_kda_decode_run(const densefeed_kda_decode_problem* problem);

#ifdef __cplusplus
}
#endif

#endif /* DENSEFEED_KDA_DECODE_KERNEL_H */
