// The fast mask (stack tops walked at compile time, counted repetitions sharing their walks,
// tokens that run past a top finished against the real state) against the direct one (one walk
// of the whole trie from the real state, no caches), on the real Flint vocabulary, at every
// state of seeded random outputs: bit for bit. Plus the bounds on that precompute.
#include <gtest/gtest.h>

#include <random>

#include "engine/grammar/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace striker::grammar {
namespace {

using nlohmann::json;

const std::shared_ptr<Tokenizer>& flint() {
  static const std::shared_ptr<Tokenizer> tok =
      Tokenizer::from_dir(std::string(STRIKER_SHARED_DIR) + "/fixtures/flint-tokenizer");
  return tok;
}

std::shared_ptr<const TokenVocabulary> flint_vocab() {
  static const auto vocab = std::make_shared<const TokenVocabulary>(*flint(), 151552);
  return vocab;
}

StructuredOutputSpec schema_spec(const json& s, bool whitespace) {
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::JsonSchema;
  spec.schema = s;
  spec.json_whitespace = whitespace;
  return spec;
}

size_t count(const std::vector<uint32_t>& m) {
  size_t n = 0;
  for (uint32_t w : m) n += size_t(__builtin_popcount(w));
  return n;
}

// Draws an output from the masks (uniformly, or among tokens of at most 2 bytes so the walk
// reaches deep into structure and bounded repetitions) and compares the two masks at every
// state. Returns the number of states compared.
size_t compare_along_random_outputs(const StructuredOutputSpec& spec, int outputs, size_t max_tokens,
                                    const CompileLimits& limits = {}) {
  auto vocab = flint_vocab();
  auto g = compile_structured_output(spec, vocab, limits);
  GrammarAutomaton& a = *g->automaton;
  std::vector<uint32_t> fast(vocab->words()), direct(vocab->words());
  size_t compared = 0;
  for (int o = 0; o < outputs; ++o) {
    std::mt19937 rng(uint32_t(17 + o));
    int32_t state = a.initial_state();
    for (size_t step = 0; step < max_tokens && !a.complete(state); ++step) {
      a.fill_mask(state, fast);
      a.fill_mask_exact(state, direct);
      ++compared;
      if (fast != direct) {
        size_t shown = 0;
        for (int32_t id = 0; id < vocab->vocab_size() && shown < 5; ++id) {
          const bool f = (fast[size_t(id) >> 5] >> (id & 31)) & 1, d = (direct[size_t(id) >> 5] >> (id & 31)) & 1;
          if (f != d) {
            ADD_FAILURE() << "output " << o << " step " << step << ": token " << id << " '" << vocab->bytes(id)
                          << "' fast " << f << " direct " << d;
            ++shown;
          }
        }
        return compared;
      }
      std::vector<int32_t> pool;
      const bool short_only = rng() % 2 == 0;
      for (size_t w = 0; w < fast.size(); ++w)
        for (uint32_t bits = fast[w]; bits; bits &= bits - 1) {
          const int32_t id = int32_t(w * 32 + size_t(__builtin_ctz(bits)));
          if (!short_only || vocab->bytes(id).size() <= 2) pool.push_back(id);
        }
      if (pool.empty()) break;  // only the end (stop tokens) is left
      state = a.advance(state, pool[rng() % pool.size()]);
      EXPECT_NE(state, GrammarAutomaton::kDead);
      if (state == GrammarAutomaton::kDead) return compared;
    }
  }
  return compared;
}

TEST(GrammarMaskPaths, PrecomputedMasksEqualTheDirectWalk) {
  // Bounded strings (unicode, escapes), minLength, formats, patterns with counts, arrays with
  // min/maxItems of objects, anyOf, enums, numbers: the counted copies and their references.
  const json person = {{"type", "object"},
                       {"properties",
                        {{"name", {{"type", "string"}, {"minLength", 5}, {"maxLength", 40}}},
                         {"email", {{"type", "string"}, {"format", "email"}}},
                         {"id", {{"type", "string"}, {"format", "uuid"}}},
                         {"code", {{"type", "string"}, {"pattern", "^[A-Z]{2,3}-[0-9]{4,6}$"}}},
                         {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 150}}}}},
                       {"required", {"name", "email", "id", "code", "age"}}};
  const json order = {
      {"type", "object"},
      {"properties",
       {{"items", {{"type", "array"}, {"minItems", 2}, {"maxItems", 6},
                   {"items", {{"type", "object"},
                              {"properties", {{"sku", {{"type", "string"}, {"maxLength", 8}}},
                                              {"tags", {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 3}}}, {"maxItems", 4}}},
                                              {"price", {{"type", "number"}, {"minimum", 0}, {"maximum", 1000}}}}},
                              {"required", {"sku", "tags", "price"}}}}}},
        {"note", {{"anyOf", {{{"type", "string"}, {"maxLength", 200}}, {{"type", "null"}}}}}},
        {"status", {{"enum", {"pending", "shipped", "naïve", "日本"}}}}}},
      {"required", {"items", "note", "status"}}};
  size_t states = 0;
  states += compare_along_random_outputs(schema_spec(person, false), 3, 60);
  states += compare_along_random_outputs(schema_spec(person, true), 1, 60);
  states += compare_along_random_outputs(schema_spec(order, false), 3, 80);
  // Recursion deeper than the precompute reaches (tops met for the first time at run time).
  StructuredOutputSpec any;
  any.kind = StructuredOutputSpec::Kind::JsonObject;
  states += compare_along_random_outputs(any, 2, 60);
  StructuredOutputSpec re;
  re.kind = StructuredOutputSpec::Kind::Regex;
  re.text = "(?:[a-z]{1,12}\\.){2,5}(com|org)( [0-9]{3,9})*";
  states += compare_along_random_outputs(re, 2, 30);
  re.text = "(?:-?[a-c]?){3,60}!";  // copies of an element that may match nothing do not agree
  states += compare_along_random_outputs(re, 2, 30);
  StructuredOutputSpec gbnf;
  gbnf.kind = StructuredOutputSpec::Kind::Grammar;
  gbnf.text = "root ::= item (\", \" item){0,7}\nitem ::= [a-z]{2,20} | \"<\" [0-9]{1,30} \">\"\n";
  states += compare_along_random_outputs(gbnf, 2, 30);
  EXPECT_GT(states, 300u);
}

TEST(GrammarMaskPaths, CountedCopiesShareOneWalk) {
  auto stats_for = [](int max_length) {
    return compile_structured_output(
               schema_spec({{"type", "object"}, {"properties", {{"s", {{"type", "string"}, {"maxLength", max_length}}}}}}, false),
               flint_vocab())
        ->automaton->stats();
  };
  const auto short_string = stats_for(300), long_string = stats_for(3000);
  // 300 copies of a string character: one whole-trie walk per distinct character state, the
  // copies walk only the subtrees deeper than they agree on (shared walks).
  EXPECT_GT(short_string.shared_walks, 10 * short_string.top_walks);
  // Ten times the copies cost nothing more: copies past the longest token (128 bytes) are the
  // same top as their reference and are not walked at all.
  EXPECT_EQ(long_string.top_walks, short_string.top_walks);
  EXPECT_EQ(long_string.shared_walks, short_string.shared_walks);
  EXPECT_LT(long_string.mask_cache_bytes, short_string.mask_cache_bytes * 11 / 10);
}

json many_bounded_strings() {
  json props = json::object();
  for (int i = 0; i < 12; ++i) props["p" + std::to_string(i)] = {{"type", "string"}, {"minLength", 40 + i}, {"maxLength", 90 + i}};
  return {{"type", "object"}, {"properties", props}};
}

TEST(GrammarMaskPaths, PrecomputeStopsAtItsTimeBudgetAndMasksStayExact) {
  CompileLimits quick;
  quick.automaton.precompute_ms = 2;
  auto g = compile_structured_output(schema_spec(many_bounded_strings(), false), flint_vocab(), quick);
  EXPECT_FALSE(g->automaton->stats().precompute_complete);
  const json one = {{"type", "object"}, {"properties", {{"p", {{"type", "string"}, {"maxLength", 20}}}}}};
  EXPECT_TRUE(compile_structured_output(schema_spec(one, false), flint_vocab())->automaton->stats().precompute_complete);
  // The tops it did not reach are walked on first use, to the same masks.
  EXPECT_GT(compare_along_random_outputs(schema_spec(many_bounded_strings(), false), 1, 40, quick), 20u);
}

TEST(GrammarMaskPaths, TooManyMasksOrTooSlowACompileIsRefused) {
  CompileLimits small;
  small.automaton.max_mask_cache_bytes = size_t(1) << 20;
  try {
    compile_structured_output(schema_spec(many_bounded_strings(), true), flint_vocab(), small);
    FAIL() << "fitted in 1 MiB of masks";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.keyword(), "size");
    EXPECT_NE(std::string(e.what()).find("MiB of token masks"), std::string::npos) << e.what();
  }
  CompileLimits tight;
  tight.grammar.max_build_ms = 20;  // thread CPU time of the whole compile
  try {
    compile_structured_output(schema_spec(many_bounded_strings(), true), flint_vocab(), tight);
    FAIL() << "compiled within 20 ms";
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.keyword(), "size");
    EXPECT_NE(std::string(e.what()).find("ms of CPU time"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace striker::grammar
