// Debian's libjs-vega, inlined into a report page so that the page needs no
// network when it is viewed. Debian ships Vega as one UMD file per package
// (vega-util.min.js, vega-view.min.js, ...) and no single vega.min.js; each
// file, loaded as a plain script, would replace the global `vega` with its own
// exports. So every file is loaded through a small AMD `define` that hands it
// the packages it asks for by name, and the transforms are registered with the
// dataflow as upstream's top-level `vega` package does (vega/index.js:
// extend(transforms, tx, vtx, encode, ...)).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace densefeed {

// Where libjs-vega installs its files (`dpkg -L libjs-vega`).
std::filesystem::path default_vega_dir();

// The Vega packages a report's charts need, in dependency order.
const std::vector<std::string>& vega_packages();

// One <script> element per package plus the loader and the registration,
// defining the global `vega` (View, parse, ...). Throws InfraError naming the
// missing file and the Debian package when `dir` lacks one.
std::string vega_inline_scripts(const std::filesystem::path& dir);

}  // namespace densefeed
