// The key of the ledger's keyed hash chain (HMAC-SHA256, RFC 2104 / FIPS
// 198-1). It lives outside the ledger, so that an editor of the ledger file
// who lacks it cannot re-seal the chain: a file of 32 random bytes, readable
// and writable by its owner only, created on first use. Its path is
// densefeed.yaml's `ledger_key` when set, else
// $XDG_CONFIG_HOME/densefeed/keys/<sha256 of the ledger's path, 16 hex>.key
// ($XDG_CONFIG_HOME defaults to ~/.config): never in the ledger's folder.
#pragma once

#include <filesystem>
#include <string>

namespace densefeed {

// The key file for `ledger` (absolute) whose chain_keys records
// `fingerprint` (sha256 of the key, 64 hex): the one registered for it with
// set_ledger_key_file, else keys/<fingerprint's first 32 hex>.key above
// (fingerprint empty, a ledger not keyed yet: the keys folder itself).
std::filesystem::path ledger_key_file(const std::filesystem::path& ledger, const std::string& fingerprint);
// Registers the key file given for this ledger (--ledger-key,
// DENSEFEED_LEDGER_KEY or densefeed.yaml's ledger_key; process-wide).
void set_ledger_key_file(const std::filesystem::path& ledger, const std::filesystem::path& key);
// Forgets what set_ledger_key_file registered for `ledger`: its key is the
// default above again (a trusted configuration that names no key replaces a
// worktree's that named one).
void forget_ledger_key_file(const std::filesystem::path& ledger);

struct LedgerKey {
  std::string bytes;        // the key
  std::string fingerprint;  // sha256 of the key, hex (recorded in chain_keys)
  std::filesystem::path file;
};

// Reads the key; with `create`, makes it (mode 0600, O_EXCL) when the file
// does not exist. Throws InputError when it exists but is not a regular file
// of 32 bytes owned by this user and unreadable by others, or (without
// create) does not exist; InfraError when it cannot be written.
LedgerKey load_ledger_key(const std::filesystem::path& file, bool create);

// The key of `ledger`, whose chain_keys records `fingerprint` ('' when the
// ledger has no key yet: then, with `create`, a new key is made, named by its
// own identity unless a key file is registered). Looks in the order above,
// then at the pre-identity name (sha256 of the ledger's path), which it links
// to the identity's name. Throws InputError naming the ledger when the key
// found is not the one `fingerprint` names (saying which fingerprint is
// expected and how to pass the key: --ledger-key FILE or
// DENSEFEED_LEDGER_KEY), or naming the key file when it is missing or
// breaks load_ledger_key's rules; InfraError when a key cannot be made.
LedgerKey find_ledger_key(const std::filesystem::path& ledger, const std::string& fingerprint, bool create);

// HMAC-SHA256 of `message` under `key`, hex (64 characters).
std::string hmac_sha256_hex(const std::string& key, const std::string& message);

}  // namespace densefeed
