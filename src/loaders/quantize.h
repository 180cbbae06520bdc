// `striker quantize`: a BF16 Flint checkpoint -> an NVFP4 GGUF (FLINT.md §3). Every linear
// weight becomes NVFP4 with per-16 UE4M3 scales and a global scale per tensor (per expert for
// stacked experts); norms, sinks, router and bias are F32; the embedding stays BF16.
#pragma once
#include <string>

#include "model/weights.h"

namespace striker {

struct QuantizeOptions {
  std::string name;  // general.name
};

void quantize_to_gguf(const LoadedModel& source, const std::string& out_path, const QuantizeOptions& options = {});

}  // namespace striker
