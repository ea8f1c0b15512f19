#include "vega_bundle.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "error.h"

#ifndef DENSEFEED_VEGA_DIR
#define DENSEFEED_VEGA_DIR "/usr/share/javascript/vega"
#endif

namespace densefeed {

std::filesystem::path default_vega_dir() { return DENSEFEED_VEGA_DIR; }

const std::vector<std::string>& vega_packages() {
  // vega-functions asks for "vega-selections", which Debian installs as vega-selection.min.js.
  static const std::vector<std::string> packages = {
      "vega-util",   "vega-time",       "vega-format",    "vega-loader",   "vega-dataflow",  "vega-statistics",
      "vega-scale",  "vega-canvas",     "vega-scenegraph", "vega-expression", "vega-selection", "vega-functions",
      "vega-runtime", "vega-view",      "vega-event-selector", "vega-parser", "vega-transforms", "vega-view-transforms",
      "vega-encode"};
  return packages;
}

std::string vega_inline_scripts(const std::filesystem::path& dir) {
  std::string out =
      "<script>var densefeedVegaPackages={};function densefeedVegaPackage(name,body){"
      "var define=function(deps,factory){var exports={};factory.apply(null,deps.map(function(d){"
      "return d==='exports'?exports:densefeedVegaPackages[d==='vega-selections'?'vega-selection':d];}));"
      "densefeedVegaPackages[name]=exports;};define.amd=true;body(define);}</script>\n";
  for (const auto& name : vega_packages()) {
    const auto file = dir / (name + ".min.js");
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      throw InfraError(fmt::format("{}: cannot read Vega's {} (install Debian's libjs-vega: apt-get install libjs-vega)",
                                   file.string(), name));
    }
    std::ostringstream text;
    text << in.rdbuf();
    std::string js = text.str();
    // A source map comment would make a viewer's developer tools fetch the map from the network.
    if (const auto map = js.rfind("//# sourceMappingURL="); map != std::string::npos) js.erase(map);
    // Inside a <script> element only "</script" ends it; the minified code has none, but a
    // future version might carry one in a string.
    for (std::size_t at = 0; (at = js.find("</script", at)) != std::string::npos;) js.replace(at, 2, "<\\/");
    out += fmt::format("<script>densefeedVegaPackage(\"{}\",function(define){{var exports,module;\n{}\n}});</script>\n", name, js);
  }
  out +=
      "<script>var vega={};Object.keys(densefeedVegaPackages).forEach(function(k){Object.assign(vega,densefeedVegaPackages[k]);});"
      "Object.assign(densefeedVegaPackages['vega-dataflow'].transforms,densefeedVegaPackages['vega-transforms'],"
      "densefeedVegaPackages['vega-view-transforms'],densefeedVegaPackages['vega-encode']);</script>\n";
  return out;
}

}  // namespace densefeed
