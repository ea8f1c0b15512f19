// densefeed's exit codes (README, "Exit codes"), the one mapping every verb
// uses: 0 green, 1 red, 2 bad usage or input (rejected), 3 error (the
// reference, the machine or densefeed itself failed; interrupted or
// cancelled), 4 not ended yet (queued, started, requeued, cancel_requested),
// 5 green but a --fail-on bench verdict was met (a green gate with a slower
// bench: run --fail-on slower; fail_on.h).
#pragma once

#include "verdict.h"

namespace densefeed {

inline constexpr int kExitGreen = 0;
inline constexpr int kExitRed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitError = 3;
inline constexpr int kExitNotEnded = 4;
inline constexpr int kExitFailOn = 5;

// The exit code of a verdict: green 0, red 1, error 3.
inline int exit_code_of(Verdict v) {
  switch (v) {
    case Verdict::green: return kExitGreen;
    case Verdict::red: return kExitRed;
    case Verdict::error: return kExitError;
  }
  return kExitError;
}

}  // namespace densefeed
