// --async-scheduling's default (async_scheduling_flag.h): on for the CUDA backend unless n-gram
// speculation runs, off on the CPU backend, and an explicit flag always wins.
#include <gtest/gtest.h>

#include "cli/async_scheduling_flag.h"

using striker::cli::resolve_async_scheduling;

TEST(AsyncSchedulingFlag, OnByDefaultOnCudaOnly) {
  EXPECT_TRUE(resolve_async_scheduling(std::nullopt, /*device_sampling=*/true, /*speculative=*/false).on);
  EXPECT_FALSE(resolve_async_scheduling(std::nullopt, false, false).on);
  EXPECT_FALSE(resolve_async_scheduling(std::nullopt, true, /*speculative=*/true).on);
  EXPECT_FALSE(resolve_async_scheduling(std::nullopt, false, true).on);
}

TEST(AsyncSchedulingFlag, ExplicitFlagWins) {
  for (bool device : {false, true})
    for (bool spec : {false, true}) {
      EXPECT_TRUE(resolve_async_scheduling(true, device, spec).on) << device << spec;
      EXPECT_FALSE(resolve_async_scheduling(false, device, spec).on) << device << spec;
    }
  EXPECT_EQ(resolve_async_scheduling(false, true, false).why, "--no-async-scheduling");
}

TEST(AsyncSchedulingFlag, SaysWhyItIsOff) {
  EXPECT_NE(resolve_async_scheduling(std::nullopt, false, false).why.find("CPU"), std::string::npos);
  EXPECT_NE(resolve_async_scheduling(std::nullopt, true, true).why.find("--speculative-config"), std::string::npos);
}
