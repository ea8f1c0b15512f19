#include "service_wire.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "error.h"
#include "sha256.h"

namespace densefeed {

namespace {

using J = nlohmann::json;

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) throw InfraError(fmt::format("the densefeed service connection broke while sending: {}", std::strerror(errno)));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

// false at end of stream before the first byte.
bool read_all(int fd, char* p, std::size_t n, bool eof_ok) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd, p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && got == 0 && eof_ok) return false;
    if (r <= 0) throw InfraError(r == 0 ? "the densefeed service connection closed in the middle of a message"
                                        : fmt::format("the densefeed service connection broke: {}", std::strerror(errno)));
    got += static_cast<std::size_t>(r);
  }
  return true;
}

[[noreturn]] void bad_request(const std::string& message) { throw InputError("", {}, "request", message); }

J parse_header(const std::string& bytes, bool request) {
  J h = J::parse(bytes, nullptr, false);
  if (h.is_discarded() || !h.is_object()) {
    if (request) bad_request("expected a JSON object as the request's header");
    throw InfraError("the densefeed service answered with a header that is not a JSON object");
  }
  return h;
}

std::uint64_t size_field(const J& j, const char* key, std::uint64_t max) {
  if (!j.contains(key) || !j[key].is_number_unsigned() || j[key].get<std::uint64_t>() > max) {
    bad_request(fmt::format("expected {} as a byte count of at most {}", key, max));
  }
  return j[key].get<std::uint64_t>();
}

std::string read_sized(int fd, std::uint64_t size, std::size_t max) {
  auto f = read_frame(fd, max);
  if (!f || f->size() != size) throw InfraError(fmt::format("a frame of {} bytes was announced, another came", size));
  return *f;
}

}  // namespace

bool is_plain_file_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name == "." || name == "..") return false;
  for (const char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) return false;
  }
  return true;
}

void write_frame(int fd, std::string_view bytes) {
  const std::uint32_t n = static_cast<std::uint32_t>(bytes.size());
  const unsigned char len[4] = {static_cast<unsigned char>(n >> 24), static_cast<unsigned char>(n >> 16),
                                static_cast<unsigned char>(n >> 8), static_cast<unsigned char>(n)};
  write_all(fd, reinterpret_cast<const char*>(len), 4);
  write_all(fd, bytes.data(), bytes.size());
}

std::optional<std::string> read_frame(int fd, std::size_t max_bytes) {
  unsigned char len[4];
  if (!read_all(fd, reinterpret_cast<char*>(len), 4, true)) return std::nullopt;
  const std::size_t n = (std::size_t{len[0]} << 24) | (std::size_t{len[1]} << 16) | (std::size_t{len[2]} << 8) | len[3];
  if (n > max_bytes) throw InfraError(fmt::format("a frame of {} bytes is over the limit of {}", n, max_bytes));
  std::string s(n, '\0');
  if (n > 0) read_all(fd, s.data(), n, false);
  return s;
}

void send_request(int fd, const WireRequest& r) {
  J h = {{"version", kWireVersion}, {"args", r.args}, {"inputs", J::array()}, {"outputs", r.outputs}};
  for (const auto& f : r.inputs) h["inputs"].push_back({{"name", f.name}, {"size", f.bytes.size()}});
  if (r.snapshot) h["snapshot"] = {{"size", r.snapshot->tar.size()}, {"sha256", r.snapshot->sha256}, {"head", r.snapshot->head}};
  write_frame(fd, h.dump());
  for (const auto& f : r.inputs) write_frame(fd, f.bytes);
  if (r.snapshot) {
    const std::string& t = r.snapshot->tar;
    for (std::size_t at = 0; at < t.size(); at += kWireChunk) write_frame(fd, std::string_view(t).substr(at, kWireChunk));
  }
}

namespace {

std::vector<std::string> string_list(const J& h, const char* key) {
  if (!h.contains(key) || !h[key].is_array()) bad_request(fmt::format("expected {} as an array of strings", key));
  std::vector<std::string> v;
  for (const auto& x : h[key]) {
    if (!x.is_string()) bad_request(fmt::format("expected {} as an array of strings", key));
    v.push_back(x.get<std::string>());
  }
  return v;
}

WireSnapshot receive_snapshot(int fd, const J& s, std::uint64_t snapshot_max) {
  if (!s.is_object()) bad_request("expected snapshot as an object");
  WireSnapshot snap;
  const auto size = size_field(s, "size", ~0ull);
  if (size > snapshot_max) {
    bad_request(fmt::format("the worktree snapshot is {} bytes, over this service's limit of {} bytes (snapshot_limit_mb): "
                            "commit and push, then submit the commit, or leave large files out (.gitignore)", size, snapshot_max));
  }
  if (!s.contains("sha256") || !s["sha256"].is_string() || !s.contains("head") || !s["head"].is_string()) {
    bad_request("expected snapshot.sha256 and snapshot.head as strings");
  }
  snap.head = s["head"].get<std::string>();
  snap.tar.reserve(size);
  while (snap.tar.size() < size) {
    auto f = read_frame(fd, kWireChunk);
    if (!f || f->empty() || snap.tar.size() + f->size() > size) bad_request("the snapshot's bytes do not match its announced size");
    snap.tar += *f;
  }
  snap.sha256 = sha256_hex(snap.tar);
  if (snap.sha256 != s["sha256"].get<std::string>()) {
    bad_request(fmt::format("the snapshot's sha256 is {}, not the {} announced", snap.sha256, s["sha256"].get<std::string>()));
  }
  return snap;
}

}  // namespace

WireRequest receive_request(int fd, std::uint64_t snapshot_max) {
  const auto header = read_frame(fd, kWireHeaderMax);
  if (!header) bad_request("the connection closed before a request");
  const J h = parse_header(*header, true);
  if (h.value("version", 0) != kWireVersion) {
    bad_request(fmt::format("expected wire version {}: this client and the service are different densefeed versions", kWireVersion));
  }
  WireRequest r;
  r.args = string_list(h, "args");
  r.outputs = string_list(h, "outputs");
  for (const auto& o : r.outputs) {
    if (!is_plain_file_name(o)) bad_request(fmt::format("output name '{}' is not a plain file name", o));
  }
  if (!h.contains("inputs") || !h["inputs"].is_array()) bad_request("expected inputs as an array");
  std::vector<std::pair<std::string, std::uint64_t>> announced;
  for (const auto& i : h["inputs"]) {
    if (!i.is_object() || !i.contains("name") || !i["name"].is_string() || !is_plain_file_name(i["name"].get<std::string>())) {
      bad_request("expected each input as {name: a plain file name, size}");
    }
    announced.emplace_back(i["name"].get<std::string>(), size_field(i, "size", kWireFileMax));
  }
  for (const auto& [name, size] : announced) r.inputs.push_back({name, read_sized(fd, size, kWireFileMax)});
  if (h.contains("snapshot")) r.snapshot = receive_snapshot(fd, h["snapshot"], snapshot_max);
  return r;
}

void send_response(int fd, const WireResponse& r) {
  J h = {{"exit", r.exit_code}, {"stdout_size", r.out.size()}, {"stderr_size", r.err.size()}, {"outputs", J::array()}};
  for (const auto& f : r.outputs) h["outputs"].push_back({{"name", f.name}, {"size", f.bytes.size()}});
  write_frame(fd, h.dump());
  write_frame(fd, r.out);
  write_frame(fd, r.err);
  for (const auto& f : r.outputs) write_frame(fd, f.bytes);
}

WireResponse receive_response(int fd) {
  const auto header = read_frame(fd, kWireHeaderMax);
  if (!header) throw InfraError("the densefeed service closed the connection without an answer");
  const J h = parse_header(*header, false);
  WireResponse r;
  try {
    r.exit_code = h.at("exit").get<int>();
    r.out = read_sized(fd, h.at("stdout_size").get<std::uint64_t>(), kWireFileMax);
    r.err = read_sized(fd, h.at("stderr_size").get<std::uint64_t>(), kWireFileMax);
    for (const auto& o : h.at("outputs")) {
      const std::string name = o.at("name").get<std::string>();
      if (!is_plain_file_name(name)) throw InfraError("the service named an output that is not a plain file name");
      r.outputs.push_back({name, read_sized(fd, o.at("size").get<std::uint64_t>(), kWireFileMax)});
    }
  } catch (const nlohmann::json::exception& e) {
    throw InfraError(fmt::format("the densefeed service's answer is malformed: {}", e.what()));
  }
  return r;
}

}  // namespace densefeed
