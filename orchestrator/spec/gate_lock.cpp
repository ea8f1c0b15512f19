#include "gate_lock.h"

#include <fstream>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "error.h"
#include "sha256.h"

namespace densefeed {

LockTable read_lock(const GateStore& store) {
  LockTable table;
  const auto path = store.path(store.lock_rel());
  std::ifstream in(path);
  if (!in) return table;
  static const std::regex line_re("^([0-9a-f]{64}) [ *](.+)$");
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::smatch m;
    if (!std::regex_match(line, m, line_re)) {
      throw InputError(path.string(), {number, 1}, "",
                       "expected '<64 hex digits>  <path>' (sha256sum format)");
    }
    table[m[2].str()] = m[1].str();
  }
  return table;
}

std::vector<std::string> check_locked_file(const GateStore& store, const LockTable& lock,
                                           const std::string& rel_path) {
  auto it = lock.find(rel_path);
  if (it == lock.end()) return {fmt::format("{}: not in {} (a person must run 'densefeed gate lock')", rel_path,
                                            store.lock_rel())};
  if (!std::filesystem::is_regular_file(store.path(rel_path))) return {fmt::format("{}: locked but missing", rel_path)};
  const std::string now = sha256_file(store.path(rel_path));
  if (now != it->second) {
    return {fmt::format("{}: modified since the lock (locked {}, now {})", rel_path, it->second.substr(0, 12),
                        now.substr(0, 12))};
  }
  return {};
}

std::vector<std::string> check_frozen_files(const GateStore& store, const LockTable& lock,
                                            const GateSpec& gate) {
  std::vector<std::string> problems;
  for (const auto& rel : gate.freezes) {
    auto p = check_locked_file(store, lock, rel);
    problems.insert(problems.end(), p.begin(), p.end());
  }
  return problems;
}

std::vector<std::string> files_to_lock(const GateStore& store, const std::vector<std::string>& names) {
  std::vector<std::string> files;
  for (const auto& name : names.empty() ? list_gates(store) : names) {
    files.push_back(store.gate_rel(name));
    if (!std::filesystem::is_regular_file(store.path(store.gate_rel(name)))) continue;  // write_lock says so
    const GateSpec gate = load_gate(store, name);
    files.insert(files.end(), gate.freezes.begin(), gate.freezes.end());
  }
  return files;
}

std::vector<std::string> write_lock(const GateStore& store, const std::vector<std::string>& names) {
  const LockTable old = read_lock(store);
  const auto all = list_gates(store);
  const std::vector<std::string> chosen = names.empty() ? all : names;

  // Files owned by the gates being re-locked are recomputed; everything else
  // keeps its locked hash.
  LockTable next;
  std::set<std::string> owned;
  for (const auto& name : chosen) {
    const GateSpec gate = load_gate(store, name);
    const std::string gate_rel = store.gate_rel(name);
    owned.insert(gate_rel);
    next[gate_rel] = sha256_file(store.path(gate_rel));
    for (std::size_t i = 0; i < gate.freezes.size(); ++i) {
      const auto& rel = gate.freezes[i];
      if (!std::filesystem::is_regular_file(store.path(rel))) {
        throw InputError(gate.file.string(), {}, fmt::format("freezes[{}]", i),
                         fmt::format("frozen file '{}' does not exist: nothing to lock", rel));
      }
      owned.insert(rel);
      next[rel] = sha256_file(store.path(rel));
    }
  }
  for (const auto& [rel, hash] : old) {
    if (owned.count(rel)) continue;
    // Keep entries of other gates only while their files still exist.
    const bool is_gate_file = rel.rfind(store.gates + "/", 0) == 0;
    if (is_gate_file && !std::filesystem::exists(store.path(rel))) continue;
    next[rel] = hash;
  }
  if (names.empty()) {
    // Re-locking everything drops files no gate freezes any more.
    std::set<std::string> wanted(owned.begin(), owned.end());
    for (auto it = next.begin(); it != next.end();) it = wanted.count(it->first) ? std::next(it) : next.erase(it);
  }

  std::vector<std::string> changes;
  for (const auto& [rel, hash] : next) {
    auto it = old.find(rel);
    if (it == old.end()) changes.push_back("added " + rel);
    else if (it->second != hash) changes.push_back("changed " + rel);
  }
  for (const auto& [rel, hash] : old) {
    if (!next.count(rel)) changes.push_back("removed " + rel);
  }

  const auto path = store.path(store.lock_rel());
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw InfraError(fmt::format("{}: cannot write", tmp));
    for (const auto& [rel, hash] : next) out << hash << "  " << rel << "\n";
    if (!out) throw InfraError(fmt::format("{}: write failed", tmp));
  }
  std::filesystem::rename(tmp, path);
  return changes;
}

}  // namespace densefeed
