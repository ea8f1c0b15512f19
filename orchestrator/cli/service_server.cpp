#include "service_server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command_table.h"
#include "error.h"
#include "exit_code.h"
#include "install_paths.h"
#include "ledger.h"
#include "process_runner.h"
#include "service_call.h"
#include "service_mirror.h"
#include "service_wire.h"
#include "tool_run.h"
#include "unix_socket.h"
#include "utc_time.h"

namespace densefeed {

namespace {

namespace fs = std::filesystem;

// The state folder: made 0700, or an existing one of this user made 0700.
void prepare_state(const ServiceConfig& c) {
  std::error_code ec;
  fs::create_directories(c.state, ec);
  struct stat st {};
  if (::stat(c.state.c_str(), &st) != 0) throw InfraError(fmt::format("{}: cannot make the state folder: {}", c.state.string(), ec.message()));
  if (st.st_uid != ::geteuid()) {
    throw InputError(c.file.string(), {}, "state",
                     fmt::format("expected a state folder of the service's own user (uid {}); {} belongs to uid {}", ::geteuid(),
                                 c.state.string(), st.st_uid));
  }
  if (::chmod(c.state.c_str(), 0700) != 0) throw InfraError(fmt::format("{}: cannot make it mode 0700", c.state.string()));
  for (const auto& d : {c.config_home(), c.requests_dir()}) {
    fs::create_directories(d, ec);
    ::chmod(d.c_str(), 0700);
  }
}

std::string people_text(const ServiceConfig& c) {
  if (c.people.empty()) return "the configuration names no people: person-only verbs are run on the service's host by its user";
  std::string s = "people: uid";
  for (std::size_t i = 0; i < c.people.size(); ++i) s += fmt::format("{}{}", i ? ", " : " ", c.people[i]);
  return s;
}

// The ledger the service owns, and the head file its audits check.
fs::path ledger_file(const ServiceConfig& c) { return c.state / "ledger.db"; }
fs::path head_file(const ServiceConfig& c) { return c.state / "head"; }
fs::path head_log(const ServiceConfig& c) { return c.state / "head.log"; }

// The argv of a child densefeed on the service's clone: the global options
// the service decides, then `args`, with --ledger (and audit's --head-file)
// added where the verb takes them.
std::vector<std::string> child_argv(const ServiceConfig& c, const CLI::App& app, std::vector<std::string> args) {
  std::vector<std::string> argv = {running_executable().string(), "--project", c.project_dir().string(), "--die-with-parent"};
  const auto chain = parsed_chain(app);
  const CLI::App* verb = chain.empty() ? &app : chain.back();
  std::vector<std::string> added;
  if (verb->get_option_no_throw("--ledger") != nullptr) added.push_back("--ledger=" + ledger_file(c).string());
  if (verb->get_option_no_throw("--head-file") != nullptr) added.push_back("--head-file=" + head_file(c).string());
  // Before the operands: canonical arguments end with "--" and positionals.
  const auto dashes = std::find(args.begin(), args.end(), "--");
  args.insert(dashes, added.begin(), added.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

WireResponse refuse(const std::string& why, int code = kExitUsage) {
  WireResponse r;
  r.exit_code = code;
  r.err = "densefeed: " + why + "\n";
  return r;
}

// One request: parsed with the command table, decided by service_policy,
// run as a child densefeed in a request folder of its own.
class Service {
 public:
  explicit Service(ServiceConfig config) : config_(std::move(config)), mirror_(config_) {}

  const ServiceConfig& config() const { return config_; }
  ServiceMirror& mirror() { return mirror_; }

  WireResponse handle(const PeerCredentials& peer, WireRequest& request) {
    CLI::App app;
    CliContext ctx;
    // The verbs own what their options write into: kept while `app` is used.
    const std::vector<CliVerb> verbs = add_command_table(app, ctx);
    std::vector<std::string> reversed(request.args.rbegin(), request.args.rend());
    try {
      app.parse(reversed);
    } catch (const CLI::ParseError& e) {
      return refuse(fmt::format("the service could not parse the request's arguments: {}", e.what()));
    }
    const Peer who{peer.uid, peer.user, is_person(peer.uid)};
    std::vector<std::string> inputs, outputs = request.outputs;
    for (const auto& f : request.inputs) inputs.push_back(f.name);
    const PolicyDecision decision = service_policy(app, who, inputs, outputs, people_text(config_));
    if (!decision.allowed) return refuse(decision.refusal);

    // A folder of its own, made here (never one left by an earlier process
    // of the same pid), removed when the request is answered: what it
    // carried is in the ledger (the manifest's text) and requests.log.
    const std::int64_t n = ++requests_;
    const fs::path dir = config_.requests_dir() / fmt::format("{}-{}-{:x}", ::getpid(), n, std::random_device{}());
    if (!fs::create_directory(dir)) throw InfraError(fmt::format("{}: exists already", dir.string()));
    ::chmod(dir.c_str(), 0700);
    struct RemoveFolder {
      fs::path dir;
      ~RemoveFolder() {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    } remove_folder{dir};
    std::string snapshot_commit;
    if (request.snapshot) {
      snapshot_commit = mirror_.commit_snapshot(*request.snapshot, dir / "snapshot", fmt::format("{} (uid {})", peer.user, peer.uid));
    }
    const ServedVerb rule = served_verb(app);
    const bool submit = rule.verb == "submit";
    // A submission is pinned against what the repository holds now.
    if (submit) mirror_.refresh();
    for (auto& f : request.inputs) {
      // A manifest is pinned to the commits of the service's clone: the
      // agent's checkout is never run, its WORKTREE is the snapshot.
      if (submit) f.bytes = mirror_.pin_manifest(f.bytes, f.name, snapshot_commit, request.snapshot ? request.snapshot->head : "");
      std::ofstream(dir / f.name, std::ios::binary) << f.bytes;
    }
    // The child runs what the service parsed and decided on, rebuilt in
    // canonical form, never the request's words as sent (a hostile trial
    // passed --peer through them).
    std::vector<std::string> args = service_arguments(app, rule).args;
    args.insert(std::find(args.begin(), args.end(), "--"), decision.add_args.begin(), decision.add_args.end());
    auto argv = child_argv(config_, app, args);
    argv.insert(argv.begin() + 4, "--peer=" + fmt::format("{} (uid {})", peer.user.empty() ? "?" : peer.user, peer.uid));
    const ToolResult ran = run_tool(argv, dir, {}, 0, std::chrono::hours(24), kWireFileMax);
    WireResponse r;
    // A child that did not end by itself (killed, timed out) is the service's
    // failure, and says how it ended when it wrote nothing.
    r.exit_code = ran.exit_code >= 0 ? ran.exit_code : kExitError;
    r.out = ran.out;
    r.err = ran.exit_code >= 0 ? ran.err : ran.what();
    for (const auto& name : request.outputs) {
      std::ifstream in(dir / name, std::ios::binary);
      if (in) r.outputs.push_back({name, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())});
    }
    return r;
  }

  // requests.log in the state folder: who asked what (as sent), its exit,
  // and for a refused or failed one the first line of what it was told:
  // an agent's attempts at a person's verb leave their trace.
  void log_request(const PeerCredentials& peer, const std::vector<std::string>& args, const WireResponse& r) {
    nlohmann::json line{{"at", utc_now()}, {"uid", peer.uid}, {"user", peer.user}, {"pid", peer.pid}, {"args", args}, {"exit", r.exit_code}};
    if (r.exit_code != 0) line["said"] = r.err.substr(0, r.err.find('\n'));
    std::lock_guard lock(log_);
    std::ofstream(config_.state / "requests.log", std::ios::app) << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }

 private:
  bool is_person(uid_t uid) const { return std::find(config_.people.begin(), config_.people.end(), uid) != config_.people.end(); }

  ServiceConfig config_;
  ServiceMirror mirror_;
  std::atomic<std::int64_t> requests_{0};
  std::mutex log_;
};

// Appends the chain's head to the head log whenever it moves (polled once a
// second, through one read-only connection, opened again when the file is
// replaced: each read sees the latest committed state) and offers it to
// head_witness; a witness that fails is told the head again at the next
// poll. A head that does not extend the one logged before (a cut-off tail,
// a ledger replaced by a re-sealed copy) is logged as such and never
// becomes the head audits check (head_file keeps the old one, so that
// `audit` through the service fails until a person looks).
[[noreturn]] void watch_head(const ServiceConfig& c) {
  std::optional<Ledger> ledger;
  ino_t inode = 0;
  std::string logged, witnessed, refused;
  {
    std::ifstream in(head_file(c));
    std::getline(in, logged);
  }
  witnessed = c.head_witness.empty() ? "" : logged;
  for (;;) {
    try {
      struct stat st {};
      const bool present = ::stat(ledger_file(c).c_str(), &st) == 0;
      if (ledger && (!present || st.st_ino != inode)) ledger.reset();
      if (!ledger && present) {
        ledger.emplace(ledger_file(c), Ledger::Mode::read_only);
        inode = st.st_ino;
      }
      if (ledger) {
        const std::string head = ledger->head().text();
        if (head != logged && head != refused) {
          const std::string why = logged.empty() ? "" : ledger->extends(ChainHead::parse(logged, head_file(c).string()));
          if (why.empty() && ledger->verify().ok) {
            std::ofstream(head_log(c), std::ios::app) << utc_now() << " " << head << "\n";
            std::ofstream(head_file(c), std::ios::trunc) << head << "\n";
            logged = head;
          } else {
            std::ofstream(head_log(c), std::ios::app) << utc_now() << " REFUSED " << head << " (does not extend " << logged << ": "
                                                     << (why.empty() ? "the chain does not verify" : why) << ")\n";
            std::cerr << fmt::format("densefeed serve: the ledger's head {} does not extend the logged head {}: {}\n", head, logged, why);
            refused = head;
          }
        }
        if (!c.head_witness.empty() && witnessed != logged) {
          auto argv = c.head_witness;
          argv.push_back(logged);
          const ToolResult w = run_tool(argv, c.state, {}, 0, std::chrono::seconds(60), 1 << 20);
          if (w.ok) {
            witnessed = logged;
          } else {
            std::cerr << fmt::format("densefeed serve: warning: the head witness failed on {} (offered again): {}\n", logged, w.what());
          }
        }
      }
    } catch (const std::exception& e) {
      std::cerr << "densefeed serve: warning: the head log could not be brought up to date: " << e.what() << "\n";
      ledger.reset();
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// The worker for the queue: a child densefeed worker on the clone, started
// again when it ends (a crash of one experiment never ends the worker, but
// the worker itself may be killed).
[[noreturn]] void supervise_worker(const ServiceConfig& c) {
  for (;;) {
    std::vector<std::string> argv = {running_executable().string(), "--project", c.project_dir().string(), "--die-with-parent", "worker",
                                     "--ledger=" + ledger_file(c).string(), "--slots=" + std::to_string(c.worker.slots),
                                     "--profile=" + c.worker.profile, "--gpus=" + c.worker.gpus};
    if (c.worker.jobs > 0) argv.push_back("--jobs=" + std::to_string(c.worker.jobs));
    ProcessSpec spec;
    spec.argv = argv;
    spec.cwd = c.state;
    spec.stdout_path = c.state / "worker.stdout.log";
    spec.stderr_path = c.state / "worker.stderr.log";
    spec.timeout = std::chrono::hours(24 * 365);
    const ProcessResult r = run_process(spec);
    std::cerr << fmt::format("densefeed serve: the worker {}; starting it again in 2 s\n", r.describe());
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

// Connections served at once; one more is answered "busy" and closed, so
// that idle clients cannot take every descriptor and thread (a hostile trial
// ended the service with 20 000 idle connections).
constexpr int kMaxConnections = 64;
// How long a client may take to send its request.
constexpr int kRequestDeadlineS = 60;

void serve_connection(Service& service, Fd fd) {
  try {
    const timeval deadline{kRequestDeadlineS, 0};
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &deadline, sizeof deadline);
    const PeerCredentials peer = peer_credentials(fd.get());
    WireResponse r;
    std::optional<std::vector<std::string>> args;
    try {
      WireRequest request = receive_request(fd.get(), service.config().snapshot_limit_bytes);
      args = request.args;
      r = service.handle(peer, request);
    } catch (const InputError& e) {
      r = refuse(e.what());
    } catch (const std::exception& e) {
      r = refuse(e.what(), kExitError);
    }
    service.log_request(peer, args.value_or(std::vector<std::string>{}), r);
    send_response(fd.get(), r);
  } catch (const std::exception& e) {
    std::cerr << "densefeed serve: a connection ended early: " << e.what() << "\n";
  }
}

}  // namespace

void serve(const ServiceConfig& config) {
  prepare_state(config);
  // The ledger's key is made and read under the state folder, by the service and its children alike.
  ::setenv("XDG_CONFIG_HOME", config.config_home().c_str(), 1);
  // The ledger (and its key) exist before the first request: a read verb
  // never meets a ledger the worker is still creating, or none at all.
  { Ledger create(ledger_file(config)); }
  Service service(config);
  service.mirror().refresh();
  const Fd listener = listen_unix(config.socket, 0660, config.socket_group);
  std::cerr << fmt::format("densefeed serve: serving {} on {} (state {}, uid {})\n", config.project_dir().string(),
                           config.socket.string(), config.state.string(), ::geteuid());
  // Both run as long as the service does (it ends by a signal, never by returning).
  std::thread head([&] { watch_head(config); });
  std::thread worker([&] { supervise_worker(config); });
  head.detach();
  worker.detach();
  std::atomic<int> open{0};
  for (;;) {
    const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory is the clients' doing, not an end:
      // the service waits and accepts again.
      if (errno != EINTR) {
        std::cerr << fmt::format("densefeed serve: accept on {} failed: {} (accepting again)\n", config.socket.string(), std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      continue;
    }
    Fd connection(fd);
    if (open.load() >= kMaxConnections) {
      try {
        send_response(connection.get(), refuse(fmt::format("the service is busy ({} requests at once): try again", kMaxConnections), kExitError));
      } catch (const std::exception&) {
      }
      continue;
    }
    ++open;
    try {
      std::thread([&service, &open, c = std::move(connection)]() mutable {
        serve_connection(service, std::move(c));
        --open;
      }).detach();
    } catch (const std::system_error& e) {
      --open;
      std::cerr << "densefeed serve: cannot start a thread for a connection: " << e.what() << "\n";
    }
  }
}

}  // namespace densefeed
