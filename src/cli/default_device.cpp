#include "cli/default_device.h"

#ifdef STRIKER_HAVE_CUDA
#include "backends/cuda/common/device_info.h"
#endif

namespace striker::cli {

std::string default_device() {
#ifdef STRIKER_HAVE_CUDA
  if (cuda::device_count() > 0) return "cuda";
#endif
  return "cpu";
}

}  // namespace striker::cli
