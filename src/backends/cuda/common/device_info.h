// What GPU (if any) this process can use; lets the CLI pick --device cuda by default.
#pragma once
#include <cstddef>
#include <string>

namespace striker::cuda {

// Number of CUDA devices visible (0 when no driver / no GPU).
int device_count();
// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" for device 0, or a reason there is none.
std::string device_summary();
// Free and total bytes of device 0 right now; false when there is no device.
bool device_memory(size_t& free_bytes, size_t& total_bytes);

}  // namespace striker::cuda
