// `densefeed gate verify` (for CI): every gate of the project folder against
// its gates.lock, and the trusted ref's export that runs use, when there is
// one, against its commit.
#pragma once

#include <string>
#include <vector>

#include "gate_store.h"
#include "project.h"
#include "tamper_event.h"

namespace densefeed {

struct GateVerification {
  struct Gate {
    std::string name;
    std::vector<std::string> problems;  // empty: the gate and its frozen files match the lock
  };
  std::vector<Gate> gates;          // in list_gates order
  std::string trusted;              // the trusted store's describe(); '' when no export was checked
  std::vector<TamperEvent> tampered;  // what the export had altered (open_gate_store replaced it)
  bool ok() const;
  // Takes over what opening `trusted` (the trusted ref's export that runs
  // use) found altered: an alteration fails verification too.
  void add_export(const GateStore& trusted);
};

// Checks each gate of `worktree` (its lock entry first; its frozen files
// only when that matches). Throws InputError when the gates folder holds no
// gate (naming `project`'s densefeed.yaml), and what read_lock and load_gate throw.
GateVerification verify_gates(const Project& project, const GateStore& worktree);

}  // namespace densefeed
