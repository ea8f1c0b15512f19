#include "report_page.h"

#include <cmath>

#include <fmt/format.h>

namespace densefeed::report_page {
namespace {

const char* kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1180px;padding:0 16px;color:#1d1d1f}
h1{font-size:22px;margin:0 0 6px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:13px;color:#444;margin:8px 0 14px}
.facts dt{font-weight:600}.facts dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}
.notice{border-left:5px solid #1f77b4;background:#eef5fb;padding:10px 14px;margin:12px 0;font-weight:500}
.notice.bad{border-color:#d62728;background:#fdeeee}.notice.warn{border-color:#bcbd22;background:#fafae6}
.side{display:grid;grid-template-columns:1fr 1fr 1fr;gap:14px}.side>div{background:#f7f7f9;border-radius:6px;padding:10px 12px}
.side h3{margin-top:0}.charts{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start;margin:8px 0}
table{border-collapse:collapse;margin:8px 0 14px;font-size:12.5px}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f2f2f4}td.num{text-align:right;font-family:ui-monospace,monospace}tr.red td,td.red{background:#fde2e1}
td.green{background:#e3f4e1}.verdict-green{color:#2ca02c;font-weight:700}.verdict-red,.verdict-error{color:#d62728;font-weight:700}
code{font-family:ui-monospace,monospace;font-size:12.5px}
nav{font-size:13px;margin:0 0 10px}nav a{margin-right:14px}
)css";

const char* kRenderScript = R"js(
(function(){
  var specs=JSON.parse(document.getElementById('densefeed-specs').textContent);
  var errors=[],rendered=0;
  function logger(id){var level=2;return{level:function(l){if(arguments.length){level=+l;return this;}return level;},
    error:function(){errors.push(id+': '+Array.prototype.join.call(arguments,' '));return this;},
    warn:function(){errors.push(id+' (warning): '+Array.prototype.join.call(arguments,' '));return this;},
    info:function(){return this;},debug:function(){return this;}};}
  Promise.all(specs.map(function(s){
    try{
      return new vega.View(vega.parse(s.spec),{renderer:'svg',container:'#'+s.id,hover:false,logger:logger(s.id)})
        .runAsync().then(function(){rendered++;},function(e){errors.push(s.id+': '+e);});
    }catch(e){errors.push(s.id+': '+e);return Promise.resolve();}
  })).then(function(){
    document.body.setAttribute('data-charts-rendered',String(rendered));
    if(errors.length)document.body.setAttribute('data-chart-errors',errors.join(' | '));
  });
})();
)js";

}  // namespace


std::string str(const J& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}
std::optional<double> num(const J& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}
// A record's double as a figure: NaN (the ledger's NULL) is no figure.
std::optional<double> known(double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); }
std::string sci(std::optional<double> v) { return v ? fmt::format("{:.3e}", *v) : "NaN"; }
std::string fixed3(std::optional<double> v) { return v ? fmt::format("{:.3f}", *v) : "—"; }
std::string general(std::optional<double> v) { return v ? fmt::format("{:.4g}", *v) : "—"; }

// A case value as the case wrote it: 8192, long-memory.
std::string case_value(const J& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }


std::string link(const std::string& href, const std::string& text) {
  return href.empty() ? html_escape(text) : fmt::format("<a href=\"{}\">{}</a>", html_escape(href), html_escape(text));
}

void Page::notice(const std::string& text, const char* cls) {
  notices_.push_back(text);
  body_ += fmt::format("<p class=\"notice {}\" data-notice>{}</p>\n", cls, html_escape(text));
}

std::string Page::chart(const std::string& what, J spec) {
  const std::string id = fmt::format("chart-{}", specs_.size() + 1);
  specs_.push_back({{"id", id}, {"spec", std::move(spec)}});
  return fmt::format("<div class=\"chart\" id=\"{}\" data-chart=\"{}\"></div>\n", id, html_escape(what));
}

ReportPage Page::finish(const std::string& vega_scripts) const {
  ReportPage p;
  p.kind = kind_;
  p.title = title_;
  p.charts = static_cast<int>(specs_.size());
  p.notices = notices_;
  std::string facts;
  facts += fmt::format("<dt>ledger</dt><dd data-fact=\"ledger\">{}</dd>\n", html_escape(facts_.ledger_file));
  if (facts_.chain.ok) {
    facts += fmt::format("<dt>chain head</dt><dd data-fact=\"chain-head\">{}</dd>\n<dt>chain</dt><dd>intact: {} links verified</dd>\n",
                         facts_.chain.head.empty() ? "(empty chain)" : facts_.chain.head, facts_.chain.links);
  } else {
    facts += "<dt>chain head</dt><dd data-fact=\"chain-head\">none: the chain is broken</dd>\n";
  }
  facts += fmt::format("<dt>written</dt><dd data-fact=\"written\">{}</dd>\n", html_escape(facts_.written_at));
  std::string broken;
  if (!facts_.chain.ok) {
    broken = fmt::format(
        "<p class=\"notice bad\" data-notice data-chain-broken>The ledger's hash chain is broken at link {} ({} row {}{}): {}. "
        "Rows from there on may have been changed outside densefeed; what this page shows is not verified.</p>\n",
        facts_.chain.first_broken_seq, html_escape(facts_.chain.table), facts_.chain.row_id,
        facts_.chain.experiment_id ? fmt::format(", experiment {}", facts_.chain.experiment_id) : "", html_escape(facts_.chain.problem));
  }
  std::string specs = J(specs_).dump(-1, ' ', false, J::error_handler_t::replace);
  // Inside <script> only "</" can end the element early; "<\/" is the same JSON string.
  for (std::size_t at = 0; (at = specs.find("</", at)) != std::string::npos; at += 3) specs.replace(at, 2, "<\\/");
  p.html = fmt::format(
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"generator\" content=\"densefeed report\">\n"
      "<title>{}</title>\n<style>{}</style>\n{}</head>\n<body data-kind=\"{}\" data-chain=\"{}\" data-charts=\"{}\">\n{}"
      "<h1>{}</h1>\n<dl class=\"facts\">\n{}</dl>\n{}{}\n"
      "<script type=\"application/json\" id=\"densefeed-specs\">{}</script>\n<script>{}</script>\n</body></html>\n",
      html_escape(title_), kStyle, vega_scripts, kind_, facts_.chain.ok ? "ok" : "broken", specs_.size(),
      nav_.empty() ? "" : "<nav data-nav>" + nav_ + "</nav>\n", html_escape(title_), facts, broken, body_, specs, kRenderScript);
  return p;
}

std::string Table::html() const {
  std::string out = id.empty() ? "<table>" : fmt::format("<table data-table=\"{}\">", html_escape(id));
  out += "<thead><tr>";
  for (const auto& h : head) out += "<th>" + html_escape(h) + "</th>";
  out += "</tr></thead><tbody>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out += i < red.size() && red[i] ? "<tr class=\"red\">" : "<tr>";
    for (const auto& c : rows[i]) out += c;
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

std::string td(const std::string& text) { return "<td>" + html_escape(text) + "</td>"; }
std::string tdn(const std::string& text) { return "<td class=\"num\">" + html_escape(text) + "</td>"; }
std::string tdv(const std::string& verdict) {
  return fmt::format("<td class=\"verdict-{}\">{}</td>", html_escape(verdict), html_escape(verdict));
}
std::string td_html(const std::string& html) { return "<td>" + html + "</td>"; }

}  // namespace densefeed::report_page
