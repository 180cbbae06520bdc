// Issue 11's open question, measured: can ONE persistent kernel stream the dependent GEMV chain of a
// batch-1 decode layer (QKV -> o_proj -> router -> gate/up -> down, Flint's shapes, 49 layers) near the
// card's read bandwidth, where the per-op kernels of the step spend 5-7 µs per op on 1-8 MB?
// Two transports, each with one CTA per SM and per-(layer, op) global counters instead of kernel
// boundaries: the ring (session 25: a producer warp copies the CTA's share of every op's weights into a
// shared-memory ring in consumption order; consumer warps take chunks through mbarriers) and warp
// streams (session 42: every warp streams its own rows into its own cp.async ring across op and layer
// boundaries; BF16 and NVFP4 weights). Not Flint's forward pass: no attention (o_proj reads the q part of
// the QKV output), all layers MoE, experts drawn from a pool of 64 per layer; the point is the schedule,
// checked against plain per-op kernels on the same data.
#pragma once

namespace striker::cuda::testing {

// `bench_cuda_kernels persistent-chain`: a dependency-free stream of the step's bytes (the control), then
// per transport the checks at 1 and 3 layers and the 49-layer chain timed with the step's own routing,
// with routing known in advance, L2-resident, and without the dots (from L2 and from DRAM: the transport
// alone); per op the wait (counter + input) and the work. Returns the number of failed checks.
int bench_persistent_chain();

}  // namespace striker::cuda::testing
