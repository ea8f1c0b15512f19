#include "rank_group.h"

#include <sys/prctl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "process_json.h"

namespace densefeed {
namespace {

using J = nlohmann::json;

// Set by SIGTERM/SIGINT (the launcher's timeout or cancel of the whole
// group) and by the first rank that fails: every rank's run_process ends
// its process group when it sees it.
std::atomic<bool> g_stop{false};

void on_stop(int) { g_stop.store(true); }

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string part; std::getline(in, part, sep);) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

J paths(const std::vector<std::filesystem::path>& v) {
  J a = J::array();
  for (const auto& p : v) a.push_back(p.string());
  return a;
}

}  // namespace

std::map<std::string, std::string> rank_environment(int rank, int world, int port) {
  const std::string r = std::to_string(rank), w = std::to_string(world);
  return {{"DENSEFEED_RANK", r},
          {"DENSEFEED_WORLD_SIZE", w},
          {"RANK", r},
          {"WORLD_SIZE", w},
          {"LOCAL_RANK", r},
          {"LOCAL_WORLD_SIZE", w},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"NCCL_NVLS_ENABLE", "0"},
          {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"},
          {"NVSHMEM_DISABLE_NVLS", "1"}};
}

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw InfraError(fmt::format("rank group: cannot make a socket: {}", std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw InfraError(fmt::format("rank group: cannot bind a loopback port: {}", std::strerror(err)));
  return ntohs(a.sin_port);
}

std::vector<RankOutcome> run_rank_group(const RankGroupSpec& spec) {
  const int world = static_cast<int>(spec.ranks.size());
  const int port = free_loopback_port();
  g_stop.store(false);
  std::vector<std::string> inherited;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) inherited = split(v, ',');
  std::vector<RankOutcome> out(spec.ranks.size());
  std::atomic<bool> taken{false};
  std::vector<std::thread> threads;
  for (int k = 0; k < world; ++k) {
    threads.emplace_back([&, k] {
      const RankCommand& c = spec.ranks[static_cast<std::size_t>(k)];
      ProcessSpec p;
      p.argv = c.argv;
      p.exe_dirs = c.exe_dirs;
      p.launcher = c.launcher;
      p.env = rank_environment(k, world, port);
      if (!c.env.count("CUDA_VISIBLE_DEVICES") && inherited.size() >= static_cast<std::size_t>(world)) {
        p.env["CUDA_VISIBLE_DEVICES"] = inherited[static_cast<std::size_t>(k)];
      }
      for (const auto& [key, value] : c.env) p.env[key] = value;
      p.cwd = c.cwd;
      p.stdout_path = c.stdout_path;
      p.stderr_path = c.stderr_path;
      p.timeout = spec.timeout;
      p.cancel = &g_stop;
      RankOutcome& o = out[static_cast<std::size_t>(k)];
      o.rank = k;
      try {
        o.process = run_process(p);
      } catch (const std::exception& e) {
        o.process.start_error = e.what();
      }
      if (!o.process.ok() && !o.process.cancelled && !taken.exchange(true)) {
        o.first = true;
        g_stop.store(true);
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

int rank_group_main(const std::filesystem::path& spec_file) {
  // The ranks run as this process's user inside the same sandbox: not
  // dumpable, none of them can ptrace it to change the report or the exit
  // status its pass or fail rests on (prctl(2) PR_SET_DUMPABLE; a rank's
  // execve makes its own process dumpable again, not this one).
  ::prctl(PR_SET_DUMPABLE, 0);
  struct sigaction sa{};
  sa.sa_handler = on_stop;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  std::ifstream in(spec_file);
  const J j = J::parse(in, nullptr, false);
  if (j.is_discarded()) throw InfraError(fmt::format("{}: not a rank group (JSON)", spec_file.string()));
  const auto outcomes = run_rank_group(rank_group_from_json(j));
  J report = J::array();
  bool ok = true;
  for (const auto& o : outcomes) {
    report.push_back(rank_outcome_to_json(o));
    ok = ok && o.process.ok();
  }
  std::cout << J{{"ranks", report}}.dump() << "\n" << std::flush;
  return ok ? 0 : 1;
}

J rank_group_to_json(const RankGroupSpec& spec) {
  J ranks = J::array();
  for (const auto& r : spec.ranks) {
    ranks.push_back({{"argv", r.argv},
                     {"exe_dirs", paths(r.exe_dirs)},
                     {"env", r.env},
                     {"cwd", r.cwd.string()},
                     {"stdout_path", r.stdout_path.string()},
                     {"stderr_path", r.stderr_path.string()},
                     {"launcher", r.launcher}});
  }
  return {{"ranks", ranks}, {"timeout_ms", spec.timeout.count()}};
}

RankGroupSpec rank_group_from_json(const J& j) {
  RankGroupSpec spec;
  spec.timeout = std::chrono::milliseconds(j.at("timeout_ms").get<long long>());
  for (const auto& r : j.at("ranks")) {
    RankCommand c;
    c.argv = r.at("argv").get<std::vector<std::string>>();
    for (const auto& d : r.at("exe_dirs")) c.exe_dirs.emplace_back(d.get<std::string>());
    c.env = r.at("env").get<std::map<std::string, std::string>>();
    c.cwd = r.at("cwd").get<std::string>();
    c.stdout_path = r.at("stdout_path").get<std::string>();
    c.stderr_path = r.at("stderr_path").get<std::string>();
    c.launcher = r.value("launcher", std::vector<std::string>{});
    spec.ranks.push_back(std::move(c));
  }
  return spec;
}

J rank_outcome_to_json(const RankOutcome& r) {
  return {{"rank", r.rank}, {"first", r.first}, {"process", process_result_to_json(r.process)}};
}

RankOutcome rank_outcome_from_json(const J& j) {
  RankOutcome r;
  r.rank = j.at("rank").get<int>();
  r.first = j.at("first").get<bool>();
  r.process = process_result_from_json(j.at("process"));
  return r;
}

std::vector<RankOutcome> read_rank_outcomes(const std::filesystem::path& stdout_path) {
  std::ifstream in(stdout_path);
  std::vector<RankOutcome> found;
  for (std::string line; std::getline(in, line);) {
    const J j = J::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("ranks")) continue;
    try {
      std::vector<RankOutcome> ranks;
      for (const auto& r : j.at("ranks")) ranks.push_back(rank_outcome_from_json(r));
      found = std::move(ranks);
    } catch (const std::exception&) {
      // not the group's report
    }
  }
  return found;
}

std::optional<RankOutcome> failed_rank(const std::vector<RankOutcome>& ranks) {
  for (const auto& r : ranks) {
    if (r.first) return r;
  }
  for (const auto& r : ranks) {
    if (!r.process.ok()) return r;
  }
  return std::nullopt;
}

std::string describe_ranks(const std::vector<RankOutcome>& ranks) {
  const auto failed = failed_rank(ranks);
  if (!failed) return fmt::format("{} ranks all exited 0", ranks.size());
  std::vector<int> ended, finished;
  for (const auto& r : ranks) {
    if (r.rank == failed->rank) continue;
    if (r.process.cancelled) ended.push_back(r.rank);
    else if (r.process.ok()) finished.push_back(r.rank);
  }
  std::string text = fmt::format("rank {} of {} {}", failed->rank, ranks.size(), failed->process.describe());
  if (!ended.empty()) text += fmt::format("; rank{} {} {} ended with it", ended.size() > 1 ? "s" : "", fmt::join(ended, ", "),
                                          ended.size() > 1 ? "were" : "was");
  if (!finished.empty()) text += fmt::format("; rank{} {} had exited 0", finished.size() > 1 ? "s" : "", fmt::join(finished, ", "));
  return text;
}

}  // namespace densefeed
