// Text from a manifest or a harness (hypothesis, author, reasons, log
// tails) made safe to show on a terminal: a control character or an invisible
// direction mark could otherwise move the cursor, rewrite a line ("\r green")
// or reorder what an engineer reads, and a line feed could draw a line that
// looks like densefeed's own ("\nverdict: green"). Every text printer (the
// report, ledger show/list/compare, status, the HTML report) shows such a
// field through one_line(); the MCP tools' text and everything main prints
// pass through printable() as well. JSON output escapes control characters
// as JSON does.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace densefeed {

// `text` with escapes in place of: C0 controls except '\n' and '\t' when
// keep_newlines (\x1b, \r, \x07 ...), DEL (\x7f), C1 controls (U+0080..U+009F,
// as \u0085), the bidirectional marks and isolates U+202A..U+202E,
// U+2066..U+2069, U+200E, U+200F, U+061C, the line and paragraph separators
// U+2028 and U+2029 (line breaks to a browser and some editors), and bytes that are not UTF-8
// (\xff). A backslash stays as it is. Everything else is unchanged.
std::string printable(std::string_view text, bool keep_newlines = true);

// `text` on one line, for a field a text printer shows after its label
// (a hypothesis, an author, an experiment name, a reason, a log tail): as
// printable(text, false), but a line feed is "\n" and a tab "\t", so
// that the text reads as it was written and still cannot start a line of
// its own ("h\nverdict: green" cannot draw a verdict line of densefeed's).
// A carriage return stays "\x0d", as printable() writes it.
std::string one_line(std::string_view text);

// While it lives, what is written to `stream` reaches its buffer through
// printable(), a line at a time (flushed at each '\n' and on flush): main
// puts std::cout and std::cerr behind one for every verb whose output is
// text or JSON for a terminal (not `ledger export`'s CSV, not the MCP
// server's protocol stream). JSON stays valid: control characters are
// already escaped by nlohmann's dump, and \u202e is a JSON escape too.
class PrintableStream {
 public:
  explicit PrintableStream(std::ostream& stream);
  ~PrintableStream();
  PrintableStream(const PrintableStream&) = delete;
  PrintableStream& operator=(const PrintableStream&) = delete;

 private:
  class Buffer;
  std::ostream& stream_;
  std::streambuf* original_;
  std::unique_ptr<Buffer> buffer_;
};

}  // namespace densefeed
