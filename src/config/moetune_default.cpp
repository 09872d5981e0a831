// moetune's own default config for its mma.sync GEMM kernel: a first heuristic from simple
// reasoning, to be retuned from measurements. Every rule is one commented step below.
#include <algorithm>
#include <cmath>

#include "config/kernel_rules.hpp"
#include "moetune/config.hpp"

namespace moetune {
namespace {

// Whether BLOCK_SIZE_N keeps a weight tile inside whole fp8 scale blocks (or whole blocks
// inside a tile), as validation requires.
bool fits_block_n(const MoeShape& shape, int BLOCK_SIZE_N) {
  if (shape.dtype != Dtype::fp8_w8a8 || !shape.block_shape) return true;
  const int block_n = (*shape.block_shape)[0];
  return block_n % BLOCK_SIZE_N == 0 || BLOCK_SIZE_N % block_n == 0;
}

}  // namespace

KernelConfig moetune_default_config(const MoeShape& shape, const GpuSpec& gpu, int M, bool down) {
  // The GEMM: up writes 2N columns reducing over K; down writes K columns reducing over N.
  const long long cols = down ? shape.K : 2LL * shape.N;
  const long long depth = down ? shape.N : shape.K;
  const int E_global = std::max(shape.E_global, shape.E);
  const double share = E_global > 0 ? static_cast<double>(shape.topk) / E_global : 0.0;
  // Uniform routing: token slots per expert, and experts of this rank that get any token.
  const double slots_per_expert = static_cast<double>(M) * share;
  const double active_experts =
      shape.E * (1.0 - std::pow(std::max(0.0, 1.0 - share), static_cast<double>(M)));
  const double slots_per_active = active_experts > 0 ? slots_per_expert * shape.E / active_experts
                                                     : 0.0;
  KernelConfig c;
  // BLOCK_SIZE_M: the smallest tile holding an expert's expected slots, so little padding is
  // computed. It depends on M and routing only, never on `down`: one alignment serves both.
  c.BLOCK_SIZE_M = slots_per_expert <= 16 ? 16 : slots_per_expert <= 32 ? 32
                 : slots_per_expert <= 96 ? 64 : 128;
  // BLOCK_SIZE_K: 16-bit 64 elements (128-byte rows); fp8 128, one scale group, or the largest
  // of 128/64/32 dividing block_k so a K-tile never straddles a scale group.
  c.BLOCK_SIZE_K = shape.dtype == Dtype::fp8_w8a8 ? 128 : 64;
  if (shape.dtype == Dtype::fp8_w8a8 && shape.block_shape) {
    const int block_k = (*shape.block_shape)[1];
    while (c.BLOCK_SIZE_K > 32 && block_k % c.BLOCK_SIZE_K != 0) c.BLOCK_SIZE_K /= 2;
  }
  // ...and no deeper than the reduction (a longer K-tile multiplies padding zeros), down to the
  // kernel's minimum row of 64 bytes.
  const int min_block_k = 64 / weight_bytes(shape.dtype);
  while (c.BLOCK_SIZE_K > min_block_k && c.BLOCK_SIZE_K > depth) c.BLOCK_SIZE_K /= 2;
  // num_warps: 8 for 128-row tiles, to keep the accumulator per thread in registers; else 4.
  c.num_warps = c.BLOCK_SIZE_M >= 128 ? 8 : 4;
  // num_stages: small tiles are memory-bound and want loads in flight (4); big tiles 3.
  c.num_stages = c.BLOCK_SIZE_M >= 128 ? 3 : 4;
  // GROUP_SIZE_M: 1 while an expert fits one M-tile (no neighbour to share a weight tile with).
  c.GROUP_SIZE_M = slots_per_active <= c.BLOCK_SIZE_M ? 1 : 16;
  // Output tiles of the launch: M-tiles over the active experts times N-tiles.
  const double m_tiles = active_experts * std::ceil(slots_per_active / c.BLOCK_SIZE_M);
  auto tiles = [&](int BLOCK_SIZE_N) {
    return m_tiles * static_cast<double>((cols + BLOCK_SIZE_N - 1) / BLOCK_SIZE_N);
  };
  // BLOCK_SIZE_N: 128, or 64 when 128-wide tiles cannot give every SM one.
  c.BLOCK_SIZE_N = 128;
  if (tiles(128) < gpu.sm_count && fits_block_n(shape, 64)) c.BLOCK_SIZE_N = 64;
  // SPLIT_K: with fewer tiles than half the SMs, split the reduction (up to 4 ways) while each
  // split keeps a whole number of K-tiles.
  while (c.SPLIT_K < 4 && tiles(c.BLOCK_SIZE_N) * c.SPLIT_K < gpu.sm_count / 2.0 &&
         depth % (2LL * c.SPLIT_K * c.BLOCK_SIZE_K) == 0) {
    c.SPLIT_K *= 2;
  }
  // Fit shared memory: fewer stages first (down to 2), then narrower N-tiles, then shallower
  // K-tiles, each step only to a tile the kernel accepts; BLOCK_SIZE_M stays, as the down GEMM
  // must share it.
  const ValidationTarget target{shape.dtype, shape.block_shape, &gpu};
  auto acceptable = [&](const KernelConfig& k) {
    return fits_block_n(shape, k.BLOCK_SIZE_N) && k.BLOCK_SIZE_N >= 32 && k.BLOCK_SIZE_K >= 32 &&
           k.num_stages >= 2 && config::kernel_rule_violation(k, target) == nullptr;
  };
  while (moetune_smem_bytes(c, target) > gpu.smem_per_block_bytes) {
    KernelConfig fewer_stages = c, narrower = c, shallower = c;
    --fewer_stages.num_stages;
    narrower.BLOCK_SIZE_N /= 2;
    shallower.BLOCK_SIZE_K /= 2;
    if (acceptable(fewer_stages)) {
      c = fewer_stages;
    } else if (acceptable(narrower)) {
      c = narrower;
    } else if (acceptable(shallower)) {
      c = shallower;
    } else {
      break;  // nothing smaller exists; validation will say why
    }
  }
  return c;
}

}  // namespace moetune
