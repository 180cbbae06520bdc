// --speculative-config as vLLM reads it: the n-gram method with vLLM's defaults, everything else
// refused with a message naming what is wrong.
#include <gtest/gtest.h>

#include "cli/speculative_flag.h"
#include "core/error.h"

using namespace striker;
using striker::cli::parse_speculative_config;

namespace {

void expect_refused(const std::string& json, const std::string& needle) {
  try {
    parse_speculative_config(json);
    ADD_FAILURE() << "accepted " << json;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << json << " -> " << e.what();
  }
}

TEST(SpeculativeFlag, NgramWithVllmDefaults) {
  SpeculativeConfig c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3})");
  EXPECT_EQ(c.num_speculative_tokens, 3);
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  EXPECT_EQ(c.disable_by_batch_size, 0);
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4})");
  EXPECT_EQ(c.prompt_lookup_min, 4);
  EXPECT_EQ(c.prompt_lookup_max, 4);
  c = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_min": 2})");
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 2);
  c = parse_speculative_config(
      R"({"model": "[ngram]", "num_speculative_tokens": 2, "prompt_lookup_min": 1, "prompt_lookup_max": 3, "disable_by_batch_size": 4})");
  EXPECT_EQ(c.num_speculative_tokens, 2);
  EXPECT_EQ(c.prompt_lookup_min, 1);
  EXPECT_EQ(c.prompt_lookup_max, 3);
  EXPECT_EQ(c.disable_by_batch_size, 4);
}

TEST(SpeculativeFlag, RefusesWhatItCannotHonour) {
  expect_refused("{", "not valid JSON");
  expect_refused("[1]", "must be a JSON object");
  expect_refused(R"({"num_speculative_tokens": 3})", "needs \"method\": \"ngram\"");
  expect_refused(R"({"method": "eagle3", "model": "org/eagle", "num_speculative_tokens": 3})", "draft model");
  expect_refused(R"({"method": "mtp", "num_speculative_tokens": 1})", "method 'mtp' is not available");
  expect_refused(R"({"method": "suffix", "num_speculative_tokens": 1})", "method 'suffix' is not available");
  expect_refused(R"({"method": "ngram"})", "num_speculative_tokens is required");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens must be > 0");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": "3"})", "num_speculative_tokens must be an integer");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 4, "prompt_lookup_max": 2})",
                 "prompt_lookup_min=4 must be <= prompt_lookup_max=2");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 0})", "prompt_lookup_min must be > 0");
  expect_refused(R"({"method": "ngram", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1})",
                 "'draft_tensor_parallel_size' is not taken");
  expect_refused(R"({"method": 3, "num_speculative_tokens": 3})", "method must be a string");
}

}  // namespace
