#include "machine_ceilings.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "environment.h"
#include "ledger.h"
#include "process_runner.h"

namespace densefeed {

MachineCeilings measure_cpu_ceilings() {
  MachineCeilings m;
  const Environment env = collect_environment();
  m.host = env.host;
  m.device = "cpu";
  m.device_name = env.cpu_model;
  m.tool = "densefeed machine calibrate (std::memcpy, 32 KiB to 256 MiB, best of 7)";
  m.measured_at = utc_now();
  nlohmann::ordered_json per_size = nlohmann::ordered_json::object();
  for (std::size_t bytes = std::size_t{32} << 10; bytes <= std::size_t{256} << 20; bytes *= 4) {
    std::vector<unsigned char> src(bytes, 1), dst(bytes, 0);
    // Enough copies per timing that one lasts at least about 1 ms.
    const std::size_t reps = std::max<std::size_t>(1, (std::size_t{8} << 20) / bytes);
    double best_s = 1e30;
    for (int t = 0; t < 8; ++t) {
      const auto a = std::chrono::steady_clock::now();
      for (std::size_t r = 0; r < reps; ++r) {
        std::memcpy(dst.data(), src.data(), bytes);
        src[r % bytes] = static_cast<unsigned char>(dst[(r * 7) % bytes] + 1);  // the copies cannot be elided
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
      if (t > 0) best_s = std::min(best_s, s);
    }
    const double bps = 2.0 * static_cast<double>(bytes) * static_cast<double>(reps) / best_s;
    per_size[std::to_string(bytes)] = bps;
    m.bytes_per_s = std::max(m.bytes_per_s, bps);
  }
  m.figures = {{"copy_bytes_per_s_by_size", per_size}};
  return m;
}

std::optional<MachineCeilings> measure_gpu_ceilings(const std::filesystem::path& probe, std::string* why) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(probe, ec)) {
    *why = fmt::format("{} is not installed (densefeed was built without CUDA)", probe.string());
    return std::nullopt;
  }
  const auto out = capture_output({probe.string()}, std::filesystem::current_path(), std::chrono::minutes(5));
  if (!out) {
    *why = fmt::format("{} found no GPU or failed (run it by hand to see why)", probe.string());
    return std::nullopt;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(*out);
  } catch (const nlohmann::json::parse_error& e) {
    *why = fmt::format("{} printed no JSON: {}", probe.string(), e.what());
    return std::nullopt;
  }
  MachineCeilings m;
  m.host = collect_environment().host;
  m.device = doc.value("uuid", "");
  m.device_name = doc.value("device", "");
  m.bytes_per_s = doc.value("copy_bytes_per_s", 0.0);
  m.flops_per_s = std::max(doc.value("fp32_flops_per_s", 0.0), doc.value("bf16_flops_per_s", 0.0));
  m.figures = doc;
  m.tool = "densefeed-gpu-ceilings (device-to-device copy of 1 GiB, cublasGemmEx 8192^3 fp32 and bf16)";
  m.measured_at = utc_now();
  if (m.device.empty() || !(m.bytes_per_s > 0)) {
    *why = fmt::format("{} printed no device or copy rate", probe.string());
    return std::nullopt;
  }
  return m;
}

Ceilings ceilings_of(const MachineCeilings& m) {
  return Ceilings{m.bytes_per_s, m.flops_per_s,
                  fmt::format("{} on {} ({}) at {}", m.tool, m.host, m.device_name.empty() ? m.device : m.device_name, m.measured_at)};
}

Ceilings fastest_ceilings(const std::vector<MachineCeilings>& devices) {
  const MachineCeilings* bytes = &devices.front();
  const MachineCeilings* flops = &devices.front();
  for (const auto& d : devices) {
    if (d.bytes_per_s > bytes->bytes_per_s) bytes = &d;
    if (d.flops_per_s > flops->flops_per_s) flops = &d;
  }
  Ceilings c = ceilings_of(*bytes);
  c.flops_per_s = flops->flops_per_s;
  if (flops != bytes && flops->flops_per_s > 0) c.source += "; FLOP/s: " + ceilings_of(*flops).source;
  return c;
}

}  // namespace densefeed
