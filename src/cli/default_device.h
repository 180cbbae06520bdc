// The device a command runs on when --device is not given: "cuda" where a GPU is visible, else "cpu".
#pragma once
#include <string>

namespace striker::cli {

std::string default_device();

}  // namespace striker::cli
