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

// include_stop_str_in_output: nothing is held back, the output ends right after the stop string.
TEST(StopStringsIncluded, MatchAcrossPiecesKeepsStopAndDropsTheRest) {
  StopStringFilter f({"llo!"}, true);
  EXPECT_EQ(f.feed("He", true).text, "He");
  EXPECT_EQ(f.feed("l", true).text, "l");  // not held back: could be the stop string, sent anyway
  EXPECT_EQ(f.feed("lo", true).text, "lo");
  auto r = f.feed("!xyz", true);
  EXPECT_EQ(r.text, "!");  // the stop string's last byte, not what follows it
  EXPECT_EQ(r.matched, "llo!");
  EXPECT_EQ(f.feed("more", true).text, "");  // finished
}

TEST(StopStringsIncluded, MatchInsideOnePieceAndEarliestWins) {
  StopStringFilter f({"cd", "bc"}, true);
  auto r = f.feed("abcdef", true);
  EXPECT_EQ(r.text, "abc");
  EXPECT_EQ(r.matched, "bc");
}

TEST(StopStringsIncluded, SameInputExcludedVsIncluded) {
  for (bool include : {false, true}) {
    StopStringFilter f({"END"}, include);
    std::string out;
    std::optional<std::string> matched;
    for (const char* piece : {"ab", "cE", "N", "Dtail"}) {
      auto r = f.feed(piece, true);
      out += r.text;
      if (r.matched) matched = r.matched;
    }
    out += f.finish("", true).text;
    EXPECT_EQ(out, include ? "abcEND" : "abc") << "include=" << include;
    EXPECT_EQ(matched, "END");
  }
}

TEST(StopStringsIncluded, LookBackWindowSpansTheMinTokensBoundaryAndTheEnd) {
  StopStringFilter f({"xyz"}, true);
  EXPECT_EQ(f.feed("ax", false).text, "ax");  // not armed yet: passes through, still remembered
  auto r = f.feed("yzb", true);
  EXPECT_EQ(r.text, "yz");
  EXPECT_EQ(r.matched, "xyz");
  StopStringFilter g({"xyz"}, true);
  EXPECT_EQ(g.feed("axy", true).text, "axy");
  auto end = g.finish("q", true);  // no match at the end: the tail is released as is
  EXPECT_EQ(end.text, "q");
  EXPECT_FALSE(end.matched);
}
