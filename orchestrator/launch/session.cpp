#include "session.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "error.h"
#include "printable.h"
#include "process_tree.h"
#include "sha256.h"

namespace densefeed {
namespace {

namespace fs = std::filesystem;

// What a session wrote, as a reason may quote it: its first 200 bytes with
// controls, direction marks and bytes that are not UTF-8 escaped
// (printable.h), so that the reason stays valid UTF-8 in the JSON report and
// the ledger whatever the session wrote.
std::string shown(const std::string& line) {
  const bool cut = line.size() > 200;
  return printable(std::string_view(line).substr(0, 200), false) + (cut ? "..." : "");
}

}  // namespace

std::string changed_after_answer(const std::filesystem::path& answered, const std::map<std::string, std::string>& out_hashes) {
  std::error_code ec;
  for (const auto& [name, sha] : out_hashes) {
    const auto original = answered / name;
    if (sha == "not a file" || !fs::is_regular_file(original, ec)) continue;
    if (sha256_file(original) != sha) return name;
  }
  return "";
}

std::uint64_t tree_rss_bytes(int root) {
  if (root <= 0) return 0;
  std::vector<pid_t> pids = descendants(list_processes(), root);
  pids.push_back(root);
  std::uint64_t total = 0;
  for (pid_t p : pids) {
    std::ifstream in(fmt::format("/proc/{}/status", p));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("VmRSS:", 0) == 0) total += std::stoull(line.substr(6)) * 1024;
    }
  }
  return total;
}

HarnessSession::HarnessSession(Launch launch, fs::path exchange, std::string who, Executor& executor)
    : launch_(std::move(launch)), executor_(executor), exchange_(std::move(exchange)), who_(std::move(who)) {
  // A socket pair, not a pipe: a write after the session died fails with
  // EPIPE instead of raising SIGPIPE in densefeed (send MSG_NOSIGNAL).
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw InfraError(fmt::format("{}: cannot make the request channel: {}", who_, std::strerror(errno)));
  }
  write_fd_ = fds[0];
  const int read_fd = fds[1];
  std::error_code ec;
  fs::remove_all(exchange_, ec);
  fs::create_directories(exchange_, ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create the exchange folder: {}", exchange_.string(), ec.message()));
  launch_.untrusted.env["DENSEFEED_SESSION"] = "1";
  launch_.untrusted.stdin_fd = read_fd;
  launch_.untrusted.leader = &leader_;
  // Born in the freezer's cgroup: no process of the session is ever outside
  // it, so a pause has nothing to catch (process_freezer.h join_fd).
  launch_.untrusted.freeze_join_fd = freezer_.join_fd();
  launch_.untrusted.cancel = &cancel_;
  thread_ = std::thread([this, read_fd] {
    LaunchResult r;
    try {
      AllocationRequest request;
      request.name = "session";
      r = executor_.allocate(request)->run(launch_);
    } catch (const std::exception& e) {
      r.infrastructure = e.what();
    }
    ::close(read_fd);
    {
      const std::lock_guard lock(mutex_);
      result_ = r;
    }
    done_ = true;
  });
}

void HarnessSession::close_input() {
  if (!input_closed_.exchange(true)) ::shutdown(write_fd_, SHUT_WR);
}

void HarnessSession::pause() {
  const int leader = leader_.load();
  if (leader <= 0 || done_) return;
  if (!paused_.exchange(true)) freezer_.freeze(leader);
}

void HarnessSession::resume() {
  if (paused_.exchange(false)) freezer_.thaw(leader_.load());
}

HarnessSession::~HarnessSession() {
  resume();
  close_input();
  for (int i = 0; i < 100 && !done_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  cancel_ = true;
  thread_.join();
  ::close(write_fd_);
}

LaunchResult HarnessSession::result() const {
  const std::lock_guard lock(mutex_);
  return result_;
}

std::string HarnessSession::read_line(std::chrono::steady_clock::time_point deadline, bool& timed_out) {
  const fs::path log = launch_.untrusted.stdout_path;
  timed_out = false;
  for (;;) {
    if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) continue;
      return line;
    }
    if (cancel_requested()) cancel_ = true;  // densefeed cancel: the session ends, the request with it
    const bool over = done_.load();  // read once more after it ended: its last lines
    std::ifstream in(log, std::ios::binary);
    if (in) {
      in.seekg(static_cast<std::streamoff>(stdout_offset_));
      std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      stdout_offset_ += chunk.size();
      pending_ += chunk;
    }
    if (pending_.find('\n') != std::string::npos) continue;
    if (over) return "";
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

SessionAnswer HarnessSession::end_request(SessionAnswer a, const char* what) {
  (void)what;
  cancel_ = true;
  for (int i = 0; i < 1000 && !done_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  a.ended = true;
  return a;
}

SessionAnswer HarnessSession::request(const SessionRequest& req, const fs::path& dest, std::chrono::milliseconds timeout) {
  SessionAnswer a;
  const int id = next_id_++;
  const fs::path dir = exchange_ / fmt::format("{:05}", id);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create the request folder: {}", dir.string(), ec.message()));
  nlohmann::ordered_json j = {{"densefeed_session", 1}, {"id", id},  {"mode", req.mode},   {"case", req.case_values},
                              {"seed", std::to_string(req.seed)}, {"out", dir.string()}, {"warmup", req.warmup}, {"iters", req.iters}};
  const std::string line = j.dump() + "\n";
  const auto start = std::chrono::steady_clock::now();
  const auto finish = [&](SessionAnswer r) {
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!r.ended) r.rss_bytes = tree_rss_bytes(leader_.load());
    // The request's folder leaves the session's reach before anything reads it.
    fs::remove_all(dest, ec);
    fs::rename(dir, dest, ec);
    if (ec) throw InfraError(fmt::format("{}: cannot move the request's outputs to {}: {}", dir.string(), dest.string(), ec.message()));
    r.out = dest;
    // Each plain file with one name is replaced by a copy of densefeed's
    // own (a new inode) and the original moved aside: a descriptor the
    // session kept reaches the original only, never what is compared.
    r.answered = dest.string() + ".answered";
    fs::remove_all(r.answered, ec);
    fs::create_directories(r.answered, ec);
    if (ec) throw InfraError(fmt::format("{}: cannot be made: {}", r.answered.string(), ec.message()));
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(dest, ec)) entries.push_back(e.path());
    for (const auto& path : entries) {
      const auto name = path.filename().string();
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        r.out_hashes[name] = "not a file";
        continue;
      }
      const fs::path copy = dest / ("." + name + ".copy");
      fs::copy_file(path, copy, fs::copy_options::overwrite_existing, ec);
      if (!ec) fs::rename(path, r.answered / name, ec);
      if (!ec) fs::rename(copy, path, ec);
      if (ec) throw InfraError(fmt::format("{}: cannot copy the session's output: {}", path.string(), ec.message()));
      r.out_hashes[name] = sha256_file(path);
    }
    return r;
  };
  const auto ended_before = [&](const char* when) {
    // The session is gone: how it ended.
    for (int i = 0; i < 1000 && !done_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const LaunchResult r = result();
    SessionAnswer e;
    e.ended = true;
    if (!r.infrastructure.empty()) {
      e.kind = FailureKind::infrastructure;
      e.failure = "could not run: " + r.infrastructure;
      return e;
    }
    const Failure f = process_failure_value(FailureWho::candidate, r.result.process);
    e.kind = !r.result.limit.empty() ? FailureKind::limit : f.kind == FailureKind::none ? FailureKind::exit_code : f.kind;
    e.signal = f.signal;
    e.exit_code = f.exit_code;
    e.failure = fmt::format("{} {}{}", r.result.process.describe(), when, r.result.limit.empty() ? "" : "; it exceeded " + r.result.limit);
    if (id == 0 && r.result.process.started && f.kind == FailureKind::none) {
      e.failure += ": does its harness speak the session protocol (a serve loop reading requests from stdin, "
                   "densefeed_harness.serve in Python, densefeed::serve in C++)?";
    }
    return e;
  };
  if (done_) return finish(ended_before("before this request was sent"));
  if (::send(write_fd_, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
    return finish(ended_before("before it read this request"));
  }
  const auto deadline = start + timeout;
  for (;;) {
    bool timed_out = false;
    const std::string got = read_line(deadline, timed_out);
    if (timed_out) {
      a.kind = FailureKind::timeout;
      a.failure = fmt::format("did not answer within {:g} s and was killed", std::chrono::duration<double>(timeout).count());
      return finish(end_request(a, "timeout"));
    }
    if (got.empty()) return finish(ended_before("before it answered"));
    const auto doc = nlohmann::json::parse(got, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("id") || !doc["id"].is_number_integer() || !doc.contains("status") ||
        !doc["status"].is_string()) {
      a.kind = FailureKind::malformed_output;
      a.failure = fmt::format("wrote '{}' on stdout, which is not an answer ({{\"id\": {}, \"status\": \"ok\"}}); it was ended", shown(got), id);
      return finish(end_request(a, "garbage"));
    }
    if (doc["id"].get<long long>() != id) {
      a.kind = FailureKind::malformed_output;
      a.failure = fmt::format("answered for request {} while request {} was asked; it was ended", doc["id"].get<long long>(), id);
      return finish(end_request(a, "wrong id"));
    }
    const std::string status = doc["status"];
    if (status == "ok") {
      a.ok = true;
      return finish(a);
    }
    a.kind = FailureKind::exit_code;
    a.failure = fmt::format("reported an error: {}", shown(doc.value("message", status)));
    return finish(a);
  }
}

}  // namespace densefeed
