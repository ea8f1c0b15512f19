// The agent skill (skills/densefeed-optimization-loop) says nothing that is
// not so: every command in its ```sh blocks runs (in order, into a fresh
// ledger) without a usage error and with the exit code it states; every
// manifest in its ```yaml blocks is accepted by `densefeed submit`, or refused
// with the message it states; every example experiment it names validates
// when the file is in this checkout; every field path it writes exists in a
// schema under schemas/; and its front matter is what the Agent Skills
// format asks for.
#include <gtest/gtest.h>

#include <iostream>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "cli_verbs.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::filesystem::path kRoot = DENSEFEED_SOURCE_DIR;
const std::string kExe = DENSEFEED_EXE;

// densefeed as the skill's commands run it: in densefeed's own project (its
// gates as checked out, not as its main branch has them), with the build's
// harnesses on PATH. The commands run from a temporary folder that stands in
// for the checkout (experiments/ linked, its own .densefeed/).
testing::CliResult densefeed_in_project(std::vector<std::string> args, const std::filesystem::path& cwd) {
  args.insert(args.begin(), {"--project", kRoot.string(), "--trust-worktree"});
  return testing::run_cli(kExe, args, cwd, testing::with_on_path(std::filesystem::path(kExe).parent_path()));
}
const std::filesystem::path kSkill = kRoot / "skills" / "densefeed-optimization-loop";

struct Block {
  std::filesystem::path file;
  int line = 0;  // of the opening fence
  std::string lang;
  std::string text;
};

// SKILL.md first, then its supporting Markdown files in path order.
std::vector<std::filesystem::path> skill_files() {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kSkill)) {
    if (e.is_regular_file() && e.path().extension() == ".md" && e.path().filename() != "SKILL.md") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  files.insert(files.begin(), kSkill / "SKILL.md");
  return files;
}

std::vector<Block> fenced_blocks(const std::filesystem::path& file) {
  std::vector<Block> blocks;
  std::istringstream in(testing::read_file(file));
  std::optional<Block> open;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("```", 0) == 0) {
      if (open) {
        blocks.push_back(*open);
        open.reset();
      } else {
        open = Block{file, n, line.substr(3), ""};
      }
      continue;
    }
    if (open) open->text += line + "\n";
  }
  return blocks;
}

std::vector<Block> all_blocks(const std::string& lang) {
  std::vector<Block> out;
  for (const auto& f : skill_files()) {
    for (auto& b : fenced_blocks(f)) {
      if (b.lang == lang) out.push_back(b);
    }
  }
  return out;
}

std::string where(const Block& b) { return fmt::format("{}:{}", std::filesystem::relative(b.file, kRoot).string(), b.line); }

// A command line of a ```sh block: words (shell quoting: '...', "...",
// backslash) and its trailing comment.
struct Command {
  std::vector<std::string> words;
  std::string comment;
  std::string text;
  std::string at;
};

std::vector<Command> commands_of(const Block& b) {
  std::vector<Command> out;
  std::istringstream in(b.text);
  std::string logical;
  int n = b.line;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (!line.empty() && line.back() == '\\') {
      logical += line.substr(0, line.size() - 1);
      continue;
    }
    logical += line;
    Command c;
    c.text = logical;
    c.at = fmt::format("{}:{}", std::filesystem::relative(b.file, kRoot).string(), n);
    std::string word;
    bool in_word = false;
    char quote = 0;
    for (std::size_t i = 0; i < logical.size(); ++i) {
      const char ch = logical[i];
      if (quote) {
        if (ch == quote) quote = 0;
        else word += ch;
        continue;
      }
      if (ch == '\'' || ch == '"') {
        quote = ch;
        in_word = true;
      } else if (ch == '\\' && i + 1 < logical.size()) {
        word += logical[++i];
        in_word = true;
      } else if (ch == '#' && !in_word) {
        c.comment = logical.substr(i + 1);
        break;
      } else if (ch == ' ' || ch == '\t') {
        if (in_word) c.words.push_back(word);
        word.clear();
        in_word = false;
      } else {
        word += ch;
        in_word = true;
      }
    }
    if (in_word) c.words.push_back(word);
    logical.clear();
    if (!c.words.empty()) out.push_back(c);
  }
  return out;
}

TEST(Skill, HasTheAgentSkillsFrontMatterAndItsLinksResolve) {
  const std::string text = testing::read_file(kSkill / "SKILL.md");
  ASSERT_EQ(text.rfind("---\n", 0), 0u) << "SKILL.md must start with YAML front matter";
  const auto end = text.find("\n---\n", 4);
  ASSERT_NE(end, std::string::npos);
  const YAML::Node front = YAML::Load(text.substr(4, end - 4));
  ASSERT_TRUE(front.IsMap());
  const auto name = front["name"].as<std::string>("");
  const auto description = front["description"].as<std::string>("");
  // Agent Skills: name = the folder's name, lowercase letters, digits and
  // hyphens, at most 64 characters; description non-empty, at most 1024.
  EXPECT_EQ(name, kSkill.filename().string());
  EXPECT_TRUE(std::regex_match(name, std::regex("[a-z0-9]+(-[a-z0-9]+)*"))) << name;
  EXPECT_LE(name.size(), 64u);
  EXPECT_FALSE(description.empty());
  EXPECT_LE(description.size(), 1024u);
  for (const auto& f : skill_files()) {
    const std::string body = testing::read_file(f);
    const std::regex link(R"(\]\(([^)#:]+)\))");
    for (auto it = std::sregex_iterator(body.begin(), body.end(), link); it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(std::filesystem::exists(f.parent_path() / (*it)[1].str())) << f << " links to " << (*it)[1];
    }
  }
}

TEST(Skill, EveryManifestItShowsIsAcceptedOrRefusedAsItSays) {
  testing::TempDir dir;
  std::size_t manifests = 0;
  for (const auto& b : all_blocks("yaml")) {
    YAML::Node doc;
    try {
      doc = YAML::Load(b.text);
    } catch (const YAML::Exception& e) {
      ADD_FAILURE() << where(b) << ": not YAML: " << e.what();
      continue;
    }
    if (!doc.IsMap() || !doc["experiment"]) continue;  // an excerpt, not a manifest
    ++manifests;
    const auto path = dir / fmt::format("block-{}.yaml", manifests);
    testing::write_file(path, b.text);
    const auto r = densefeed_in_project({"submit", path.string(), "--ledger", (dir / "validate.db").string(), "--json"}, dir.path());
    std::smatch refused;
    if (std::regex_search(b.text, refused, std::regex("^# refused: (.+)\n"))) {
      EXPECT_EQ(r.exit_code, 2) << where(b) << " should be refused\n" << r.out << r.err;
      EXPECT_NE(r.err.find(refused[1].str()), std::string::npos) << where(b) << ": expected '" << refused[1] << "' in\n" << r.err;
    } else {
      EXPECT_EQ(r.exit_code, 0) << where(b) << "\n" << r.out << r.err;
    }
    std::cout << where(b) << ": manifest '" << doc["experiment"].as<std::string>() << "' -> exit " << r.exit_code << "\n";
  }
  EXPECT_GE(manifests, 2u);
}

// Data-driven: the example files it names, validated when this checkout has them.
TEST(Skill, EveryExampleExperimentItNamesValidates) {
  std::set<std::string> named;
  const std::regex path(R"(experiments/[A-Za-z0-9._-]+\.yaml)");
  for (const auto& f : skill_files()) {
    const std::string body = testing::read_file(f);
    for (auto it = std::sregex_iterator(body.begin(), body.end(), path); it != std::sregex_iterator(); ++it) named.insert(it->str());
  }
  for (const char* example : {"experiments/cp-affine-chain-tf32.yaml", "experiments/cp-affine-chain-tf32x3.yaml",
                              "experiments/kda-decode-merge-vtiles.yaml", "experiments/kv-transfer-release-lock.yaml"}) {
    EXPECT_TRUE(named.count(example)) << "the skill does not name " << example;
  }
  testing::TempDir dir;
  std::size_t validated = 0;
  for (const auto& p : named) {
    if (!std::filesystem::exists(kRoot / p)) {
      std::cout << "skipping " << p << ": not in this checkout\n";
      continue;
    }
    const auto r = densefeed_in_project({"submit", (kRoot / p).string(), "--ledger", (dir / "validate.db").string(), "--json"}, dir.path());
    EXPECT_EQ(r.exit_code, 0) << p << "\n" << r.out << r.err;
    std::cout << p << ": submit -> exit " << r.exit_code << "\n";
    ++validated;
  }
  EXPECT_GE(validated, 2u);
}

// Does `path` (a.b[].c) name a property somewhere under `schema`?
bool resolves(const nlohmann::json& root, const nlohmann::json& schema, const std::vector<std::string>& parts, std::size_t i, int depth = 0) {
  if (depth > 40 || !schema.is_object()) return false;
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"].get<std::string>();
    if (ref.rfind("#", 0) != 0) return false;
    return resolves(root, root.at(nlohmann::json::json_pointer(ref.substr(1))), parts, i, depth + 1);
  }
  for (const char* combinator : {"anyOf", "oneOf", "allOf"}) {
    if (!schema.contains(combinator)) continue;
    for (const auto& branch : schema[combinator]) {
      if (resolves(root, branch, parts, i, depth + 1)) return true;
    }
  }
  if (i == parts.size()) return true;
  std::string key = parts[i];
  const bool each = key.size() > 2 && key.substr(key.size() - 2) == "[]";
  if (each) key.resize(key.size() - 2);
  const nlohmann::json* child = nullptr;
  if (schema.contains("properties") && schema["properties"].contains(key)) child = &schema["properties"][key];
  if (!child) return false;
  if (!each) return resolves(root, *child, parts, i + 1, depth + 1);
  // key[] : the items of an array property
  std::function<bool(const nlohmann::json&, int)> items = [&](const nlohmann::json& s, int d) {
    if (d > 40 || !s.is_object()) return false;
    if (s.contains("$ref")) return items(root.at(nlohmann::json::json_pointer(s["$ref"].get<std::string>().substr(1))), d + 1);
    if (s.contains("items")) return resolves(root, s["items"], parts, i + 1, depth + 1);
    for (const char* combinator : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(combinator)) continue;
      for (const auto& branch : s[combinator]) {
        if (items(branch, d + 1)) return true;
      }
    }
    return false;
  };
  return items(*child, 0);
}

TEST(Skill, EveryFieldPathItWritesIsInASchema) {
  std::vector<std::pair<std::string, nlohmann::json>> schemas;
  for (const auto& e : std::filesystem::directory_iterator(kRoot / "schemas")) {
    if (e.path().extension() == ".json") schemas.emplace_back(e.path().filename().string(), nlohmann::json::parse(testing::read_file(e.path())));
  }
  // `stages.gate.failing_cases[].metrics`: dotted, lowercase; file names (gates.lock) are not fields.
  const std::regex span("`([a-z_]+(?:\\[\\])?(?:\\.[a-z_0-9]+(?:\\[\\])?)+)`");
  const std::regex file_name(R"(.*\.(md|yaml|yml|json|lock|db|py|cpp|h|cu|npy|sqlite|txt|log)$)");
  std::size_t checked = 0;
  for (const auto& f : skill_files()) {
    const std::string body = testing::read_file(f);
    for (auto it = std::sregex_iterator(body.begin(), body.end(), span); it != std::sregex_iterator(); ++it) {
      const std::string path = (*it)[1].str();
      if (std::regex_match(path, file_name)) continue;
      std::vector<std::string> parts;
      std::istringstream in(path);
      for (std::string p; std::getline(in, p, '.');) parts.push_back(p);
      bool found = false;
      for (const auto& [name, schema] : schemas) found = found || resolves(schema, schema, parts, 0);
      EXPECT_TRUE(found) << f.filename() << ": `" << path << "` is in no schema under schemas/";
      ++checked;
    }
  }
  EXPECT_GE(checked, 20u);
}

TEST(Skill, EveryCommandRunsInOrderWithTheExitCodeItStates) {
  testing::TempDir dir;
  // Paths in the skill are relative to the checkout; the ledger is the
  // default one, .densefeed/ledger.db, here under the temporary folder.
  std::filesystem::create_directory_symlink(kRoot / "experiments", dir / "experiments");
  std::filesystem::create_directories(dir / ".densefeed");
  const auto ledger = (dir / ".densefeed" / "ledger.db").string();
  const auto verbs = testing::cli_verbs(kExe);
  std::size_t ran = 0;
  for (const auto& b : all_blocks("sh")) {
    for (auto c : commands_of(b)) {
      ASSERT_EQ(c.words[0], "densefeed") << c.at << ": a command the skill gives that is not densefeed's: " << c.text;
      std::vector<std::string> args(c.words.begin() + 1, c.words.end());
      const std::string verb = testing::verb_of(verbs, args);
      ASSERT_FALSE(verb.empty()) << c.at << ": no such verb: " << c.text;
      const auto& help = verbs.at(verb).help;
      // Every option it uses is one the verb has.
      for (const auto& a : args) {
        if (a.rfind("--", 0) == 0) EXPECT_NE(help.find(a), std::string::npos) << c.at << ": densefeed " << verb << " has no " << a;
      }
      if (c.comment.find("not run by the skill test") != std::string::npos) {
        std::cout << c.at << ": checked, not run: " << c.text << "\n";
        continue;
      }
      if (std::find(args.begin(), args.end(), "--ledger") == args.end() && help.find("--ledger") != std::string::npos) {
        args.insert(args.end(), {"--ledger", ledger});
      }
      const auto r = densefeed_in_project(args, dir.path());
      std::smatch stated;
      if (std::regex_search(c.comment, stated, std::regex(R"(\bexit (\d))"))) {
        EXPECT_EQ(r.exit_code, std::stoi(stated[1].str())) << c.at << ": " << c.text << "\n" << r.out.substr(0, 3000) << r.err;
      } else {
        EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << c.at << ": exit " << r.exit_code << ": " << c.text << "\n" << r.err;
      }
      EXPECT_NE(r.exit_code, 2) << c.at << ": bad usage: " << c.text << "\n" << r.err;
      std::cout << c.at << ": exit " << r.exit_code << ": " << c.text << "\n";
      ++ran;
    }
  }
  EXPECT_GE(ran, 10u);
}

}  // namespace
}  // namespace densefeed
