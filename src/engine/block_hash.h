// Prefix-cache block hashes (vLLM's hash_block_tokens): block i of a token sequence is named by
// H(hash of block i-1, the block's token ids, extra keys), block 0 chained to a per-process
// seed hash (vLLM's NONE_HASH). Equal hashes mean equal KV, so a block computed for one request
// can serve another. SHA-256 from OpenSSL's libcrypto; the CBOR flavour serializes exactly as
// vLLM's sha256_cbor does (canonical CBOR of [parent, [ids...], extra or null]), so a KV-event
// consumer that knows the seed can recompute the hashes.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace striker {

using BlockHash = std::array<uint8_t, 32>;

// --prefix-caching-hash-algo. Sha256 serializes with striker's own fixed binary layout (vLLM's
// sha256 pickles Python objects, which nothing outside Python reproduces); Sha256Cbor is vLLM's.
enum class HashAlgo { Sha256, Sha256Cbor };
// Throws striker::Error naming the valid values.
HashAlgo parse_hash_algo(const std::string& name);
std::string hash_algo_name(HashAlgo algo);

// What besides the tokens changes a block's KV or must keep it apart (vLLM: LoRA, multimodal,
// cache_salt). Only block 0 carries them; the chain carries them on.
using ExtraKeys = std::vector<std::string>;

class BlockHasher {
 public:
  // seed: the chain's root is H(seed) (vLLM: PYTHONHASHSEED); none: 32 random bytes per process.
  BlockHasher(HashAlgo algo, const std::optional<std::string>& seed);
  HashAlgo algo() const { return algo_; }
  const BlockHash& none_hash() const { return none_hash_; }
  BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens, const ExtraKeys& extra) const;
  // Hashes of the full blocks of `tokens` past the `hashes.size()` already known.
  void extend(std::span<const int32_t> tokens, int32_t block_size, const ExtraKeys& first_block_extra,
              std::vector<BlockHash>& hashes) const;

 private:
  HashAlgo algo_;
  BlockHash none_hash_;
};

std::string hash_hex(const BlockHash& h);

}  // namespace striker
