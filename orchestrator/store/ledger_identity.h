// A ledger's identity read from its file without opening it as a Ledger
// (no migration, no checks): for code that needs the ledger's chain key
// while another part of the process holds the ledger (a revision build's
// seal) and for tests.
#pragma once

#include <filesystem>
#include <string>

namespace densefeed {

// The fingerprint (sha256 of the chain key, 64 hex) the ledger at `ledger`
// records in its chain_keys table: its identity (ledger_key.h). '' when the
// file does not exist, is not SQLite, or holds no key yet (never throws).
std::string ledger_key_fingerprint(const std::filesystem::path& ledger);

}  // namespace densefeed
