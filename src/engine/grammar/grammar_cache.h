// Compiled structured-output grammars shared between requests that ask for the same thing
// (agents resend one schema all day): the automaton's state and mask caches stay warm, so a
// repeated schema costs no compile and almost no mask time. Least recently used first out.
#pragma once
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/grammar/structured_output.h"

namespace striker::grammar {

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenVocabulary> vocab, size_t capacity, CompileLimits limits = {})
      : vocab_(std::move(vocab)), capacity_(capacity), limits_(limits) {}

  struct Result {
    std::shared_ptr<const CompiledGrammar> grammar;
    bool hit = false;
  };
  // Compiles on a miss (outside the lock); throws GrammarError as compile_structured_output.
  Result get(const StructuredOutputSpec& spec);
  const TokenVocabulary& vocab() const { return *vocab_; }

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  size_t capacity_;
  CompileLimits limits_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru_;  // front = newest
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace striker::grammar
