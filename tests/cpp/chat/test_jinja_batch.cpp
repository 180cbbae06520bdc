// Batch renderer for the Python differential tests (tests/python/test_chat_template_*.py):
// with STRIKER_JINJA_BATCH_IN=cases.json ([{"template": ..., "vars": {...}}, ...]) it writes
// STRIKER_JINJA_BATCH_OUT=[{"ok": true, "out": ...} | {"ok": false, "error": ...}, ...].
// Without the variables the test is reported as skipped (it checks nothing by itself).
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "chat/jinja/template.h"
#include "core/error.h"

TEST(JinjaBatch, RenderCasesFromEnv) {
  const char* in_path = std::getenv("STRIKER_JINJA_BATCH_IN");
  const char* out_path = std::getenv("STRIKER_JINJA_BATCH_OUT");
  if (!in_path || !out_path) GTEST_SKIP() << "driven by the Python differential tests";
  std::ifstream in(in_path);
  ASSERT_TRUE(in) << in_path;
  std::stringstream ss;
  ss << in.rdbuf();
  auto cases = nlohmann::ordered_json::parse(ss.str());
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& c : cases) {
    nlohmann::ordered_json r;
    try {
      auto t = striker::jinja::Template::parse(c["template"].get<std::string>(), "case");
      r["ok"] = true;
      r["out"] = t.render_json(c["vars"]);
    } catch (const striker::Error& e) {
      r["ok"] = false;
      r["error"] = e.what();
    }
    results.push_back(std::move(r));
  }
  std::ofstream out(out_path);
  out << results.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}
