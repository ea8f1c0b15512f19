#include "machine_ceilings.h"

#include "utc_time.h"

#include <algorithm>
#include <filesystem>
#include <cstdlib>
#include <cctype>
#include <map>
#include <fstream>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "environment.h"
#include "process_runner.h"

namespace densefeed {

double last_level_cache_bytes() {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::map<std::string, double> shared;  // shared_cpu_list -> bytes of the highest-level cache
  for (const auto& cpu : fs::directory_iterator("/sys/devices/system/cpu", ec)) {
    const std::string name = cpu.path().filename().string();
    if (name.rfind("cpu", 0) != 0 || name.size() < 4 || !std::isdigit(static_cast<unsigned char>(name[3]))) continue;
    int best_level = 0;
    double best_bytes = 0;
    std::string best_list;
    for (const auto& index : fs::directory_iterator(cpu.path() / "cache", ec)) {
      if (index.path().filename().string().rfind("index", 0) != 0) continue;
      std::ifstream level_in(index.path() / "level"), size_in(index.path() / "size"), list_in(index.path() / "shared_cpu_list");
      int level = 0;
      std::string size, list;
      if (!(level_in >> level) || !(size_in >> size) || size.empty()) continue;
      std::getline(list_in, list);
      double bytes = std::strtod(size.c_str(), nullptr);
      if (size.back() == 'K') bytes *= 1024;
      else if (size.back() == 'M') bytes *= 1048576;
      else if (size.back() == 'G') bytes *= 1073741824;
      if (level > best_level) best_level = level, best_bytes = bytes, best_list = list.empty() ? name : list;
    }
    if (best_bytes > 0) shared[best_list] = best_bytes;
  }
  double total = 0;
  for (const auto& [list, bytes] : shared) total += bytes;
  return total;
}

MachineCeilings measure_cpu_ceilings() {
  MachineCeilings m;
  const Environment env = collect_environment();
  m.host = env.host;
  m.device = "cpu";
  m.device_name = env.cpu_model;
  const double cache = last_level_cache_bytes();
  std::size_t largest = std::size_t{256} << 20;
  while (static_cast<double>(largest) < 4 * cache) largest *= 4;
  m.tool = fmt::format("densefeed machine calibrate (std::memcpy, 32 KiB to {} MiB, best of 7)", largest >> 20);
  m.measured_at = utc_now();
  nlohmann::ordered_json per_size = nlohmann::ordered_json::object();
  double memory = 0;
  for (std::size_t bytes = std::size_t{32} << 10; bytes <= largest; bytes *= 4) {
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
    if (cache > 0 && static_cast<double>(bytes) >= 4 * cache) memory = bps;
  }
  m.figures = {{"copy_bytes_per_s_by_size", per_size}, {"memory_copy_bytes_per_s", memory}, {"last_level_cache_bytes", cache}};
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
  Ceilings c{m.bytes_per_s, m.flops_per_s,
             fmt::format("{} on {} ({}) at {}", m.tool, m.host, m.device_name.empty() ? m.device : m.device_name, m.measured_at)};
  // Recorded since issue 26; an older row has neither (bytes_per_s for every case).
  const auto number = [&](const char* key) {
    return m.figures.is_object() && m.figures.contains(key) && m.figures[key].is_number() ? m.figures[key].get<double>() : 0.0;
  };
  c.memory_bytes_per_s = number("memory_copy_bytes_per_s");
  c.cache_bytes = number("last_level_cache_bytes");
  return c;
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
  // Beyond the caches: the fastest device's rate there (a device that
  // measured no memory figure, a GPU's copy of 1 GiB, counts its one rate).
  // Only when every device's figure for it is known; else bytes_per_s for all.
  double memory = 0, cache = 0;
  bool known = true;
  for (const auto& d : devices) {
    const Ceilings dc = ceilings_of(d);
    const bool gpu = d.device != "cpu";
    if (!gpu && !(dc.memory_bytes_per_s > 0 && dc.cache_bytes > 0)) known = false;
    memory = std::max(memory, gpu ? dc.bytes_per_s : dc.memory_bytes_per_s);
    cache = std::max(cache, dc.cache_bytes);
  }
  c.memory_bytes_per_s = known && cache > 0 ? memory : 0;
  c.cache_bytes = known ? cache : 0;
  if (flops != bytes && flops->flops_per_s > 0) c.source += "; FLOP/s: " + ceilings_of(*flops).source;
  return c;
}

}  // namespace densefeed
