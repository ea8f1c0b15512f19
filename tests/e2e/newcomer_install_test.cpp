// Issue 31, "a newcomer's first hour": `densefeed help`, an unknown verb, and
// the man page and shell completions the build generates from the CLI's own
// command tree (orchestrator/cli/cli_help.h), run for real in bash, zsh and fish.
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_verbs.h"
#include "test_support.h"

namespace densefeed {
namespace {

const std::string kExe = DENSEFEED_EXE;
const std::filesystem::path kBuild = DENSEFEED_BUILD_DIR;

testing::CliResult df(const std::vector<std::string>& args) { return testing::run_cli(kExe, args, std::filesystem::temp_directory_path()); }

std::string program(const std::string& name) {
  for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"}) {
    if (std::filesystem::exists(std::filesystem::path(dir) / name)) return (std::filesystem::path(dir) / name).string();
  }
  return "";
}

// What a shell prints running `script` (bash -c / zsh -c / fish -c).
testing::CliResult shell(const std::string& sh, const std::string& script) {
  return testing::run_cli(program(sh), {"-c", script}, std::filesystem::temp_directory_path());
}

// The words COMPREPLY holds after bash completes the command line `words` (its last word being completed).
std::set<std::string> bash_completions(const std::string& words) {
  const auto r = shell("bash", "source '" + (kBuild / "share/bash-completion/completions/densefeed").string() +
                                   "'; COMP_WORDS=(" + words + "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); "
                                   "[[ \"" + words + "\" == *' ' ]] && { COMP_WORDS+=(''); COMP_CWORD=$((COMP_CWORD + 1)); }; "
                                   "_densefeed; printf '%s\\n' \"${COMPREPLY[@]}\"");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) if (!line.empty()) out.insert(line);
  return out;
}

TEST(NewcomerHelp, HelpPrintsTheTopLevelHelpWithExamplesOfRealVerbs) {
  const auto help = df({"help"});
  const auto flag = df({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  EXPECT_EQ(help.out, flag.out);
  EXPECT_NE(help.out.find("EXAMPLES:"), std::string::npos) << help.out;
  const auto verbs = testing::cli_verbs(kExe);
  std::size_t examples = 0;
  const std::regex example(R"(^  densefeed (.+)$)");
  std::istringstream lines(help.out.substr(help.out.find("EXAMPLES:")));
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, example)) continue;
    std::istringstream words(m[1].str());
    std::vector<std::string> args;
    for (std::string w; words >> w;) args.push_back(w);
    EXPECT_FALSE(testing::verb_of(verbs, args).empty()) << "an example names no verb: " << line;
    ++examples;
  }
  for (const char* verb : {"densefeed init", "densefeed run ", "densefeed status ", "densefeed ledger list", "densefeed report ",
                           "densefeed narrow "}) {
    EXPECT_NE(help.out.find(verb), std::string::npos) << "no example of " << verb;
  }
  EXPECT_GE(examples, 6u);
}

TEST(NewcomerHelp, HelpOfAVerbIsThatVerbsOwnHelp) {
  const auto help = df({"help", "ledger", "list"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  EXPECT_EQ(help.out, df({"ledger", "list", "--help"}).out);
  EXPECT_NE(help.out.find("--verdict"), std::string::npos) << help.out;
  EXPECT_EQ(df({"help", "run"}).out, df({"run", "--help"}).out);
  const auto bad = df({"help", "lederg"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown command 'lederg' (did you mean 'ledger'?)"), std::string::npos) << bad.err;
}

TEST(NewcomerHelp, AnUnknownVerbIsNamedWithTheClosestOne) {
  const auto bogus = df({"bogus"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("unknown command 'bogus' (did you mean '"), std::string::npos) << bogus.err;
  EXPECT_NE(bogus.err.find("see densefeed --help"), std::string::npos) << bogus.err;
  EXPECT_EQ(bogus.err.find("A subcommand is required"), std::string::npos) << bogus.err;
  const auto rn = df({"rnu", "experiments/x.yaml"});
  EXPECT_EQ(rn.exit_code, 2);
  EXPECT_NE(rn.err.find("unknown command 'rnu' (did you mean 'run'?); see densefeed --help"), std::string::npos) << rn.err;
  // Below a verb, after global options with values.
  const auto lsit = df({"--project", "/nonexistent", "ledger", "lsit", "--json"});
  EXPECT_EQ(lsit.exit_code, 2);
  EXPECT_NE(lsit.err.find("unknown command 'ledger lsit' (did you mean 'ledger list'?); see densefeed ledger --help"),
            std::string::npos)
      << lsit.err;
  const auto doc = nlohmann::json::parse(lsit.out);
  EXPECT_EQ(doc["verdict"], "bad-input");
  EXPECT_EQ(doc["details"]["field"], "command line");
  // A known verb's own bad option is still CLI11's message.
  const auto opt = df({"status", "--bogus-option"});
  EXPECT_EQ(opt.exit_code, 2);
  EXPECT_EQ(opt.err.find("unknown command"), std::string::npos) << opt.err;
}

TEST(NewcomerInstall, TheManPageIsGeneratedFromTheCliAndNamesEveryVerbAndOption) {
  const std::string page = testing::read_file(kBuild / "share/man/man1/densefeed.1");
  const auto generated = df({"--generate", "man"});
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  EXPECT_EQ(page, generated.out) << "share/man/man1/densefeed.1 is older than the densefeed built beside it";
  EXPECT_EQ(page.rfind(".\\\" densefeed(1)", 0), 0u);
  EXPECT_NE(page.find(".SH EXAMPLES"), std::string::npos);
  const auto verbs = testing::cli_verbs(kExe);
  ASSERT_GT(verbs.size(), 30u);
  const std::regex option(R"((^|\s)(--[a-z][a-z0-9-]*))");
  for (const auto& [verb, info] : verbs) {
    EXPECT_NE(page.find(".SS \"densefeed " + verb + "\""), std::string::npos) << "the man page has no section for " << verb;
    for (std::sregex_iterator m(info.help.begin(), info.help.end(), option), end; m != end; ++m) {
      std::string roff;
      for (const char c : (*m)[2].str()) roff += c == '-' ? "\\-" : std::string(1, c);
      EXPECT_NE(page.find("\\fB" + roff + "\\fR"), std::string::npos) << verb << "'s " << (*m)[2] << " is not in the man page";
    }
  }
  if (const std::string groff = program("groff"); !groff.empty()) {
    // man(7) as groff reads it, every warning on: none.
    const auto r = testing::run_cli(groff, {"-man", "-Tutf8", "-ww", "-z", (kBuild / "share/man/man1/densefeed.1").string()},
                                    std::filesystem::temp_directory_path());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err, "");
  }
  EXPECT_EQ(df({"--generate", "pdf"}).exit_code, 2);
}

TEST(NewcomerInstall, BashCompletionOffersTheVerbsAndOptionsTypedSoFar) {
  EXPECT_EQ(testing::read_file(kBuild / "share/bash-completion/completions/densefeed"), df({"--generate", "bash"}).out);
  EXPECT_EQ(bash_completions("densefeed ru"), (std::set<std::string>{"run"}));
  EXPECT_TRUE(bash_completions("densefeed status --j").count("--json"));
  EXPECT_EQ(bash_completions("densefeed ledger l"), (std::set<std::string>{"list"}));
  // An option's value is not taken for a verb; the verb's own options follow it.
  EXPECT_EQ(bash_completions("densefeed --project ledger led"), (std::set<std::string>{"ledger"}));
  const auto run_opts = bash_completions("densefeed run --ledger x.db --no-b");
  EXPECT_TRUE(run_opts.count("--no-bench")) << run_opts.size();
  const auto top = bash_completions("densefeed ");
  EXPECT_TRUE(top.count("help") && top.count("narrow") && top.count("gate")) << top.size();
  EXPECT_FALSE(top.count("--generate")) << "a hidden option is offered";
}

TEST(NewcomerInstall, ZshAndFishCompletionsRunInTheirShells) {
  const std::string zsh = program("zsh"), fish = program("fish");
  if (zsh.empty() || fish.empty()) GTEST_SKIP() << "zsh or fish is not installed (.ci/run installs both)";
  const auto zfile = (kBuild / "share/zsh/site-functions/_densefeed").string();
  const auto ffile = (kBuild / "share/fish/vendor_completions.d/densefeed.fish").string();
  EXPECT_EQ(testing::read_file(zfile), df({"--generate", "zsh"}).out);
  EXPECT_EQ(testing::read_file(ffile), df({"--generate", "fish"}).out);
  const auto zparse = testing::run_cli(zsh, {"-n", zfile}, std::filesystem::temp_directory_path());
  EXPECT_EQ(zparse.exit_code, 0) << zparse.err;
  // The functions the completer calls, run by zsh (compdef stubbed: compinit's).
  const auto zrun = shell("zsh", "compdef() { :; }; source '" + zfile + "'; _densefeed_subcommands \"$(_densefeed_path ledger l)\"; "
                                 "echo; _densefeed_options \"$(_densefeed_path --project x status 7 --j)\"");
  EXPECT_EQ(zrun.exit_code, 0) << zrun.err;
  EXPECT_NE(zrun.out.find("list show"), std::string::npos) << zrun.out;
  EXPECT_NE(zrun.out.find("--wait"), std::string::npos) << zrun.out;
  // _densefeed itself, with compsys's _describe, compadd and _files stubbed to print what they are given.
  const auto zcomplete = shell("zsh", "compdef() { :; }; source '" + zfile + "'; "
                                      "_describe() { print -l -- \"${(@P)4}\"; }; compadd() { shift; print -l -- \"$@\"; }; _files() { print FILES; }; "
                                      "words=(densefeed ledger l); CURRENT=3; _densefeed; echo ---; "
                                      "words=(densefeed status 7 --j); CURRENT=4; _densefeed; echo ---; "
                                      "words=(densefeed status 7 ''); CURRENT=4; _densefeed");
  EXPECT_EQ(zcomplete.exit_code, 0) << zcomplete.err;
  EXPECT_NE(zcomplete.out.find("\nshow:everything recorded for one experiment\n"), std::string::npos) << zcomplete.out;
  EXPECT_EQ(zcomplete.out.find("run:"), std::string::npos) << zcomplete.out;
  EXPECT_NE(zcomplete.out.find("---\n--help\n-h\n--wait\n"), std::string::npos) << zcomplete.out;
  EXPECT_NE(zcomplete.out.find("\n--json\n---\nFILES\n"), std::string::npos) << zcomplete.out;
  // fish completes a command line for real (complete -C).
  const auto frun = shell("fish", "source '" + ffile + "'; complete -C 'densefeed ru'; echo ---; complete -C 'densefeed ledger list --ver'");
  EXPECT_EQ(frun.exit_code, 0) << frun.err;
  EXPECT_NE(frun.out.find("run\t"), std::string::npos) << frun.out;
  EXPECT_NE(frun.out.find("--verdict"), std::string::npos) << frun.out;
  EXPECT_EQ(frun.out.find("narrow"), std::string::npos) << frun.out;
}

}  // namespace
}  // namespace densefeed
