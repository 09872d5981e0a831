// The plan of kernels/moe_gemms_persistent_sm90a.cuh (both grouped GEMMs of a block-fp8 layer
// in one persistent launch), shared by the kernel and the host (src/moe/persistent.cpp): its
// fixed geometry, shared memory, workspace, and how the work is split over the grid. constexpr
// only, no CUDA includes, as tile_math.cuh.
//
// Work unit: one 128-deep K-tile of 256 weight rows (32 KB of e4m3) against the 16 token slots of
// one m-block (the alignment's BLOCK_SIZE_M = 16). GEMM1 (w13) tile (m-block b, j): the 128 gate
// rows and the 128 up rows of intermediate columns [128 j, 128 j + 128), K / 128 units; GEMM2 (w2)
// item (b, jj): output columns [256 jj, 256 jj + 256), N / 128 units. Block c of P takes the GEMM1
// units [c T1 / P, (c+1) T1 / P) (a tile may be split over blocks: stream-K) and then the GEMM2
// items [c I2 / P, (c+1) I2 / P), so every block streams the same bytes and all of them turn to
// GEMM2 together.
#pragma once

// Callable from host code and from kernels (as tile_math.cuh defines it; host code includes this
// file by its path in the repository, where "common/..." would not resolve).
#ifndef MOETUNE_HD
#if defined(__CUDACC__)
#define MOETUNE_HD __host__ __device__
#else
#define MOETUNE_HD
#endif
#endif

namespace moetune {
namespace persistent_plan {

constexpr int kBlockM = 16;          // token slots per m-block
constexpr int kUnitRows = 256;       // weight rows per unit
constexpr int kUnitK = 128;          // reduction depth per unit (e4m3: bytes per row)
constexpr int kConsumerThreads = 256;  // two warpgroups, 128 weight rows each
constexpr int kProducerThreads = 128;  // one warpgroup issuing the cp.async copies
constexpr int kThreads = kConsumerThreads + kProducerThreads;
constexpr int kATileBytes = kBlockM * kUnitK;                  // 2 KB of token rows
constexpr int kStageBytes = kATileBytes + kUnitRows * kUnitK;  // a ring slot: 34 KB
constexpr int kOutRowBytes = kUnitRows * 2 + 16;  // a staged bf16 output row (+16: bank spread)
constexpr int kPartialBytes = kUnitRows * kBlockM * 4;  // a stream-K partial tile, fp32
constexpr int kMaxMBlocks = 8;       // m-blocks one block's tables hold
constexpr int kMaxDownUnits = 8;     // N / 128 up to 8 (N <= 1024)
constexpr int kMaxStages = 6;
constexpr int kTraceUnits = 64;      // a probe's per-unit stamps per block
constexpr int kTraceStride = 8 + 2 * kTraceUnits;  // int64 per block in a probe's trace
constexpr int kSlotScales = 32;      // floats of scales per ring slot (16 tokens + 4 slices)

MOETUNE_HD constexpr int up_tiles(int N) { return 2 * N / kUnitRows; }  // per m-block
MOETUNE_HD constexpr int up_units(int K) { return K / kUnitK; }        // per GEMM1 tile
MOETUNE_HD constexpr int down_items(int K) { return K / kUnitRows; }   // per m-block
MOETUNE_HD constexpr int down_units(int N) { return N / kUnitK; }      // per GEMM2 item

// Dynamic shared memory: the ring, GEMM2's activation rows (one 2 KB tile per unit of its
// reduction) and their scales, the staged output tile, the m-block tables, a ticket word, each
// slot's scales, the full and empty mbarriers of each slot.
MOETUNE_HD constexpr int smem_bytes(int stages, int N) {
  return stages * kStageBytes + down_units(N) * kATileBytes + kBlockM * kMaxDownUnits * 4 +
         kBlockM * kOutRowBytes + kMaxMBlocks * (kBlockM + 1) * 4 + 16 +
         stages * kSlotScales * 4 + 2 * stages * 8;
}

// First unit (or item) of block c of p over `total`.
MOETUNE_HD constexpr long long range_begin(long long c, long long total, long long p) {
  return c * total / p;
}

// Workspace: int32 counters (a ticket per GEMM1 tile, a ready count per m-block, one done count),
// then two partial tiles per block (its first and its last GEMM1 segment).
MOETUNE_HD constexpr long long counter_ints(long long max_m_blocks, int N) {
  return max_m_blocks * (up_tiles(N) + 1) + 1;
}
MOETUNE_HD constexpr long long partials_offset(long long max_m_blocks, int N) {
  return (counter_ints(max_m_blocks, N) * 4 + 255) / 256 * 256;
}
MOETUNE_HD constexpr long long workspace_bytes(long long max_m_blocks, int N, long long grid) {
  return partials_offset(max_m_blocks, N) + grid * 2 * kPartialBytes;
}

// The m-blocks one block of `grid` can touch: its GEMM1 units and GEMM2 items each lie within
// max_m_blocks / grid + 2 consecutive m-blocks, and both ranges start near the same one.
MOETUNE_HD constexpr bool tables_fit(long long max_m_blocks, long long grid) {
  return grid > 0 && (max_m_blocks + grid - 1) / grid + 3 <= kMaxMBlocks;
}

// nullptr when the kernel takes the shape (block fp8 e4m3 with [bn, 128] blocks), else why not.
MOETUNE_HD constexpr const char* shape_violation(int N, int K, int block_n, int block_k) {
  if (block_k != kUnitK) return "block_k must be 128 (one activation group per GEMM1 tile)";
  if (block_n % 64 != 0) return "block_n must be a multiple of 64 (a weight scale per m64 slice)";
  if (N % 128 != 0 || (2 * N) % block_n != 0)
    return "N must be a multiple of 128 (a GEMM1 tile: 128 gate and 128 up rows)";
  if (down_units(N) > kMaxDownUnits) return "N must be at most 1024";
  if (K % kUnitRows != 0 || K % block_n != 0) return "K must be a multiple of 256";
  return nullptr;
}

// Ring slots the layer uses: 4 where they fit the per-block shared memory `smem_limit`, else 3
// (0 when fewer fit). More slots keep more copies outstanding and served the blocks less evenly
// on the H200: at Qwen3.5 fp8 TP4 M = 8 the last block ended GEMM1 at 34.3 µs with 4 and 40.9
// with 6 (bench/results/2026-12-02_h200_twentyfirst_session.md, calls 4 and 5).
constexpr int kLayerStages = 4;
MOETUNE_HD constexpr int stages_for(int N, int smem_limit) {
  for (int s = kLayerStages; s >= 3; --s)
    if (smem_bytes(s, N) <= smem_limit) return s;
  return 0;
}

}  // namespace persistent_plan
}  // namespace moetune
