// The house rule on long functions (issue 27, "thin verbs"): no function or
// lambda body in orchestrator/ is over kMaxLines lines unless a comment right
// above it says why, starting with "Long function:". Checked on the source,
// as layers_test.cpp checks the includes: the scanner below blanks comments,
// string and character literals, then pairs braces and calls a brace block a
// body when the text before it ends a parameter list (`)`, optionally followed
// by const, noexcept, override, mutable or a trailing return type) or a lambda
// capture (`]`), and is not an if/for/while/switch/catch.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kOrchestrator = std::filesystem::path(DENSEFEED_SOURCE_DIR) / "orchestrator";
// Issue 27: "No function over about 120 lines without a reason written above it."
constexpr int kMaxLines = 120;
const std::string kReasonMarker = "Long function:";

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `src` with comments, string literals (raw ones too) and character literals
// replaced by spaces, newlines kept, so that offsets and line numbers hold.
std::string blank_non_code(const std::string& src) {
  std::string out = src;
  const auto blank = [&](std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to && k < out.size(); ++k) {
      if (out[k] != '\n') out[k] = ' ';
    }
  };
  std::size_t i = 0;
  const std::size_t n = src.size();
  while (i < n) {
    if (src.compare(i, 2, "//") == 0) {
      std::size_t j = src.find('\n', i);
      if (j == std::string::npos) j = n;
      blank(i, j);
      i = j;
    } else if (src.compare(i, 2, "/*") == 0) {
      std::size_t j = src.find("*/", i + 2);
      j = j == std::string::npos ? n : j + 2;
      blank(i, j);
      i = j;
    } else if (src[i] == 'R' && i + 1 < n && src[i + 1] == '"' && (i == 0 || !std::isalnum(static_cast<unsigned char>(src[i - 1])))) {
      const std::size_t open = src.find('(', i + 2);
      const std::string close = ")" + src.substr(i + 2, open - (i + 2)) + "\"";
      std::size_t j = src.find(close, open);
      j = j == std::string::npos ? n : j + close.size();
      blank(i, j);
      i = j;
    } else if (src[i] == '"' || (src[i] == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(src[i - 1]))))) {
      // A quote after a hex digit is a digit separator (1'000), not a literal.
      const char q = src[i];
      std::size_t j = i + 1;
      while (j < n && src[j] != q && src[j] != '\n') j += src[j] == '\\' ? 2 : 1;
      blank(i + 1, j);
      i = j + 1;
    } else {
      ++i;
    }
  }
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

struct Body {
  std::filesystem::path file;
  int line = 0;   // 1-based line of the header's first line
  int lines = 0;  // from the opening brace's line to the closing one's
  std::string header;
  bool has_reason = false;
};

bool is_body_header(const std::string& code, std::size_t brace) {
  std::string head = code.substr(0, brace);
  head = trim(head);
  if (head.empty()) return false;
  if (head.back() == ']') return true;  // [&] { ... }
  static const std::regex trailing(R"((\s*(const|noexcept|override|final|mutable)\s*$)|(\s*->\s*[\w:<>,\s\*&]+$))");
  for (std::smatch m; std::regex_search(head, m, trailing) && m.position(0) > 0;) head = trim(head.substr(0, m.position(0)));
  if (head.empty() || head.back() != ')') return false;
  // Find the '(' that this ')' closes, and the word before it.
  int depth = 0;
  std::size_t k = head.size();
  while (k-- > 0) {
    if (head[k] == ')') ++depth;
    else if (head[k] == '(' && --depth == 0) break;
  }
  if (k == std::string::npos || k == 0) return false;
  std::size_t e = k;
  while (e > 0 && std::isspace(static_cast<unsigned char>(head[e - 1]))) --e;
  std::size_t b = e;
  while (b > 0 && (std::isalnum(static_cast<unsigned char>(head[b - 1])) || head[b - 1] == '_')) --b;
  static const std::vector<std::string> control = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype"};
  const std::string word = head.substr(b, e - b);
  if (std::find(control.begin(), control.end(), word) != control.end()) return false;
  // A lambda's parameter list follows its capture: [&](int x) { ... }
  if (word.empty()) return e > 0 && head[e - 1] == ']';
  return true;
}

std::vector<Body> long_bodies(const std::filesystem::path& file) {
  const std::string src = read(file);
  const std::string code = blank_non_code(src);
  std::vector<std::size_t> line_starts = {0};
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\n') line_starts.push_back(i + 1);
  }
  const auto line_of = [&](std::size_t offset) {
    return static_cast<int>(std::upper_bound(line_starts.begin(), line_starts.end(), offset) - line_starts.begin());
  };
  const auto line_text = [&](int line) {
    const std::size_t b = line_starts[line - 1];
    const std::size_t e = static_cast<std::size_t>(line) < line_starts.size() ? line_starts[line] - 1 : src.size();
    return src.substr(b, e - b);
  };
  std::vector<Body> out;
  std::vector<std::size_t> open;
  for (std::size_t i = 0; i < code.size(); ++i) {
    if (code[i] == '{') {
      open.push_back(i);
    } else if (code[i] == '}' && !open.empty()) {
      const std::size_t brace = open.back();
      open.pop_back();
      const int lines = line_of(i) - line_of(brace) + 1;
      if (lines <= kMaxLines) continue;
      // The header: back to the end of the previous statement or block.
      const std::size_t stop = code.find_last_of(";{}", brace == 0 ? 0 : brace - 1);
      const std::size_t from = stop == std::string::npos ? 0 : stop + 1;
      if (!is_body_header(code.substr(from, brace - from + 1), brace - from)) continue;
      const std::size_t first = code.find_first_not_of(" \t\r\n", from);
      Body b{file, line_of(first), lines, trim(code.substr(first, std::min<std::size_t>(brace - first, 80))), false};
      // The comment lines right above the header's first line.
      for (int l = b.line - 1; l >= 1; --l) {
        const std::string t = trim(line_text(l));
        if (t.rfind("//", 0) != 0) break;
        if (t.find(kReasonMarker) != std::string::npos) b.has_reason = true;
      }
      out.push_back(b);
    }
  }
  return out;
}

std::vector<std::filesystem::path> sources() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kOrchestrator)) {
    if (e.path().extension() == ".cpp" || e.path().extension() == ".h") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(HouseRules, NoFunctionIsOverAbout120LinesWithoutAReasonAboveIt) {
  std::string unexplained;
  for (const auto& f : sources()) {
    for (const auto& b : long_bodies(f)) {
      if (!b.has_reason) {
        unexplained += "  " + std::filesystem::relative(b.file, kOrchestrator).string() + ":" + std::to_string(b.line) + " " +
                       std::to_string(b.lines) + " lines: " + b.header + "\n";
      }
    }
  }
  EXPECT_TRUE(unexplained.empty()) << "function bodies over " << kMaxLines << " lines with no '// " << kReasonMarker
                                   << " ...' comment right above them:\n"
                                   << unexplained;
}

// The scanner itself, on sources written here: a test that cannot fail is no test.
class HouseRulesScanner : public ::testing::Test {
 protected:
  std::filesystem::path write(const std::string& name, const std::string& text) {
    const auto dir = std::filesystem::temp_directory_path() / ("house_rules_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / name) << text;
    return dir / name;
  }
  static std::string lines(int n, const std::string& line) {
    std::string s;
    for (int i = 0; i < n; ++i) s += line + "\n";
    return s;
  }
};

TEST_F(HouseRulesScanner, FindsALongFunctionALongLambdaAndALongMethod) {
  const auto f = write("long.cpp", "int f(int a) {\n" + lines(125, "  a += 1;") + "  return a;\n}\n" +
                                       "void g() {\n  auto k = [&](int x) mutable {\n" + lines(125, "    x++;") + "  };\n}\n" +
                                       "int C::m(const std::string& s) const noexcept {\n" + lines(125, "  s.size();") + "}\n");
  const auto found = long_bodies(f);
  ASSERT_EQ(found.size(), 4u);  // in the order they close
  EXPECT_EQ(found[0].line, 1);
  EXPECT_EQ(found[0].lines, 128);
  EXPECT_FALSE(found[0].has_reason);
  EXPECT_EQ(found[1].line, 130);  // the lambda's statement
  EXPECT_EQ(found[1].lines, 127);
  EXPECT_EQ(found[2].line, 129);  // g(), which holds it
  EXPECT_EQ(found[2].header, "void g()");
  EXPECT_EQ(found[3].line, 258);
  EXPECT_EQ(found[3].lines, 127);
}

TEST_F(HouseRulesScanner, AReasonAboveIsFoundAndControlBlocksAndBracesInTextAreNot) {
  const auto f = write("reason.cpp", "// Long function: between fork and exec only async-signal-safe calls.\n"
                                     "int f(int a) {\n" + lines(125, "  a += 1;") + "}\n" +
                                     "void g() {\n  if (x) {\n" + lines(50, "  y();") + "  }\n" +
                                     "  const char* s = \"{{{{\"; char c = '{'; // {\n  /* { */ int n = 1'000;\n" +
                                     lines(50, "  y();") + "}\n" +
                                     "void h() { for (int i = 0; i < 1; ++i) {\n" + lines(125, "  y();") + "}}\n");
  const auto found = long_bodies(f);
  ASSERT_EQ(found.size(), 2u);  // f and h, never g's if, nor h's for
  EXPECT_TRUE(found[0].has_reason);
  EXPECT_EQ(found[0].line, 2);
  EXPECT_EQ(found[1].header, "void h()");
  EXPECT_FALSE(found[1].has_reason);
}

TEST_F(HouseRulesScanner, AFunctionOfExactlyTheLimitIsNotLong) {
  const auto f = write("limit.cpp", "int f() {\n" + lines(kMaxLines - 2, "  ;") + "}\n");
  EXPECT_TRUE(long_bodies(f).empty());
  const auto g = write("over.cpp", "int f() {\n" + lines(kMaxLines - 1, "  ;") + "}\n");
  EXPECT_EQ(long_bodies(g).size(), 1u);
}

}  // namespace
