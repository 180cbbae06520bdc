// Tokenizer unit tests that need no Python: streaming detokenization over the shared corpus,
// the public API on the fixture tokenizers, thread safety, long inputs and error messages.
// (Id parity with Hugging Face is checked in tests/python/test_tokenizer_*.py.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace fs = std::filesystem;
using striker::Tokenizer;

namespace {

fs::path shared_dir() {
  const char* env = std::getenv("STRIKER_SHARED_DIR");
  return env ? fs::path(env) : fs::path(STRIKER_SHARED_DIR);
}

std::vector<std::string> load_corpus() {
  std::ifstream in(fs::path(STRIKER_SOURCE_DIR) / "tests/python/corpus/tokenizer_corpus.jsonl", std::ios::binary);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line).get<std::string>());
  return out;
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> c = load_corpus();
  return c;
}

const Tokenizer& fixture(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& t = cache[name];
  if (!t) t = Tokenizer::from_dir(shared_dir() / "fixtures" / name);
  return *t;
}

bool valid_utf8(const std::string& s) { return striker::tok::utf8_first_invalid(s) == s.size(); }

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += std::to_string(id) + " ";
  return out;
}

void expect_streaming_matches(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  SCOPED_TRACE("ids: " + ids_text(ids) + (skip ? "(skipping special tokens)" : ""));
  striker::IncrementalDetokenizer detok(tok, skip);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string piece = detok.push(id);
    ASSERT_TRUE(valid_utf8(piece));
    streamed += piece;
  }
  std::string tail;
  ASSERT_NO_THROW(tail = detok.flush());
  ASSERT_TRUE(valid_utf8(tail));
  streamed += tail;
  ASSERT_EQ(streamed, tok.decode(ids, skip));
}

class FixtureTokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTokenizer, StreamingDecodeOfCorpusEqualsFullDecode) {
  const Tokenizer& tok = fixture(GetParam());
  ASSERT_GE(corpus().size(), 2000u);
  size_t tokens = 0;
  for (const auto& text : corpus()) {
    const auto ids = tok.encode(text);
    tokens += ids.size();
    for (bool skip : {false, true}) {
      expect_streaming_matches(tok, ids, skip);
      if (HasFatalFailure()) {
        ADD_FAILURE() << "text: " << text.substr(0, 200);
        return;
      }
    }
    if (!text.empty()) EXPECT_FALSE(tok.decode(ids).empty());
  }
  EXPECT_GT(tokens, 100000u);
}

TEST_P(FixtureTokenizer, StreamingDecodeOfRandomIdsEqualsFullDecode) {
  // Random ids split characters anywhere, so pieces must wait for complete UTF-8.
  const Tokenizer& tok = fixture(GetParam());
  std::mt19937 rng(11);
  std::vector<int32_t> single_byte;  // tokens that stand for one byte (lone lead/continuation bytes)
  for (int32_t id = 0; id < 2000; ++id) {
    const auto piece = tok.id_to_token(id);
    if (piece && piece->size() <= 2 && !tok.decode(std::vector<int32_t>{id}).empty() &&
        tok.decode(std::vector<int32_t>{id}).size() <= 3)
      single_byte.push_back(id);
  }
  ASSERT_GT(single_byte.size(), 100u);
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(tok.vocab_size()) - 1);
  for (int round = 0; round < 3000; ++round) {
    std::vector<int32_t> ids(rng() % 40);
    for (auto& id : ids) id = (rng() % 2) ? any(rng) : single_byte[rng() % single_byte.size()];
    expect_streaming_matches(tok, ids, round % 2 == 0);
    if (HasFatalFailure()) return;
  }
}

TEST_P(FixtureTokenizer, ApiAgreesWithTokenizerJson) {
  const Tokenizer& tok = fixture(GetParam());
  std::ifstream in(shared_dir() / "fixtures" / GetParam() / "tokenizer.json");
  const auto j = nlohmann::json::parse(in);
  int64_t max_id = -1;
  for (const auto& [piece, id] : j["model"]["vocab"].items()) max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  for (const auto& a : j["added_tokens"]) {
    const int32_t id = a["id"].get<int32_t>();
    max_id = std::max<int64_t>(max_id, id);
    EXPECT_EQ(tok.token_to_id(a["content"].get<std::string>()), id);
    EXPECT_EQ(tok.id_to_token(id), a["content"].get<std::string>());
    EXPECT_EQ(tok.is_special(id), a["special"].get<bool>());
    // Added tokens are found inside text, with or without neighbours.
    EXPECT_EQ(tok.encode("x" + a["content"].get<std::string>() + "y").at(1), id);
  }
  EXPECT_EQ(tok.vocab_size(), max_id + 1);
  EXPECT_EQ(tok.token_to_id("Ġthe"), j["model"]["vocab"]["Ġthe"].get<int32_t>());
  EXPECT_FALSE(tok.token_to_id("no such token!").has_value());
  EXPECT_FALSE(tok.id_to_token(static_cast<int32_t>(max_id + 1)).has_value());
  EXPECT_EQ(tok.decode(std::vector<int32_t>{static_cast<int32_t>(max_id + 5), -3}), "");  // unknown ids dropped
}

TEST_P(FixtureTokenizer, EncodeIsThreadSafe) {
  const Tokenizer& tok = fixture(GetParam());
  const auto& texts = corpus();
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok.encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (size_t i = w; i < texts.size(); i += 2)  // overlapping halves: shared cache entries
        if (tok.encode(texts[i]) != expected[i]) ++mismatches[w];
    });
  }
  for (auto& t : threads) t.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST_P(FixtureTokenizer, LongRunsRoundTrip) {
  const Tokenizer& tok = fixture(GetParam());
  for (const std::string& s : {std::string(200000, ' '), std::string(100000, '7'), std::string(50000, 'a'),
                               std::string(30000, '\n') + "x", std::string("\t \n", 3) + std::string(60000, '\t')}) {
    const auto ids = tok.encode(s);
    EXPECT_EQ(tok.decode(ids), s);
  }
}

TEST_P(FixtureTokenizer, FromFileMatchesFromDir) {
  const auto direct = Tokenizer::from_file(shared_dir() / "fixtures" / GetParam() / "tokenizer.json");
  const Tokenizer& tok = fixture(GetParam());
  EXPECT_EQ(direct->vocab_size(), tok.vocab_size());
  for (size_t i = 0; i < corpus().size(); i += 7) EXPECT_EQ(direct->encode(corpus()[i]), tok.encode(corpus()[i]));
}

TEST_P(FixtureTokenizer, InvalidUtf8IsAnError) {
  const Tokenizer& tok = fixture(GetParam());
  EXPECT_THROW(tok.encode(std::string("ok \xC3(")), striker::Error);
  EXPECT_THROW(tok.encode(std::string("\xED\xA0\x80")), striker::Error);  // a surrogate
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTokenizer, ::testing::Values("flint-tokenizer", "tokenizers/qwen3"),
                         [](const auto& info) { return info.param == "flint-tokenizer" ? "flint" : "qwen3"; });

TEST(Utf8Lossy, ReplacesMaximalSubparts) {
  using striker::tok::utf8_lossy;
  EXPECT_EQ(utf8_lossy("abc"), "abc");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");                    // truncated 4-byte: one U+FFFD
  EXPECT_EQ(utf8_lossy("\xE0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");           // E0 needs A0..BF next
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");           // overlong lead byte
  EXPECT_EQ(utf8_lossy("a\xF4\x90\x80\x80z"), "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDz");
  EXPECT_EQ(utf8_lossy("\xE4\xB8\xAD\xE4\xB8"), "\xE4\xB8\xAD\xEF\xBF\xBD");
}

fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("striker_tok_test_" + std::to_string(::getpid()));
  fs::create_directories(dir / name);
  std::ofstream(dir / name / "tokenizer.json") << text;
  return dir / name;
}

std::string error_of(const fs::path& dir) {
  try {
    Tokenizer::from_dir(dir);
  } catch (const striker::Error& e) {
    return e.what();
  }
  return "";
}

TEST(IncrementalDetokenizer, ByteFallbackRunsStayConsistent) {
  // A byte-fallback run decodes as a group: E4 B8 AD E4 is "\uFFFD" x4, not "中\uFFFD".
  const fs::path dir = write_temp("bytes", R"({"decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
      "model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0, "<0xE4>": 1, "<0xB8>": 2, "<0xAD>": 3, "<0xFF>": 4},
                "merges": []}})");
  const auto tok = Tokenizer::from_dir(dir);
  EXPECT_EQ(tok->encode("a中"), (std::vector<int32_t>{0, 1, 2, 3}));
  std::mt19937 rng(5);
  for (int round = 0; round < 5000; ++round) {
    std::vector<int32_t> ids(rng() % 12);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 5);
    expect_streaming_matches(*tok, ids, false);
    if (HasFatalFailure()) return;
  }
}

TEST(IncrementalDetokenizer, MetaspaceAndSpecialTokensStayConsistent) {
  // The Metaspace decoder treats the first token of a decode specially; streaming must still
  // concatenate to the full decode, with and without skipping special tokens.
  const fs::path dir = write_temp("metaspace", R"({
      "added_tokens": [{"id": 8, "content": "<s>", "special": true, "normalized": false}],
      "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": true},
      "decoder": {"type": "Sequence", "decoders": [{"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first"},
                                                  {"type": "ByteFallback"}, {"type": "Fuse"}]},
      "model": {"type": "BPE", "byte_fallback": true, "merges": [["\u2581", "a"]],
                "vocab": {"\u2581": 0, "a": 1, "b": 2, "\u2581a": 3, "<0xE4>": 4, "<0xB8>": 5, "<0xAD>": 6, "<0x20>": 7}}})");
  const auto tok = Tokenizer::from_dir(dir);
  EXPECT_EQ(tok->encode("a a<s>b"), (std::vector<int32_t>{3, 3, 8, 2}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{3, 3, 8, 2}), "a a<s>b");
  std::mt19937 rng(9);
  for (int round = 0; round < 5000; ++round) {
    std::vector<int32_t> ids(rng() % 12);
    for (auto& id : ids) id = static_cast<int32_t>(rng() % 9);
    expect_streaming_matches(*tok, ids, round % 2 == 0);
    if (HasFatalFailure()) return;
  }
}

TEST(TokenizerErrors, NameTheFileAndJsonPath) {
  EXPECT_NE(error_of("/no/such/dir").find("/no/such/dir/tokenizer.json"), std::string::npos);
  const std::string minimal = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}})";
  EXPECT_EQ(error_of(write_temp("ok", minimal)), "");
  EXPECT_EQ(Tokenizer::from_dir(write_temp("ok", minimal))->encode("abba"), (std::vector<int32_t>{2, 1, 0}));

  const auto expect = [](const std::string& name, const std::string& json, const std::string& part) {
    const fs::path dir = write_temp(name, json);
    const std::string err = error_of(dir);
    EXPECT_NE(err.find((dir / "tokenizer.json").string()), std::string::npos) << err;
    EXPECT_NE(err.find(part), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  };
  expect("syntax", "{\"model\": ", "invalid JSON");
  expect("unigram", R"({"model": {"type": "Unigram", "vocab": []}})", "/model/type: unsupported model type 'Unigram'");
  expect("merge", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a c"]}})",
         "/model/merges/0: merge token 'c' is not in the vocab");
  expect("vocab", R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})", "/model/vocab/a: expected an integer");
  expect("norm", R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Precompiled"}]},
                     "model": {"type": "BPE", "vocab": {}, "merges": []}})",
         "/normalizer/normalizers/1/type: unsupported normalizer type 'Precompiled'");
  expect("newline", R"({"model": {"type": "BPE", "vocab": {"a\nb": "x"}, "merges": []}})",
         "/model/vocab/a\\x0Ab: expected an integer");  // file text is escaped to keep one line
  std::string deep = R"({"type": "NFC"})";
  for (int i = 0; i < 100; ++i) deep = R"({"type": "Sequence", "normalizers": [)" + deep + "]}";
  expect("deep", R"({"normalizer": )" + deep + R"(, "model": {"type": "BPE", "vocab": {}, "merges": []}})",
         "nested too deeply");
  expect("added", R"({"added_tokens": [{"id": 0, "content": "<s>"}], "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
         "/added_tokens/0/id");
}

}  // namespace
