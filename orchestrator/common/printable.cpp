#include "printable.h"

#include <fmt/format.h>

namespace densefeed {

std::string printable(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      if ((c < 0x20 && !(keep_newlines && (c == '\n' || c == '\t'))) || c == 0x7f) out += fmt::format("\\x{:02x}", c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence (RFC 3629): its length from the lead byte, every
    // continuation byte 10xxxxxx, no overlong form, no surrogate.
    const std::size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    bool valid = len > 0 && i + len <= n;
    char32_t cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (std::size_t k = 1; valid && k < len; ++k) {
      valid = (s[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (valid && ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))) {
      valid = false;
    }
    if (!valid) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
      continue;
    }
    const bool hidden = (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
                        cp == 0x200E || cp == 0x200F || cp == 0x061C || cp == 0x2028 || cp == 0x2029;
    if (hidden) out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
    else out.append(text.substr(i, len));
    i += len;
  }
  return out;
}

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && text[i] != '\n' && text[i] != '\t') continue;
    out += printable(text.substr(begin, i - begin), false);
    if (i < text.size()) out += text[i] == '\n' ? "\\n" : "\\t";
    begin = i + 1;
  }
  return out;
}

class PrintableStream::Buffer : public std::streambuf {
 public:
  explicit Buffer(std::streambuf* out) : out_(out) {}
  ~Buffer() override { flush_line(); }

 protected:
  int_type overflow(int_type ch) override {
    if (ch == traits_type::eof()) return traits_type::not_eof(ch);
    line_ += static_cast<char>(ch);
    if (ch == '\n') flush_line();
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) overflow(traits_type::to_int_type(s[i]));
    return n;
  }
  int sync() override {
    flush_line();
    return out_->pubsync();
  }

 private:
  void flush_line() {
    if (line_.empty()) return;
    const std::string shown = printable(line_);
    out_->sputn(shown.data(), static_cast<std::streamsize>(shown.size()));
    line_.clear();
  }
  std::streambuf* out_;
  std::string line_;
};

PrintableStream::PrintableStream(std::ostream& stream)
    : stream_(stream), original_(stream.rdbuf()), buffer_(std::make_unique<Buffer>(original_)) {
  stream_.rdbuf(buffer_.get());
}

PrintableStream::~PrintableStream() {
  stream_.flush();
  stream_.rdbuf(original_);
  buffer_.reset();
  stream_.flush();
}

}  // namespace densefeed
