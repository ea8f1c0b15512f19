#include "list_filter_check.h"

#include <cctype>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {
namespace {

// --since: a UTC date or time, YYYY-MM-DD[THH:MM[:SS]][Z], with real ranges.
void check_since(const std::string& text) {
  const auto bad = [&] {
    throw InputError("command line", {}, "--since",
                     "expected a UTC date or time such as 2026-11-29 or 2026-11-29T20:00 (YYYY-MM-DD[THH:MM[:SS]]), got '" + text + "'");
  };
  std::string t = text;
  if (!t.empty() && t.back() == 'Z') t.pop_back();
  const auto digits = [&](std::size_t at, std::size_t n, int lo, int hi) {
    if (t.size() < at + n) bad();
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i]))) bad();
      v = v * 10 + (t[i] - '0');
    }
    if (v < lo || v > hi) bad();
    return v;
  };
  if (t.size() != 10 && t.size() != 16 && t.size() != 19) bad();
  const int year = digits(0, 4, 1970, 9999);
  if (t[4] != '-' || t[7] != '-') bad();
  const int month = digits(5, 2, 1, 12);
  static const int days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const int day = digits(8, 2, 1, days[month - 1]);
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month == 2 && day == 29 && !leap) bad();
  if (t.size() > 10) {
    if (t[10] != 'T' || t[13] != ':') bad();
    digits(11, 2, 0, 23);
    digits(14, 2, 0, 59);
    if (t.size() == 19) {
      if (t[16] != ':') bad();
      digits(17, 2, 0, 59);
    }
  }
}

// --verdict: an overall verdict or a state.
void check_verdict(const std::string& text) {
  static const std::vector<std::string> allowed = {"green", "red", "error", "unknown", "pending", "queued", "started", "requeued",
                                                   "interrupted", "finished", "cancel_requested", "cancelled", "rejected", "recorded"};
  for (const auto& a : allowed) {
    if (a == text) return;
  }
  throw InputError("command line", {}, "--verdict",
                   fmt::format("'{}' is neither a verdict (green, red, error, unknown, pending) nor a state (queued, started, "
                               "requeued, interrupted, finished, cancel_requested, cancelled, rejected)", text));
}

}  // namespace

void check_list_filter(const Ledger::ListFilter& filter) {
  if (!filter.since.empty()) check_since(filter.since);
  if (!filter.verdict.empty()) check_verdict(filter.verdict);
}

}  // namespace densefeed
