// How ledger verify, head, backup, recover and audit acknowledge print what
// they found or did: text for people, or one JSON document with --json.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "ledger.h"
#include "pending_results.h"

namespace densefeed {

// {ok, links, first_broken?: {seq, table, row_id, experiment_id, problem}}, or one line.
void print_chain_check(std::ostream& out, const std::filesystem::path& ledger, const ChainCheck& c, bool json);
// {head, seq, hash, key_fingerprint}, or "SEQ:HASH".
void print_chain_head(std::ostream& out, const ChainHead& h, const std::string& key_fingerprint, bool json);
// {backup, head}, or "FILE: backup of LEDGER at head SEQ:HASH".
void print_backup(std::ostream& out, const std::string& file, const std::filesystem::path& ledger, const ChainHead& h, bool json);
// {ledger, recovered: [{experiment_id, file, outcome, verdict, cases, refusal?, reason?}]},
// or one line per file (a refused one says why and that it is kept).
void print_recovered(std::ostream& out, const std::filesystem::path& ledger, const std::filesystem::path& runs,
                     const std::vector<RecoveredRun>& recovered, bool json);
// {tamper_event, acknowledged_by, note}, or one line.
void print_tamper_acknowledged(std::ostream& out, std::int64_t id, const std::string& by, const std::string& note, bool json);

}  // namespace densefeed
