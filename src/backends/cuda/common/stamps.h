// Host side of the per-CTA stamps (stamps.cuh): a profiling build only (cmake -DSTRIKER_STAMPS=ON).
#pragma once

namespace striker::cuda {

#ifdef STRIKER_STAMPS
// With STRIKER_STAMPS=path in the environment: allocates the ring and points every stamped kernel at it.
void stamps_begin();
// Writes the ring to that path (u32 words per record, u32 records, then the records) and frees it.
void stamps_end();
#else
inline void stamps_begin() {}
inline void stamps_end() {}
#endif

}  // namespace striker::cuda
