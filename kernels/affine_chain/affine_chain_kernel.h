/* The C entry point of the cp-affine-chain gate's kernel: what the gate's
 * frozen benchmark driver (affine_chain_driver, driver_main.cpp) loads from
 * the arm's libaffine_chain_kernel.so and times (README, "Timings the
 * candidate cannot forge"). The gate freezes this header: an arm changes
 * what is behind the entry point, never its shape.
 *
 * The driver prepares one case's inputs with the frozen code the reference
 * uses (chunk plan, inputs, fp64 chunk reduction; chunk_plan.h,
 * chunk_pairs.h, reference.h), exactly as the harness's bench mode prepares
 * them (prepare_head, affine_chain.h), rounds the chunk pairs to fp32 and
 * calls the entry point once per iteration on the same host buffers.
 * Plain C, so that any language's kernel can sit behind it. */
#ifndef DENSEFEED_AFFINE_CHAIN_KERNEL_H
#define DENSEFEED_AFFINE_CHAIN_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change of the structs below; the kernel refuses another. */
#define DENSEFEED_AFFINE_CHAIN_ABI 1

/* One chunk of the plan (chunk_plan.h, Chunk): tokens [t0, t0 + count) of
 * `sequence` inside `shard`; the flags are 0 or 1. */
typedef struct densefeed_affine_chain_chunk {
  uint64_t t0;
  uint64_t count;
  uint64_t sequence;
  uint64_t shard;
  int32_t begins_sequence;
  int32_t ends_sequence;
} densefeed_affine_chain_chunk;

/* One case, all in host memory the driver owns. Row-major throughout. */
typedef struct densefeed_affine_chain_problem {
  uint32_t abi;          /* DENSEFEED_AFFINE_CHAIN_ABI */
  const char* path;      /* "partitioned" or "unpartitioned" (the gate's candidate path) */
  const char* precision; /* the arm's parameter: "ieee" | "tf32" | "tf32-rn" | "tf32x3" */
  const char* device;    /* the arm's parameter: "cpu" | "cuda" */
  uint64_t heads;        /* H */
  uint64_t sequences;    /* S */
  uint64_t chunks;       /* C, entries of `plan` */
  uint64_t shards;       /* R */
  uint64_t dim_k;        /* K */
  uint64_t dim_v;        /* V */
  const densefeed_affine_chain_chunk* plan; /* [C], in token order */
  const float* transitions;      /* [H, C, K, K] chunk transitions M_c, fp32 */
  const float* contributions;    /* [H, C, K, V] chunk contributions H_c, fp32 */
  const double* initial_states;  /* [H, S, K, V] initial states S0 (fp32 values) */
  /* Out: [S, H, K, V], the final state of every sequence, fp32. The driver
   * fills it with NaN before each call. */
  float* final_states;
  /* Out: a NUL-terminated message when the call fails. */
  char* error;
  size_t error_size;
} densefeed_affine_chain_problem;

/* Computes final_states from the problem. Returns 0, or non-zero with a
 * message in `error`. The driver times the whole call (on "cuda": CUDA
 * events on the legacy default stream and a device synchronisation after
 * it). The inputs at these addresses do not change between calls with the
 * same problem, so a kernel may keep copies of them (device memory) from
 * one call to the next; it computes the outputs in every call. */
typedef int densefeed_affine_chain_fn(const densefeed_affine_chain_problem* problem);
int densefeed_affine_chain_run(const densefeed_affine_chain_problem* problem);

#ifdef __cplusplus
}
#endif

#endif /* DENSEFEED_AFFINE_CHAIN_KERNEL_H */
