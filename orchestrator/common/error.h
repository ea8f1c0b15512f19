// Typed errors that cross stage boundaries. The CLI maps them to exit codes:
// InputError -> 2 (bad input), InfraError -> 3 (infrastructure). A red verdict
// is never an exception: it is a result.
#pragma once

#include <stdexcept>
#include <string>

namespace densefeed {

// Where in a source file a value sits. Line and column are 1-based; 0 means
// unknown (the whole file).
struct SourceMark {
  int line = 0;
  int column = 0;
};

// Bad input: a manifest, gate file, lock file or harness argument that is not
// what it should be. what() is "FILE:LINE:COLUMN: field 'FIELD': MESSAGE", with
// the parts that are unknown left out.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, SourceMark mark, std::string field, std::string message);
  const std::string& file() const { return file_; }
  SourceMark mark() const { return mark_; }
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  SourceMark mark_;
  std::string field_;
  std::string message_;
};

// densefeed itself, the ledger or the machine failed (cannot start a process,
// cannot write a file, SQLite error). Never caused by a candidate.
class InfraError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace densefeed
