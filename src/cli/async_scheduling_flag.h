// --async-scheduling's default, as vLLM (on by default since its 0.14) applies it to striker's
// backends: on where the backend samples on the device and runs steps asynchronously
// (--device cuda), off on the CPU backend (its forward pass is the step: a worker thread buys
// nothing, docs/performance.md, twenty-sixth session) and with n-gram speculation (whose guesses
// need each step's tokens on the host first; vLLM too runs n-gram without it). An explicit
// --async-scheduling or --no-async-scheduling wins.
#pragma once
#include <optional>
#include <string>

namespace striker::cli {

struct AsyncSchedulingChoice {
  bool on = false;
  std::string why;  // for the startup log: "--async-scheduling", "default on --device cuda", ...
};

// `given`: the flag's value when the command line names it, else nullopt.
AsyncSchedulingChoice resolve_async_scheduling(std::optional<bool> given, bool device_sampling, bool speculative);

}  // namespace striker::cli
