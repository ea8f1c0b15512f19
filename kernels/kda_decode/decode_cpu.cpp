#include "decode_cpu.h"

#include <algorithm>
#include <cmath>

#include "bf16.h"

namespace densefeed::kda_decode {
namespace {

// fla's in-kernel L2 normalisation epsilon (reference.h, kL2NormEps), in fp32.
constexpr float kEps = 1e-6f;

// 1 / sqrt(sum(x^2) + eps) is not what upstream computes: it divides by the
// square root (b_q / tl.sqrt(tl.sum(b_q * b_q) + 1e-6)), so this returns the
// divisor and the callers divide.
float l2_divisor(const std::uint16_t* x, std::size_t n) {
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = bf16_bits_to_float(x[i]);
    sum += v * v;
  }
  return std::sqrt(sum + kEps);
}

}  // namespace

std::string_view to_string(Version version) {
  switch (version) {
    case Version::v0: return "v0";
    case Version::v3: return "v3";
  }
  return "?";
}

std::optional<Version> parse_version(std::string_view text) {
  if (text == "v0") return Version::v0;
  if (text == "v3") return Version::v3;
  return std::nullopt;
}

void row_factors(const BatchView& in, std::size_t b, std::size_t h, const StepOptions& options,
                 RowFactors& out) {
  const std::size_t H = in.spec.heads, K = in.spec.dim_k;
  const std::size_t bh = b * H + h;
  const std::uint16_t* q = &in.q[bh * K];
  const std::uint16_t* k = &in.k[bh * K];
  const std::uint16_t* g = &in.g_raw[bh * K];
  const float* bias = &in.dt_bias[h * K];
  const float q_div = l2_divisor(q, K);
  const float k_div = l2_divisor(k, K);
  const float scale = 1.0f / std::sqrt(static_cast<float>(K));
  const float a = std::exp(in.a_log[h]);
  out.k.resize(K);
  out.q.resize(K);
  out.decay.resize(K);
  for (std::size_t i = 0; i < K; ++i) {
    out.q[i] = bf16_bits_to_float(q[i]) / q_div * scale;
    out.k[i] = bf16_bits_to_float(k[i]) / k_div;
    const float x = a * (bf16_bits_to_float(g[i]) + bias[i]);
    const float sig = 1.0f / (1.0f + std::exp(-x));
    out.decay[i] = std::exp(options.lower_bound * sig);
  }
}

void update_columns(const BatchView& in, std::size_t b, std::size_t h, const RowFactors& f,
                    std::size_t c0, std::size_t c1, float* o, float* state_out) {
  const std::size_t H = in.spec.heads, K = in.spec.dim_k, V = in.spec.dim_v;
  const std::size_t bh = b * H + h;
  const float* s0 = &in.state[bh * K * V];
  const float beta = bf16_bits_to_float(in.beta[bh]);
  // Row-wise sweeps over the [K, c1 - c0] block so that memory is read in order;
  // each column's sums still run over i = 0..K-1 in order.
  float acc[kTileV];
  float u[kTileV];
  for (std::size_t c0b = c0; c0b < c1; c0b += kTileV) {
    const std::size_t w = std::min(kTileV, c1 - c0b);
    std::fill(acc, acc + w, 0.0f);
    for (std::size_t i = 0; i < K; ++i) {
      const float* row = &s0[i * V + c0b];
      float* out_row = &state_out[i * V + c0b];
      for (std::size_t j = 0; j < w; ++j) {
        const float s = row[j] * f.decay[i];
        out_row[j] = s;
        acc[j] += s * f.k[i];
      }
    }
    for (std::size_t j = 0; j < w; ++j) {
      u[j] = (bf16_bits_to_float(in.v[bh * V + c0b + j]) - acc[j]) * beta;
      acc[j] = 0.0f;
    }
    for (std::size_t i = 0; i < K; ++i) {
      float* out_row = &state_out[i * V + c0b];
      for (std::size_t j = 0; j < w; ++j) {
        const float s = out_row[j] + f.k[i] * u[j];
        out_row[j] = s;
        acc[j] += s * f.q[i];
      }
    }
    for (std::size_t j = 0; j < w; ++j) o[c0b + j] = acc[j];
  }
}

void decode_step_cpu(Version version, const BatchView& in, const StepOptions& options, float* o,
                     float* state_out) {
  const std::size_t B = in.spec.batch, H = in.spec.heads, K = in.spec.dim_k, V = in.spec.dim_v;
  RowFactors f;
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t bh = b * H + h;
      float* o_bh = &o[bh * V];
      float* s_bh = &state_out[bh * K * V];
      if (version == Version::v3) {
        row_factors(in, b, h, options, f);
        update_columns(in, b, h, f, 0, V, o_bh, s_bh);
      } else {
        // One upstream program per V-tile, each recomputing the factors.
        for (std::size_t c0 = 0; c0 < V; c0 += kTileV) {
          row_factors(in, b, h, options, f);
          update_columns(in, b, h, f, c0, std::min(V, c0 + kTileV), o_bh, s_bh);
        }
      }
    }
  }
}

}  // namespace densefeed::kda_decode
