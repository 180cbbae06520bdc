// What GPU (if any) this process can use; lets the CLI pick --device cuda by default.
#pragma once
#include <cstddef>
#include <string>

namespace striker::cuda {

// Number of CUDA devices visible (0 when no driver / no GPU).
int device_count();
// "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)" for device 0, or a reason there is none.
std::string device_summary();
// Device 0's peak DRAM bandwidth in bytes/s from its memory clock and bus width (2 transfers per
// clock), the card's own ceiling: the H100's 3.35 TB/s is below the 4.6 TB/s H200 roofline the
// benches quote, so a fraction of the latter understates how close an H100 run is to its card.
// 0 when there is no device or the driver does not report them.
double device_dram_peak_bytes_per_s();
// Free and total bytes of device 0 right now; false when there is no device.
bool device_memory(size_t& free_bytes, size_t& total_bytes);

}  // namespace striker::cuda
