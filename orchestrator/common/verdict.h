// Verdict vocabulary (DESIGN.md): green = the candidate passed; red = the
// candidate is wrong, crashed, timed out or wrote no output; error = the
// reference or densefeed itself failed.
#pragma once

#include <string>

namespace densefeed {

enum class Verdict { green, red, error };

inline const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::green: return "green";
    case Verdict::red: return "red";
    case Verdict::error: return "error";
  }
  return "error";
}

// error beats red beats green.
inline Verdict worst(Verdict a, Verdict b) {
  auto rank = [](Verdict v) { return v == Verdict::error ? 2 : v == Verdict::red ? 1 : 0; };
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace densefeed
