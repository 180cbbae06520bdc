// Compares the C++ emulation of Python semantics with results computed by real Python.
// The cases come from tests/python/test_parsers_oracle.py, which runs this test with
// STRIKER_PARSERS_ORACLE pointing at its case file; run alone, the test is skipped.
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "chat/glm47_args.h"
#include "chat/tool_json.h"
#include "chat/tool_schema.h"

namespace striker {
namespace {

const nlohmann::json& oracle_cases() {
  static const nlohmann::json cases = [] {
    const char* path = std::getenv("STRIKER_PARSERS_ORACLE");
    if (path == nullptr) return nlohmann::json();
    std::ifstream in(path);
    return nlohmann::json::parse(in);
  }();
  return cases;
}

#define REQUIRE_ORACLE()                                                                  \
  if (oracle_cases().is_null()) GTEST_SKIP() << "run through tests/python/test_parsers_oracle.py"

TEST(PythonOracle, Coercion) {
  REQUIRE_ORACLE();
  const auto& cases = oracle_cases().at("coerce");
  for (const auto& c : cases) {
    const auto types = c.at("types").get<std::set<std::string>>();
    const auto value = c.at("value").get<std::string>();
    EXPECT_EQ(coerce_to_schema_types(value, types).json, c.at("expected").get<std::string>())
        << "value " << nlohmann::json(value).dump() << " types " << c.at("types").dump();
  }
  std::printf("checked %zu coerce cases\n", cases.size());
}

TEST(PythonOracle, ArgumentScan) {
  REQUIRE_ORACLE();
  const auto& cases = oracle_cases().at("scan");
  for (const auto& c : cases) {
    nlohmann::json got = nlohmann::json::array();
    for (const auto& arg : glm47_scan_args(c.at("body").get<std::string>(), c.at("partial").get<bool>()))
      got.push_back({arg.key, arg.value});
    EXPECT_EQ(got, c.at("expected")) << "body " << c.at("body").dump() << " partial " << c.at("partial");
  }
  std::printf("checked %zu scan cases\n", cases.size());
}

TEST(PythonOracle, FloatRepr) {
  REQUIRE_ORACLE();
  const auto& cases = oracle_cases().at("float_repr");
  for (const auto& c : cases) {
    const double value = std::strtod(c.at("value").get<std::string>().c_str(), nullptr);
    EXPECT_EQ(python_float_repr(value), c.at("expected").get<std::string>());
  }
  std::printf("checked %zu float_repr cases\n", cases.size());
}

TEST(PythonOracle, JsonString) {
  REQUIRE_ORACLE();
  const auto& cases = oracle_cases().at("json_string");
  for (const auto& c : cases) {
    EXPECT_EQ(python_json_string(c.at("text").get<std::string>()), c.at("expected").get<std::string>())
        << c.at("text").dump();
  }
  std::printf("checked %zu json_string cases\n", cases.size());
}

}  // namespace
}  // namespace striker
