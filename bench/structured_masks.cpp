// Structured-output mask benchmark on the real 151,552-token Flint vocabulary, one core:
// compile time per schema (grammar, automaton, the precomputed stack-top walks, the first
// mask), then the per-token cost of (mask for the next token + advance by the chosen token)
// over a whole output. The first pass is a schema's first output after its compile (every
// parser state new); the second replays it (every mask cached: a schema seen before).
//  * Realistic cases replay a valid instance, tokenized as a model would write it.
//  * With --schemas FILE (tests/python/structured_schemas.py 200 > FILE: the 200 random schemas
//    of test_server_structured.py, compact JSON for 3 of 4 as there), each output is generated
//    by drawing uniformly from the mask (what the random-weight test model does), seeded.
// Times are the thread's CPU time (one core; the build machine is shared and noisy).
//
//   bench_structured_masks [--schemas FILE] [--each] [--exact] [TOKENIZER_DIR]
//   --each prints every schema's line.
//   --exact also times the direct mask (one whole-trie walk per state, no caches) for contrast.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "engine/grammar/structured_output.h"
#include "tokenizer/tokenizer.h"

using namespace striker;
using namespace striker::grammar;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Per-token times are this thread's CPU time: "one core", and immune to a busy machine.
double thread_cpu_us() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

struct Case {
  std::string name;
  StructuredOutputSpec spec;
  std::string output;  // a valid output to replay
};

StructuredOutputSpec schema_spec(const json& s) {
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::JsonSchema;
  spec.schema = s;
  return spec;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"person (flat object)",
                 schema_spec({{"type", "object"},
                              {"properties",
                               {{"name", {{"type", "string"}, {"maxLength", 40}}},
                                {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 150}}},
                                {"email", {{"type", "string"}, {"format", "email"}}},
                                {"member", {{"type", "boolean"}}}}},
                              {"required", {"name", "age", "email", "member"}}}),
                 R"({"age": 42, "email": "ada.lovelace@example.org", "member": true, "name": "Ada Lovelace"})"});
  out.push_back({"order (nested, arrays, enums)",
                 schema_spec({{"type", "object"},
                              {"properties",
                               {{"id", {{"type", "string"}, {"pattern", "^ORD-[0-9]{6}$"}}},
                                {"status", {{"enum", {"pending", "shipped", "delivered", "cancelled"}}}},
                                {"items", {{"type", "array"}, {"minItems", 1}, {"maxItems", 20},
                                           {"items", {{"type", "object"},
                                                      {"properties", {{"sku", {{"type", "string"}}},
                                                                      {"qty", {{"type", "integer"}, {"minimum", 1}}},
                                                                      {"price", {{"type", "number"}, {"minimum", 0}}}}},
                                                      {"required", {"sku", "qty", "price"}}}}}},
                                {"note", {{"anyOf", {{{"type", "string"}}, {{"type", "null"}}}}}}}},
                              {"required", {"id", "status", "items", "note"}}}),
                 "{\n  \"id\": \"ORD-123456\",\n  \"items\": [\n    {\"price\": 19.99, \"qty\": 2, \"sku\": \"A-1\"},\n"
                 "    {\"price\": 5, \"qty\": 10, \"sku\": \"B-22\"}\n  ],\n  \"note\": null,\n  \"status\": \"shipped\"\n}"});
  out.push_back({"free text field (long string)",
                 schema_spec({{"type", "object"},
                              {"properties", {{"summary", {{"type", "string"}}}, {"score", {{"type", "number"}}}}},
                              {"required", {"summary", "score"}}}),
                 R"({"score": 0.87, "summary": "The quarterly report shows steady growth across all regions, with )"
                 R"(particularly strong results in Europe and Asia. Costs were kept under control, and the outlook )"
                 R"(for the next year remains positive despite \"headwinds\" in logistics."})"});
  StructuredOutputSpec any;
  any.kind = StructuredOutputSpec::Kind::JsonObject;
  out.push_back({"json_object", any, R"({"city": "Paris", "days": [1, 2, 3], "nested": {"ok": true, "v": -1.5e3}})"});
  StructuredOutputSpec re;
  re.kind = StructuredOutputSpec::Kind::Regex;
  re.text = "[A-Z][a-z]+ [0-9]{4}-[0-9]{2}-[0-9]{2}";
  out.push_back({"regex", re, "Meeting 2026-12-01"});
  return out;
}

struct Timing {
  std::vector<double> us;
  void add(const Timing& o) { us.insert(us.end(), o.us.begin(), o.us.end()); }
  double mean() const {
    double s = 0;
    for (double x : us) s += x;
    return us.empty() ? 0 : s / double(us.size());
  }
  double pct(double p) const {
    if (us.empty()) return 0;
    std::vector<double> v = us;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
  }
  double max() const { return us.empty() ? 0 : *std::max_element(us.begin(), us.end()); }
  std::string summary() const {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%7.1f %7.1f %8.1f %8.1f", mean(), pct(0.5), pct(0.99), max());
    return buf;
  }
};

bool has(const std::vector<uint32_t>& mask, int32_t id) { return (mask[size_t(id) >> 5] >> (id & 31)) & 1; }

// Replays `ids` through a matcher: the mask for each token, then the token.
Timing replay(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& ids,
              const std::vector<int32_t>& stops, size_t words) {
  Timing t;
  GrammarMatcher m(g, -1);
  std::vector<uint32_t> mask(words);
  for (int32_t id : ids) {
    const double t0 = thread_cpu_us();
    m.fill_mask(stops, mask);
    m.accept(id, stops);
    t.us.push_back(thread_cpu_us() - t0);
    if (!has(mask, id)) std::fprintf(stderr, "bench: token %d was not in its mask\n", id);
  }
  return t;
}

// An output drawn uniformly from each mask (the random-weight model), at most `max_tokens`.
Timing generate(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& stops, size_t words,
                uint32_t seed, size_t max_tokens, std::vector<int32_t>& ids) {
  Timing t;
  GrammarMatcher m(g, -1);
  std::vector<uint32_t> mask(words);
  std::mt19937 rng(seed);
  ids.clear();
  while (ids.size() < max_tokens && !m.finished()) {
    const double t0 = thread_cpu_us();
    m.fill_mask(stops, mask);
    const double t1 = thread_cpu_us();
    size_t allowed = 0;
    for (uint32_t w : mask) allowed += size_t(__builtin_popcount(w));
    if (allowed == 0) {
      std::fprintf(stderr, "bench: empty mask\n");
      break;
    }
    size_t pick = std::uniform_int_distribution<size_t>(0, allowed - 1)(rng);
    int32_t id = 0;
    for (size_t w = 0;; ++w) {
      const size_t c = size_t(__builtin_popcount(mask[w]));
      if (pick < c) {
        uint32_t bits = mask[w];
        for (; pick; --pick) bits &= bits - 1;
        id = int32_t(w * 32 + size_t(__builtin_ctz(bits)));
        break;
      }
      pick -= c;
    }
    const double t2 = thread_cpu_us();
    m.accept(id, stops);
    t.us.push_back((t1 - t0) + (thread_cpu_us() - t2));
    ids.push_back(id);
  }
  return t;
}

// The direct mask (whole-trie walk per state, no top caches) along the same tokens.
Timing exact(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& ids, size_t words) {
  Timing t;
  GrammarAutomaton& a = *g->automaton;
  std::vector<uint32_t> mask(words);
  int32_t state = a.initial_state();
  for (int32_t id : ids) {
    if (state == GrammarAutomaton::kDead) break;
    const double t0 = thread_cpu_us();
    a.fill_mask_exact(state, mask);
    t.us.push_back(thread_cpu_us() - t0);
    state = a.advance(state, id);
  }
  return t;
}

struct Compiled {
  std::shared_ptr<const CompiledGrammar> g;
  double cpu_ms = 0;
};

Compiled compile(const StructuredOutputSpec& spec, const std::shared_ptr<const TokenVocabulary>& vocab) {
  const double t0 = thread_cpu_us();
  auto g = compile_structured_output(spec, vocab);
  return {g, (thread_cpu_us() - t0) / 1000.0};
}

void print_stats_line(const char* what, std::vector<double> v) {
  Timing t{std::move(v)};
  std::printf("  %-34s mean %8.1f  p50 %8.1f  max %8.1f\n", what, t.mean(), t.pct(0.5), t.max());
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::string(STRIKER_SHARED_DIR) + "/fixtures/flint-tokenizer", schemas_file;
  bool with_exact = false, each = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--schemas" && i + 1 < argc) schemas_file = argv[++i];
    else if (a == "--exact") with_exact = true;
    else if (a == "--each") each = true;
    else dir = a;
  }
  auto tok = Tokenizer::from_dir(dir);
  const int64_t vocab_size = 151552;
  auto t0 = Clock::now();
  auto vocab = std::make_shared<TokenVocabulary>(*tok, vocab_size);
  std::printf("vocabulary: %lld ids, trie of %zu nodes built in %.1f ms\n\n", (long long)vocab_size,
              vocab->nodes().byte.size(), ms_since(t0));
  const std::vector<int32_t> stops{151329, 151336, 151338};
  const size_t words = vocab->words();
  std::printf("%-30s %8s %6s | %-34s | %-34s\n", "case", "compile", "tokens", "first pass us/token mean p50 p99 max",
              "cached us/token mean p50 p99 max");
  for (const Case& c : cases()) {
    const Compiled cg = compile(c.spec, vocab);
    std::vector<int32_t> ids = tok->encode(c.output);
    ids.push_back(stops[0]);
    const Timing cold = replay(cg.g, ids, stops, words);
    const Timing warm = replay(cg.g, ids, stops, words);
    const auto st = cg.g->automaton->stats();
    std::printf("%-30s %6.1fms %6zu | %s | %s  (%zu tops: %zu walks, %zu shared; %.1f MiB)\n", c.name.c_str(), cg.cpu_ms,
                ids.size(), cold.summary().c_str(), warm.summary().c_str(), st.tops, st.top_walks, st.shared_walks,
                double(st.mask_cache_bytes) / 1048576.0);
    if (with_exact) std::printf("%-30s %8s %6s | %s   (direct whole-trie walk per token)\n", "", "", "", exact(cg.g, ids, words).summary().c_str());
  }
  if (schemas_file.empty()) return 0;
  std::ifstream in(schemas_file);
  const json all = json::parse(in);
  Timing cold_all, warm_all, exact_all;
  std::vector<double> compile_ms, schema_cold_mean, schema_warm_mean, schema_tokens;
  size_t worst = 0;
  double worst_mean = -1;
  for (size_t i = 0; i < all.size(); ++i) {
    StructuredOutputSpec spec = schema_spec(all[i]);
    spec.json_whitespace = i % 4 == 0;  // as test_server_structured.py: 3 of 4 use disable_any_whitespace
    Compiled cg;
    try {
      cg = compile(spec, vocab);
    } catch (const GrammarError& e) {
      std::printf("schema %zu refused: %s\n", i, e.what());
      continue;
    }
    std::vector<int32_t> ids;
    const Timing cold = generate(cg.g, stops, words, uint32_t(1000 + i), 400, ids);
    const Timing warm = replay(cg.g, ids, stops, words);
    if (with_exact) exact_all.add(exact(cg.g, ids, words));
    cold_all.add(cold);
    warm_all.add(warm);
    if (each) {
      const auto st = cg.g->automaton->stats();
      std::printf("schema %3zu: compile %7.1f ms, %3zu tokens | first pass %s | cached %s  (%zu tops: %zu walks, %zu shared; %zu stacks; %.1f MiB)\n",
                  i, cg.cpu_ms, ids.size(), cold.summary().c_str(), warm.summary().c_str(), st.tops, st.top_walks,
                  st.shared_walks, st.precomputed_stacks, double(st.mask_cache_bytes) / 1048576.0);
    }
    compile_ms.push_back(cg.cpu_ms);
    schema_cold_mean.push_back(cold.mean());
    schema_warm_mean.push_back(warm.mean());
    schema_tokens.push_back(double(ids.size()));
    if (cold.mean() > worst_mean) {
      worst_mean = cold.mean();
      worst = i;
    }
  }
  std::printf("\n%zu random schemas (tests/python/structured_schemas.py), outputs drawn from the masks:\n", all.size());
  print_stats_line("compile ms (CPU)", compile_ms);
  print_stats_line("tokens per output", schema_tokens);
  print_stats_line("first pass us/token, per-schema mean", schema_cold_mean);
  print_stats_line("cached us/token, per-schema mean", schema_warm_mean);
  std::printf("  all %zu tokens, us/token          mean    p50      p99      max\n", cold_all.us.size());
  std::printf("    first pass                    %s\n", cold_all.summary().c_str());
  std::printf("    cached                        %s\n", warm_all.summary().c_str());
  if (with_exact) std::printf("    direct walk (no caches)       %s\n", exact_all.summary().c_str());
  std::printf("  slowest first pass: schema %zu (%.1f us/token): %s\n", worst, worst_mean, all[worst].dump().c_str());
  return 0;
}
