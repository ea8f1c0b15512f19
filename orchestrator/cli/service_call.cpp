#include "service_call.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "error.h"
#include "service_wire.h"

namespace densefeed {

namespace {

// The one table of what the service serves. Every verb not here is not
// served (ServedTo::nobody): run, worker, init, bench and machine calibrate,
// gate verify, ledger backup, mcp, serve and the hidden verbs.
const std::vector<ServedVerb>& served_table() {
  static const std::vector<ServedVerb> table = {
      {"submit", ServedTo::everyone, {{"MANIFEST", false}}},
      {"status", ServedTo::everyone, {}},
      {"cancel", ServedTo::everyone, {}},
      {"ledger list", ServedTo::everyone, {}},
      {"ledger show", ServedTo::everyone, {}},
      {"ledger compare", ServedTo::everyone, {}},
      {"ledger export", ServedTo::everyone, {}},
      {"ledger verify", ServedTo::everyone, {}},
      {"ledger head", ServedTo::everyone, {}},
      {"report", ServedTo::everyone, {{"--output", true}}},
      {"gate list", ServedTo::everyone, {}},
      {"gate show", ServedTo::everyone, {}},
      {"compare", ServedTo::everyone, {{"REF", false}, {"CAND", false}}},
      {"repro", ServedTo::everyone, {}},
      {"trace analyze", ServedTo::everyone, {{"FILE", false}}},
      {"audit", ServedTo::everyone, {{"--junit", true}}},
      {"gate lock", ServedTo::people, {}},
      {"review approve", ServedTo::people, {}},
      {"review reject", ServedTo::people, {}},
      {"promote", ServedTo::people, {}},
      {"ledger recover", ServedTo::people, {}},
      {"audit acknowledge", ServedTo::people, {}},
  };
  return table;
}

// Options no peer may give: the service decides the project, the ledger and
// the head it checks (its head log).
constexpr std::array kServiceOwned = {"--project", "--ledger", "--ledger-key", "--head-file", "--service", "--peer", "--die-with-parent"};
// Options only people may give, whatever the verb.
constexpr std::array kPeopleOnly = {"--trust-worktree", "--no-sandbox", "--allow-untrusted-gates", "--allow-unsandboxed",
                                    "--accept-candidate-timing", "--accept-speedup-beyond-bound", "--accept-agent-base"};

std::string option_name(const CLI::Option* o) {
  return o->get_positional() && !o->nonpositional() ? o->get_name(true) : "--" + o->get_lnames().front();
}

bool is_flag(const CLI::Option* o) { return o->get_type_size_max() == 0; }

}  // namespace

std::vector<const CLI::App*> parsed_chain(const CLI::App& app) {
  std::vector<const CLI::App*> chain;
  const CLI::App* at = &app;
  for (;;) {
    const auto subs = at->get_subcommands();
    if (subs.empty()) break;
    at = subs.front();
    chain.push_back(at);
  }
  return chain;
}

ServedVerb served_verb(const CLI::App& app) {
  std::string verb;
  for (const auto* a : parsed_chain(app)) verb += (verb.empty() ? "" : " ") + a->get_name();
  for (const auto& v : served_table()) {
    if (v.verb == verb) return v;
  }
  return {verb, ServedTo::nobody, {}};
}

CanonicalCall service_arguments(const CLI::App& app, const ServedVerb& rule) {
  CanonicalCall call;
  // The one global option a peer may ask for, which the service's policy
  // decides on (a person's only): every other global is the service's.
  if (const CLI::Option* trust = app.get_option_no_throw("--trust-worktree"); trust != nullptr && trust->count() > 0) {
    call.args.push_back("--trust-worktree");
  }
  const auto chain = parsed_chain(app);
  std::vector<std::pair<const CLI::Option*, std::string>> positionals;
  for (std::size_t level = 0; level < chain.size(); ++level) {
    const CLI::App* a = chain[level];
    call.args.push_back(a->get_name());
    for (const CLI::Option* o : a->get_options()) {
      if (o->count() == 0 || option_name(o) == "--help") continue;
      const std::string name = option_name(o);
      const auto file = std::find_if(rule.files.begin(), rule.files.end(), [&](const FileOperand& f) { return f.option == name; });
      if (o->get_positional() && !o->nonpositional()) {
        if (level + 1 != chain.size()) throw InputError("command line", {}, name, "expected no operand before a further verb");
        for (const auto& r : o->results()) positionals.emplace_back(o, r);
        continue;
      }
      if (is_flag(o)) {
        for (std::size_t i = 0; i < o->count(); ++i) call.args.push_back(name);
        continue;
      }
      const auto per = static_cast<std::size_t>(std::max(1, o->get_type_size_max()));
      const auto& results = o->results();
      for (std::size_t i = 0; i < results.size(); i += per) {
        if (per == 1) {
          if (file != rule.files.end()) call.files.push_back({*file, call.args.size(), results[i]});
          call.args.push_back(name + "=" + results[i]);
          continue;
        }
        call.args.push_back(name);
        for (std::size_t k = i; k < std::min(results.size(), i + per); ++k) call.args.push_back(results[k]);
      }
    }
  }
  if (!positionals.empty()) call.args.push_back("--");
  for (const auto& [o, value] : positionals) {
    const std::string name = option_name(o);
    const auto file = std::find_if(rule.files.begin(), rule.files.end(), [&](const FileOperand& f) { return f.option == name; });
    if (file != rule.files.end()) call.files.push_back({*file, call.args.size(), value});
    call.args.push_back(value);
  }
  return call;
}

namespace {

std::string refused(const std::string& what, const std::string& who) { return fmt::format("{} is not served to you: {}", what, who); }

std::string check_file_operand(const CLI::Option* o, const FileOperand& f, const std::vector<std::string>& inputs,
                               const std::vector<std::string>& outputs) {
  const auto& names = f.output ? outputs : inputs;
  for (const auto& v : o->results()) {
    if (!is_plain_file_name(v) || std::find(names.begin(), names.end(), v) == names.end()) {
      return fmt::format("{} '{}' is not a file this request {}: the service reads and writes only the files sent with a request", f.option, v,
                         f.output ? "asked back" : "carried");
    }
  }
  return {};
}

}  // namespace

PolicyDecision service_policy(const CLI::App& app, const Peer& peer, const std::vector<std::string>& inputs,
                              const std::vector<std::string>& outputs, const std::string& people_text) {
  PolicyDecision d;
  const ServedVerb rule = served_verb(app);
  const std::string you = fmt::format("you are {} (uid {})", peer.user.empty() ? "a user without a login" : peer.user, peer.uid);
  if (rule.to == ServedTo::nobody) {
    d.refusal = fmt::format("`densefeed {}` is not served over the service's socket: it is run on the service's host by its own user "
                            "(served: submit, status, cancel, ledger list|show|compare|export|verify|head, report, gate list|show, "
                            "compare, trace analyze, audit; to people also gate lock, review, promote, ledger recover, audit acknowledge)",
                            rule.verb);
    return d;
  }
  if (rule.to == ServedTo::people && !peer.person) {
    d.refusal = refused(fmt::format("`densefeed {}`", rule.verb),
                        fmt::format("it is a person's verb, which only the service's people may run ({}); {}", people_text, you));
    return d;
  }
  std::vector<const CLI::App*> levels = {&app};
  for (const auto* a : parsed_chain(app)) levels.push_back(a);
  for (const CLI::App* a : levels) {
    for (const CLI::Option* o : a->get_options()) {
      if (o->count() == 0) continue;
      const std::string name = option_name(o);
      if (std::find(kServiceOwned.begin(), kServiceOwned.end(), name) != kServiceOwned.end()) {
        d.refusal = fmt::format("{} is the service's to decide (its project, ledger, key and head log): leave it out", name);
        return d;
      }
      if (!peer.person && std::find(kPeopleOnly.begin(), kPeopleOnly.end(), name) != kPeopleOnly.end()) {
        d.refusal = refused(name, fmt::format("it is a person's option, which only the service's people may give ({}); {}", people_text, you));
        return d;
      }
      for (const auto& f : rule.files) {
        if (f.option != name) continue;
        if (auto why = check_file_operand(o, f, inputs, outputs); !why.empty()) {
          d.refusal = why;
          return d;
        }
      }
    }
  }
  if (rule.to == ServedTo::people) {
    const CLI::App* verb = levels.back();
    const CLI::Option* by = nullptr;
    for (const CLI::Option* o : verb->get_options()) by = option_name(o) == "--by" ? o : by;
    if (by != nullptr && by->count() > 0 && by->results().front() != peer.user) {
      d.refusal = fmt::format("--by '{}' is not you: through the service a person's decision is recorded under their own login ({})",
                              by->results().front(), you);
      return d;
    }
    if (by != nullptr && by->count() == 0) d.add_args.push_back("--by=" + peer.user);
  }
  d.allowed = true;
  return d;
}

}  // namespace densefeed
