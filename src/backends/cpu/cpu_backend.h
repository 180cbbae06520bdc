// The CPU reference backend: FLINT.md §4 with exactly its rounding points.
// CONTRACT header.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace striker {

// `model` must outlive the backend (weights are read in place). threads = 0: all cores.
std::unique_ptr<Backend> make_cpu_backend(const LoadedModel& model, int threads = 0);

}  // namespace striker
