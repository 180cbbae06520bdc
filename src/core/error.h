// One exception type for every user-facing failure (bad file, bad config, bad request).
// The message is a single line that names the file / tensor / field at fault.
#pragma once
#include <stdexcept>
#include <string>

namespace striker {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace striker
