// The request limits the parsing tests check against: a 1000-token vocabulary, 100-token context.
#pragma once

#include "server/sampling_request.h"

namespace striker::server {

inline RequestLimits small_request_limits() {
  RequestLimits l;
  l.vocab_size = 1000;
  l.max_model_len = 100;
  return l;
}

}  // namespace striker::server
