#include "cli/async_scheduling_flag.h"

namespace striker::cli {

AsyncSchedulingChoice resolve_async_scheduling(std::optional<bool> given, bool device_sampling, bool speculative) {
  if (given) return {*given, *given ? "--async-scheduling" : "--no-async-scheduling"};
  if (!device_sampling) return {false, "off by default on the CPU backend"};
  if (speculative) return {false, "off by default with --speculative-config"};
  return {true, "on by default with --device cuda; --no-async-scheduling turns it off"};
}

}  // namespace striker::cli
