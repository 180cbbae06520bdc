#include <gtest/gtest.h>

#include "jinja_test_util.h"

using striker::jinja::testing::render;

TEST(JinjaBasics, Smoke) {
  EXPECT_EQ(render("Hello {{ name }}!", R"({"name": "W"})"), "Hello W!");
}
