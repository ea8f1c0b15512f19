// What a parsed command line asks of a densefeed service, and whether the
// service serves it to the peer that asked: the one table of served verbs,
// their file operands and the person-only verbs and options (issue 28).
//
// The client and the service read the same command table (command_table.h):
// the client turns its parsed command line into canonical arguments
// (service_arguments), with each file operand replaced by a plain file name
// it uploads or expects back; the service parses those arguments with the
// same table and decides on what it parsed (service_policy), so what it
// checks is exactly what its child densefeed process will run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <sys/types.h>

namespace densefeed {

// Who may run a verb through the service.
enum class ServedTo {
  everyone,  // agents and people: submit, status, reads
  people,    // the service's `people:` only: gate lock, review, promote, ledger recover, audit acknowledge
  nobody,    // not served: run it on the service's host as the service's user
};

// A file operand of a served verb: an option (or positional) whose values
// are paths on the client's machine.
struct FileOperand {
  std::string option;  // "--output", or a positional's name ("MANIFEST")
  bool output = false; // written by the verb (sent back), else read (uploaded)
};

struct ServedVerb {
  std::string verb;  // "ledger show"
  ServedTo to = ServedTo::nobody;
  std::vector<FileOperand> files;
};

// The parsed verb: its subcommand names from the top ("audit acknowledge"),
// and the rule for it (ServedTo::nobody for a verb not in the table).
ServedVerb served_verb(const CLI::App& app);

// The verb's subcommands from the top, as parsed.
std::vector<const CLI::App*> parsed_chain(const CLI::App& app);

// One value of a file operand in canonical arguments.
struct FileArgument {
  FileOperand operand;
  std::size_t arg_index = 0;  // where it is in the canonical arguments
  std::string value;          // the path as given
};

struct CanonicalCall {
  std::vector<std::string> args;      // verb words, "--name=value"/"--flag" per given option, "--", positionals
  std::vector<FileArgument> files;    // file operands among args
};

// The parsed command line below the top level in canonical form: global
// options are the service's to decide and dropped, but --trust-worktree,
// which goes first for the service's policy to refuse or allow (a person's
// option). Throws InputError for a value the form cannot carry.
CanonicalCall service_arguments(const CLI::App& app, const ServedVerb& rule);

// The service's decision on a parsed request.
struct PolicyDecision {
  bool allowed = false;
  std::string refusal;                // why not, naming the verb or option and who may use it
  std::vector<std::string> add_args;  // arguments the service adds (promote's --by=LOGIN)
};

struct Peer {
  uid_t uid = 0;
  std::string user;  // login, '' when none
  bool person = false;
};

// Decides on `app` (parsed from a request's arguments): the verb's rule,
// then each option given (--project and --ledger and audit's --head-file are
// the service's: refused to everyone; --trust-worktree, --no-sandbox, audit's
// --allow-* and promote's --accept-* are people's), then the file operands
// (each a plain name the request sent, or names as an output), then --by of
// a person's verb (it must be the person's login). `inputs` and `outputs`
// are the names the request carried.
PolicyDecision service_policy(const CLI::App& app, const Peer& peer, const std::vector<std::string>& inputs,
                              const std::vector<std::string>& outputs, const std::string& people_text);

}  // namespace densefeed
