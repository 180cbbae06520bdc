#include "engine/block_hash.h"

#include <openssl/evp.h>
#include <openssl/rand.h>


#include "core/error.h"

namespace striker {

namespace {

BlockHash sha256(const std::vector<uint8_t>& bytes) {
  BlockHash out{};
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), out.data(), &len, EVP_sha256(), nullptr) != 1 || len != out.size())
    throw std::runtime_error("OpenSSL EVP_Digest(sha256) failed");
  return out;
}

// Canonical CBOR (RFC 8949 §4.2.1): the shortest head for every length and integer.
void cbor_head(std::vector<uint8_t>& out, uint8_t major, uint64_t v) {
  const uint8_t m = uint8_t(major << 5);
  if (v < 24) {
    out.push_back(uint8_t(m | v));
    return;
  }
  int bytes = v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffULL ? 4 : 8;
  out.push_back(uint8_t(m | (bytes == 1 ? 24 : bytes == 2 ? 25 : bytes == 4 ? 26 : 27)));
  for (int i = bytes - 1; i >= 0; --i) out.push_back(uint8_t(v >> (8 * i)));
}

void cbor_int(std::vector<uint8_t>& out, int64_t v) {
  if (v >= 0) cbor_head(out, 0, uint64_t(v));
  else cbor_head(out, 1, uint64_t(-(v + 1)));
}

void cbor_text(std::vector<uint8_t>& out, const std::string& s) {
  cbor_head(out, 3, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void le32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(uint8_t(v >> (8 * i)));
}

// vLLM: sha256_cbor((parent, tuple(ids), extra_keys or None)).
std::vector<uint8_t> cbor_block(const BlockHash& parent, std::span<const int32_t> tokens, const ExtraKeys& extra) {
  std::vector<uint8_t> out;
  out.reserve(48 + tokens.size() * 5);
  cbor_head(out, 4, 3);
  cbor_head(out, 2, parent.size());
  out.insert(out.end(), parent.begin(), parent.end());
  cbor_head(out, 4, tokens.size());
  for (int32_t t : tokens) cbor_int(out, t);
  if (extra.empty()) {
    out.push_back(0xf6);  // null
  } else {
    cbor_head(out, 4, extra.size());
    for (const auto& k : extra) cbor_text(out, k);
  }
  return out;
}

// striker's layout: parent, then each list as a little-endian count and its items.
std::vector<uint8_t> binary_block(const BlockHash& parent, std::span<const int32_t> tokens, const ExtraKeys& extra) {
  std::vector<uint8_t> out(parent.begin(), parent.end());
  le32(out, uint32_t(tokens.size()));
  for (int32_t t : tokens) le32(out, uint32_t(t));
  le32(out, uint32_t(extra.size()));
  for (const auto& k : extra) {
    le32(out, uint32_t(k.size()));
    out.insert(out.end(), k.begin(), k.end());
  }
  return out;
}

}  // namespace

HashAlgo parse_hash_algo(const std::string& name) {
  if (name == "sha256") return HashAlgo::Sha256;
  if (name == "sha256_cbor") return HashAlgo::Sha256Cbor;
  throw Error("--prefix-caching-hash-algo must be one of sha256, sha256_cbor; got '" + name + "'");
}

std::string hash_algo_name(HashAlgo algo) { return algo == HashAlgo::Sha256 ? "sha256" : "sha256_cbor"; }

BlockHasher::BlockHasher(HashAlgo algo, const std::optional<std::string>& seed) : algo_(algo) {
  if (seed) {
    std::vector<uint8_t> bytes;
    if (algo == HashAlgo::Sha256Cbor) cbor_text(bytes, *seed);  // vLLM: sha256_cbor(PYTHONHASHSEED)
    else bytes.assign(seed->begin(), seed->end());
    none_hash_ = sha256(bytes);
  } else if (RAND_bytes(none_hash_.data(), int(none_hash_.size())) != 1) {
    throw std::runtime_error("OpenSSL RAND_bytes failed to seed the prefix-cache hash");
  }
}

BlockHash BlockHasher::hash_block(const BlockHash& parent, std::span<const int32_t> tokens, const ExtraKeys& extra) const {
  return sha256(algo_ == HashAlgo::Sha256Cbor ? cbor_block(parent, tokens, extra) : binary_block(parent, tokens, extra));
}

void BlockHasher::extend(std::span<const int32_t> tokens, int32_t block_size, const ExtraKeys& first_block_extra,
                         std::vector<BlockHash>& hashes) const {
  static const ExtraKeys kNone;
  const size_t B = size_t(block_size);
  for (size_t i = hashes.size(); (i + 1) * B <= tokens.size(); ++i) {
    const BlockHash& parent = i == 0 ? none_hash_ : hashes[i - 1];
    hashes.push_back(hash_block(parent, tokens.subspan(i * B, B), i == 0 ? first_block_extra : kNone));
  }
}

std::string hash_hex(const BlockHash& h) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : h) {
    s.push_back(digits[b >> 4]);
    s.push_back(digits[b & 15]);
  }
  return s;
}

}  // namespace striker
