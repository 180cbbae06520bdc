#include "loaders/file_digest.h"

#include <openssl/evp.h>

#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"

namespace striker {

namespace {

using MdCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

// Digest of `prefix` followed by the file's bytes, read in 1 MiB pieces.
std::string digest_hex(const EVP_MD* md, const std::filesystem::path& path, const std::string& prefix) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open the file to check its checksum");
  MdCtx ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1) throw Error("OpenSSL could not start a digest");
  EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size());
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), size_t(in.gcount()));
  }
  if (in.bad()) throw Error(path.string() + ": read error while checking its checksum");
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx.get(), out, &n);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s += hex[out[i] >> 4];
    s += hex[out[i] & 15];
  }
  return s;
}

}  // namespace

std::string sha256_file_hex(const std::filesystem::path& path) { return digest_hex(EVP_sha256(), path, ""); }

std::string git_blob_sha1_file_hex(const std::filesystem::path& path) {
  const std::string header = "blob " + std::to_string(std::filesystem::file_size(path)) + std::string(1, '\0');
  return digest_hex(EVP_sha1(), path, header);
}

}  // namespace striker
