// SHA-256 (FIPS 180-4) through OpenSSL's EVP interface.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace densefeed {

// Lower-case hex digest (64 characters) of `bytes`.
std::string sha256_hex(std::string_view bytes);

// Digest of a file's bytes. Throws InfraError when it cannot be read.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace densefeed
