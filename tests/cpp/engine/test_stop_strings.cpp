#include <gtest/gtest.h>

#include "engine/stop_strings.h"

using namespace striker;

TEST(StopStrings, MatchAcrossPiecesIsRemovedAndNothingLeaks) {
  StopStringFilter f({"llo!"});
  EXPECT_EQ(f.feed("He", true).text, "He");
  auto r = f.feed("l", true);
  EXPECT_EQ(r.text, "");  // could be the start of "llo!"
  r = f.feed("lo", true);
  EXPECT_EQ(r.text, "");
  EXPECT_FALSE(r.matched);
  r = f.feed("!", true);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.matched, "llo!");
  EXPECT_EQ(f.feed("more", true).text, "");  // finished
}

TEST(StopStrings, HeldTextIsReleasedWhenItCannotMatch) {
  StopStringFilter f({"abc"});
  EXPECT_EQ(f.feed("xa", true).text, "x");
  EXPECT_EQ(f.feed("bd", true).text, "abd");
  EXPECT_EQ(f.feed("ab", true).text, "");
  auto end = f.finish("", true);
  EXPECT_EQ(end.text, "ab");
  EXPECT_FALSE(end.matched);
}

TEST(StopStrings, EarliestMatchWinsAndTextBeforeItIsKept) {
  StopStringFilter f({"cd", "bc"});
  auto r = f.feed("abcd", true);
  EXPECT_EQ(r.text, "a");
  EXPECT_EQ(r.matched, "bc");
}

TEST(StopStrings, NotArmedPassesThrough) {
  StopStringFilter f({"abc"});
  auto r = f.feed("xabc", false);
  EXPECT_EQ(r.text, "xabc");
  EXPECT_FALSE(r.matched);
  r = f.feed("ab", true);
  EXPECT_EQ(r.text, "");
  r = f.feed("c", true);
  EXPECT_EQ(r.matched, "abc");
}

TEST(StopStrings, FinishStillFindsAStopInTheTail) {
  StopStringFilter f({"END"});
  EXPECT_EQ(f.feed("xy", true).text, "xy");
  auto r = f.finish("zENDq", true);
  EXPECT_EQ(r.text, "z");
  EXPECT_EQ(r.matched, "END");
}

TEST(StopStrings, HoldBackNeverSplitsUtf8) {
  StopStringFilter f({"\xC3\xA9!"});  // "é!"
  EXPECT_EQ(f.feed("caf\xC3\xA9", true).text, "caf");
  EXPECT_EQ(f.feed("?", true).text, "\xC3\xA9?");
}

TEST(StopStrings, NoStopStringsIsPassThrough) {
  StopStringFilter f({});
  EXPECT_EQ(f.feed("abc", true).text, "abc");
  EXPECT_EQ(f.finish("d", true).text, "d");
}
