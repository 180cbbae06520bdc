// Structured-output mask benchmark on the real 151,552-token Flint vocabulary, one core:
// compile time per schema, then the per-token cost of (mask for the next token + advance by
// the chosen token) along a realistic output (a valid instance, tokenized as a model would
// write it). The first pass meets every parser state for the first time (a new schema); the
// second pass is the steady state of a schema seen before (every mask cached). Times are the
// thread's CPU time (one core).
//
//   bench_structured_masks [TOKENIZER_DIR]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
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
};

// Replays `ids` through a matcher: the mask for each token, then the token.
Timing replay(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<int32_t>& ids,
              const std::vector<int32_t>& stops, size_t words) {
  Timing t;
  GrammarMatcher m(g, -1);
  std::vector<uint32_t> mask(words);
  for (int32_t id : ids) {
    const double t0 = thread_cpu_us();
    m.fill_mask(stops, mask);
    const bool allowed = (mask[size_t(id) >> 5] >> (id & 31)) & 1;
    m.accept(id, stops);
    t.us.push_back(thread_cpu_us() - t0);
    if (!allowed) std::fprintf(stderr, "bench: token %d was not in its mask\n", id);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : std::string(STRIKER_SHARED_DIR) + "/fixtures/flint-tokenizer";
  auto tok = Tokenizer::from_dir(dir);
  const int64_t vocab_size = 151552;
  auto t0 = Clock::now();
  auto vocab = std::make_shared<TokenVocabulary>(*tok, vocab_size);
  std::printf("vocabulary: %lld ids, trie of %zu nodes built in %.1f ms\n\n", (long long)vocab_size,
              vocab->nodes().byte.size(), ms_since(t0));
  const std::vector<int32_t> stops{151329, 151336, 151338};
  std::printf("%-32s %10s %7s | %-28s | %-28s\n", "case", "compile ms", "tokens", "first pass us/token mean p50 p99",
              "cached us/token mean p50 p99");
  for (const Case& c : cases()) {
    t0 = Clock::now();
    auto g = compile_structured_output(c.spec, vocab);
    const double compile_ms = ms_since(t0);
    std::vector<int32_t> ids = tok->encode(c.output);
    ids.push_back(stops[0]);
    const Timing cold = replay(g, ids, stops, vocab->words());
    const Timing warm = replay(g, ids, stops, vocab->words());
    const auto st = g->automaton->stats();
    std::printf("%-32s %10.2f %7zu | %8.1f %8.1f %9.1f | %8.1f %8.1f %9.1f   (%zu states, %zu masks, %.1f MiB)\n",
                c.name.c_str(), compile_ms, ids.size(), cold.mean(), cold.pct(0.5), cold.pct(0.99), warm.mean(),
                warm.pct(0.5), warm.pct(0.99), st.states, st.cached_masks, double(st.mask_cache_bytes) / 1048576.0);
  }
  return 0;
}
