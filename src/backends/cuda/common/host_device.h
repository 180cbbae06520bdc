// STRIKER_HOST_DEVICE: marks the layout functions that both the CUDA kernels and their host tests
// (tests/cuda/host, built without nvcc) call, so one definition serves both.
#pragma once

#if !defined(STRIKER_HOST_DEVICE)
#if defined(__CUDACC__)
#define STRIKER_HOST_DEVICE __host__ __device__
#else
#define STRIKER_HOST_DEVICE
#endif
#endif
