// The wire protocol between the densefeed CLI and a densefeed service over
// its unix socket: one request, one response, each a JSON header frame
// followed by the raw frames it announces. A frame is a 4-byte big-endian
// length and that many bytes.
//
//   request:  {"version": 1, "args": [...], "inputs": [{"name", "size"}],
//              "outputs": [name...], "snapshot": {"size", "sha256", "head"}?}
//             then each input's bytes (one frame each), then the snapshot's
//             bytes in frames of at most kWireChunk
//   response: {"exit": N, "stdout_size", "stderr_size", "outputs": [{"name", "size"}]}
//             then stdout, stderr and each output (one frame each)
//
// args are the verb and its options in the canonical form of service_call.h
// (file operands replaced by the names of inputs and outputs); a snapshot is
// a tar archive of the agent's worktree (worktree_snapshot.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace densefeed {

inline constexpr int kWireVersion = 1;
inline constexpr std::size_t kWireHeaderMax = 1 << 20;  // bytes of a header frame
inline constexpr std::size_t kWireChunk = 1 << 20;      // bytes of a snapshot frame
inline constexpr std::size_t kWireFileMax = 64 << 20;   // bytes of one input, output or stream

struct WireFile {
  std::string name;   // a plain file name: [A-Za-z0-9._-]+, not "." or ".."
  std::string bytes;
};

struct WireSnapshot {
  std::string tar;     // the archive
  std::string sha256;  // hex, of tar
  std::string head;    // the commit the agent's worktree is at ('' outside git)
};

struct WireRequest {
  std::vector<std::string> args;
  std::vector<WireFile> inputs;
  std::vector<std::string> outputs;  // names of files the verb writes, sent back
  std::optional<WireSnapshot> snapshot;
};

struct WireResponse {
  int exit_code = 0;
  std::string out, err;
  std::vector<WireFile> outputs;
};

// Whether `name` is a plain file name the service may create in a request's folder.
bool is_plain_file_name(const std::string& name);

// Throw InfraError when the peer hangs up or a write fails.
void write_frame(int fd, std::string_view bytes);
// The next frame, or nullopt at end of stream before one. Throws InfraError
// for a frame over `max_bytes` or cut short.
std::optional<std::string> read_frame(int fd, std::size_t max_bytes);

void send_request(int fd, const WireRequest& r);
// Throws InputError (field "request") for a malformed request: bad JSON, an
// unknown version, a file name that is not plain, a snapshot over
// `snapshot_max` bytes or whose sha256 differs from its bytes.
WireRequest receive_request(int fd, std::uint64_t snapshot_max);
void send_response(int fd, const WireResponse& r);
// Throws InfraError when the service hung up or sent something malformed.
WireResponse receive_response(int fd);

}  // namespace densefeed
