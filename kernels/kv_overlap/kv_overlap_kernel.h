/* The C entry point of the kv-overlap gate's kernel: what the gate's frozen
 * benchmark driver (kv_overlap_driver, driver_main.cpp) loads from the arm's
 * libkv_overlap_kernel.so and times (README, "Timings the candidate cannot
 * forge"). The gate freezes this header.
 *
 * One call is one prefill_kv run of the serving model (serving_model.h): the
 * prefill loop and the KV transfer beside it, until both have ended. The
 * driver fills the source with the frozen KV values (kv_values.h) as the
 * reference does and poisons the received buffer with NaN before every
 * call, outside the timed region. Plain C. */
#ifndef DENSEFEED_KV_OVERLAP_KERNEL_H
#define DENSEFEED_KV_OVERLAP_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change of the struct below; the kernel refuses another. */
#define DENSEFEED_KV_OVERLAP_ABI 1

/* One case; times in microseconds, as the harness's flags give them. */
typedef struct densefeed_kv_overlap_problem {
  uint32_t abi;          /* DENSEFEED_KV_OVERLAP_ABI */
  const char* variant;   /* the arm's parameter: "hold" | "release" */
  uint64_t steps;        /* prefill steps */
  uint64_t step_us;      /* kernel time per step */
  uint64_t host_us;      /* host work per step under the lock */
  uint64_t switch_steps; /* whole steps held before a waiting thread gets the lock */
  uint64_t chunks;       /* KV chunks */
  uint64_t chunk_elems;  /* float32 elements per chunk */
  uint64_t chunk_us;     /* copy time per chunk */
  uint64_t submit_us;    /* CPU time of one submission, under the lock */
  uint64_t window;       /* chunks in flight at most */
  const float* kv_source; /* [chunks, chunk_elems] */
  float* kv_received;     /* out: [chunks, chunk_elems], what the transfer delivered */
  char* error;            /* out: a NUL-terminated message when the call fails */
  size_t error_size;
} densefeed_kv_overlap_problem;

/* One prefill_kv run. Returns 0, or non-zero with a message in `error`.
 * Every thread it starts has ended when it returns. */
typedef int densefeed_kv_overlap_fn(const densefeed_kv_overlap_problem* problem);
int densefeed_kv_overlap_run(const densefeed_kv_overlap_problem* problem);

#ifdef __cplusplus
}
#endif

#endif /* DENSEFEED_KV_OVERLAP_KERNEL_H */
