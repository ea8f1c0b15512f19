#include "inputs.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <thread>

#include "bf16.h"

namespace densefeed::kda_decode {
namespace {

// splitmix64's output mix (Steele, Lea, Flood, "Fast Splittable Pseudorandom
// Number Generators", OOPSLA 2014; constants of Vigna's splitmix64.c,
// https://prng.di.unimi.it/splitmix64.c): a bijection of u64 with good avalanche.
std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// splitmix64's increment, 2^64 / golden ratio.
constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;

// Independent streams: element 3 of q and element 3 of k are separate draws.
enum class Stream : std::uint64_t {
  q = 1,
  k = 2,
  g_raw = 3,
  v = 4,
  beta = 5,
  state = 6,
  a_log = 7,
  dt_bias = 8,
};

// The key of one vector: (seed, stream, index) absorbed word by word, each step
// a bijection of the running hash, so distinct keys collide no more than
// random 64-bit values would.
std::uint64_t vector_key(std::uint64_t seed, Stream stream, std::uint64_t index) {
  std::uint64_t h = mix64(seed + kGamma);
  h = mix64((h ^ static_cast<std::uint64_t>(stream)) + kGamma);
  return mix64((h ^ index) + kGamma);
}

// Element e of a vector: splitmix64's e-th output from the vector's key. One
// mix per element, so the [B, H, K, V] state (5e8 elements at B = 512) is cheap.
std::uint64_t element_bits(std::uint64_t key, std::uint64_t e) {
  return mix64(key + (e + 1) * kGamma);
}

// Top 53 bits to a double strictly inside (0, 1), so log() below is finite.
double to_open_unit(std::uint64_t bits) {
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

// `count` N(0, 1) draws: elements 2p and 2p + 1 are the two outputs of one
// Box-Muller transform (Box & Muller, Ann. Math. Stat. 1958).
void fill_normals(std::uint64_t key, double* out, std::size_t count) {
  for (std::size_t p = 0; 2 * p < count; ++p) {
    const double u1 = to_open_unit(element_bits(key, 2 * p));
    const double u2 = to_open_unit(element_bits(key, 2 * p + 1));
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    out[2 * p] = r * std::cos(theta);
    if (2 * p + 1 < count) out[2 * p + 1] = r * std::sin(theta);
  }
}

// N(0, 1) rounded to fp32 then to bf16 (both round to nearest even).
void fill_bf16_normals(std::uint64_t key, std::vector<std::uint16_t>& out, std::size_t count,
                       std::vector<double>& scratch) {
  scratch.resize(count);
  fill_normals(key, scratch.data(), count);
  out.resize(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = float_to_bf16_bits(static_cast<float>(scratch[i]));
}

}  // namespace

void parallel_over(std::size_t n, const std::function<void(std::size_t, std::size_t)>& work) {
  const std::size_t threads =
      std::min<std::size_t>({n, std::max(1u, std::thread::hardware_concurrency()), std::size_t{16}});
  if (threads <= 1) {
    work(0, n);
    return;
  }
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back(work, n * t / threads, n * (t + 1) / threads);
  }
  for (auto& th : pool) th.join();
}

void check_spec(const InputSpec& spec) {
  const auto positive = [](std::size_t n, const char* name) {
    if (n == 0) throw std::invalid_argument(std::string("kda_decode inputs: ") + name + " must be positive");
  };
  positive(spec.batch, "batch");
  positive(spec.heads, "heads");
  positive(spec.dim_k, "dim_k");
  positive(spec.dim_v, "dim_v");
}

HeadParams head_params(const InputSpec& spec, std::size_t h) {
  HeadParams p;
  const double a = 1.0 + 15.0 * to_open_unit(element_bits(vector_key(spec.seed, Stream::a_log, h), 0));
  p.a_log = static_cast<float>(std::log(a));
  const std::uint64_t key = vector_key(spec.seed, Stream::dt_bias, h);
  p.dt_bias.resize(spec.dim_k);
  for (std::size_t i = 0; i < spec.dim_k; ++i) {
    p.dt_bias[i] = static_cast<float>(2.0 * to_open_unit(element_bits(key, i)) - 1.0);
  }
  return p;
}

void head_inputs(const InputSpec& spec, std::size_t b, std::size_t h, HeadInputs& out) {
  const std::uint64_t index = static_cast<std::uint64_t>(b) * spec.heads + h;
  std::vector<double> scratch;
  fill_bf16_normals(vector_key(spec.seed, Stream::q, index), out.q, spec.dim_k, scratch);
  fill_bf16_normals(vector_key(spec.seed, Stream::k, index), out.k, spec.dim_k, scratch);
  fill_bf16_normals(vector_key(spec.seed, Stream::g_raw, index), out.g_raw, spec.dim_k, scratch);
  fill_bf16_normals(vector_key(spec.seed, Stream::v, index), out.v, spec.dim_v, scratch);
  double x = 0.0;
  fill_normals(vector_key(spec.seed, Stream::beta, index), &x, 1);
  out.beta = float_to_bf16_bits(static_cast<float>(1.0 / (1.0 + std::exp(-x))));
  const std::uint64_t key = vector_key(spec.seed, Stream::state, index);
  const std::size_t n = spec.dim_k * spec.dim_v;
  out.state.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    out.state[i] = static_cast<float>(2.0 * to_open_unit(element_bits(key, i)) - 1.0);
  }
}

BatchInputs batch_inputs(const InputSpec& spec) {
  check_spec(spec);
  const std::size_t B = spec.batch, H = spec.heads, K = spec.dim_k, V = spec.dim_v;
  BatchInputs in;
  in.spec = spec;
  in.q.resize(B * H * K);
  in.k.resize(B * H * K);
  in.g_raw.resize(B * H * K);
  in.v.resize(B * H * V);
  in.beta.resize(B * H);
  in.a_log.resize(H);
  in.dt_bias.resize(H * K);
  in.state.resize(B * H * K * V);
  for (std::size_t h = 0; h < H; ++h) {
    const HeadParams p = head_params(spec, h);
    in.a_log[h] = p.a_log;
    std::copy(p.dt_bias.begin(), p.dt_bias.end(), in.dt_bias.begin() + static_cast<std::ptrdiff_t>(h * K));
  }
  // Every (b, h) is a pure function of the spec, written to its own slices, so
  // threads give the same bits as one thread.
  const auto fill = [&](std::size_t first, std::size_t last) {
    HeadInputs one;
    for (std::size_t bh = first; bh < last; ++bh) {
      head_inputs(spec, bh / H, bh % H, one);
      std::copy(one.q.begin(), one.q.end(), in.q.begin() + static_cast<std::ptrdiff_t>(bh * K));
      std::copy(one.k.begin(), one.k.end(), in.k.begin() + static_cast<std::ptrdiff_t>(bh * K));
      std::copy(one.g_raw.begin(), one.g_raw.end(), in.g_raw.begin() + static_cast<std::ptrdiff_t>(bh * K));
      std::copy(one.v.begin(), one.v.end(), in.v.begin() + static_cast<std::ptrdiff_t>(bh * V));
      in.beta[bh] = one.beta;
      std::copy(one.state.begin(), one.state.end(), in.state.begin() + static_cast<std::ptrdiff_t>(bh * K * V));
    }
  };
  parallel_over(B * H, fill);
  return in;
}

}  // namespace densefeed::kda_decode
