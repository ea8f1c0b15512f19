// A harness written to attack the runner rather than the gate (issue 8), one
// way per --mode, to prove that densefeed survives each: it must end every
// one with the verdict it deserves, leave no process behind, keep its logs
// bounded, and (under the sandbox) keep the gates, the lock, the ledger and
// the network out of reach. Speaks the harness protocol: the reference
// writes y_i = sin(seed * 1e-3 + i) as float64 y.npy, an honest candidate the
// same in float32.
//
//   hostile_harness --role reference|candidate --mode MODE --n N --seed SEED --out DIR
//                   [--ref-mode honest|sleep|segfault|exit-nonzero|no-output]
//                   [--gate-file F --lock-file F --ledger-file F --port P]
// Modes (candidate):
//   honest            the right answer
//   sleep             sleeps forever (SIGTERM ends it)
//   fork-ignore-term  ignores SIGTERM and sleeps, with three children that
//                     ignore it too: one in its group, one that called setsid,
//                     and that one's own child
//   daemonize         leaves a setsid'd grandchild that ignores SIGTERM
//                     running, then writes the right answer and exits 0
//   flood             writes 1 GiB to stdout, then the right answer
//   segfault          dereferences a null pointer
//   exit-nonzero      exits 7
//   bad-utf8          writes bytes that are not UTF-8 to stdout and stderr, exits 3
//   no-output         exits 0 without writing y.npy
//   tamper            tries to overwrite the gate file, the lock and the
//                     ledger, to read the reference's output, and to connect
//                     to 127.0.0.1:PORT; prints one line per attempt
//                     ("gate-file: written" or "gate-file: refused (why)"),
//                     then writes the right answer
// Every run that writes y.npy also writes OUT/selftime.txt, "START_NS END_NS"
// of its main on CLOCK_MONOTONIC, for tests/perf/runner_overhead.py.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "npy_writer.h"

namespace {

std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback = "") {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

[[noreturn]] void sleep_forever() {
  for (;;) ::pause();
}

void ignore_term() { ::signal(SIGTERM, SIG_IGN); }

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Tries to overwrite `path` in place (no O_CREAT: a private /tmp must not
// pass for the real file); says what happened.
void try_overwrite(const char* what, const std::string& path) {
  if (path.empty()) return;
  const int fd = ::open(path.c_str(), O_WRONLY);
  if (fd < 0) {
    std::printf("%s: refused (%s)\n", what, std::strerror(errno));
    return;
  }
  const char garbage[] = "tampered by the candidate";
  const ssize_t n = ::pwrite(fd, garbage, sizeof garbage - 1, 0);
  std::printf("%s: %s\n", what, n > 0 ? "written" : (std::string("refused (") + std::strerror(errno) + ")").c_str());
  ::close(fd);
}

void try_read(const char* what, const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    std::printf("%s: refused (%s)\n", what, std::strerror(errno));
    return;
  }
  char byte = 0;
  std::printf("%s: %s\n", what, ::read(fd, &byte, 1) == 1 ? "read" : "refused (empty)");
  ::close(fd);
}

void try_connect(int port) {
  if (port <= 0) return;
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::printf("network: refused (%s)\n", std::strerror(errno));
  } else {
    write_all(s, "tampered", 8);
    std::printf("network: connected\n");
  }
  if (s >= 0) ::close(s);
}

}  // namespace

// CLOCK_MONOTONIC is one clock for every process of the machine (sandboxed
// or not), so tests/perf/runner_overhead.py can set this harness's own time
// against the runner's spawn-to-reap time.
std::uint64_t monotonic_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(t.tv_nsec);
}

// Writes OUT/selftime.txt: "START_NS END_NS" of main, for the figures.
void write_selftime(const std::filesystem::path& out, std::uint64_t start_ns) {
  const std::string line = std::to_string(start_ns) + " " + std::to_string(monotonic_ns()) + "\n";
  if (FILE* f = std::fopen((out / "selftime.txt").c_str(), "w")) {
    std::fputs(line.c_str(), f);
    std::fclose(f);
  }
}

int main(int argc, char** argv) {
  const std::uint64_t start_ns = monotonic_ns();
  const std::string role = arg(argc, argv, "--role");
  const std::string mode = arg(argc, argv, "--mode", "honest");
  const std::size_t n = std::stoul(arg(argc, argv, "--n", "64"));
  const std::uint64_t seed = std::stoull(arg(argc, argv, "--seed", "0"));
  const std::filesystem::path out = arg(argc, argv, "--out");
  const auto y = [&](std::size_t i) { return std::sin(static_cast<double>(seed) * 1e-3 + static_cast<double>(i)); };

  if (role == "reference") {
    // A broken reference, for the `error` verdicts.
    const std::string fault = arg(argc, argv, "--ref-mode", "honest");
    if (fault == "sleep") sleep_forever();
    if (fault == "segfault") {
      volatile int* null = nullptr;
      *null = 1;
    }
    if (fault == "exit-nonzero") return 7;
    if (fault == "no-output") return 0;
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = y(i);
    densefeed::write_npy(out / "y.npy", std::span<const double>(v), std::vector<std::size_t>{n});
    write_selftime(out, start_ns);
    return 0;
  }

  if (mode == "sleep") sleep_forever();
  if (mode == "fork-ignore-term") {
    ignore_term();
    if (::fork() == 0) sleep_forever();  // stays in the group
    if (::fork() == 0) {
      ::setsid();  // leaves the group and the session
      if (::fork() == 0) sleep_forever();
      sleep_forever();
    }
    sleep_forever();
  }
  if (mode == "daemonize") {
    // The grandchild says when it is ready, and its parent is waited for, so
    // that exactly one orphan is left when this process exits.
    int ready[2];
    if (::pipe(ready) != 0) return 3;
    const pid_t child = ::fork();
    if (child == 0) {
      ::setsid();
      if (::fork() == 0) {
        ignore_term();
        write_all(ready[1], "r", 1);
        sleep_forever();
      }
      _exit(0);
    }
    ::close(ready[1]);
    char byte = 0;
    if (::read(ready[0], &byte, 1) != 1) return 3;
    ::waitpid(child, nullptr, 0);
  }
  if (mode == "flood") {
    std::vector<char> block(1 << 20, 'x');
    for (std::size_t i = 63; i < block.size(); i += 64) block[i] = '\n';
    for (int i = 0; i < 1024; ++i) write_all(STDOUT_FILENO, block.data(), block.size());
    std::fprintf(stderr, "flood: wrote 1 GiB to stdout\n");
  }
  if (mode == "segfault") {
    std::fprintf(stderr, "about to dereference a null pointer\n");
    std::fflush(stderr);
    volatile int* null = nullptr;
    *null = 1;
  }
  if (mode == "exit-nonzero") {
    std::fprintf(stderr, "giving up with exit code 7\n");
    return 7;
  }
  if (mode == "bad-utf8") {
    std::fprintf(stdout, "\xff out \xc3\n");
    std::fprintf(stderr, "\xff\xfe bad utf8 \xe2\x80\n");
    return 3;
  }
  if (mode == "no-output") return 0;
  if (mode == "tamper") {
    try_overwrite("gate-file", arg(argc, argv, "--gate-file"));
    try_overwrite("lock-file", arg(argc, argv, "--lock-file"));
    try_overwrite("ledger-file", arg(argc, argv, "--ledger-file"));
    // The run folder's sibling: where the reference of case 0 writes its
    // answer. Where that folder can be seen at all (no sandbox), the
    // reference may be running beside this candidate: wait up to 30 s for
    // its file to be there and non-empty before trying it.
    const auto reference = out.parent_path().parent_path() / "reference-000" / "out";
    std::error_code ec;
    for (int i = 0; i < 3000 && std::filesystem::is_directory(reference, ec) &&
                    !(std::filesystem::exists(reference / "y.npy", ec) && std::filesystem::file_size(reference / "y.npy", ec) > 0);
         ++i) {
      ::usleep(10000);
    }
    try_read("reference-output", reference / "y.npy");
    try_connect(std::stoi(arg(argc, argv, "--port", "0")));
    std::fflush(stdout);
  }

  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(y(i));
  densefeed::write_npy(out / "y.npy", std::span<const float>(v), std::vector<std::size_t>{n});
  write_selftime(out, start_ns);
  return 0;
}
