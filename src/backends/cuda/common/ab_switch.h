// TEMPORARY, this session's A/B measurement only (issue 11; deleted with the loser once measured):
// STRIKER_AB_OFF=name[,name] turns a new decode-path piece off so one binary times the step both ways.
#pragma once
#include <cstdlib>
#include <cstring>

namespace striker::cuda {
inline bool ab_off(const char* name) {
  const char* e = std::getenv("STRIKER_AB_OFF");
  return e != nullptr && std::strstr(e, name) != nullptr;
}
}  // namespace striker::cuda
