#include "error.h"

#include <fmt/format.h>

namespace densefeed {
namespace {

std::string format_input_error(const std::string& file, SourceMark mark, const std::string& field,
                               const std::string& message) {
  std::string where = file;
  if (mark.line > 0) where += fmt::format(":{}:{}", mark.line, mark.column);
  if (!field.empty()) return fmt::format("{}: field '{}': {}", where, field, message);
  return fmt::format("{}: {}", where, message);
}

}  // namespace

InputError::InputError(std::string file, SourceMark mark, std::string field, std::string message)
    : std::runtime_error(format_input_error(file, mark, field, message)),
      file_(std::move(file)),
      mark_(mark),
      field_(std::move(field)),
      message_(std::move(message)) {}

}  // namespace densefeed
