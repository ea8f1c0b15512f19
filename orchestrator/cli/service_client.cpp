#include "service_client.h"

#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>

#include "error.h"
#include "project.h"
#include "service_call.h"
#include "service_wire.h"
#include "unix_socket.h"
#include "worktree_snapshot.h"
#include "yaml_document.h"

namespace densefeed {

namespace {

// The client's bound on a snapshot; the service's own (snapshot_limit_mb) is
// usually lower and is the one that refuses.
constexpr std::uint64_t kClientSnapshotLimit = 4096ull << 20;

std::string read_input(const std::filesystem::path& p, const std::string& option) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) throw InputError(p.string(), {}, option, "expected a file to send to the service");
  if (std::filesystem::file_size(p, ec) > kWireFileMax) {
    throw InputError(p.string(), {}, option, fmt::format("expected a file of at most {} bytes to send to the service", kWireFileMax));
  }
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A plain name for `path` that no other file of the request has.
std::string wire_name(const std::filesystem::path& path, std::set<std::string>& used) {
  std::string base = path.filename().string();
  for (char& c : base) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
  }
  if (base.empty() || base == "." || base == ".." || base.size() > 150) base = "file";
  std::string name = base;
  for (int i = 2; used.count(name); ++i) name = fmt::format("{}-{}", i, base);
  used.insert(name);
  return name;
}

bool candidate_is_worktree(const std::string& text, const std::string& path) {
  try {
    const auto doc = parse_yaml(text, path);
    const auto& v = doc.value;
    return v.is_object() && v.contains("candidate") && v["candidate"].is_object() && v["candidate"].value("revision", "") == "WORKTREE";
  } catch (const InputError&) {
    return false;  // the service reports the manifest's error
  }
}

// Files of a folder operand (trace analyze's folder of per-rank traces), sorted.
std::vector<std::filesystem::path> operand_files(const std::filesystem::path& p) {
  if (!std::filesystem::is_directory(p)) return {p};
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(p)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Prepared {
  WireRequest request;
  std::map<std::string, std::filesystem::path> outputs;  // wire name -> local path
};

Prepared prepare(const CLI::App& app, CliContext& ctx) {
  const ServedVerb rule = served_verb(app);
  const CanonicalCall call = service_arguments(app, rule);
  Prepared p;
  std::set<std::string> used;
  std::map<std::size_t, std::vector<std::string>> replaced;  // arg index -> what replaces it
  bool worktree_candidate = false;
  for (const auto& f : call.files) {
    std::vector<std::string> names;
    const std::string prefix = f.operand.option.rfind("--", 0) == 0 ? f.operand.option + "=" : "";
    if (f.operand.output) {
      const auto name = wire_name(f.value, used);
      p.request.outputs.push_back(name);
      p.outputs[name] = std::filesystem::absolute(f.value);
      names.push_back(prefix + name);
    } else {
      for (const auto& file : operand_files(f.value)) {
        const auto name = wire_name(file, used);
        p.request.inputs.push_back({name, read_input(file, f.operand.option)});
        if (rule.verb == "submit") worktree_candidate = worktree_candidate || candidate_is_worktree(p.request.inputs.back().bytes, file.string());
        names.push_back(prefix + name);
      }
    }
    replaced[f.arg_index] = names;
  }
  for (std::size_t i = 0; i < call.args.size(); ++i) {
    if (auto r = replaced.find(i); r != replaced.end()) {
      p.request.args.insert(p.request.args.end(), r->second.begin(), r->second.end());
    } else {
      p.request.args.push_back(call.args[i]);
    }
  }
  if (worktree_candidate) {
    // The worktree's project folder, found without opening anything (no
    // store, no ledger: nothing is written into the agent's checkout).
    std::filesystem::path dir = std::filesystem::current_path();
    try {
      dir = find_project(std::filesystem::current_path(), ctx.project_text).dir;
    } catch (const InputError&) {
    }
    p.request.snapshot = take_worktree_snapshot(dir, kClientSnapshotLimit);
  }
  return p;
}

}  // namespace

std::optional<std::filesystem::path> service_for(const CLI::App& app, CliContext& ctx) {
  const ServedVerb rule = served_verb(app);
  if (!ctx.service_text.empty()) {
    if (rule.to == ServedTo::nobody) {
      throw InputError("command line", {}, "--service",
                       fmt::format("`densefeed {}` is not served over a service's socket (served: submit, status, cancel, ledger "
                                   "list|show|compare|export|verify|head, report, gate list|show, compare, trace analyze, audit; to "
                                   "people also gate lock, review, promote, ledger recover, audit acknowledge)",
                                   rule.verb));
    }
    return std::filesystem::absolute(ctx.service_text);
  }
  // A verb the service runs for a peer runs here (its child's densefeed.yaml
  // is the clone's, which may name the service itself).
  if (!ctx.peer.empty() || rule.to == ServedTo::nobody) return std::nullopt;
  if (auto s = configured_service(ctx); !s.empty()) return s;
  return std::nullopt;
}

std::filesystem::path configured_service(const CliContext& ctx) {
  if (!ctx.service_text.empty()) return std::filesystem::absolute(ctx.service_text);
  try {
    // The worktree's densefeed.yaml only: nothing is opened or exported here.
    return find_project(std::filesystem::current_path(), ctx.project_text).service;
  } catch (const InputError&) {
    return {};  // no project here: the verb runs here and says so itself
  }
}

int call_service(const std::filesystem::path& socket, const CLI::App& app, CliContext& ctx) {
  const Prepared p = prepare(app, ctx);
  const Fd fd = connect_unix(socket);
  try {
    send_request(fd.get(), p.request);
  } catch (const InfraError&) {
    // A service that answers before it reads (busy) has closed its side:
    // its answer is still there to read; without one, receiving says so.
  }
  const WireResponse r = receive_response(fd.get());
  std::cout << r.out << std::flush;
  std::cerr << r.err << std::flush;
  for (const auto& f : r.outputs) {
    const auto local = p.outputs.find(f.name);
    if (local == p.outputs.end()) throw InfraError(fmt::format("the densefeed service sent back '{}', which was not asked for", f.name));
    std::ofstream out(local->second, std::ios::binary | std::ios::trunc);
    out.write(f.bytes.data(), static_cast<std::streamsize>(f.bytes.size()));
    if (!out) throw InfraError("cannot write " + local->second.string());
  }
  return r.exit_code;
}

}  // namespace densefeed
