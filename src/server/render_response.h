// The body of vLLM's render endpoints: the `GenerateRequest` that vLLM's token-in/token-out
// generate endpoint takes (vllm/entrypoints/serve/disagg/protocol.py), built from a request that
// was validated but not run. Pure data shaping, no I/O.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "server/sampling_request.h"

namespace striker::server {

// A SamplingParams in vLLM's field names (its SamplingParams as pydantic dumps it, minus the
// fields striker has no counterpart for).
nlohmann::json sampling_params_json(const SamplingParams& params);

// {request_id, token_ids, features: null, sampling_params, model, stream, stream_options,
//  cache_salt, priority, kv_transfer_params: null}. `body` is the request as sent: its `model` is
// echoed (null when absent).
nlohmann::json generate_request_json(const std::string& request_id, const std::vector<int32_t>& token_ids,
                                     const SamplingRequest& sampling, const SamplingParams& params,
                                     const nlohmann::json& body);

}  // namespace striker::server
