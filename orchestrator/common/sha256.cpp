#include "sha256.h"

#include <array>
#include <fstream>
#include <memory>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "error.h"

namespace densefeed {
namespace {

class Digest {
 public:
  Digest() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
      throw InfraError("OpenSSL: cannot initialise SHA-256");
    }
  }
  void update(const void* data, std::size_t n) {
    if (EVP_DigestUpdate(ctx_.get(), data, n) != 1) throw InfraError("OpenSSL: SHA-256 update failed");
  }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), md.data(), &len) != 1) throw InfraError("OpenSSL: SHA-256 final failed");
    std::string out;
    for (unsigned int i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  Digest d;
  d.update(bytes.data(), bytes.size());
  return d.hex();
}

std::string sha256_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InfraError(fmt::format("{}: cannot open the file to hash it", path.string()));
  Digest d;
  std::array<char, 1 << 16> buffer{};
  while (in) {
    in.read(buffer.data(), buffer.size());
    if (in.gcount() > 0) d.update(buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw InfraError(fmt::format("{}: read error while hashing", path.string()));
  return d.hex();
}

}  // namespace densefeed
