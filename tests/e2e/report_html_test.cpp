// `densefeed report` rendered in a real browser: Debian's chromium, headless,
// opens each kind of page from a ledger the test built with the real CLI and
// harnesses. A screenshot of each page must have the requested size and not
// be blank; the DOM Chromium dumps after the page's scripts ran must hold the
// charts Vega drew (SVG marks whose aria-labels carry the values) and the exact
// values the ledger holds (the tf32 example's red cells, the tf32x3 speedup).
// Then the pages that say why there is nothing to draw: a queued experiment,
// a red gate without benchmark, a broken hash chain, an empty ledger; and the
// MCP tool that writes an experiment's page.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <zlib.h>

#include <array>
#include <cstdlib>
#include <optional>
#include <cstdint>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gate_store.h"
#include "ledger.h"
#include "ledger_identity.h"
#include "manifest.h"
#include "project.h"
#include "ledger_key.h"
#include "test_support.h"

namespace densefeed {
namespace {

using J = nlohmann::json;

const std::filesystem::path kSource = DENSEFEED_SOURCE_DIR;

// --- a PNG reader (8-bit RGB or RGBA, non-interlaced: what Chromium writes) --

struct Image {
  std::uint32_t width = 0, height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;  // rows of width * channels bytes
  std::array<std::uint8_t, 3> rgb(std::uint32_t x, std::uint32_t y) const {
    const auto* p = &pixels[(static_cast<std::size_t>(y) * width + x) * channels];
    return {p[0], p[1], p[2]};
  }
};

std::uint32_t be32(const std::string& s, std::size_t at) {
  return (std::uint32_t(std::uint8_t(s[at])) << 24) | (std::uint32_t(std::uint8_t(s[at + 1])) << 16) |
         (std::uint32_t(std::uint8_t(s[at + 2])) << 8) | std::uint32_t(std::uint8_t(s[at + 3]));
}

// PNG specification (W3C, 2003): chunks, zlib-compressed IDAT, per-row filters 0..4.
Image read_png(const std::filesystem::path& path) {
  const std::string f = testing::read_file(path);
  Image img;
  if (f.size() < 8 || f.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) throw std::runtime_error(path.string() + ": not a PNG");
  std::string idat;
  int depth = 0, type = 0, interlace = 0;
  for (std::size_t at = 8; at + 8 <= f.size();) {
    const std::uint32_t len = be32(f, at);
    const std::string kind = f.substr(at + 4, 4);
    if (kind == "IHDR") {
      img.width = be32(f, at + 8);
      img.height = be32(f, at + 12);
      depth = std::uint8_t(f[at + 16]);
      type = std::uint8_t(f[at + 17]);
      interlace = std::uint8_t(f[at + 20]);
    } else if (kind == "IDAT") {
      idat += f.substr(at + 8, len);
    }
    at += 12 + len;
  }
  if (depth != 8 || (type != 2 && type != 6) || interlace != 0) throw std::runtime_error(path.string() + ": not 8-bit RGB(A), non-interlaced");
  img.channels = type == 6 ? 4 : 3;
  const std::size_t stride = std::size_t(img.width) * img.channels;
  std::vector<std::uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) != Z_OK || raw_len != raw.size()) {
    throw std::runtime_error(path.string() + ": IDAT does not inflate to the image's size");
  }
  img.pixels.resize(stride * img.height);
  for (std::uint32_t y = 0; y < img.height; ++y) {
    const std::uint8_t filter = raw[y * (stride + 1)];
    const std::uint8_t* in = &raw[y * (stride + 1) + 1];
    std::uint8_t* out = &img.pixels[y * stride];
    const std::uint8_t* up = y ? &img.pixels[(y - 1) * stride] : nullptr;
    for (std::size_t i = 0; i < stride; ++i) {
      const int a = i >= std::size_t(img.channels) ? out[i - img.channels] : 0;
      const int b = up ? up[i] : 0;
      const int c = up && i >= std::size_t(img.channels) ? up[i - img.channels] : 0;
      int v = in[i];
      switch (filter) {
        case 0: break;
        case 1: v += a; break;
        case 2: v += b; break;
        case 3: v += (a + b) / 2; break;
        case 4: {
          const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          v += (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default: throw std::runtime_error(path.string() + ": bad filter type");
      }
      out[i] = static_cast<std::uint8_t>(v);
    }
  }
  return img;
}

struct Looks {
  double non_white = 0;      // fraction of pixels that are not (near) white
  std::size_t colours = 0;   // distinct colours
  std::size_t red = 0;           // pixels of the red marks' colour (#d62728: red verdicts, bounds, the broken-chain banner)
  std::size_t fail_outline = 0;  // pixels of the outline of cells over their bound (#ff00aa, used for nothing else)
  std::size_t blue = 0, orange = 0;  // the heatmap's two sides of the bound (blueorange scheme), roughly
  std::size_t overlap = 0;           // pixels of the trace overlap strip (#00a884, used for nothing else)
};
Looks look_at(const Image& img) {
  Looks l;
  std::set<std::uint32_t> colours;
  std::size_t non_white = 0;
  for (std::uint32_t y = 0; y < img.height; ++y) {
    for (std::uint32_t x = 0; x < img.width; ++x) {
      const auto [r, g, b] = img.rgb(x, y);
      if (r < 245 || g < 245 || b < 245) ++non_white;
      if (colours.size() < 100000) colours.insert((std::uint32_t(r) << 16) | (std::uint32_t(g) << 8) | b);
      if (r == 0xd6 && g == 0x27 && b == 0x28) ++l.red;
      if (r == 0xff && g == 0x00 && b == 0xaa) ++l.fail_outline;
      if (r == 0x00 && g == 0xa8 && b == 0x84) ++l.overlap;
      if (b > r + 60 && b > 120) ++l.blue;
      if (r > b + 80 && g > 60 && r > 180) ++l.orange;
    }
  }
  l.non_white = double(non_white) / (double(img.width) * img.height);
  l.colours = colours.size();
  return l;
}

// --- the browser -------------------------------------------------------------

std::string chromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::filesystem::exists(c)) return c;
  }
  return "";
}

class ReportHtml : public ::testing::Test {
 protected:
  // The ledgers' chain keys (ledger_key.h) live under $XDG_CONFIG_HOME. This
  // process (which makes and reads ledgers too) and every densefeed it runs
  // (which inherit it) use the test's folder: the same keys, and none written
  // into the real home.
  void SetUp() override {
    if (const char* x = std::getenv("XDG_CONFIG_HOME")) saved_config_home_ = x;
    ::setenv("XDG_CONFIG_HOME", (dir_ / ".config").c_str(), 1);
    ASSERT_FALSE(chromium().empty()) << "Debian's chromium is needed (./setup.sh installs it: apt-get install chromium)";
    ledger_ = dir_ / "ledger.db";
  }
  void TearDown() override {
    if (saved_config_home_) ::setenv("XDG_CONFIG_HOME", saved_config_home_->c_str(), 1);
    else ::unsetenv("XDG_CONFIG_HOME");
  }

  testing::CliResult densefeed(const std::vector<std::string>& args) const {
    return testing::run_cli(DENSEFEED_EXE, args, kSource, {{"HOME", dir_.path().string()}});
  }
  // The tf32 example (red) into the test's ledger; returns its id.
  std::int64_t run_example(const std::string& manifest, bool bench) {
    return run_manifest(kSource / "experiments" / manifest, bench);
  }
  std::int64_t run_manifest(const std::filesystem::path& manifest, bool bench) {
    std::vector<std::string> args = {"--trust-worktree", "run", manifest.string(), "--ledger", ledger_.string(), "--jobs", "2", "--json"};
    if (!bench) args.push_back("--no-bench");
    const auto r = densefeed(args);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out << r.err;
    const J doc = J::parse(r.out, nullptr, false);
    EXPECT_TRUE(doc.is_object() && doc.contains("experiment_id")) << r.out << r.err;
    return doc.is_object() ? doc.value("experiment_id", std::int64_t{0}) : 0;
  }
  J show(std::int64_t id) const {
    const auto r = densefeed({"ledger", "show", std::to_string(id), "--ledger", ledger_.string(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return J::parse(r.out);
  }
  // Writes the page; returns the report's JSON document.
  J report(const std::vector<std::string>& which, const std::filesystem::path& out, const std::filesystem::path& ledger = {}) const {
    std::vector<std::string> args = {"report"};
    args.insert(args.end(), which.begin(), which.end());
    for (const auto& a : {std::string("-o"), out.string(), std::string("--ledger"), (ledger.empty() ? ledger_ : ledger).string(), std::string("--json")}) {
      args.push_back(a);
    }
    const auto r = densefeed(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return J::parse(r.out, nullptr, false);
  }
  // Chromium's DOM after the page's scripts ran (virtual time lets Vega finish first).
  std::string dump_dom(const std::filesystem::path& page) const {
    const auto r = testing::run_cli(chromium(), {"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + (dir_ / "chromium").string(),
                                                 "--virtual-time-budget=20000", "--dump-dom", "file://" + page.string()},
                                    dir_.path(), {{"HOME", dir_.path().string()}});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  }
  Image screenshot(const std::filesystem::path& page, int w, int h) const {
    const auto png = dir_ / (page.stem().string() + ".png");
    const auto r = testing::run_cli(chromium(), {"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                                 "--user-data-dir=" + (dir_ / "chromium").string(), "--virtual-time-budget=20000",
                                                 fmt::format("--window-size={},{}", w, h), "--screenshot=" + png.string(), "file://" + page.string()},
                                    dir_.path(), {{"HOME", dir_.path().string()}});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // Kept for people to look at when DENSEFEED_REPORT_SCREENSHOTS names a folder.
    if (const char* keep = std::getenv("DENSEFEED_REPORT_SCREENSHOTS")) {
      std::filesystem::create_directories(keep);
      std::filesystem::copy_file(png, std::filesystem::path(keep) / png.filename(), std::filesystem::copy_options::overwrite_existing);
    }
    return read_png(png);
  }
  // The body's data-charts and data-charts-rendered, and no chart error.
  static void expect_charts_rendered(const std::string& dom, int at_least) {
    std::smatch charts, rendered;
    ASSERT_TRUE(std::regex_search(dom, charts, std::regex("data-charts=\"(\\d+)\""))) << dom.substr(0, 2000);
    ASSERT_TRUE(std::regex_search(dom, rendered, std::regex("data-charts-rendered=\"(\\d+)\""))) << "the page's scripts did not finish";
    EXPECT_EQ(charts[1].str(), rendered[1].str());
    EXPECT_GE(std::stoi(charts[1].str()), at_least);
    const auto errors = dom.find("data-chart-errors=");
    EXPECT_EQ(errors, std::string::npos) << dom.substr(errors, 1500);
    // Vega's SVG renderer: one <svg> per chart, marks as graphics-symbol elements.
    std::size_t svgs = 0;
    for (auto at = dom.find("<svg"); at != std::string::npos; at = dom.find("<svg", at + 1)) ++svgs;
    EXPECT_EQ(svgs, std::stoul(charts[1].str()));
  }
  // Where Vega drew the SVG element whose aria-label is exactly `label`: its translate(x, y).
  static std::optional<std::pair<double, double>> mark_at(const std::string& dom, const std::string& label) {
    const auto at = dom.find("aria-label=\"" + label + "\"");
    if (at == std::string::npos) return std::nullopt;
    const auto open = dom.rfind('<', at), close = dom.find('>', at);
    const std::string element = dom.substr(open, close - open);
    std::smatch m;
    if (!std::regex_search(element, m, std::regex(R"re(transform="translate\(([-0-9.e]+),([-0-9.e]+)\)")re"))) return std::nullopt;
    return std::make_pair(std::stod(m[1].str()), std::stod(m[2].str()));
  }
  static std::size_t count(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  // SVG elements Vega drew whose aria-label contains `what` (the page's spec JSON holds the same text, but not as an attribute).
  static std::size_t count_marks(const std::string& dom, const std::string& what, bool at_start = false) {
    std::size_t n = 0;
    const std::regex label("aria-label=\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(dom.begin(), dom.end(), label); it != std::sregex_iterator(); ++it) {
      const auto at = (*it)[1].str().find(what);
      n += at_start ? at == 0 : at != std::string::npos;
    }
    return n;
  }

  testing::TempDir dir_;
  std::filesystem::path ledger_;
  std::optional<std::string> saved_config_home_;
};

// The tf32 example is red: its page draws the T x shards heatmap with the red
// cells outlined, and the DOM holds every failing (case, metric) with the
// ledger's exact value, as a chart mark and as a table cell, and no other.
TEST_F(ReportHtml, RedTf32PageShowsEveryFailingCellWithTheLedgersValue) {
  const auto id = run_example("cp-affine-chain-tf32.yaml", false);
  ASSERT_GT(id, 0);
  const J record = show(id);
  ASSERT_EQ(record["gate_run"]["verdict"], "red");
  const auto page = dir_ / "tf32.html";
  const J written = report({std::to_string(id)}, page);
  EXPECT_EQ(written["kind"], "experiment");
  EXPECT_EQ(written["path"], page.string());
  const std::string html = testing::read_file(page);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos) << "a page must need no network";
  EXPECT_EQ(html.find("<link"), std::string::npos);

  const std::string dom = dump_dom(page);
  expect_charts_rendered(dom, 4);
  // The failing cells, from the ledger: "T=8192 shards=16 regime=long-memory: final_state.rel_l2 6.363e-02 over the bound 1.000e-05".
  std::set<std::string> expected, expected_cells;
  std::size_t failing = 0;
  for (const auto& c : record["gate_run"]["cases"]) {
    const J& cj = c["case_json"];
    std::string group = "regime=" + cj["regime"].get<std::string>();
    if (!cj["seq_lens"].get<std::string>().empty()) group += " seq_lens=" + cj["seq_lens"].get<std::string>();
    for (const auto& m : c["metrics"]) {
      if (m["passed"] != 0) continue;
      ++failing;
      const std::string where = fmt::format("T={} shards={} {}", cj["T"].get<int>(), cj["shards"].get<int>(), group);
      const std::string value = m["value"].is_null() ? "NaN" : fmt::format("{:.3e}", m["value"].get<double>());
      expected.insert(fmt::format("aria-label=\"{}: {}.{} {} over the bound {:.3e}\"", where, m["output"].get<std::string>(),
                                  m["metric"].get<std::string>(), value, m["bound"].get<double>()));
      expected_cells.insert(fmt::format("data-cell=\"{}\">{}</td>", where, value));
    }
  }
  ASSERT_GT(failing, 10u) << "the tf32 example should fail many cases";
  for (const auto& e : expected) EXPECT_NE(dom.find(e), std::string::npos) << "no chart mark " << e;
  for (const auto& e : expected_cells) EXPECT_NE(dom.find(e), std::string::npos) << "no table cell " << e;
  // Exactly those: each failing metric is one outlined heatmap cell and (its value > 0) one trend point.
  EXPECT_EQ(count_marks(dom, "over the bound"), 2 * failing);
  EXPECT_EQ(count(dom, "<td class=\"num red\" data-cell="), failing);
  // The bound is drawn as a rule in each trend chart; one shards=1 cell is within it.
  EXPECT_NE(dom.find("aria-label=\"bound 1.0e-5\""), std::string::npos);
  EXPECT_NE(dom.find("shards=1 regime=long-memory: final_state.rel_l2"), std::string::npos);
  // A red gate has no benchmark, and the page says why.
  EXPECT_NE(dom.find("No benchmark: the gate is red. densefeed never measures"), std::string::npos);
  // The page states its ledger, its chain head and when it was written.
  Ledger ledger(ledger_, Ledger::Mode::read_only);
  const auto chain = ledger.rows("record_chain");
  ASSERT_FALSE(chain.empty());
  EXPECT_NE(dom.find("data-fact=\"chain-head\">" + chain.back()["hash"].get<std::string>() + "<"), std::string::npos);
  EXPECT_NE(dom.find("data-fact=\"ledger\">" + ledger_.string() + "<"), std::string::npos);
  EXPECT_TRUE(std::regex_search(dom, std::regex("data-fact=\"written\">20\\d\\d-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ<")));

  const Image shot = screenshot(page, 1280, 2000);
  EXPECT_EQ(shot.width, 1280u);
  EXPECT_EQ(shot.height, 2000u);
  const Looks looks = look_at(shot);
  EXPECT_GT(looks.non_white, 0.08) << "the screenshot is (nearly) blank";
  EXPECT_GT(looks.colours, 200u);
  EXPECT_GT(looks.fail_outline, 200u) << "no outline of a failing cell is visible";
  EXPECT_GT(looks.blue, 500u) << "no cell within the bound (blue) is visible";
  EXPECT_GT(looks.orange, 500u) << "no cell over the bound (orange) is visible";
}

// tf32x3 is green and benchmarked against tf32: the page draws every sample of
// both arms and the speedup with its interval, each also in a table.
TEST_F(ReportHtml, GreenTf32x3PageDrawsBenchSamplesAndTheSpeedupInterval) {
  const auto id = run_example("cp-affine-chain-tf32x3.yaml", true);
  ASSERT_GT(id, 0);
  const J record = show(id);
  ASSERT_EQ(record["gate_run"]["verdict"], "green");
  ASSERT_FALSE(record["bench_cases"].empty());
  const auto page = dir_ / "tf32x3.html";
  report({std::to_string(id)}, page);
  const std::string dom = dump_dom(page);
  expect_charts_rendered(dom, 5);
  EXPECT_EQ(count_marks(dom, "over the bound"), 0u);
  EXPECT_GT(count_marks(dom, "within the bound"), 20u);
  std::size_t samples = 0;
  for (const auto& b : record["bench_cases"]) {
    int round = 0;
    for (const auto& r : b["rounds_json"]) {
      ++round;
      for (const char* arm : {"base", "candidate"}) {
        for (const auto& v : r[std::string(arm) + "_ms"]) {
          ++samples;
          EXPECT_NE(dom.find(fmt::format("aria-label=\"round {} {} {:.4g} ms\"", round, arm, v.get<double>())), std::string::npos);
        }
      }
    }
    const std::string label = b["case_label"].get<std::string>();
    const auto f3 = [](const J& v) { return fmt::format("{:.3f}", v.get<double>()); };
    EXPECT_NE(dom.find(fmt::format("aria-label=\"{}: speedup {} [{}, {}], {}\"", label, f3(b["speedup"]), f3(b["speedup_lo"]), f3(b["speedup_hi"]),
                                   b["verdict"].get<std::string>())),
              std::string::npos);
    EXPECT_NE(dom.find(fmt::format("<td class=\"num\">[{}, {}]</td>", f3(b["speedup_lo"]), f3(b["speedup_hi"]))), std::string::npos);
    EXPECT_NE(dom.find(fmt::format("aria-label=\"noise band {:.3f} to {:.3f}\"", 1 - b["threshold"].get<double>(), 1 + b["threshold"].get<double>())),
              std::string::npos);
  }
  EXPECT_EQ(count_marks(dom, "round ", true), samples) << "one mark per sample";
  const Looks looks = look_at(screenshot(page, 1280, 2600));
  EXPECT_GT(looks.non_white, 0.05);
  EXPECT_EQ(looks.fail_outline, 0u) << "a green gate has no failing cell";
}

// A gate's history marks the red experiment where it fell and tabulates why
// it was red (the red_gates_by_reason view); the whole ledger counts
// experiments per day and verdict and shows the queue.
TEST_F(ReportHtml, GateAndLedgerPagesMarkRedExperimentsAndTheQueue) {
  const auto red = run_example("cp-affine-chain-tf32.yaml", false);
  ASSERT_GT(red, 0);
  const auto queued = densefeed({"submit", "experiments/kda-decode-merge-vtiles.yaml", "--ledger", ledger_.string(), "--json"});
  ASSERT_EQ(queued.exit_code, 0) << queued.out << queued.err;
  const J record = show(red);

  const auto gate_page = dir_ / "gate.html";
  EXPECT_EQ(report({"--gate", "cp-affine-chain"}, gate_page)["kind"], "gate");
  std::string dom = dump_dom(gate_page);
  expect_charts_rendered(dom, 1);
  EXPECT_NE(dom.find(fmt::format("aria-label=\"#{} cp-affine-chain-tf32: gate red — {}\"", red, record["gate_run"]["reason"].get<std::string>())),
            std::string::npos);
  EXPECT_NE(dom.find(fmt::format("<td>tolerance: final_state.rel_l2</td><td class=\"num\">1</td><td>{}</td>", red)), std::string::npos);
  EXPECT_EQ(dom.find("kda-decode"), std::string::npos) << "another gate's experiment on the gate's page";
  Looks looks = look_at(screenshot(gate_page, 1100, 900));
  EXPECT_GT(looks.red, 20u) << "the red experiment's cross is not visible";

  const auto ledger_page = dir_ / "ledger.html";
  EXPECT_EQ(report({}, ledger_page)["kind"], "ledger");
  dom = dump_dom(ledger_page);
  expect_charts_rendered(dom, 2);
  const std::string day = record["submitted_at"].get<std::string>().substr(0, 10);
  EXPECT_NE(dom.find(fmt::format("aria-label=\"{}: 1 red\"", day)), std::string::npos);
  EXPECT_NE(dom.find(fmt::format("aria-label=\"{}: 1 pending\"", day)), std::string::npos);
  EXPECT_NE(dom.find("aria-label=\"queued: 1\""), std::string::npos);
  EXPECT_NE(dom.find("aria-label=\"finished: 1\""), std::string::npos);
  EXPECT_NE(dom.find("<td>kda-decode-merge-vtiles</td><td>kda-decode</td><td>queued</td>"), std::string::npos);
  looks = look_at(screenshot(ledger_page, 1100, 1000));
  EXPECT_GT(looks.non_white, 0.03);
  EXPECT_GT(looks.red, 100u) << "the red bar of the day is not visible";
}

// The KV-transfer example (hold against release) has a trace overlap check:
// kv_submit must lie inside dispatch_wait. Its page draws, for each arm, every
// A and B slice the ledger's finding lists as one mark on its lane with the
// finding's exact times, and each segment where they overlap as one shaded
// band; the bands add up to the finding's own overlap fraction. Release
// overlaps, hold does not (DESIGN.md: zero overlap before the fix).
TEST_F(ReportHtml, KvTransferPageDrawsEveryTraceIntervalAndShadesTheOverlap) {
  const auto id = run_example("kv-transfer-release-lock.yaml", false);
  ASSERT_GT(id, 0);
  const J record = show(id);
  ASSERT_EQ(record["gate_run"]["verdict"], "green");
  ASSERT_EQ(record["trace_findings"].size(), 2u);
  const auto page = dir_ / "kv.html";
  report({std::to_string(id)}, page);
  const std::string dom = dump_dom(page);
  // The two arms' timelines; the gate is exact (a copy), so it draws no heat
  // map of zeros (issue 31) but says so.
  expect_charts_rendered(dom, 2);
  EXPECT_NE(dom.find("All cases exact (error 0)"), std::string::npos);
  EXPECT_EQ(dom.find("data-chart=\"heatmap\""), std::string::npos);
  std::map<std::string, std::size_t> overlaps_of;
  for (const auto& f : record["trace_findings"]) {
    const std::string arm = f["arm"];
    const J& d = f["details"];
    ASSERT_EQ(f["kind"], "overlap");
    const double w0 = d["window"]["start_ns"].get<double>();
    const auto ms = [&](const J& v) { return (v.get<double>() - w0) / 1e6; };
    ASSERT_EQ(d["involved"].size(), d["involved_total"].get<std::size_t>()) << "every slice is listed at these sizes";
    std::size_t a_slices = 0, b_slices = 0;
    std::vector<std::pair<double, double>> a;  // to measure U(A)
    for (const auto& sl : d["involved"]) {
      const bool is_a = sl["role"] == "a";
      (is_a ? a_slices : b_slices) += 1;
      std::string label = fmt::format("{}: {} {} on {} (rank {}): {:.3f} to {:.3f} ms", arm, is_a ? "A" : "B", sl["name"].get<std::string>(),
                                      sl["lane"].get<std::string>(), sl["rank"].get<std::int64_t>(), ms(sl["start_ns"]), ms(sl["end_ns"]));
      if (is_a) {
        label += fmt::format(", {:.3f} ms exposed", sl["ns"].get<double>() / 1e6);
        a.emplace_back(sl["start_ns"].get<double>(), sl["end_ns"].get<double>());
        EXPECT_EQ(sl["name"], "kv_submit");
      } else {
        EXPECT_EQ(sl["name"], "dispatch_wait");
      }
      EXPECT_EQ(count_marks(dom, label), 1u) << "no (or more than one) timeline mark " << label;
    }
    EXPECT_GT(a_slices, 0u);
    EXPECT_GT(b_slices, 0u);
    EXPECT_EQ(count_marks(dom, arm + ": A "), a_slices) << "one mark per A slice";
    EXPECT_EQ(count_marks(dom, arm + ": B "), b_slices) << "one mark per B slice";
    double overlap_ns = 0;
    for (const auto& o : d["overlaps"]) {
      EXPECT_EQ(count_marks(dom, fmt::format("{}: overlap of A and B: {:.3f} to {:.3f} ms", arm, ms(o["start_ns"]), ms(o["end_ns"]))), 1u);
      overlap_ns += o["end_ns"].get<double>() - o["start_ns"].get<double>();
    }
    overlaps_of[arm] = d["overlaps"].size();
    EXPECT_EQ(count_marks(dom, arm + ": overlap of A and B"), d["overlaps"].size());
    // The shaded segments are the check's own overlap: |U(A) ∩ U(B)| / |U(A)| is the finding's value.
    std::sort(a.begin(), a.end());
    double union_a = 0, reach = -1e300;
    for (const auto& [start, end] : a) {
      if (end > reach) union_a += end - std::max(start, reach), reach = end;
    }
    EXPECT_NEAR(overlap_ns / union_a, f["value"].get<double>(), 1e-9) << arm;
  }
  EXPECT_GT(overlaps_of["candidate"], 0u) << "release: the submissions overlap dispatch's waits";
  EXPECT_EQ(overlaps_of["base"], 0u) << "hold: no submission overlaps a wait";
  EXPECT_NE(dom.find("A and B never overlap in the window (base arm)."), std::string::npos);
  const Looks looks = look_at(screenshot(page, 1280, 3600));
  EXPECT_GT(looks.overlap, 60u) << "no overlap band is visible";

  // The project's report keys (gates/kv-overlap.yaml: chunks x steps) ...
  EXPECT_NE(dom.find("<h3>kv.max_abs over chunks × steps (bound 0.000e+00)</h3>"), std::string::npos);
  // ... and, with a bare --ledger outside any project, the first two numeric case keys that vary.
  std::vector<std::string> order;
  std::map<std::string, std::set<std::string>> values;
  std::set<std::string> not_numeric;
  // In the order the ledger recorded the keys (nlohmann::json would sort them).
  const auto shown = densefeed({"ledger", "show", std::to_string(id), "--ledger", ledger_.string(), "--json"});
  const auto ordered = nlohmann::ordered_json::parse(shown.out)["gate_run"]["cases"];
  for (const auto& c : ordered) {
    for (const auto& [k, v] : c["case_json"].items()) {
      if (!values.count(k)) order.push_back(k);
      values[k].insert(v.dump());
      if (!v.is_number()) not_numeric.insert(k);
    }
  }
  std::vector<std::string> inferred;
  for (const auto& k : order) {
    if (!not_numeric.count(k) && values[k].size() > 1 && inferred.size() < 2) inferred.push_back(k);
  }
  ASSERT_EQ(inferred.size(), 2u);
  const auto bare_page = dir_ / "kv-bare.html";
  const auto bare = testing::run_cli(DENSEFEED_EXE, {"report", std::to_string(id), "-o", bare_page.string(), "--ledger", ledger_.string()}, dir_.path(),
                                     {{"HOME", dir_.path().string()}});
  ASSERT_EQ(bare.exit_code, 0) << bare.out << bare.err;
  const std::string bare_dom = dump_dom(bare_page);
  expect_charts_rendered(bare_dom, 2);  // the two timelines: an exact gate draws no heat map
  EXPECT_NE(bare_dom.find(fmt::format("<h3>kv.max_abs over {} × {} (bound 0.000e+00)</h3>", inferred[0], inferred[1])), std::string::npos)
      << inferred[0] << " x " << inferred[1];
}

// Review and promotion of the KV example (risk: concurrency; a pre-registered
// acceptance criterion): the page tables the review with its reviewer, note
// and time, the promotion with who and when, and the criterion with both
// sides' values and its verdict, exactly as `ledger show --json` has them.
TEST_F(ReportHtml, KvTransferPageTablesReviewPromotionAndAcceptanceValues) {
  const auto id = run_example("kv-transfer-release-lock.yaml", false);
  ASSERT_GT(id, 0);
  const auto approve = densefeed({"review", "approve", std::to_string(id), "--by", "alice", "--note", "lock released only around the wait",
                                  "--ledger", ledger_.string()});
  ASSERT_EQ(approve.exit_code, 0) << approve.out << approve.err;
  const auto promote = densefeed({"--trust-worktree", "promote", std::to_string(id), "--by", "carol", "--ledger", ledger_.string(), "--json"});
  ASSERT_TRUE(promote.exit_code == 0 || promote.exit_code == 1) << promote.out << promote.err;
  const J record = show(id);
  ASSERT_EQ(record["reviews"].size(), 1u);
  ASSERT_TRUE(record["promotion"].is_object());
  ASSERT_EQ(record["acceptance_runs"].size(), 1u);
  const auto page = dir_ / "kv-promoted.html";
  report({std::to_string(id)}, page);
  const std::string dom = dump_dom(page);
  expect_charts_rendered(dom, 3);
  const J& review = record["reviews"][0];
  EXPECT_EQ(review["reviewer"], "alice");
  EXPECT_NE(dom.find(fmt::format("<tr><td>{}</td><td>concurrency</td><td>approve</td><td>alice</td><td>lock released only around the wait</td></tr>",
                                 review["reviewed_at"].get<std::string>())),
            std::string::npos);
  const J& promotion = record["promotion"];
  EXPECT_EQ(promotion["promoted_by"], "carol");
  EXPECT_NE(dom.find(fmt::format("Promoted by <b>carol</b> at {}.", promotion["promoted_at"].get<std::string>())), std::string::npos);
  EXPECT_NE(dom.find("Risk categories (latest decision): concurrency: approve"), std::string::npos);
  const J& run = record["acceptance_runs"][0];
  ASSERT_EQ(run["criteria"].size(), 1u);
  const J& c = run["criteria"][0];
  EXPECT_EQ(c["criterion"], "prefill_kv_ms <= 1.05 * prefill_ms");
  const bool passed = c["passed"].get<bool>();
  EXPECT_NE(dom.find(fmt::format("<td>prefill_kv_ms &lt;= 1.05 * prefill_ms</td><td>median</td><td class=\"num\">{:.4g}</td><td class=\"num\">{:.4g}</td>"
                                 "<td class=\"verdict-{}\">{}</td>",
                                 c["lhs"].get<double>(), c["rhs"].get<double>(), passed ? "green" : "red", passed ? "green" : "red")),
            std::string::npos);
  EXPECT_NE(dom.find(fmt::format("Run {} at {}: <span class=\"verdict-{}\">{}</span>", run["id"].get<std::int64_t>(), run["started_at"].get<std::string>(),
                                 passed ? "green" : "red", run["verdict"].get<std::string>())),
            std::string::npos);
  // Drawn as well: the criterion's two sides (the label's "<=" is left out: how a serialiser escapes it in an attribute varies).
  EXPECT_EQ(count_marks(dom, fmt::format(" 1.05 * prefill_ms: left {:.4g}, right {:.4g}, {}", c["lhs"].get<double>(), c["rhs"].get<double>(),
                                         passed ? "holds" : "fails")),
            1u);
}

// The KDA decode gate's history (v3 against v0, then the reverse): the gate
// page draws each experiment's measured speedup with its interval and the
// predicted one, left to right in the order recorded, at heights in the
// order of their values, with the ledger's exact figures; --since leaves the
// earlier experiment out of the gate and ledger pages.
TEST_F(ReportHtml, KdaGateHistoryDrawsEachSpeedupInOrderAndSinceLeavesEarlierOut) {
  const auto forward = run_example("kda-decode-merge-vtiles.yaml", true);
  ASSERT_GT(forward, 0);
  std::string text = testing::read_file(kSource / "experiments/kda-decode-merge-vtiles.yaml");
  const auto swap = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  swap("experiment: kda-decode-merge-vtiles", "experiment: kda-decode-split-vtiles");
  swap("predicted_speedup: 1.05", "predicted_speedup: 0.95");
  swap("params: {version: v3}", "params: {version: V0}");
  swap("params: {version: v0}", "params: {version: v3}");
  swap("params: {version: V0}", "params: {version: v0}");
  const auto reverse_manifest = dir_ / "kda-decode-split-vtiles.yaml";
  testing::write_file(reverse_manifest, text);
  const auto reverse = run_manifest(reverse_manifest, true);
  ASSERT_GT(reverse, forward);

  struct Expected {
    std::int64_t id;
    std::string label, interval, predicted;
    double speedup;
  };
  std::vector<Expected> expected;
  for (const auto id : {forward, reverse}) {
    const J record = show(id);
    ASSERT_EQ(record["gate_run"]["verdict"], "green");
    // What the bench stage said when it recorded no case (CI cannot rerun it).
    ASSERT_EQ(record["bench_cases"].size(), 1u) << record.value("state", J()).dump() << " " << record["record"]["stages"].value("bench", J()).dump();
    const J& b = record["bench_cases"][0];
    const auto f3 = [](const J& v) { return fmt::format("{:.3f}", v.get<double>()); };
    expected.push_back({id,
                        fmt::format("#{} {} {}: speedup {} [{}, {}], predicted {}", id, record["name"].get<std::string>(), b["case_label"].get<std::string>(),
                                    f3(b["speedup"]), f3(b["speedup_lo"]), f3(b["speedup_hi"]), f3(b["predicted_speedup"])),
                        fmt::format("interval {} to {}", f3(b["speedup_lo"]), f3(b["speedup_hi"])), "predicted " + f3(b["predicted_speedup"]),
                        b["speedup"].get<double>()});
  }
  EXPECT_EQ(expected[0].predicted, "predicted 1.050");
  EXPECT_EQ(expected[1].predicted, "predicted 0.950");
  const auto page = dir_ / "kda-gate.html";
  report({"--gate", "kda-decode"}, page);
  const std::string dom = dump_dom(page);
  expect_charts_rendered(dom, 1);
  std::vector<std::pair<double, double>> at;
  for (const auto& e : expected) {
    EXPECT_EQ(count_marks(dom, e.label), 1u) << "no speedup mark " << e.label;
    EXPECT_GE(count_marks(dom, e.interval), 1u) << e.interval;
    EXPECT_GE(count_marks(dom, e.predicted), 1u) << e.predicted;
    const auto xy = mark_at(dom, e.label);
    ASSERT_TRUE(xy) << e.label;
    at.push_back(*xy);
  }
  EXPECT_LT(at[0].first, at[1].first) << "the earlier experiment is drawn left of the later one";
  EXPECT_EQ(at[0].second < at[1].second, expected[0].speedup > expected[1].speedup) << "higher speedup, higher on the chart";
  const Looks looks = look_at(screenshot(page, 1100, 900));
  EXPECT_GT(looks.non_white, 0.03);

  // --since the later experiment's submission: the earlier one is left out.
  const std::string since = show(reverse)["submitted_at"];
  ASSERT_LT(show(forward)["submitted_at"].get<std::string>(), since) << "the two must be submitted in different seconds";
  const auto since_page = dir_ / "kda-gate-since.html";
  report({"--gate", "kda-decode", "--since", since}, since_page);
  const std::string since_dom = dump_dom(since_page);
  expect_charts_rendered(since_dom, 1);
  EXPECT_EQ(count_marks(since_dom, expected[1].label), 1u);
  EXPECT_EQ(since_dom.find(fmt::format("#{} kda-decode-merge-vtiles", forward)), std::string::npos) << "the earlier experiment is on the --since page";
  EXPECT_NE(since_dom.find("<p>1 experiments, 0 red or error, 1 measured speedups.</p>"), std::string::npos);
  const auto ledger_since = dir_ / "ledger-since.html";
  report({"--since", since}, ledger_since);
  const std::string ledger_dom = dump_dom(ledger_since);
  EXPECT_NE(ledger_dom.find(fmt::format("<td class=\"num\">{}</td><td>kda-decode-split-vtiles</td>", reverse)), std::string::npos);
  EXPECT_EQ(ledger_dom.find("kda-decode-merge-vtiles"), std::string::npos) << "the earlier experiment is on the --since ledger page";
  const auto ledger_all = dir_ / "ledger-all.html";
  report({}, ledger_all);
  EXPECT_NE(dump_dom(ledger_all).find(fmt::format("<td class=\"num\">{}</td><td>kda-decode-merge-vtiles</td>", forward)), std::string::npos)
      << "without --since the earlier experiment is listed";
}

// Pages with nothing to draw say why: a queued experiment, a broken chain, an empty ledger.
TEST_F(ReportHtml, QueuedBrokenChainAndEmptyLedgerPagesSaySo) {
  const auto empty = dir_ / "empty.db";
  { Ledger create(empty); }
  const auto empty_page = dir_ / "empty.html";
  const J e = report({}, empty_page, empty);
  EXPECT_EQ(e["charts"], 0);
  EXPECT_EQ(e["chain"]["ok"], true);
  std::string dom = dump_dom(empty_page);
  EXPECT_NE(dom.find("The ledger holds no experiments yet"), std::string::npos);
  EXPECT_NE(dom.find("data-charts-rendered=\"0\""), std::string::npos);
  // A new ledger's one link records its chain key's fingerprint (issue 15): that is its head.
  {
    Ledger ledger(empty, Ledger::Mode::read_only);
    const auto chain = ledger.rows("record_chain");
    ASSERT_EQ(chain.size(), 1u);
    EXPECT_EQ(chain[0]["table_name"], "chain_keys") << chain[0].dump();
    EXPECT_NE(dom.find("data-fact=\"chain-head\">" + chain[0]["hash"].get<std::string>() + "<"), std::string::npos);
    EXPECT_NE(dom.find("intact: 1 links verified"), std::string::npos);
  }
  Looks looks = look_at(screenshot(empty_page, 800, 600));
  EXPECT_GT(looks.non_white, 0.005) << "the notice is not visible";

  const auto queued = densefeed({"submit", "experiments/cp-affine-chain-tf32.yaml", "--ledger", ledger_.string(), "--json"});
  ASSERT_EQ(queued.exit_code, 0) << queued.out << queued.err;
  const auto id = J::parse(queued.out)["experiment_id"].get<std::int64_t>();
  const auto queued_page = dir_ / "queued.html";
  const J q = report({std::to_string(id)}, queued_page);
  EXPECT_EQ(q["charts"], 0);
  dom = dump_dom(queued_page);
  EXPECT_NE(dom.find(fmt::format("Experiment {} is queued: no stage has run yet", id)), std::string::npos);
  EXPECT_NE(dom.find("No benchmark: the gate has not run."), std::string::npos);
  EXPECT_NE(dom.find("<b data-state=\"\">queued</b>"), std::string::npos);

  // Someone rewrites a recorded hypothesis with sqlite3, past the trigger,
  // and puts the trigger back as it was (a dropped one is refused before any
  // page: the schema inventory, issue 15): only the chain can tell.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(ledger_.c_str(), &db), SQLITE_OK);
  std::string trigger;
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_schema WHERE name = 'experiments_no_update'", -1, &st, nullptr), SQLITE_OK);
  if (sqlite3_step(st) == SQLITE_ROW) trigger = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  ASSERT_FALSE(trigger.empty()) << "the ledger has no trigger experiments_no_update";
  // The experiment's link (after the key's, link 1 on a new ledger).
  std::int64_t link = 0;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT seq FROM record_chain WHERE table_name = 'experiments' AND row_id = ?", -1, &st, nullptr), SQLITE_OK);
  sqlite3_bind_int64(st, 1, id);
  if (sqlite3_step(st) == SQLITE_ROW) link = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  ASSERT_GT(link, 1) << "the experiment's row is not chained after the key's";
  char* error = nullptr;
  const int rc = sqlite3_exec(db, ("DROP TRIGGER experiments_no_update; UPDATE experiments SET hypothesis = 'rewritten'; " + trigger).c_str(),
                              nullptr, nullptr, &error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << (error ? error : "");
  const auto broken_page = dir_ / "broken.html";
  const J b = report({std::to_string(id)}, broken_page);
  EXPECT_EQ(b["chain"]["ok"], false);
  dom = dump_dom(broken_page);
  EXPECT_NE(dom.find("data-chain=\"broken\""), std::string::npos);
  EXPECT_NE(dom.find(fmt::format("The ledger's hash chain is broken at link {} (experiments row {}, experiment {}): the row was changed after "
                                 "it was recorded.", link, id, id)),
            std::string::npos)
      << dom.substr(std::min(dom.find("data-chain-broken"), dom.size()), 300);
  EXPECT_NE(dom.find("data-fact=\"chain-head\">none: the chain is broken<"), std::string::npos);
  looks = look_at(screenshot(broken_page, 1000, 700));
  EXPECT_GT(looks.non_white, 0.02);
  EXPECT_GT(looks.red, 100u) << "the broken-chain banner's red border is not visible";
}

// Bad input is exit 2 naming what to change.
TEST_F(ReportHtml, BadInputIsExit2) {
  { Ledger create(ledger_); }
  auto r = densefeed({"report", "7", "-o", (dir_ / "x.html").string(), "--ledger", ledger_.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no experiment with id 7"), std::string::npos) << r.err;
  r = densefeed({"report", "7", "--gate", "cp-affine-chain", "-o", (dir_ / "x.html").string(), "--ledger", ledger_.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give either ID or --gate"), std::string::npos) << r.err;
  r = densefeed({"report", "--ledger", ledger_.string()});
  EXPECT_EQ(r.exit_code, 2) << "no -o";
  // Without its chain key the ledger cannot be checked: the report, like every
  // reader, refuses it naming the key's file (a broken chain is a page, above).
  const auto key = ledger_key_file(std::filesystem::absolute(ledger_), ledger_key_fingerprint(ledger_));
  ASSERT_TRUE(std::filesystem::remove(key)) << key;
  r = densefeed({"report", "-o", (dir_ / "x.html").string(), "--ledger", ledger_.string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(key.string() + ": the ledger's chain key is not here"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "x.html"));
}

// The MCP tool writes the experiment's page and returns its path.
TEST_F(ReportHtml, McpWriteReportReturnsThePagesPath) {
  const auto id = run_example("cp-affine-chain-tf32.yaml", false);
  ASSERT_GT(id, 0);
  const auto requests = dir_ / "mcp.in";
  testing::write_file(requests,
                      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
                      "\n" +
                          fmt::format(R"({{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"write_report","arguments":{{"experiment_id":{}}}}}}})", id) +
                          "\n");
  const auto mcp = testing::run_cli("/bin/sh", {"-c", fmt::format("exec '{}' --trust-worktree mcp --ledger '{}' < '{}'", DENSEFEED_EXE, ledger_.string(), requests.string())},
                                    kSource, {{"HOME", dir_.path().string()}});
  ASSERT_EQ(mcp.exit_code, 0) << mcp.err;
  J result;
  std::istringstream lines(mcp.out);
  for (std::string line; std::getline(lines, line);) {
    const J r = J::parse(line, nullptr, false);
    if (r.is_object() && r.value("id", 0) == 2) result = r["result"];
  }
  ASSERT_TRUE(result.is_object()) << mcp.out;
  EXPECT_FALSE(result.value("isError", false)) << result.dump();
  const std::filesystem::path path = result["structuredContent"]["path"].get<std::string>();
  EXPECT_EQ(path.filename(), fmt::format("experiment-{}.html", id));
  EXPECT_EQ(result["structuredContent"]["kind"], "experiment");
  ASSERT_TRUE(std::filesystem::is_regular_file(path));
  EXPECT_NE(testing::read_file(path).find(fmt::format("<title>Experiment {}: cp-affine-chain-tf32</title>", id)), std::string::npos);
}


// Issue 31: `report --folder` writes one folder of linked pages. Chromium
// follows the links index -> gate -> experiment -> compare -> harness log;
// every local href of every page resolves to a file inside the folder and
// none leaves it (no http, no absolute path); every page renders its charts
// without a JavaScript or Vega error. An exact gate (all errors 0: recorded
// here through the ledger's API, as no shipped example is bit-exact) says
// "All cases exact (error 0)" instead of drawing a heat map of zeros; the KDA
// gate's one-axis grid is titled "over batch", never "over - × batch".
class ReportContext : public ReportHtml {
 protected:
  // An experiment of the KDA manifest whose every case has error 0.
  std::int64_t record_exact() {
    const Project project = load_project(kSource);
    Manifest m = load_manifest(kSource / "experiments" / "kda-decode-merge-vtiles.yaml", worktree_store(project), project);
    GateResult exact;
    for (int b : {1, 3, 8}) {
      CaseResult c;
      c.gate_case.label = fmt::format("batch={} H=64 D=128", b);
      c.gate_case.values = {{"batch", b}, {"H", 64}, {"D", 128}};
      OutputResult o;
      o.output = "o";
      o.comparison.checks = {{"rel_l2", 0, 1e-6, true, 0}, {"max_abs", 0, 5e-7, true, 0}};
      c.outputs.push_back(o);
      exact.cases.push_back(c);
    }
    Ledger ledger(ledger_);
    const auto id = ledger.record_experiment({&m, {{"version", 3}}, {{"version", 0}}});
    ledger.record_gate_run(id, {"kda-decode", std::string(64, 'a'), {}, "quick", 1, utc_now(), &exact});
    ledger.record_event(id, ExperimentEvent::finished, "run");
    return id;
  }
  // Every href of a page: each must be relative and name a file inside `dir`.
  static std::vector<std::string> hrefs(const std::string& html) {
    std::vector<std::string> out;
    const std::regex href("href=\"([^\"]*)\"");
    for (auto it = std::sregex_iterator(html.begin(), html.end(), href); it != std::sregex_iterator(); ++it) out.push_back((*it)[1].str());
    return out;
  }
};

TEST_F(ReportContext, AFolderLinksIndexGateExperimentCompareAndLogsAndRendersOffline) {
  const auto first = run_example("kda-decode-merge-vtiles.yaml", false);
  const auto second = run_example("kda-decode-merge-vtiles.yaml", false);
  ASSERT_GT(first, 0);
  ASSERT_GT(second, first);
  const auto exact = record_exact();
  const auto dir = dir_ / "report";
  const J written = report({"--folder"}, dir);
  ASSERT_EQ(written["kind"], "index") << written.dump(2);
  EXPECT_EQ(written["path"], (dir / "index.html").string());
  EXPECT_GT(written["logs"].get<int>(), 0) << "the runs' harness logs are copied";
  // Every page: its hrefs resolve inside the folder; nothing is fetched from outside.
  std::set<std::string> linked;
  for (const auto& p : written["pages"]) {
    const std::string html = testing::read_file(p.get<std::string>());
    EXPECT_EQ(html.find("src=\"http"), std::string::npos) << p;
    EXPECT_EQ(html.find("<link"), std::string::npos) << p;
    EXPECT_EQ(html.find("url(http"), std::string::npos) << p;
    for (const auto& h : hrefs(html)) {
      EXPECT_TRUE(h.find(':') == std::string::npos && !h.empty() && h[0] != '/' && h.find("..") == std::string::npos) << p << " links " << h;
      EXPECT_TRUE(std::filesystem::is_regular_file(dir / h)) << p << " links " << h << ", which the folder lacks";
      linked.insert(h);
    }
  }
  // index -> gate -> experiment -> compare -> harness log, each a link on the page before.
  const std::string gate = "gate-kda-decode.html", page1 = fmt::format("experiment-{}.html", first);
  const std::string compare = fmt::format("compare-{}-{}.html", first, second);
  std::string dom = dump_dom(dir / "index.html");
  expect_charts_rendered(dom, 2);
  EXPECT_NE(dom.find("href=\"" + gate + "\""), std::string::npos);
  EXPECT_NE(dom.find("href=\"" + compare + "\""), std::string::npos) << "the index lists the compare pages";
  dom = dump_dom(dir / gate);
  expect_charts_rendered(dom, 2);
  EXPECT_NE(dom.find("href=\"" + page1 + "\""), std::string::npos);
  EXPECT_NE(dom.find("data-chart=\"headroom\""), std::string::npos);
  EXPECT_NE(dom.find(fmt::format("data-headroom=\"#{} batch=1 H=64 D=128\">0</td>", exact)), std::string::npos) << "an exact case's headroom is 0";
  dom = dump_dom(dir / page1);
  expect_charts_rendered(dom, 2);
  EXPECT_NE(dom.find("href=\"index.html\""), std::string::npos);
  EXPECT_NE(dom.find("href=\"" + compare + "\""), std::string::npos);
  EXPECT_NE(dom.find("<dd data-provenance="), std::string::npos);
  EXPECT_NE(dom.find("<h3>o.rel_l2 over batch (bound"), std::string::npos) << "a one-axis grid's title";
  EXPECT_EQ(dom.find("over - ×"), std::string::npos);
  std::smatch log;
  ASSERT_TRUE(std::regex_search(dom, log, std::regex(fmt::format("href=\"(logs/{}/[^\"]+/std(err|out)\\.log)\"", first)))) << "no harness log linked";
  const auto copied = dir / log[1].str();
  const auto original = ledger_.parent_path() / (ledger_.stem().string() + "-runs") / std::to_string(first) /
                        std::filesystem::path(log[1].str()).lexically_relative(fmt::format("logs/{}", first));
  ASSERT_TRUE(std::filesystem::exists(original)) << original;
  EXPECT_EQ(testing::read_file(copied), testing::read_file(original)) << "the copy is the run folder's log";
  dom = dump_dom(dir / compare);
  expect_charts_rendered(dom, 1);
  EXPECT_NE(dom.find("data-table=\"compare cases\""), std::string::npos);
  EXPECT_TRUE(std::regex_search(dom, std::regex("<td>batch=8[^<]*</td><td class=\"verdict-green\">green</td><td>o\\.rel_l2 [^<]*</td>"
                                                "<td class=\"verdict-green\">green</td>")))
      << "case by case, both experiments";
  // The exact experiment: no heat map of zeros.
  dom = dump_dom(dir / fmt::format("experiment-{}.html", exact));
  expect_charts_rendered(dom, 0);
  EXPECT_NE(dom.find("All cases exact (error 0): 3 case(s), o.rel_l2 = 0 in each"), std::string::npos);
  EXPECT_EQ(dom.find("data-chart=\"heatmap\""), std::string::npos);
  EXPECT_TRUE(linked.count(page1) && linked.count(compare) && linked.count(gate));

  // The same experiment as markdown for a pull request, printed.
  const auto md = densefeed({"report", std::to_string(exact), "--format", "md", "--ledger", ledger_.string()});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_EQ(md.out.rfind(fmt::format("### densefeed: experiment {} kda-decode-merge-vtiles: :white_check_mark: **green**", exact), 0), 0u) << md.out;
  EXPECT_NE(md.out.find("**Gate** (profile quick, seed 1): 3 case(s), 3 green, 0 not green."), std::string::npos) << md.out;
}

}  // namespace
}  // namespace densefeed
