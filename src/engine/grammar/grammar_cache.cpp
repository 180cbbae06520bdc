#include "engine/grammar/grammar_cache.h"

namespace striker::grammar {

GrammarCache::Result GrammarCache::get(const StructuredOutputSpec& spec) {
  const std::string key = spec.cache_key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return {it->second->second, true};
    }
  }
  auto compiled = compile_structured_output(spec, vocab_, limits_);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) return {it->second->second, true};  // a racing twin
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return {compiled, false};
}

}  // namespace striker::grammar
