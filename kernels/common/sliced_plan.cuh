// The plan of kernels/moe_gemms_sliced_sm90a.cuh (GEMM1, SiLU(gate)·up and GEMM2 of a block-fp8
// layer in one launch, a block per intermediate slice), shared by the kernel and the host
// (src/moe/sliced.cpp): its geometry, shared memory and counters. constexpr only, no CUDA
// includes, as tile_math.cuh. The ring's units hold 32 KB of weights and the consumer layout is
// the persistent kernel's (persistent_plan.cuh: 16 token slots, m64 wgmma slices); GEMM1's units
// are 128 rows x 256 deep (kUpDepth K-subtiles of 128) instead of 256 x 128, so that each weight
// row comes in 256-byte runs: the same bytes copied 4.8% faster at M = 8 (57 experts) and 3.6%
// at M = 16 on an H100 SXM (bench/results/2026-12-07_thirtysixth_session.md, ring_copy d2).
//
// Block (m-block b, slice j) of the grid [max m-blocks x N / 128]: GEMM1's 128 gate rows of
// intermediate columns [128 j, 128 j + 128) over K, then its 128 up rows (K / 128 units in
// all), SiLU·up quantized per token (one 128-group, the same values the stage path's fused
// epilogue writes) into shared memory, then GEMM2's partial sum over those 128 columns for
// all K output columns (K / 256 units of w2 rows [256 u, 256 u + 256), columns
// [128 j, 128 j + 128)), times the routed weight, added into out [M, K] (red.global.add).
// GEMM2's reduction is split over the N / 128 slices, so no block waits for another's
// activation.
//
// Pairs (PAIR, N = 256: two slices): the two slices of an m-block are a cluster of two blocks
// that swap their activation halves through distributed shared memory after GEMM1; block j then
// runs GEMM2 over the whole intermediate for out's columns [K/2 j, K/2 j + K/2): K / 256 units
// of w2 rows [K/2 j + 128 u, + 128) x all 256 columns, laid out as GEMM1's (two 128-deep
// K-subtiles), so w2 rows too come in 256-byte runs, and each out element takes one add per
// expert instead of two.
#pragma once

// NVRTC knows the kernels' headers by their names under kernels/ (src/cuda/jit); host code
// includes this file by its path in the repository, where this folder is the including one.
#if defined(__CUDACC_RTC__)
#include "common/persistent_plan.cuh"
#else
#include "persistent_plan.cuh"
#endif

namespace moetune {
namespace sliced_plan {

using persistent_plan::kBlockM;
using persistent_plan::kConsumerThreads;
using persistent_plan::kOutRowBytes;
using persistent_plan::kProducerThreads;
using persistent_plan::kThreads;
using persistent_plan::kUnitK;
using persistent_plan::kUnitRows;

constexpr int kUpDepth = 2;                          // K-subtiles (128 deep) per GEMM1 unit
constexpr int kUpRows = kUnitRows / kUpDepth;        // weight rows per GEMM1 unit: gate or up
constexpr int kActTileBytes = kBlockM * kUnitK;      // a [16][128 B] token tile: GEMM2's B
constexpr int kUpATileBytes = kUpDepth * kActTileBytes;  // GEMM1's token rows per unit: 4 KB
constexpr int kStageBytes = kUpATileBytes + kUnitRows * kUnitK;  // a ring slot: 36 KB
// Floats of scales per ring slot: GEMM1's 16 token rows x kUpDepth, then 2 m64 slices x
// kUpDepth of w13 (36 used; GEMM2's 4 w2 slices sit at 16..19); 40 keeps slots 16-byte apart.
constexpr int kSlotScales = 40;
constexpr int kUpWScale = kBlockM * kUpDepth;        // where GEMM1's w13 scales start

constexpr int kMinStages = 2;
constexpr int kMaxStages = 5;  // 5 x 36 KB slots and the rest fit 227 KB
// Blocks that zero `out` before any block adds into it (the first kZeroBlocks tickets; a block
// takes its ticket when it starts, so every block it waits for is already running).
constexpr int kZeroBlocks = 64;
// Slices at most: every slice adds its own bf16-rounded partial row into out, so a token's row
// takes slices x topk adds in any order; two slices cost 5-7e-3 relative run to run on the
// anchors (topk 8; the stage path's folded sum: 3-4e-3), and the error grows with the adds.
constexpr int kMaxSlices = 4;
// int32 counters in the workspace: the next ticket, the zeroing blocks done, the blocks done.
constexpr int kCounterInts = 3;

MOETUNE_HD constexpr int slices(int N) { return N / kUnitK; }           // GEMM1 tiles per m-block
MOETUNE_HD constexpr int up_units(int K) { return K / kUnitK; }         // per block (both halves)
MOETUNE_HD constexpr int down_units(int K) { return K / kUnitRows; }    // per block

// Dynamic shared memory: the ring, two activation tiles (GEMM2's B operand: the block's own, and
// a pair's other half), two staged bf16 output tiles (GEMM2's adds leave from one while the next
// is written), each slot's scales, the two tiles' activation scales, the slot table, the
// ticket, the full and empty mbarriers of each slot and a pair's activation barrier.
MOETUNE_HD constexpr int smem_bytes(int stages) {
  return stages * kStageBytes + 2 * kActTileBytes + 2 * kBlockM * kOutRowBytes +
         stages * kSlotScales * 4 + 2 * kBlockM * 4 + kBlockM * 4 + 16 + 2 * stages * 8 + 8;
}
// MOETUNE_SLICED_TRACE builds (a JIT knob, cuda/nvrtc.hpp): block g < kTraceBlocks writes
// globaltimer stamps (ns) into the device array kTraceSymbol [kTraceBlocks][kTraceStamps] at its
// entry, its PDL wait's return, its first copy (the derivation done), GEMM1's end and its exit
// (consumer thread 0), then the SM it ran on (%smid, not a time: at its entry); blocks with no
// m-block write no third to fifth.
constexpr int kTraceBlocks = 4096;
constexpr int kTraceStamps = 6;
constexpr int kTraceSmid = 5;  // the stamp that holds the SM
constexpr const char* kTraceSymbol = "moetune_sliced_trace";

// Whether N takes pairs (two slices: a cluster of two blocks per m-block).
MOETUNE_HD constexpr bool pairs(int N) { return N == 2 * kUnitK; }

// nullptr when the kernel takes the shape (block fp8 e4m3, [block_n, 128] blocks), else why not.
MOETUNE_HD constexpr const char* shape_violation(int N, int K, int block_n, int block_k) {
  if (block_k != kUnitK) return "block_k must be 128 (a slice is one activation group)";
  if (block_n % 64 != 0) return "block_n must be a multiple of 64 (a weight scale per m64 slice)";
  if (N % kUnitK != 0 || (2 * N) % block_n != 0)
    return "N must be a multiple of 128 (whole slices) and 2N of block_n";
  if (N / kUnitK > kMaxSlices) return "N must be at most 512 (each slice adds its rows into out)";
  if (K % kUnitRows != 0 || K % block_n != 0)
    return "K must be a multiple of 256 (whole GEMM2 units) and of block_n";
  return nullptr;
}

// The most ring slots that fit `smem_limit` bytes per block, at most `want` (0: none fit).
MOETUNE_HD constexpr int stages_for(int want, int smem_limit) {
  for (int s = want < kMaxStages ? want : kMaxStages; s >= kMinStages; --s)
    if (smem_bytes(s) <= smem_limit) return s;
  return 0;
}

}  // namespace sliced_plan
}  // namespace moetune
