// The layers of orchestrator/, checked on the source (as
// untrusted_launch_test.cpp checks the process starters): each folder is a
// layer, each layer may include only its own and lower layers' headers, no
// two files anywhere include each other in a loop, and the build links each
// layer to the one below it and to nothing above (orchestrator/CMakeLists.txt),
// so that what this test lists is what the build refuses to break.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::filesystem::path kOrchestrator = std::filesystem::path(DENSEFEED_SOURCE_DIR) / "orchestrator";

// Bottom to top, with what each holds. A layer may include its own headers
// and those of every layer before it; never one after it.
const std::vector<std::pair<std::string, std::string>> kLayers = {
    {"common", "errors, failures as values, hashing and keys, YAML and schemas, the workspace, case grids, command templates"},
    {"judge", "pure judgement over given files: tensors and comparison, statistics, timing checks, traces"},
    {"launch", "starting processes: runner, sandbox, the untrusted launcher, executors, rank groups, sessions, machine facts"},
    {"spec", "what is declared and trusted: project, gates, manifests, revisions, the gate store and its lock"},
    {"record", "the typed results of stages and experiments"},
    {"store", "the SQLite ledger: schema, writes, chain, queue, audit, export"},
    {"pipeline", "the stages, the arms and their builds, the experiment runner"},
    {"present", "text, JSON, HTML, next steps, MCP tools"},
    {"cli", "the command table and the verbs"},
};

// Headers included by name that are not orchestrator's: generated at build
// time, or another target's (the harnesses' .npy writer, the version).
const std::set<std::string> kOutside = {"ledger_schema_sql.h", "npy_writer.h", "densefeed_version.h"};

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int layer_index(const std::string& layer) {
  for (std::size_t i = 0; i < kLayers.size(); ++i) {
    if (kLayers[i].first == layer) return static_cast<int>(i);
  }
  return -1;
}

struct Source {
  std::filesystem::path path;
  std::string layer;
  std::vector<std::string> includes;  // #include "..." names, in order
};

// Every .h and .cpp under orchestrator/, by file name.
std::map<std::string, Source> sources() {
  std::map<std::string, Source> out;
  const std::regex include(R"re(^\s*#\s*include\s*"([^"]+)")re");
  for (const auto& e : std::filesystem::recursive_directory_iterator(kOrchestrator)) {
    const auto ext = e.path().extension();
    if (ext != ".h" && ext != ".cpp") continue;
    Source s;
    s.path = e.path();
    s.layer = std::filesystem::relative(e.path().parent_path(), kOrchestrator).string();
    std::istringstream text(read(e.path()));
    for (std::string line; std::getline(text, line);) {
      std::smatch m;
      if (std::regex_search(line, m, include)) s.includes.push_back(m[1]);
    }
    const auto name = e.path().filename().string();
    EXPECT_FALSE(out.count(name)) << name << " is in two layers: " << out[name].path << " and " << e.path();
    out[name] = s;
  }
  return out;
}

TEST(Layers, EveryFolderIsALayerAndEveryFileIsInOne) {
  std::set<std::string> folders;
  for (const auto& e : std::filesystem::directory_iterator(kOrchestrator)) {
    if (e.is_directory()) folders.insert(e.path().filename().string());
    else EXPECT_EQ(e.path().filename(), "CMakeLists.txt") << e.path() << " lies outside every layer's folder";
  }
  std::set<std::string> listed;
  for (const auto& [name, what] : kLayers) listed.insert(name);
  EXPECT_EQ(folders, listed);
  for (const auto& [name, s] : sources()) {
    EXPECT_GE(layer_index(s.layer), 0) << s.path << " is in " << s.layer << ", which is no layer";
  }
}

TEST(Layers, NoFileIncludesAHeaderOfAHigherLayer) {
  const auto all = sources();
  std::size_t checked = 0;
  for (const auto& [name, s] : all) {
    for (const auto& inc : s.includes) {
      const auto base = std::filesystem::path(inc).filename().string();
      if (kOutside.count(base)) continue;
      ++checked;
      EXPECT_EQ(inc, base) << s.path << " includes \"" << inc << "\": by file name only (the layer's include path finds it)";
      const auto it = all.find(base);
      if (it == all.end()) {
        ADD_FAILURE() << s.path << " includes \"" << inc << "\", which is no header of orchestrator/ (list it in kOutside if generated)";
        continue;
      }
      EXPECT_LE(layer_index(it->second.layer), layer_index(s.layer))
          << s.path << " (" << s.layer << ") includes " << base << " of the higher layer " << it->second.layer;
    }
  }
  EXPECT_GT(checked, 300u) << "too few includes found: is the source tree where the test looks?";
}

// Rooms (a file's name without its extension: x.h and x.cpp are one room)
// and who includes whom; a loop between two rooms is two concepts that
// cannot be understood apart.
TEST(Layers, NoTwoRoomsIncludeEachOtherInALoop) {
  const auto all = sources();
  std::map<std::string, std::set<std::string>> edges;
  for (const auto& [name, s] : all) {
    const auto room = std::filesystem::path(name).stem().string();
    edges[room];
    for (const auto& inc : s.includes) {
      const auto target = std::filesystem::path(inc).stem().string();
      if (target != room && all.count(std::filesystem::path(inc).filename().string())) edges[room].insert(target);
    }
  }
  // Depth-first search; a grey room met again closes a loop.
  std::map<std::string, int> colour;  // 0 white, 1 grey, 2 black
  std::vector<std::string> stack;
  std::vector<std::string> loops;
  std::function<void(const std::string&)> visit = [&](const std::string& r) {
    colour[r] = 1;
    stack.push_back(r);
    for (const auto& t : edges[r]) {
      if (colour[t] == 1) {
        std::string loop;
        for (auto it = std::find(stack.begin(), stack.end(), t); it != stack.end(); ++it) loop += *it + " -> ";
        loops.push_back(loop + t);
      } else if (colour[t] == 0) {
        visit(t);
      }
    }
    stack.pop_back();
    colour[r] = 2;
  };
  for (const auto& [room, to] : edges) {
    if (colour[room] == 0) visit(room);
  }
  EXPECT_TRUE(loops.empty()) << "include loops: " << [&] {
    std::string s;
    for (const auto& l : loops) s += "\n  " + l;
    return s;
  }();
}

// The build holds the same order: orchestrator/CMakeLists.txt makes each
// layer a library with densefeed_layer(NAME BELOW), linking only BELOW.
TEST(Layers, TheBuildLinksEachLayerToTheOneBelowOnly) {
  const std::string cmake = read(kOrchestrator / "CMakeLists.txt");
  const std::regex layer_call(R"re(\ndensefeed_layer\((\w+) "(\w*)"\))re");
  std::vector<std::pair<std::string, std::string>> built;
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), layer_call); it != std::sregex_iterator(); ++it) {
    built.emplace_back((*it)[1], (*it)[2]);
  }
  ASSERT_EQ(built.size() + 1, kLayers.size()) << "one densefeed_layer() per layer but cli (the executable)";
  for (std::size_t i = 0; i < built.size(); ++i) {
    EXPECT_EQ(built[i].first, kLayers[i].first);
    EXPECT_EQ(built[i].second, i == 0 ? "" : kLayers[i - 1].first) << built[i].first << " must link the layer below it";
  }
  // No layer library links another layer beside the one below.
  const std::regex extra_link(R"(target_link_libraries\(densefeed_(\w+) (PUBLIC|PRIVATE|INTERFACE)([^)]*)\))");
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), extra_link); it != std::sregex_iterator(); ++it) {
    const std::string target = (*it)[1], libs = (*it)[3];
    if (target == "core") continue;  // the interface library of all layers, for tests and tools
    std::istringstream words(libs);
    for (std::string lib; words >> lib;) {
      for (const auto& [name, what] : kLayers) {
        EXPECT_NE(lib, "densefeed_" + name) << "densefeed_" << target << " links densefeed_" << name << " beside the layer below";
      }
    }
  }
}

// Typed all the way: what a stage decided travels as values (Failure,
// BenchGuard, TimingFlag, verdict enums); reasons are words for people. No
// printer, next step or stage searches a reason's text to decide anything
// (a candidate's own words could be in it), nor an error document's or an
// exception's message (MCP's get_status searched the CLI's error for
// " is still " to tell a wait that ran out: now the exit code says it).
TEST(TypedAllTheWay, NoPrinterNextStepOrStageSearchesTheWordsOfAReason) {
  const std::regex search(
      R"re(\b\w*(reason|why)\w*(\(\))?\s*\.\s*(find|rfind|starts_with|ends_with|compare|find_first_of)\s*\(|(contains|regex_search|regex_match)\s*\(\s*[\w.>-]*(reason|why)\b|\["(reason|why|error|detail|message)"\][^;]*\.\s*(find|rfind|starts_with|ends_with|find_first_of)\s*\(|\bwhat\(\)\)?\s*\.\s*(find|rfind|starts_with|ends_with)\s*\()re");
  std::size_t files = 0;
  for (const auto& [name, s] : sources()) {
    if (s.layer != "present" && s.layer != "pipeline") continue;
    ++files;
    std::istringstream text(read(s.path));
    int n = 0;
    for (std::string line; std::getline(text, line);) {
      ++n;
      EXPECT_FALSE(std::regex_search(line, search)) << s.path.string() << ":" << n << " searches a reason's words: " << line;
    }
  }
  EXPECT_GT(files, 20u);
}

// The harness protocol's variables are spelled in one file
// (common/harness_protocol.h); every command gets them from its builders.
TEST(HarnessProtocol, ItsVariablesAreSpelledInOneFileOnly) {
  const std::regex spelled(R"re("DENSEFEED_(MODE|CASE|SEED|OUT|WARMUP|ITERS)")re");
  for (const auto& [name, s] : sources()) {
    if (name == "harness_protocol.h") continue;
    std::istringstream text(read(s.path));
    int n = 0;
    for (std::string line; std::getline(text, line);) {
      ++n;
      EXPECT_FALSE(std::regex_search(line, spelled)) << s.path.string() << ":" << n << " spells a protocol variable: " << line;
    }
  }
  EXPECT_TRUE(std::regex_search(read(kOrchestrator / "common" / "harness_protocol.h"), spelled));
}

}  // namespace
