#include "cli.h"

#include <charconv>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {

std::filesystem::path CliContext::ledger_path() const {
  return std::filesystem::absolute(ledger_text.empty() ? root() / ".densefeed" / "ledger.db" : std::filesystem::path(ledger_text));
}

std::uint64_t parse_unsigned(const std::string& what, const std::string& text, std::uint64_t max) {
  std::uint64_t value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || text[0] == '+' || ec != std::errc() || ptr != end || value > max) {
    throw InputError("command line", {}, what, fmt::format("expected an integer from 0 to {}, got '{}'", max, text));
  }
  return value;
}

std::int64_t parse_experiment_id(const std::string& text) {
  return static_cast<std::int64_t>(parse_unsigned("ID", text, INT64_MAX));
}

void add_ledger_and_json(CLI::App* verb, CliContext& ctx) {
  verb->add_option("--ledger", ctx.ledger_text, "SQLite ledger (default ROOT/.densefeed/ledger.db)");
  verb->add_flag("--json", ctx.json, "print one JSON document");
}

}  // namespace densefeed
