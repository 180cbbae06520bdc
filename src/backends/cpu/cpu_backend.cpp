// STUB until the cpu part lands: replaced by the real implementation.
#include "backends/cpu/cpu_backend.h"

#include "core/error.h"

namespace striker {

std::unique_ptr<Backend> make_cpu_backend(const LoadedModel&, int) {
  throw Error("the CPU backend is not available yet");
}

}  // namespace striker
