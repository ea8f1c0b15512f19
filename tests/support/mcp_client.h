// A client of `densefeed mcp` for end-to-end tests: the server as a child
// process with pipes on both ends, JSON-RPC lines written to its stdin and
// read from its stdout (MCP 2025-11-25, basic/transports: stdio). Reads wait
// at most `patience` for a line: a guard against a hung server, not a
// measurement.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace densefeed::testing {

class McpClient {
 public:
  using J = nlohmann::json;
  // Starts argv[0] (an absolute path) with exactly `env`; stderr goes to /dev/null.
  McpClient(std::vector<std::string> argv, const std::map<std::string, std::string>& env) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe");
    std::vector<std::string> env_text;
    for (const auto& [k, v] : env) env_text.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      const int err = ::open("/dev/null", O_WRONLY);
      dup2(err, 2);
      close(in[1]);
      close(out[0]);
      execve(args[0], args.data(), envp.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
    signal(SIGPIPE, SIG_IGN);
  }
  ~McpClient() {
    if (to_ >= 0) close(to_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(from_);
  }
  McpClient(const McpClient&) = delete;
  McpClient& operator=(const McpClient&) = delete;

  void send_line(const std::string& line) {
    const std::string text = line + "\n";
    if (::write(to_, text.data(), text.size()) != static_cast<ssize_t>(text.size())) throw std::runtime_error("write to the server");
  }
  void send(const J& message) { send_line(message.dump()); }
  // The next line, or "" at the end of output or after `patience`.
  std::string line(std::chrono::seconds patience = std::chrono::seconds(120)) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (true) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string l = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return l;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) return "";
      pollfd p{from_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::read(from_, chunk, sizeof chunk);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  // The response with this id (other messages read on the way are kept for
  // their own response() or close_and_drain()), or null at the end of output.
  J response(const J& id) {
    if (auto it = pending_.find(id.dump()); it != pending_.end()) {
      J r = it->second;
      pending_.erase(it);
      return r;
    }
    while (true) {
      const auto l = line();
      if (l.empty()) return J();
      J m = J::parse(l);
      if (!m.contains("id")) {
        notifications_.push_back(m);  // a notification (notifications/progress): kept in order
        continue;
      }
      if (m["id"] == id) return m;
      pending_[m.value("id", J()).dump()] = m;
    }
  }
  J request(const J& id, const std::string& method, const J& params = J::object()) {
    send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}});
    return response(id);
  }
  J call(const J& id, const std::string& tool, const J& arguments) {
    return request(id, "tools/call", {{"name", tool}, {"arguments", arguments}});
  }
  // The notifications read so far (messages without an id), in order.
  const std::vector<J>& notifications() const { return notifications_; }
  // initialize (2025-11-25) and notifications/initialized; false when the server did not answer.
  bool initialize() {
    const J r = request(0, "initialize", {{"protocolVersion", "2025-11-25"}, {"capabilities", J::object()},
                                          {"clientInfo", {{"name", "densefeed-test"}, {"version", "1"}}}});
    if (!r.contains("result")) return false;
    send({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    return true;
  }
  // Closes stdin; returns every line written after that and the exit status.
  std::pair<std::vector<std::string>, int> close_and_drain() {
    close(to_);
    to_ = -1;
    std::vector<std::string> rest;
    for (const auto& [id, m] : pending_) rest.push_back(m.dump());
    pending_.clear();
    for (std::string l = line(); !l.empty(); l = line()) rest.push_back(l);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return {rest, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
  }

 private:
  pid_t pid_ = 0;
  int to_ = -1, from_ = -1;
  std::string buffer_;
  std::vector<J> notifications_;
  std::map<std::string, J> pending_;
};

}  // namespace densefeed::testing
