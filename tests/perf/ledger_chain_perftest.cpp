// Prints (does not assert) what the keyed chain and the schema inventory
// cost: per recorded experiment (record_experiment + a one-case gate run with
// its stage outcome + record_finished, each its own transaction as in a run)
// and per audit (verify + schema_differences) on a ledger of N experiments.
//
//   ledger_chain_perftest [N=10000] [FOLDER=/tmp]
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "ledger.h"
#include "ledger_key.h"
#include "sha256.h"

int main(int argc, char** argv) {
  namespace df = densefeed;
  using clock = std::chrono::steady_clock;
  const int n = argc > 1 ? std::stoi(argv[1]) : 10000;
  const std::filesystem::path dir = std::filesystem::path(argc > 2 ? argv[2] : "/tmp") / "densefeed-ledger-perf";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = dir / "ledger.db";
  df::set_ledger_key_file(path, dir.parent_path() / "densefeed-ledger-perf.key");
  std::filesystem::remove(dir.parent_path() / "densefeed-ledger-perf.key");
  df::Manifest m;
  m.doc.path = "perf.yaml";
  m.doc.text = "experiment: perf\n";
  m.sha256 = std::string(64, 'a');
  m.name = "perf";
  m.hypothesis = "h";
  m.predicted_effect = "p";
  m.gate = "perf";
  m.candidate.revision = "WORKTREE";
  m.base.revision = "WORKTREE";
  df::GateResult green;
  df::CaseResult c;
  c.gate_case.label = "n=64";
  c.gate_case.values = {{"n", 64}};
  green.cases.push_back(c);
  const auto seconds = [](clock::duration d) { return std::chrono::duration<double>(d).count(); };

  df::Ledger ledger(path);
  const auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    const auto id = ledger.record_experiment({&m, {{"i", i}}, {{"i", -1}}, "", "", false});
    ledger.record_gate_run(id, {"perf", std::string(64, 'b'), {}, "quick", static_cast<std::uint64_t>(i), df::utc_now(), &green});
    ledger.record_finished(id, "run");
  }
  const double record_s = seconds(clock::now() - t0);
  const auto head = ledger.head();

  // The keyed link itself: HMAC-SHA256 against the unkeyed sha256 of version 2.
  const std::string key(32, 'k'), msg(64 + 1 + 12 + 1 + 6 + 1 + 64, 'x');
  constexpr int kLinks = 200000;
  auto t1 = clock::now();
  std::size_t sink = 0;
  for (int i = 0; i < kLinks; ++i) sink += df::hmac_sha256_hex(key, msg)[0];
  const double hmac_s = seconds(clock::now() - t1) / kLinks;
  t1 = clock::now();
  for (int i = 0; i < kLinks; ++i) sink += df::sha256_hex(msg)[0];
  const double sha_s = seconds(clock::now() - t1) / kLinks;

  const df::Ledger reader(path, df::Ledger::Mode::audit);
  t1 = clock::now();
  const auto check = reader.verify();
  const double verify_s = seconds(clock::now() - t1);
  t1 = clock::now();
  const auto differ = reader.schema_differences();
  const double inventory_s = seconds(clock::now() - t1);
  t1 = clock::now();
  { const df::Ledger open(path, df::Ledger::Mode::read_only); }
  const double open_s = seconds(clock::now() - t1);

  std::printf("experiments %d, links %lld (%s), schema objects differing %zu, file %.1f MiB\n", n,
              static_cast<long long>(check.links), check.ok ? "chain intact" : "CHAIN BROKEN", differ.size(),
              std::filesystem::file_size(path) / 1048576.0);
  std::printf("record: %.3f ms per experiment (3 transactions, %.1f links each), %.1f s in all\n", 1e3 * record_s / n,
              static_cast<double>(head.seq) / n, record_s);
  std::printf("one link's MAC: HMAC-SHA256 %.2f us vs unkeyed sha256 %.2f us (x %.2f); per experiment %.2f us of MAC\n",
              1e6 * hmac_s, 1e6 * sha_s, hmac_s / sha_s, 1e6 * hmac_s * static_cast<double>(head.seq) / n);
  std::printf("audit: verify %.3f s (%.2f us per link), schema inventory %.2f ms; read-only open (inventory included) %.2f ms\n",
              verify_s, 1e6 * verify_s / static_cast<double>(check.links), 1e3 * inventory_s, 1e3 * open_s);
  std::filesystem::remove_all(dir);
  return sink == 0 ? 1 : 0;
}
