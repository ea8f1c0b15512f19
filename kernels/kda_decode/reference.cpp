#include "reference.h"

#include <cmath>
#include <vector>

#include "bf16.h"

namespace densefeed::kda_decode {

void reference_head_step(const HeadParams& params, const HeadInputs& in, double* o, double* state_out) {
  const std::size_t K = in.q.size();
  const std::size_t V = in.v.size();
  std::vector<double> q(K), k(K), decay(K);
  double qq = 0.0, kk = 0.0;
  for (std::size_t i = 0; i < K; ++i) {
    q[i] = bf16_bits_to_float(in.q[i]);
    k[i] = bf16_bits_to_float(in.k[i]);
    qq += q[i] * q[i];
    kk += k[i] * k[i];
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(K));
  const double q_factor = scale / std::sqrt(qq + kL2NormEps);
  const double k_factor = 1.0 / std::sqrt(kk + kL2NormEps);
  const double a = std::exp(static_cast<double>(params.a_log));
  for (std::size_t i = 0; i < K; ++i) {
    q[i] *= q_factor;
    k[i] *= k_factor;
    const double x = a * (static_cast<double>(bf16_bits_to_float(in.g_raw[i])) + params.dt_bias[i]);
    const double g = kLowerBound / (1.0 + std::exp(-x));
    decay[i] = std::exp(g);
  }
  const double beta = bf16_bits_to_float(in.beta);
  // Column by column: every column of S is updated independently.
  std::vector<double> col(K);
  for (std::size_t c = 0; c < V; ++c) {
    double kS = 0.0;
    for (std::size_t i = 0; i < K; ++i) {
      col[i] = decay[i] * static_cast<double>(in.state[i * V + c]);
      kS += k[i] * col[i];
    }
    const double u = beta * (static_cast<double>(bf16_bits_to_float(in.v[c])) - kS);
    double out = 0.0;
    for (std::size_t i = 0; i < K; ++i) {
      col[i] += k[i] * u;
      out += q[i] * col[i];
      state_out[i * V + c] = col[i];
    }
    o[c] = out;
  }
}

}  // namespace densefeed::kda_decode
