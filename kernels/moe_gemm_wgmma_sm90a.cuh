// moe_gemm_wgmma_sm90a: the grouped expert GEMM on Hopper's warpgroup MMA (wgmma, sm_90a only),
// for the tiles where it pays (large M). Same contract, math, pointers, grid mapping, split-K,
// shared-memory layout and formula (tile_math::gemm_smem_bytes) as kernels/moe_gemm_mma.cuh —
// read that file's opening comment; only the MMA differs:
//
// Rows of the A and B tiles are exactly 128 bytes (bf16/fp16 BLOCK_SIZE_K 64, fp8 128) with the
// 16-byte chunks at chunk ^ (row & 7): this is the wgmma 128-byte-swizzle K-major layout, so the
// cp.async ring feeds wgmma directly (each stage 1024-byte aligned). Warpgroups (4 warps) form a
// wg_m x wg_n grid (tile_math::gemm_wg_m); each owns (BLOCK_SIZE_M / wg_m) rows as m64 slices and
// one wgmma N = BLOCK_SIZE_N / wg_n in {64, 128, 256} of columns, fp32 accumulators in registers
// (per m64 slice, thread = warp w, lane l: n8 chunk i holds rows 16w + l/4 (+8), columns
// 8i + 2(l%4) (+1), the m16n8 C-fragment layout of mma.sync). Each K-tile: wait for its cp.async
// group, fence.proxy.async, barrier, issue the next tile's loads, wgmma over the tile's k-steps
// (32 bytes each), commit; with num_stages >= 3 one wgmma group stays in flight (see kPipelined).
//
// Block fp8 with long reductions (tile_math::gemm_wgmma_warp_specialized) is warp-specialized
// instead: each tile's partial sum must be complete before it is
// folded with its scales, so a block-wide barrier per tile would idle the tensor cores through
// every fold. One extra producer warpgroup (tile_math::kWgmmaProducerThreads) copies the tiles
// with cp.async and announces each on the slot's `full` mbarrier through
// cp.async.mbarrier.arrive (the arrival happens when its copies land; it never waits for them);
// the num_warps consumer warps wait on `full`, fence.proxy.async, run the tile's wgmmas, free the
// slot on its `empty` mbarrier and fold while the other consumer warpgroups' MMAs run.
//
// FUSED_ACT = 1 (up stage, bf16/fp16): SiLU(gate)·up in the epilogue, out [M*TOPK, N], as in
// kernels/moe_gemm_mma.cuh with the warpgroup's WN columns as the slice: its B tile rows
// [0, WN/2) load the gate rows and [WN/2, WN) the up rows of the same WN/2 intermediate columns,
// so n8 chunk j < NT/2 and j + NT/2 of a thread hold gate and up of the same columns. The staged
// output rows are BLOCK_SIZE_N/2 columns wide. Block fp8 (swap-AB only) also quantizes the
// activation as kernels/silu_mul_quant.cuh does, from the fp32 accumulators (act::silu_mul_fast:
// the IEEE division cost this epilogue 5 µs) rounded once to bf16: the tile (BLOCK_SIZE_N/2
// columns, whole SCALE_BLOCK_K groups) is staged in shared memory, one warp per (token row,
// group) takes its amax, and out gets e4m3 [M*TOPK, N] with out_scale [M*TOPK, N/SCALE_BLOCK_K]
// fp32 beside it (GEMM2's a and a_scale): the activation stage and the [M*TOPK, 2N] round trip
// disappear.
//
// SWAP_AB = 1 (decode, BLOCK_SIZE_M 16 or 32): the weight tile is wgmma's A and the tile's token
// rows its B, m64 x BLOCK_SIZE_M x k per slice: each of the num_warps / 4 warpgroups owns
// BLOCK_SIZE_N / (num_warps / 4) weight rows (MI m64 slices) and every token row. The ring, copy
// plan, producer warpgroup and split-K are the same (A and B tiles keep their places in a stage;
// only the descriptors swap). Accumulator (slice i, n8 chunk j) of thread (warp w, lane l) is
// weight row 64i + 16w + l/4 (+8) of token 8j + 2(l%4) (+1): block-fp8 scales fold per slice
// (weight) and per column (token); the epilogue transposes through shared memory; fused
// SiLU(gate)·up pairs slice i (gate rows) with slice i + MI/2 (the up rows of the same columns).
//
// SUM_TOPK = 1 (down stage): the top-k sum folded into GEMM2, as in kernels/moe_gemm_mma.cuh:
// out is the layer's output [M, K] (zeroed by GEMM1's zero_out), and every store of a valid
// slot's row becomes a red.global.add into row slot / TOPK (16-byte vectors from the staged
// tile). zero_out / zero_vecs: as there.
//
// ALIGN_E > 0 (up stage, SPLIT_K 1, M * TOPK <= kInlineAlignMaxSlots: decode): there is no
// alignment launch before GEMM1. Each block derives its expert and slots from topk_ids
// (kernels/common/inline_align.cuh; ALIGN_E local experts from expert_start) and the blocks of
// N-tile 0 write the alignment's tables for GEMM2 (their M-block's sorted_token_ids rows, its
// expert_ids entry (-1: no work), and M-block 0 num_tokens_post_padded): GEMM2 reads them
// after its wait for this grid. The table pointers are written, not read, then.
//
// Chosen by src/gemm for arch sm_90a when tile_math::gemm_wgmma_eligible(config) holds, or
// SWAP_AB is 1 (tile_math::gemm_swapab_violation says what swap-AB needs).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "common/act.cuh"
#include "common/inline_align.cuh"
#include "common/mbarrier.cuh"
#include "common/pdl.cuh"
#include "common/ptx.cuh"
#include "common/red.cuh"
#include "common/tile_math.cuh"
#include "common/wgmma.cuh"

namespace moetune {

template <int STAGE,          // tile_math::kStageUp (w13) or kStageDown (w2, times topk_weights)
          int DTYPE,          // tile_math::kDtypeBf16 / kDtypeFp16 / kDtypeFp8Block / kDtypeFp8Tensor
          int N,              // per-rank expert intermediate size (w2.shape[2])
          int K,              // hidden size
          int TOPK,           // experts per token
          int SCALE_BLOCK_N,  // fp8 block-wise: block_n of the weight scales (0 otherwise)
          int SCALE_BLOCK_K,  // fp8 block-wise: block_k of the weight and activation scales (0 otherwise)
          int BLOCK_SIZE_M,   // token slots per tile (the alignment's padding unit)
          int BLOCK_SIZE_N,   // output columns per tile
          int BLOCK_SIZE_K,   // reduction depth per pipeline stage
          int GROUP_SIZE_M,   // M-blocks sweeping one N-tile together (L2 reuse of weight tiles)
          int num_warps,      // warps per block
          int num_stages,     // cp.async ring depth (num_stages - 1 K-tiles in flight)
          int SPLIT_K,        // blocks sharing one output tile's reduction (gridDim.y)
          int FUSED_ACT,      // 1: up stage writes silu(gate)·up [M*TOPK, N] (block fp8: quantized)
          int SWAP_AB,        // 1: weights as wgmma's A, the tile's tokens as its N (decode)
          int SUM_TOPK,       // 1: down stage adds into out [M, K] (the top-k sum); else 0
          int ALIGN_E>        // > 0: up stage derives the alignment for ALIGN_E local experts
__global__ void __launch_bounds__(
    tile_math::gemm_wgmma_block_threads(
        num_warps, tile_math::gemm_wgmma_warp_specialized(DTYPE == tile_math::kDtypeFp8Block,
                                                          STAGE == tile_math::kStageUp ? K : N,
                                                          BLOCK_SIZE_K, SPLIT_K)),
    SWAP_AB != 0 && !tile_math::gemm_wgmma_warp_specialized(
                        DTYPE == tile_math::kDtypeFp8Block, STAGE == tile_math::kStageUp ? K : N,
                        BLOCK_SIZE_K, SPLIT_K)
        ? tile_math::gemm_swapab_min_blocks(
              tile_math::gemm_smem_bytes(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_stages,
                                         DTYPE <= tile_math::kDtypeFp16 ? 2 : 1,
                                         DTYPE <= tile_math::kDtypeFp16 ? 2 : 1,
                                         DTYPE == tile_math::kDtypeFp8Block),
              num_warps * 32, BLOCK_SIZE_M * BLOCK_SIZE_N / (num_warps * 32), BLOCK_SIZE_M,
              DTYPE == tile_math::kDtypeFp8Block)
        : tile_math::gemm_wgmma_min_blocks(DTYPE == tile_math::kDtypeFp8Block,
                                           STAGE == tile_math::kStageUp ? K : N, BLOCK_SIZE_M,
                                           BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages,
                                           SPLIT_K))
    moe_gemm_wgmma(const void* __restrict__ a, const float* __restrict__ a_scale,
                 const void* __restrict__ w, const float* __restrict__ w_scale,
                 void* __restrict__ out, const float* __restrict__ topk_weights,
                 const int* __restrict__ sorted_token_ids, const int* __restrict__ expert_ids,
                 const int* __restrict__ num_tokens_post_padded, long long M,
                 void* __restrict__ workspace, float* __restrict__ out_scale,
                 void* __restrict__ zero_out, long long zero_vecs,
                 const int* __restrict__ topk_ids, int expert_start) {
  using namespace tile_math;
  constexpr bool kUp = STAGE == kStageUp;
  constexpr bool kFp8 = DTYPE == kDtypeFp8Block || DTYPE == kDtypeFp8Tensor;
  constexpr bool kBlockScale = DTYPE == kDtypeFp8Block;
  constexpr int kBytes = kFp8 ? 1 : 2;                   // element size of a and w
  constexpr int N_OUT = kUp ? 2 * N : K;                 // output columns
  constexpr int K_RED = kUp ? K : N;                     // reduction length
  constexpr int kThreads = num_warps * 32;               // MMA (consumer) threads
  // Warp-specialized (block fp8, long K): a producer warpgroup after the consumers does every copy.
  constexpr bool kWarpSpecialized =
      gemm_wgmma_warp_specialized(kBlockScale, K_RED, BLOCK_SIZE_K, SPLIT_K);
  constexpr int kBlockThreads = gemm_wgmma_block_threads(num_warps, kWarpSpecialized);
  constexpr int kLoaders = kWarpSpecialized ? kWgmmaProducerThreads : kThreads;
  // > 1: compiled for that many blocks per SM, the registers split at run time (tile_math);
  // 0: no bound.
  constexpr int kMinBlocks = gemm_wgmma_min_blocks(kBlockScale, K_RED, BLOCK_SIZE_M, BLOCK_SIZE_N,
                                                   BLOCK_SIZE_K, num_warps, num_stages, SPLIT_K);
  // The register split must fit the launch's pool, or a consumer's setmaxnreg.inc waits forever.
  static_assert(kMinBlocks <= 1 ||
                    (kWarpSpecialized && kThreads % 128 == 0 &&
                     kWsProducerRegs <= kSm90RegsPerSm / (kBlockThreads * kMinBlocks) / 8 * 8 &&
                     kWgmmaProducerThreads * kWsProducerRegs +
                             kThreads * gemm_ws_consumer_regs(kThreads, kMinBlocks) <=
                         kSm90RegsPerSm / (kBlockThreads * kMinBlocks) / 8 * 8 * kBlockThreads),
                "warp-specialized register split does not fit the launch's registers");
  constexpr int kRowBytes = BLOCK_SIZE_K * kBytes;       // one tile row in shared memory
  constexpr int kChunks = kRowBytes / 16;                // 16-byte chunks per tile row
  constexpr int kKSteps = kRowBytes / 32;                // MMA k-steps per tile (k16 / fp8 k32)
  constexpr int kKTiles = (K_RED + BLOCK_SIZE_K - 1) / BLOCK_SIZE_K;
  constexpr int kNTiles = (N_OUT + BLOCK_SIZE_N - 1) / BLOCK_SIZE_N;
  constexpr bool kSwap = SWAP_AB != 0;
  constexpr int kWgs = num_warps / 4;                    // warpgroups
  // Swap-AB: every warpgroup takes all token rows and a share of the weight rows.
  constexpr int kWgM = kSwap ? 1 : gemm_wg_m(BLOCK_SIZE_M, BLOCK_SIZE_N, num_warps);
  constexpr int kWgN = kWgs / (kWgM > 0 ? kWgM : 1);
  constexpr int kWgTileM = BLOCK_SIZE_M / (kWgM > 0 ? kWgM : 1);
  constexpr int WN = BLOCK_SIZE_N / kWgN;                // columns (weight rows) per warpgroup
  // m64 slices per warpgroup: of token rows, or (swap-AB) of weight rows.
  constexpr int MI = kSwap ? WN / 64 : kWgTileM / 64;
  constexpr int kMmaN = kSwap ? BLOCK_SIZE_M : WN;       // wgmma N
  constexpr int kAccN = kMmaN / 2;                       // fp32 accumulators per slice per thread
  constexpr int NT = kMmaN / 8;                          // n8 chunks per slice
  constexpr int kATile = BLOCK_SIZE_M * kRowBytes;
  constexpr int kStageBytes = gemm_smem_stage_bytes(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K,
                                                    kBytes, kBytes);
  constexpr int kAIters = (BLOCK_SIZE_M * kChunks + kLoaders - 1) / kLoaders;
  constexpr int kBIters = (BLOCK_SIZE_N * kChunks + kLoaders - 1) / kLoaders;
  constexpr bool kKTail = K_RED % BLOCK_SIZE_K != 0;
  constexpr bool kNTail = N_OUT % BLOCK_SIZE_N != 0;
  constexpr int kSBN = SCALE_BLOCK_N > 0 ? SCALE_BLOCK_N : 1;  // safe divisors when not block fp8
  constexpr int kSBK = SCALE_BLOCK_K > 0 ? SCALE_BLOCK_K : 1;
  constexpr bool kAct = FUSED_ACT != 0;
  static_assert(SUM_TOPK == 0 || (SUM_TOPK == 1 && !kUp), "SUM_TOPK: 0, or 1 on the down stage");
  constexpr bool kSumTopk = SUM_TOPK != 0;
  constexpr int kOutCols = kAct ? N : N_OUT;             // columns of out
  constexpr int kHalfW = WN / 2;                         // fused: intermediate columns per warpgroup
  constexpr bool kActQuant = kAct && kBlockScale;        // fused, and quantized per group

  static_assert(FUSED_ACT == 0 || FUSED_ACT == 1, "FUSED_ACT must be 0 or 1");
  constexpr bool kInlineAlign = ALIGN_E > 0;
  static_assert(!kInlineAlign || (kUp && SPLIT_K == 1),
                "ALIGN_E: the up stage without split-K derives the alignment");
  static_assert(!kInlineAlign || inline_align_scratch_bytes(ALIGN_E) <= num_stages * kStageBytes,
                "ALIGN_E: the derivation's scratch must fit in the ring");
  static_assert(!kAct || gemm_act_violation(kUp, DTYPE, N, WN, kSwap, BLOCK_SIZE_N,
                                            SCALE_BLOCK_K) == nullptr,
                "FUSED_ACT: up stage, N % 8 == 0, warpgroup slice / 2 a multiple of 8; block fp8: "
                "swap-AB, BLOCK_SIZE_N / 2 a multiple of block_k "
                "(see tile_math::gemm_act_violation's reason on the host)");
  static_assert(tile_rule_violation(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps,
                                    num_stages, SPLIT_K, kBytes, kBytes, kBlockScale) == nullptr,
                "config breaks tile_math::tile_rule_violation (see its reason on the host)");
  static_assert(kSwap || gemm_wgmma_eligible(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps,
                                             kBytes, kBlockScale),
                "wgmma path: BLOCK_SIZE_K * bytes must be 128, BLOCK_SIZE_M a multiple of 64 per "
                "warpgroup row, BLOCK_SIZE_N / wg_n in {64, 128, 256}");
  static_assert(!kSwap || gemm_swapab_violation(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps,
                                                kBytes, kBlockScale, kAct) == nullptr,
                "SWAP_AB: see tile_math::gemm_swapab_violation's reason on the host");
  static_assert(!kSwap || !kBlockScale || kSBN % 64 == 0,
                "SWAP_AB with block fp8: block_n must be a multiple of 64 (a scale per m64 slice)");
  static_assert(kStageBytes % 1024 == 0 && kATile % 1024 == 0, "stages must stay 1024-byte aligned");
  static_assert(GROUP_SIZE_M >= 1, "GROUP_SIZE_M must be >= 1");
  static_assert(BLOCK_SIZE_M % 16 == 0, "BLOCK_SIZE_M must be a multiple of 16");
  static_assert(BLOCK_SIZE_N % 16 == 0, "BLOCK_SIZE_N must be a multiple of 16");
  static_assert(kRowBytes % 64 == 0, "BLOCK_SIZE_K * bytes must be a multiple of 64");
  static_assert(num_stages >= 2, "num_stages must be >= 2");
  static_assert(SPLIT_K >= 1 && SPLIT_K <= kMaxSplitK, "SPLIT_K must be in 1..16");
  static_assert(K_RED * kBytes % 16 == 0, "rows of a and w must be whole 16-byte chunks");
  static_assert(!kBlockScale || (SCALE_BLOCK_K > 0 && kSBK % BLOCK_SIZE_K == 0),
                "block fp8: BLOCK_SIZE_K must divide block_k (a K-tile never straddles a scale group)");
  static_assert(!kBlockScale || (SCALE_BLOCK_N > 0 && K_RED % kSBK == 0 && N_OUT % kSBN == 0),
                "block fp8: N and K must be multiples of the scale block");
  static_assert(!kBlockScale || kSBN % 8 == 0,
                "block fp8: block_n must be a multiple of 8 (an MMA column pair shares a scale)");
  static_assert(!kBlockScale || BLOCK_SIZE_N % kSBN == 0 || kSBN % BLOCK_SIZE_N == 0,
                "block fp8: BLOCK_SIZE_N must divide block_n or be a multiple of it");

  extern __shared__ __align__(1024) unsigned char smem[];
  int* s_slot = reinterpret_cast<int*>(smem + num_stages * kStageBytes);
  int* s_ticket = s_slot + BLOCK_SIZE_M;
  // Block fp8: full[num_stages] then empty[num_stages] (tile_math::gemm_smem_bytes counts them).
  const unsigned bar_base = ptx::smem_addr(s_ticket + 4);
  auto full_bar = [&](int stage) { return bar_base + 8u * stage; };
  auto empty_bar = [&](int stage) { return bar_base + 8u * (num_stages + stage); };

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;

  // ---- tile of this block (GROUP_SIZE_M order) ---------------------------------------------
  const int num_m_blocks = gridDim.x / kNTiles;
  const int pid = blockIdx.x;
  const int split = blockIdx.y;
  constexpr int kGroupTiles = GROUP_SIZE_M * kNTiles;
  const int group = pid / kGroupTiles;
  const int first_m = group * GROUP_SIZE_M;
  const int group_rows = min(num_m_blocks - first_m, GROUP_SIZE_M);
  const int pid_m = first_m + (pid % kGroupTiles) % group_rows;
  const int pid_n = (pid % kGroupTiles) / group_rows;
  // PDL (common/pdl.cuh): the alignment tables, a (and its scales) and topk_weights come from
  // the kernels before: wait before any global access, in every block (one that exited without
  // waiting could let this grid complete before its predecessor, racing the stage after us).
  pdl_wait();
  // The block's three table reads (the total, its expert, its slots) go out together, one L2
  // round trip before the first copy instead of two: every block of the grid lies within the
  // tables (gemm::gemm_max_m_blocks caps the grid at max_num_tokens_padded / BLOCK_SIZE_M whole
  // blocks), so the reads are in bounds before the total says whether the block has work, and
  // an entry past the total is never used. The slot table's entries are read with the expert
  // (block fp8 layer -0.2..-1.1% at M = 8..256); not in moe_gemm_mma.cuh: there ptxas spilled
  // the bf16 k128 s4 up tile for it (bf16 layer +1.3%;
  // bench/results/2026-12-01_h200_fourteenth_session.md, call 1).
  const long long num_slots = M * TOPK;
  int total_padded, expert, first_slot = -1;
  if constexpr (kInlineAlign) {
    if (zero_out != nullptr)
      red::zero_share<kBlockThreads>(zero_out, zero_vecs,
                                     (long long)blockIdx.y * gridDim.x + blockIdx.x,
                                     (long long)gridDim.x * gridDim.y);
    inline_align::derive_block<BLOCK_SIZE_M, kBlockThreads, ALIGN_E>(
        topk_ids, static_cast<int>(num_slots), expert_start, pid_m, reinterpret_cast<int*>(smem),
        s_slot, expert, total_padded);
    if (pid_n == 0) {  // GEMM2's tables: one block per M-block writes its entries
      int* sorted_out = const_cast<int*>(sorted_token_ids) + (long long)pid_m * BLOCK_SIZE_M;
      for (int r = tid; r < BLOCK_SIZE_M; r += kBlockThreads)
        sorted_out[r] = s_slot[r] >= 0 ? s_slot[r] : static_cast<int>(num_slots);
      if (tid == 0) const_cast<int*>(expert_ids)[pid_m] = expert;
      if (tid == 0 && pid_m == 0) *const_cast<int*>(num_tokens_post_padded) = total_padded;
    }
  } else {
    total_padded = __ldg(num_tokens_post_padded);
    expert = __ldg(expert_ids + pid_m);
    first_slot =
        tid < BLOCK_SIZE_M ? __ldg(sorted_token_ids + (long long)pid_m * BLOCK_SIZE_M + tid) : -1;
    if (zero_out != nullptr)  // while the reads are in flight; before the exit below
      red::zero_share<kBlockThreads>(zero_out, zero_vecs,
                                     (long long)blockIdx.y * gridDim.x + blockIdx.x,
                                     (long long)gridDim.x * gridDim.y);
  }
  // expert < 0: an expert of another rank (EP), or (inline) past the last expert's run
  if ((pid_m * BLOCK_SIZE_M >= total_padded) | (expert < 0)) return;
  const int n_start = pid_n * BLOCK_SIZE_N;

  // ---- slot table (inline: derive_block wrote it) ----------------------------------------------
  if constexpr (!kInlineAlign) {
    for (int r = tid; r < BLOCK_SIZE_M; r += kBlockThreads) {
      const int slot =
          r == tid ? first_slot : __ldg(sorted_token_ids + (long long)pid_m * BLOCK_SIZE_M + r);
      s_slot[r] = (slot >= 0 && slot < num_slots) ? slot : -1;
    }
  }
  if (kWarpSpecialized && tid == 0) {
#pragma unroll
    for (int st = 0; st < num_stages; ++st) {
      mbar::init(full_bar(st), kLoaders);  // every producer thread announces its own copies
      mbar::init(empty_bar(st), num_warps);  // lane 0 of every consumer warp frees the slot
    }
  }
  __syncthreads();
  // Index among the loading threads (consumers of the warp-specialized kernel never load).
  const int ltid = kWarpSpecialized ? max(tid - kThreads, 0) : tid;

  // ---- per-thread copy plan: global row pointers and swizzled shared offsets -------------------
  const unsigned char* a_bytes = static_cast<const unsigned char*>(a);
  const unsigned char* w_bytes = static_cast<const unsigned char*>(w);
  const unsigned char* a_src[kAIters];
  int a_dst[kAIters];
  int a_chunk[kAIters];
  bool a_ok[kAIters];
#pragma unroll
  for (int i = 0; i < kAIters; ++i) {
    const int idx = ltid + i * kLoaders;
    const int row = idx / kChunks, chunk = idx % kChunks;
    const bool in_tile = idx < BLOCK_SIZE_M * kChunks;
    const int slot = in_tile ? s_slot[row] : -1;
    const long long arow = kUp ? (long long)(slot / TOPK) : (long long)slot;
    a_ok[i] = slot >= 0;
    a_src[i] = a_bytes + (slot >= 0 ? arow * (long long)(K_RED * kBytes) + chunk * 16 : 0);
    a_dst[i] = in_tile ? row * kRowBytes + swizzle_chunk(row, chunk, kChunks) * 16 : -1;
    a_chunk[i] = chunk;
  }
  // The weight tile's rows are consecutive rows of w (no N tail): a thread copies chunk column
  // ltid % 8 of tile rows ltid / 8 + i * kBRowStep, a fixed shared-memory stride (the swizzle
  // repeats every 8 rows) and a source offset known at compile time for each i, so two registers
  // hold its whole copy plan instead of kBIters pointers and offsets (swap-AB GEMM2: 97-120
  // registers, 4 blocks per SM). Fused gate/up: tile row t of warpgroup slice t / WN reads gate
  // row n_start/2 + (t / WN) * WN/2 + t % (WN/2), or the up row N further for t % WN >= WN/2;
  // with WN/2 a multiple of kBRowStep that is row0 + b_row_off(i), row0 = ltid / 8.
  constexpr int kBRowStep = kLoaders / kChunks;
  constexpr bool kBStrided = !kNTail && kChunks == 8 && kLoaders % kChunks == 0 &&
                             kBRowStep % 8 == 0 && (BLOCK_SIZE_N * kChunks) % kLoaders == 0 &&
                             (!kAct || kHalfW % kBRowStep == 0);
  auto b_row_off = [](int i) -> long long {  // source row of tile row i * kBRowStep, less row0
    const int t = i * kBRowStep;
    if constexpr (!kAct) return t;
    return (t % WN < kHalfW ? 0 : N) + (t / WN) * kHalfW + t % kHalfW;
  };
  const unsigned char* b_src0 = w_bytes;
  int b_dst0 = 0;
  if constexpr (kBStrided) {
    const int row = ltid / kChunks, chunk = ltid % kChunks;
    b_src0 = w_bytes +
             ((long long)expert * N_OUT + (kAct ? n_start / 2 : n_start) + row) *
                 (long long)(K_RED * kBytes) +
             chunk * 16;
    b_dst0 = kATile + row * kRowBytes + swizzle_chunk(row, chunk, kChunks) * 16;
  }
  constexpr int kBPlan = kBStrided ? 1 : kBIters;  // per-iteration plan entries kept
  const unsigned char* b_src[kBPlan];
  int b_dst[kBPlan];
  int b_chunk[kBPlan];
  bool b_ok[kBPlan];
#pragma unroll
  for (int i = 0; i < (kBStrided ? 0 : kBIters); ++i) {
    const int idx = ltid + i * kLoaders;
    const int row = idx / kChunks, chunk = idx % kChunks;
    const bool in_tile = idx < BLOCK_SIZE_N * kChunks;
    int n = n_start + row;
    b_ok[i] = in_tile && (!kNTail || n < N_OUT);
    if constexpr (kAct) {  // warpgroup slice: WN/2 gate rows, then the up rows of the same columns
      const int r = row % WN;
      const int col = n_start / 2 + (row / WN) * kHalfW + r % kHalfW;
      n = r < kHalfW ? col : N + col;
      b_ok[i] = in_tile && (!kNTail || col < N);
    }
    b_src[i] = w_bytes + (b_ok[i] ? ((long long)expert * N_OUT + n) * (long long)(K_RED * kBytes) +
                                        chunk * 16
                                  : 0);
    b_dst[i] = in_tile ? kATile + row * kRowBytes + swizzle_chunk(row, chunk, kChunks) * 16 : -1;
    b_chunk[i] = chunk;
  }
  const unsigned smem_base = ptx::smem_addr(smem);

  auto load_tile = [&](int kt, int stage) {
    const unsigned base = smem_base + stage * kStageBytes;
    const long long k_off = (long long)kt * kRowBytes;
#pragma unroll
    for (int i = 0; i < kAIters; ++i) {
      if (a_dst[i] < 0) continue;
      const bool ok = a_ok[i] && (!kKTail || k_off + a_chunk[i] * 16 < K_RED * kBytes);
      ptx::cp_async_16(base + a_dst[i], ok ? a_src[i] + k_off : a_bytes, ok ? 16 : 0);
    }
    if constexpr (kBStrided) {
      const bool ok = !kKTail || k_off + (ltid % kChunks) * 16 < K_RED * kBytes;
#pragma unroll
      for (int i = 0; i < kBIters; ++i)
        ptx::cp_async_16(base + b_dst0 + i * kBRowStep * kRowBytes,
                         ok ? b_src0 + k_off + b_row_off(i) * (K_RED * kBytes) : w_bytes,
                         ok ? 16 : 0);
    } else {
#pragma unroll
      for (int i = 0; i < kBIters; ++i) {
        if (b_dst[i] < 0) continue;
        const bool ok = b_ok[i] && (!kKTail || k_off + b_chunk[i] * 16 < K_RED * kBytes);
        ptx::cp_async_16(base + b_dst[i], ok ? b_src[i] + k_off : w_bytes, ok ? 16 : 0);
      }
    }
  };

  // ---- warpgroup's sub-tile ---------------------------------------------------------------------
  const int wg = min(warp / 4, kWgs - 1);  // the producer warpgroup (block fp8) computes nothing
  const int wg_m0 = (wg / kWgN) * kWgTileM;  // first row of this warpgroup (0 for swap-AB)
  const int wg_n0 = (wg % kWgN) * WN;        // first column (swap-AB: first weight row)
  const int lane_row = (warp & 3) * 16 + (lane >> 2);  // row within an m64 slice (+8 for c >= 2)

  float acc[MI][kAccN];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < kAccN; ++j) acc[i][j] = 0.f;

  // Block fp8: the activation-scale rows of this thread's accumulators (fixed for the tile):
  // of its token rows (slice i, half h: entry 2i + h), or with swap-AB of its token columns
  // (n8 chunk j, column 2(lane % 4) + e: entry 2j + e).
  constexpr int kARows = kSwap ? 2 * NT : 2 * MI;
  long long scale_row[kARows];
  // Down, swap-AB m16 (decode GEMM2, where it was measured): the routed weights of the same rows,
  // loaded here, where the K loop hides their latency, and not in the epilogue, where every
  // block waited for them after its last MMA: layer -1.3..-3.0% on Qwen3.5 fp8 TP4, -1.1..+0.3%
  // on DeepSeek-V3 TP8 at M = 8..256 (its blocks are short: bench/results/
  // 2026-12-01_h200_thirteenth_session.md, calls 8, 9). Not for more rows: four registers per
  // row entry cost the m64 tile a block per SM (168 -> 174 registers) and made m32 swap-AB
  // tiles spill under their launch bounds (nvcc 13.0).
  constexpr bool kRowWeightsEarly = !kUp && kSwap && kARows <= 4;
  float row_weight[kARows];
#pragma unroll
  for (int q = 0; q < kARows; ++q) {
    const int r = kSwap ? 8 * (q / 2) + 2 * (lane & 3) + (q & 1)
                        : wg_m0 + (q / 2) * 64 + lane_row + 8 * (q & 1);
    const int slot = s_slot[r];
    scale_row[q] = slot < 0 ? -1 : (kUp ? (long long)(slot / TOPK) : (long long)slot);
    row_weight[q] = (kRowWeightsEarly && slot >= 0) ? __ldg(topk_weights + slot) : 0.f;
  }

  // Issues (does not wait for) the wgmmas of one ring slot; `overwrite` clears d first. wgmma's A
  // operand is the m64-sliced one: the warpgroup's token rows, or with swap-AB its weight rows;
  // B is the other tile (its rows are the wgmma's N).
  auto issue_tile = [&](int stage, float (&d)[MI][kAccN], bool overwrite) {
    const unsigned a_base = smem_base + stage * kStageBytes + wg_m0 * kRowBytes;
    const unsigned b_base = smem_base + stage * kStageBytes + kATile + wg_n0 * kRowBytes;
    const unsigned op_a = kSwap ? b_base : a_base, op_b = kSwap ? a_base : b_base;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      const unsigned long long db = wgmma::make_desc(op_b + ks * 32);
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const unsigned long long da = wgmma::make_desc(op_a + i * 64 * kRowBytes + ks * 32);
        const int scale_d = (overwrite && ks == 0) ? 0 : 1;
        if constexpr (kFp8) wgmma::mma_e4m3<kMmaN>(d[i], da, db, scale_d);
        else if constexpr (DTYPE == kDtypeFp16) wgmma::mma_fp16<kMmaN>(d[i], da, db, scale_d);
        else wgmma::mma_bf16<kMmaN>(d[i], da, db, scale_d);
      }
    }
  };

  // ---- main loop over this split's K-tiles ----------------------------------------------------
  constexpr int kPerSplit = (kKTiles + SPLIT_K - 1) / SPLIT_K;
  const int kt_begin = split * kPerSplit;
  const int kt_end = min(kKTiles, kt_begin + kPerSplit);
  const int n_kt = max(0, kt_end - kt_begin);

  // Pipelined (num_stages >= 3, not block fp8): one wgmma group stays in flight while the next
  // tile is issued; a ring slot is refilled two tiles after its wgmmas were issued (the barrier at
  // the top of each step proves every warpgroup has retired them), so num_stages - 2 tiles load
  // ahead. Block fp8 folds each tile's partial sum with its scales, so each consumer warpgroup
  // waits for its tile's wgmmas (a double-buffered partial was serialized by ptxas, C7514); it
  // is warp-specialized (see the top of the file) so that the waits do not stall the copies or
  // the other warpgroups.
  constexpr bool kPipelined = num_stages >= 3 && !kBlockScale;
  constexpr int kAhead = kPipelined ? num_stages - 2 : num_stages - 1;  // tiles loading ahead
  constexpr int kGroups = K_RED / kSBK;

  // Weight-scale blocks met by a warpgroup's WN columns: one when they lie inside one block
  // (block_n a multiple of WN: the tile and warpgroup origins are multiples of WN), WN / block_n
  // when whole blocks tile them, else one per n8 chunk (few registers matter: see C7514 above).
  // Swap-AB: one per m64 slice of weight rows (block_n a multiple of 64).
  constexpr int kWScales = kSwap ? MI : kSBN % WN == 0 ? 1 : WN % kSBN == 0 ? WN / kSBN : NT;
  constexpr int kColsPerWScale = kSwap ? 64 : kWScales == NT ? 8 : WN / kWScales;
  struct Scales {
    float a[kARows];
    float w[kWScales];
  };
  // Block fp8: this thread's scale factors of K-tile kt.
  auto load_scales = [&](int kt, Scales& sc) {
    const int g = kt * BLOCK_SIZE_K / kSBK;
#pragma unroll
    for (int q = 0; q < kARows; ++q)
      sc.a[q] = scale_row[q] < 0 ? 0.f : __ldg(a_scale + scale_row[q] * kGroups + g);
    const float* ws_e = w_scale + (long long)expert * (N_OUT / kSBN) * kGroups + g;
#pragma unroll
    for (int q = 0; q < kWScales; ++q) {
      int n = n_start + wg_n0 + q * kColsPerWScale;
      if constexpr (kActQuant) {  // swap-AB slice q: gate rows, or (q >= MI/2) the up rows
        const int r = q * 64;
        n = (r < kHalfW ? 0 : N) + n_start / 2 + wg_n0 / 2 + r % kHalfW;
      }
      sc.w[q] = __ldg(ws_e + (long long)(min(n, N_OUT - 1) / kSBN) * kGroups);
    }
  };
  auto fold = [&](const float (&part)[MI][kAccN], const Scales& sc) {
    if constexpr (kSwap) {  // slice i: weight scale i; column 2(lane % 4) + e of chunk j: token
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float f = sc.a[2 * j + e] * sc.w[i];
            acc[i][4 * j + e] += part[i][4 * j + e] * f;
            acc[i][4 * j + 2 + e] += part[i][4 * j + 2 + e] * f;
          }
    } else {
  #pragma unroll
      for (int m = 0; m < MI; ++m)
  #pragma unroll
        for (int h = 0; h < 2; ++h)
  #pragma unroll
          for (int q = 0; q < kWScales; ++q) {
            const float f = sc.a[2 * m + h] * sc.w[q];
  #pragma unroll
            for (int j = q * kColsPerWScale / 8; j < (q + 1) * kColsPerWScale / 8; ++j) {
              acc[m][j * 4 + 2 * h] += part[m][j * 4 + 2 * h] * f;
              acc[m][j * 4 + 2 * h + 1] += part[m][j * 4 + 2 * h + 1] * f;
            }
          }
    }
  };
  // Top of each step: K-tile i has landed for every thread; refill the slot freed earlier.
  auto begin_step = [&](int i) {
    ptx::cp_async_wait<kAhead - 1>();
    wgmma::fence_proxy_async();  // this thread's cp.async bytes -> visible to wgmma after the barrier
    __syncthreads();
    const int next = i + kAhead;
    if (next < n_kt) load_tile(kt_begin + next, next % num_stages);
    ptx::cp_async_commit();
  };

  if constexpr (kWarpSpecialized) {
    if (tid >= kThreads) {
      if constexpr (kMinBlocks > 1) ptx::setmaxnreg_dec<kWsProducerRegs>();
      // Producer: tile i goes into slot i % num_stages once the consumers freed that slot's
      // previous tile; the slot's `full` barrier receives this thread's arrival when its copies
      // land (cp.async.mbarrier.arrive), so the producer never waits for its own copies and
      // num_stages tiles stay in flight. (Waiting for them and then arriving, as a first version
      // did, chained every announcement behind the next slot's release: 1.3-1.9x slower.)
      for (int i = 0; i < n_kt; ++i) {
        const int st = i % num_stages;
        if (i >= num_stages) mbar::wait(empty_bar(st), ((i / num_stages) - 1) & 1);
        load_tile(kt_begin + i, st);
        mbar::arrive_on_cp_async(full_bar(st));
      }
      ptx::cp_async_wait<0>();  // no committed group: a no-op (the consumers' `full` waits
                                // cover every copy before the ring is reused)
      return;  // the consumers write the output (and do split-K) on their own barrier
    }
    if constexpr (kMinBlocks > 1)
      ptx::setmaxnreg_inc<gemm_ws_consumer_regs(kThreads, kMinBlocks)>();
    float part[MI][kAccN];
    Scales sc_cur, sc_next;  // scales loaded one tile ahead: their latency hides behind a tile
    if (n_kt > 0) load_scales(kt_begin, sc_cur);
    for (int i = 0; i < n_kt; ++i) {
      const int st = i % num_stages;
      mbar::wait(full_bar(st), (i / num_stages) & 1);
      wgmma::fence_proxy_async();  // the producer's cp.async bytes -> visible to our wgmma reads
      if (i + 1 < n_kt) load_scales(kt_begin + i + 1, sc_next);
      wgmma::fence();
      issue_tile(st, part, true);
      wgmma::commit();
      wgmma::wait<0>();
      if (lane == 0) mbar::arrive(empty_bar(st));  // this warp's MMAs no longer read the slot
      fold(part, sc_cur);
      sc_cur = sc_next;
    }
  } else if constexpr (kBlockScale) {
    // Short reductions: every thread copies, one barrier per tile, num_stages - 1 tiles ahead.
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < n_kt) load_tile(kt_begin + s, s);
      ptx::cp_async_commit();
    }
    float part[MI][kAccN];
    Scales sc_cur, sc_next;
    if (n_kt > 0) load_scales(kt_begin, sc_cur);
    for (int i = 0; i < n_kt; ++i) {
      begin_step(i);
      if (i + 1 < n_kt) load_scales(kt_begin + i + 1, sc_next);
      wgmma::fence();
      issue_tile(i % num_stages, part, true);
      wgmma::commit();
      wgmma::wait<0>();
      fold(part, sc_cur);
      sc_cur = sc_next;
    }
    ptx::cp_async_wait<0>();
  } else {
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < n_kt) load_tile(kt_begin + s, s);
      ptx::cp_async_commit();
    }
    for (int i = 0; i < n_kt; ++i) {
      begin_step(i);
      wgmma::fence();
      issue_tile(i % num_stages, acc, false);
      wgmma::commit();
      if constexpr (kPipelined) wgmma::wait<1>();
      else wgmma::wait<0>();
    }
    wgmma::wait<0>();
    ptx::cp_async_wait<0>();
  }

  // PDL: the K loop is done (the producer warpgroup has returned); the epilogue and split-K
  // reduction do not need the SMs to themselves: let the next stage's blocks be scheduled.
  pdl_launch_dependents();

  // The consumer threads alone (the producer warpgroup has returned): named barrier 1.
  auto consumer_sync = [&] {
    if constexpr (kWarpSpecialized) asm volatile("bar.sync 1, %0;\n" ::"n"(kThreads) : "memory");
    else __syncthreads();
  };

  // ---- split-K: publish the partial, the last block of the tile reduces in split order --------
  if constexpr (SPLIT_K > 1) {
    constexpr int kAcc = MI * kAccN;
    const int tile = pid;  // one counter and SPLIT_K partial slots per grid tile
    int* counters = static_cast<int*>(workspace);
    const long long counter_bytes = ((long long)gridDim.x * 4 + 255) / 256 * 256;
    float4* partials = reinterpret_cast<float4*>(static_cast<unsigned char*>(workspace) + counter_bytes);
    auto part_ptr = [&](int s, int q) {
      return partials + (((long long)tile * SPLIT_K + s) * (kAcc / 4) + q) * kThreads + tid;
    };
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        __stcg(part_ptr(split, i * NT + j), make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]));
    __threadfence();
    consumer_sync();
    if (tid == 0) *s_ticket = atomicAdd(counters + tile, 1);
    consumer_sync();
    if (*s_ticket != SPLIT_K - 1) return;
    __threadfence();
    float sum[MI][kAccN];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < kAccN; ++j) sum[i][j] = 0.f;
    for (int s = 0; s < SPLIT_K; ++s) {
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          float4 v;
          if (s == split)
            v = make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
          else
            v = __ldcg(part_ptr(s, i * NT + j));
          sum[i][4 * j] += v.x;
          sum[i][4 * j + 1] += v.y;
          sum[i][4 * j + 2] += v.z;
          sum[i][4 * j + 3] += v.w;
        }
    }
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < kAccN; ++j) acc[i][j] = sum[i][j];
    if (tid == 0) counters[tile] = 0;  // ready for the next launch
  }

  // ---- epilogue: scale, routed weight, store valid slots ---------------------------------------
  float tensor_scale = 1.f;
  if constexpr (DTYPE == kDtypeFp8Tensor) tensor_scale = __ldg(a_scale) * __ldg(w_scale + expert);
  // The output scale of row `slot`, this thread's row entry q (scale_row's indexing).
  auto row_scale_of = [&](int q, int slot) {
    if constexpr (kRowWeightsEarly) return tensor_scale * row_weight[q];
    else if constexpr (!kUp) return tensor_scale * __ldg(topk_weights + slot);
    return tensor_scale;
  };
  auto pack = [](float v0, float v1) {
    if constexpr (DTYPE == kDtypeFp16) {
      const __half2 h = __floats2half2_rn(v0, v1);
      return *reinterpret_cast<const unsigned*>(&h);
    } else {
      const __nv_bfloat162 b = __floats2bfloat162_rn(v0, v1);
      return *reinterpret_cast<const unsigned*>(&b);
    }
  };
  // Fused: the value of n8 chunk j (< NT/2) of slice i, half h: silu(gate) · up, as a packed pair.
  auto out_pair = [&](int i, int j, int h, float rs) {
    if constexpr (kAct)
      return pack(act::silu_mul(acc[i][4 * j + 2 * h], acc[i][4 * (j + NT / 2) + 2 * h]),
                  act::silu_mul(acc[i][4 * j + 2 * h + 1], acc[i][4 * (j + NT / 2) + 2 * h + 1]));
    else
      return pack(acc[i][4 * j + 2 * h] * rs, acc[i][4 * j + 2 * h + 1] * rs);
  };
  constexpr int kOutChunks = kAct ? NT / 2 : NT;          // n8 output chunks per slice
  constexpr int kOutTileCols = kAct ? BLOCK_SIZE_N / 2 : BLOCK_SIZE_N;
  const int out_n0 = kAct ? n_start / 2 : n_start;        // first output column of the tile
  const int out_wg0 = kAct ? wg_n0 / 2 : wg_n0;           // of the warpgroup, within the tile
  // Staged through shared memory (the ring is free now): from the fragments a warp's store
  // covers 8 rows x 16 bytes; from the staged tile it writes whole 16-byte chunks, consecutive
  // threads along a row (GEMM2 writes M*topk*K*2 bytes: the largest stream of the layer at large
  // M). Rows are padded by 16 bytes so that a fragment store's 8 rows hit 8 different bank groups.
  constexpr int kOutRowBytes = kOutTileCols * 2 + 16;
  constexpr bool kStaged =
      BLOCK_SIZE_M * kOutRowBytes <= num_stages * kStageBytes && kOutCols % 8 == 0;
  // The staged tile's rows to their slots, whole 16-byte chunks, consecutive threads along a row.
  auto store_staged = [&] {
    constexpr int kRowChunks = kOutTileCols / 8;  // 16-byte chunks of an output row
    for (int idx = tid; idx < BLOCK_SIZE_M * kRowChunks; idx += kThreads) {
      const int r = idx / kRowChunks, c = idx % kRowChunks;
      const int slot = s_slot[r];
      const int n = out_n0 + c * 8;
      if (slot < 0 || (kNTail && n >= kOutCols)) continue;
      const uint4 v = *reinterpret_cast<const uint4*>(smem + r * kOutRowBytes + c * 16);
      if constexpr (kSumTopk)
        red::add8<DTYPE == kDtypeFp16>(static_cast<unsigned char*>(out) +
                                           ((long long)(slot / TOPK) * kOutCols + n) * 2,
                                       v);
      else
        *reinterpret_cast<uint4*>(static_cast<unsigned char*>(out) +
                                  ((long long)slot * kOutCols + n) * 2) = v;
    }
  };
  // Block fp8 fused: the staged bf16 tile quantized per (token row, SCALE_BLOCK_K group), one
  // warp each, as kernels/silu_mul_quant.cuh: scale = max(amax, 1e-10) / 448, q = e4m3(a / scale)
  // (satfinite, nearest even); out e4m3 [M*TOPK, N], out_scale [M*TOPK, N / SCALE_BLOCK_K].
  auto store_quantized = [&] {
    if constexpr (kActQuant) {
      constexpr int kTileGroups = kOutTileCols / kSBK;  // groups of a staged row
      constexpr int kPerLane = kSBK / 32;                // consecutive columns of a lane
      static_assert(kStaged && kOutTileCols % kSBK == 0 && kPerLane % 4 == 0 && N % kSBK == 0,
                    "block fp8 fused: the staged tile holds whole groups of 128k columns");
      for (int item = warp; item < BLOCK_SIZE_M * kTileGroups; item += num_warps) {
        const int r = item / kTileGroups, g = item % kTileGroups;
        const int slot = s_slot[r];
        if (slot < 0) continue;  // warp-uniform
        const unsigned short* src = reinterpret_cast<const unsigned short*>(
            smem + r * kOutRowBytes + (g * kSBK + lane * kPerLane) * 2);
        float v[kPerLane];
        float m = 0.f;
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) {
          v[c] = __bfloat162float(__ushort_as_bfloat16(src[c]));
          m = fmaxf(m, fabsf(v[c]));
        }
        m = act::warp_amax(m);
        const float sc = fmaxf(m, 1e-10f) / 448.0f;
        const int col = out_n0 + g * kSBK + lane * kPerLane;  // first intermediate column
        unsigned* dst = reinterpret_cast<unsigned*>(static_cast<unsigned char*>(out) +
                                                    (long long)slot * N + col);
#pragma unroll
        for (int c = 0; c < kPerLane; c += 4) {
          unsigned word = 0;
#pragma unroll
          for (int b = 0; b < 4; ++b)
            word |= static_cast<unsigned>(__nv_cvt_float_to_fp8(v[c + b] / sc, __NV_SATFINITE,
                                                                __NV_E4M3))
                    << (8 * b);
          dst[c / 4] = word;
        }
        if (lane == 0) out_scale[(long long)slot * (N / kSBK) + col / kSBK] = sc;
      }
    }
  };
  if constexpr (kSwap) {
    // Accumulator (slice i, n8 chunk j, half h, e) is output column out_wg0 + 64i + lane_row + 8h
    // of the tile's token row 8j + 2(lane % 4) + e (the fragment transposed); fused, slice i
    // < MI/2 holds gate and slice i + MI/2 up of the same columns. One 2-byte value per store.
    auto bits = [](float v) -> unsigned short {
      if constexpr (DTYPE == kDtypeFp16) return __half_as_ushort(__float2half_rn(v));
      else return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    };
    constexpr int kOutSlices = kAct ? MI / 2 : MI;
    if constexpr (kStaged) consumer_sync();  // every warpgroup's wgmmas are done reading the ring
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int t = 8 * j + 2 * (lane & 3) + e;
        const int slot = s_slot[t];
        const float rs = slot < 0 ? 0.f : row_scale_of(2 * j + e, slot);
#pragma unroll
        for (int i = 0; i < kOutSlices; ++i)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int q = 4 * j + 2 * h + e;
            float v;
            if constexpr (kActQuant) v = act::silu_mul_fast(acc[i][q], acc[i + MI / 2][q]);
            else if constexpr (kAct) v = act::silu_mul(acc[i][q], acc[i + MI / 2][q]);
            else v = acc[i][q] * rs;
            const int col = out_wg0 + i * 64 + lane_row + 8 * h;  // within the tile
            if constexpr (kStaged) {
              *reinterpret_cast<unsigned short*>(smem + t * kOutRowBytes + col * 2) = bits(v);
            } else {
              const int n = out_n0 + col;
              if (slot < 0 || (kNTail && n >= kOutCols)) continue;
              if constexpr (kSumTopk)
                red::add1<DTYPE == kDtypeFp16>(
                    static_cast<unsigned char*>(out) + ((long long)(slot / TOPK) * kOutCols + n) * 2,
                    bits(v));
              else
                *reinterpret_cast<unsigned short*>(static_cast<unsigned char*>(out) +
                                                   ((long long)slot * kOutCols + n) * 2) = bits(v);
            }
          }
      }
    if constexpr (kStaged) {
      consumer_sync();
      if constexpr (kActQuant) store_quantized();
      else store_staged();
    }
  } else if constexpr (kStaged) {
    consumer_sync();  // every warpgroup's wgmmas are done reading the ring
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wg_m0 + i * 64 + lane_row + 8 * h;
        const int slot = s_slot[r];
        const float rs = slot < 0 ? 0.f : row_scale_of(2 * i + h, slot);
        unsigned char* row = smem + r * kOutRowBytes + (out_wg0 + (lane & 3) * 2) * 2;
#pragma unroll
        for (int j = 0; j < kOutChunks; ++j)
          *reinterpret_cast<unsigned*>(row + j * 16) = out_pair(i, j, h, rs);
      }
    consumer_sync();
    store_staged();
  } else {
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int slot = s_slot[wg_m0 + i * 64 + lane_row + 8 * h];
        if (slot < 0) continue;
        const float rs = row_scale_of(2 * i + h, slot);
#pragma unroll
        for (int j = 0; j < kOutChunks; ++j) {
          const int n = out_n0 + out_wg0 + j * 8 + (lane & 3) * 2;
          if (kNTail && n >= kOutCols) continue;
          if constexpr (kSumTopk)
            red::add2<DTYPE == kDtypeFp16>(
                static_cast<unsigned char*>(out) + ((long long)(slot / TOPK) * kOutCols + n) * 2,
                out_pair(i, j, h, rs));
          else
            *reinterpret_cast<unsigned*>(static_cast<unsigned char*>(out) +
                                         ((long long)slot * kOutCols + n) * 2) = out_pair(i, j, h, rs);
        }
      }
  }
}

}  // namespace moetune
