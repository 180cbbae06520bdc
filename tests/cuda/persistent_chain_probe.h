// Issue 11's open question, measured: can ONE persistent kernel stream the dependent GEMV chain of a
// batch-1 BF16 decode layer (QKV -> o_proj -> router -> gate/up -> down, Flint's shapes, 49 layers)
// near 4.6 TB/s, where the per-op kernels of the step spend ~34.6 µs per layer on ~18 µs of bytes?
// Each CTA (one per SM) runs a producer warp that copies its share of every op's weights into a
// shared-memory ring in consumption order, as far ahead as the ring has room, and consumer warps that
// wait on per-(layer, op) global counters instead of kernel boundaries. Not Flint's forward pass: no
// attention (o_proj reads the q part of the QKV output), all layers MoE, experts drawn from a pool of
// 64 per layer; the point is the schedule, checked against plain per-op kernels on the same data.
#pragma once

namespace striker::cuda::testing {

// `bench_cuda_kernels persistent-chain`: the check at 3 layers, then the 49-layer chain timed with the
// step's own routing and with routing known in advance (the routing dependency's cost), L2-resident,
// without the dots (the transport alone), and with L2 prefetches of the ops ahead beside the ring; per
// op the wait (counter + input) and the work. Returns the number of failed checks.
int bench_persistent_chain();

}  // namespace striker::cuda::testing
