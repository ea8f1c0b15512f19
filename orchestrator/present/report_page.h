// The parts every report page is built from (report_html.h's pages, the
// compare page, the gate's trends): the page frame with its facts, charts
// and navigation, tables, and how a ledger value is written. Internal to
// present/'s HTML printers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report_frame.h"

namespace densefeed::report_page {

using J = nlohmann::ordered_json;

// A JSON field as text ('' when absent or null) / as a number (nullopt when not one).
std::string str(const J& j, const char* key);
std::optional<double> num(const J& j, const char* key);
// A record's double as a figure: NaN (the ledger's NULL) is no figure.
std::optional<double> known(double v);
// 3 significant digits in scientific notation ("NaN" for none); 3 decimals
// ("—"); 4 significant digits ("—").
std::string sci(std::optional<double> v);
std::string fixed3(std::optional<double> v);
std::string general(std::optional<double> v);
// A case value as the case wrote it: 8192, long-memory.
std::string case_value(const J& v);

// <a href="HREF">TEXT</a> (both escaped), or TEXT alone when href is ''.
std::string link(const std::string& href, const std::string& text);

// One page: its facts (ledger, chain head, written), a navigation line,
// notices, charts (Vega specs rendered by the page's script) and body.
class Page {
 public:
  Page(std::string kind, std::string title, const LedgerFacts& facts) : kind_(std::move(kind)), title_(std::move(title)), facts_(facts) {}

  std::string& body() { return body_; }
  void add(const std::string& html) { body_ += html; }
  // Links shown above the title (already HTML).
  void nav(const std::string& html) { nav_ = html; }
  void notice(const std::string& text, const char* cls = "");
  // A chart's container; the spec goes into the page's spec list.
  std::string chart(const std::string& what, J spec);
  ReportPage finish(const std::string& vega_scripts) const;

 private:
  std::string kind_, title_;
  const LedgerFacts& facts_;
  std::string body_, nav_;
  std::vector<J> specs_;
  std::vector<std::string> notices_;
};

// A table: header cells, then rows of (already escaped) cells; red[i] marks row i red.
struct Table {
  std::vector<std::string> head;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> red;
  std::string id;
  std::string html() const;
};
// Cells: text, a number (right-aligned), a verdict (coloured), already-made HTML.
std::string td(const std::string& text);
std::string tdn(const std::string& text);
std::string tdv(const std::string& verdict);
std::string td_html(const std::string& html);

}  // namespace densefeed::report_page
