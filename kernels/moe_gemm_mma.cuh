// moe_gemm_mma: the grouped expert GEMM of the MoE layer on the mma.sync path (sm_80, sm_89,
// sm_90a, sm_120): cp.async multi-stage pipeline, ldmatrix, tensor-core MMA, split-K.
//
// Math (slot = token * TOPK + j; e = expert of the slot's M-block):
//   up   (STAGE 0): out[slot, n] = Σ_k a[token(slot), k] · w13[e, n, k]          n < 2N, k < K
//   down (STAGE 1): out[slot, n] = topk_weights[slot] · Σ_k a[slot, k] · w2[e, n, k]   n < K, k < N
// Below, N_OUT = 2N (up) or K (down), K_RED = K (up) or N (down). fp8 block-wise dequantises each
// K-tile's partial sum: Σ_g a_scale[row, g] · w_scale[e, n / SCALE_BLOCK_N, g] · Σ_{k in g} a·w,
// g = k / SCALE_BLOCK_K (a K-tile never straddles a group); fp8 per-tensor multiplies the sum by
// a_scale[0] · w_scale[e]. Accumulation is fp32.
//
// Pointers (row-major, last dim contiguous):
//   a            up: hidden [M, K], down: intermediate [M*TOPK, N]; bf16 / fp16 / e4m3.
//                Written by the caller (up) or the activation stage (down).
//   a_scale      fp32. block: up [M, K/SCALE_BLOCK_K], down [M*TOPK, N/SCALE_BLOCK_K];
//                per-tensor: [1]; unused otherwise. Written by the quantization stage.
//   w            up: w13 [E, 2N, K], down: w2 [E, K, N]; same dtype as a.
//   w_scale      fp32. block: [E, N_OUT/SCALE_BLOCK_N, K_RED/SCALE_BLOCK_K]; per-tensor: [E].
//   out          [M*TOPK, N_OUT] ([M*TOPK, N] with FUSED_ACT), bf16 (fp16 for DTYPE fp16).
//                Written here, valid slots only.
//   topk_weights [M, TOPK] fp32 (= [M*TOPK] by slot); read by down only.
//   sorted_token_ids [>= num_tokens_post_padded] int32: slots grouped by expert, padding = M*TOPK.
//   expert_ids   [M-blocks] int32: expert of each BLOCK_SIZE_M rows of sorted_token_ids; -1 skips.
//   num_tokens_post_padded [1] int32: blocks whose first row is past it exit at once.
//   workspace    SPLIT_K > 1 only: int32 arrival counters [gridDim.x] (zero at launch: src/gemm
//                memsets them unless the caller keeps them zero; the last arriving block resets
//                its counter), padded to 256 bytes, then
//                fp32 partial tiles [gridDim.x][SPLIT_K][BLOCK_SIZE_M*BLOCK_SIZE_N].
//   out_scale    fp32 [M*TOPK, N/SCALE_BLOCK_K]: the activation scales that the wgmma kernel's
//                block-fp8 FUSED_ACT writes beside its e4m3 out; never used here (same signature).
//   zero_out     null, or zero_vecs 16-byte vectors that the grid zeroes (each block a share,
//                after its PDL wait, whether or not it has work): GEMM1 clears the layer's
//                output [M, K] this way before a SUM_TOPK GEMM2 adds into it.
//   topk_ids, expert_start: the wgmma kernel's derived alignment (its ALIGN_E); unused here
//                (same signature: src/gemm never asks this kernel to derive it).
//
// Grid: gridDim.x = (M-blocks bound) x N_TILES (N_TILES = ceil(N_OUT / BLOCK_SIZE_N)), walked in
// GROUP_SIZE_M order: GROUP_SIZE_M consecutive M-blocks (usually one expert) sweep an N-tile
// together before moving on, so a weight tile is read from HBM once and from L2 by the rest.
// gridDim.y = SPLIT_K: block (x, s) reduces K-tiles [s*per, (s+1)*per), per = ceil(K_TILES/SPLIT_K);
// the last of the SPLIT_K blocks of a tile to arrive sums the partials in split order 0..SPLIT_K-1
// (deterministic) and writes the tile. Warps: warps_m x warps_n (tile_math::gemm_warps_m), each
// owning a (BLOCK_SIZE_M/warps_m) x (BLOCK_SIZE_N/warps_n) accumulator sub-tile of m16n8 MMAs.
//
// Shared memory (tile_math::gemm_smem_bytes, all dynamic): num_stages ring slots of
// { A [BLOCK_SIZE_M][BLOCK_SIZE_K], B [BLOCK_SIZE_N][BLOCK_SIZE_K] } with rows of
// BLOCK_SIZE_K * bytes in 16-byte chunks at tile_math::swizzle_chunk(row, chunk) (conflict-free
// ldmatrix); then the slot table int32 [BLOCK_SIZE_M] (-1 for padding rows); then one 16-byte
// word for the split-K arrival ticket. A rows are gathered through the slot table; padding rows
// and tails are zero-filled by cp.async without reading global memory.
//
// FUSED_ACT = 1 (up stage, bf16/fp16 only): GEMM1 with the activation in its epilogue,
//   out[slot, c] = silu(Σ_k a·w13[e, c, k]) · Σ_k a·w13[e, N + c, k],  c < N,  out [M*TOPK, N],
// so the [M*TOPK, 2N] intermediate never reaches memory. The grid keeps ceil(2N / BLOCK_SIZE_N)
// N-tiles; tile pid_n covers intermediate columns [pid_n * BLOCK_SIZE_N/2, + BLOCK_SIZE_N/2). Only
// the B copy plan changes: within each warp's column slice of width W = BLOCK_SIZE_N / warps_n,
// tile rows [0, W/2) hold the gate rows and [W/2, W) the up rows (w13 row N + the same column) of
// that warp's W/2 intermediate columns, so a thread's n8 chunk j < NT/2 (gate) and j + NT/2 (up)
// are the same columns (tile_math::gemm_act_violation: W/2 a multiple of 8). Split-K reduces first;
// the final block folds silu(gate)·up in fp32 and rounds once. A tail (N % (BLOCK_SIZE_N/2) != 0)
// zero-fills the missing rows and skips their columns (N % 8 == 0: whole n8 chunks).
//
// SUM_TOPK = 1 (down stage, sm_90+): the top-k sum folded into GEMM2. out is the layer's output
// [M, K], zeroed by GEMM1 (zero_out), and each valid slot's row (times its routed weight,
// rounded to bf16/fp16 as the unfolded store is) is added into row slot / TOPK with
// red.global.add (common/red.cuh): no [M*TOPK, K] intermediate and no top-k sum launch. The
// adds to one element round one by one, in the order the blocks reach them (not
// bit-reproducible from run to run).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/act.cuh"
#include "common/pdl.cuh"
#include "common/ptx.cuh"
#include "common/red.cuh"
#include "common/tile_math.cuh"

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
          int FUSED_ACT,      // 1: up stage writes silu(gate)·up [M*TOPK, N] (bf16/fp16); else 0
          int SUM_TOPK>       // 1: down stage adds into out [M, K] (the top-k sum); else 0
__global__ void __launch_bounds__(num_warps * 32)
    moe_gemm_mma(const void* __restrict__ a, const float* __restrict__ a_scale,
                 const void* __restrict__ w, const float* __restrict__ w_scale,
                 void* __restrict__ out, const float* __restrict__ topk_weights,
                 const int* __restrict__ sorted_token_ids, const int* __restrict__ expert_ids,
                 const int* __restrict__ num_tokens_post_padded, long long M,
                 void* __restrict__ workspace, float* __restrict__ out_scale,
                 void* __restrict__ zero_out, long long zero_vecs,
                 const int* __restrict__ /*topk_ids*/, int /*expert_start*/) {
  using namespace tile_math;
  (void)out_scale;
  constexpr bool kUp = STAGE == kStageUp;
  constexpr bool kFp8 = DTYPE == kDtypeFp8Block || DTYPE == kDtypeFp8Tensor;
  constexpr bool kBlockScale = DTYPE == kDtypeFp8Block;
  constexpr int kBytes = kFp8 ? 1 : 2;                   // element size of a and w
  constexpr int N_OUT = kUp ? 2 * N : K;                 // output columns
  constexpr int K_RED = kUp ? K : N;                     // reduction length
  constexpr int kThreads = num_warps * 32;
  constexpr int kRowBytes = BLOCK_SIZE_K * kBytes;       // one tile row in shared memory
  constexpr int kChunks = kRowBytes / 16;                // 16-byte chunks per tile row
  constexpr int kKSteps = kRowBytes / 32;                // MMA k-steps per tile (k16 / fp8 k32)
  constexpr int kKTiles = (K_RED + BLOCK_SIZE_K - 1) / BLOCK_SIZE_K;
  constexpr int kNTiles = (N_OUT + BLOCK_SIZE_N - 1) / BLOCK_SIZE_N;
  constexpr int kWarpsM = gemm_warps_m(BLOCK_SIZE_M, BLOCK_SIZE_N, num_warps);
  constexpr int kWarpsN = num_warps / (kWarpsM > 0 ? kWarpsM : 1);
  constexpr int kWarpTileM = BLOCK_SIZE_M / (kWarpsM > 0 ? kWarpsM : 1);
  constexpr int kWarpTileN = BLOCK_SIZE_N / kWarpsN;
  constexpr int MT = kWarpTileM / 16;                    // m16 MMA tiles per warp
  constexpr int NT = kWarpTileN / 8;                     // n8 MMA tiles per warp
  constexpr int kATile = BLOCK_SIZE_M * kRowBytes;
  constexpr int kStageBytes = gemm_smem_stage_bytes(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K,
                                                    kBytes, kBytes);
  constexpr int kAIters = (BLOCK_SIZE_M * kChunks + kThreads - 1) / kThreads;
  constexpr int kBIters = (BLOCK_SIZE_N * kChunks + kThreads - 1) / kThreads;
  constexpr bool kKTail = K_RED % BLOCK_SIZE_K != 0;
  constexpr bool kNTail = N_OUT % BLOCK_SIZE_N != 0;
  constexpr int kSBN = SCALE_BLOCK_N > 0 ? SCALE_BLOCK_N : 1;  // safe divisors when not block fp8
  constexpr int kSBK = SCALE_BLOCK_K > 0 ? SCALE_BLOCK_K : 1;
  constexpr bool kAct = FUSED_ACT != 0;
  constexpr int kOutCols = kAct ? N : N_OUT;             // columns of out
  constexpr int kHalfW = kWarpTileN / 2;                 // fused: intermediate columns per warp

  static_assert(FUSED_ACT == 0 || FUSED_ACT == 1, "FUSED_ACT must be 0 or 1");
  static_assert(SUM_TOPK == 0 || (SUM_TOPK == 1 && !kUp), "SUM_TOPK: 0, or 1 on the down stage");
  constexpr bool kSumTopk = SUM_TOPK != 0;
  static_assert(!kAct || gemm_act_violation(kUp, DTYPE, N, kWarpTileN) == nullptr,
                "FUSED_ACT: up stage, bf16/fp16, N % 8 == 0, warp slice / 2 a multiple of 8 "
                "(see tile_math::gemm_act_violation's reason on the host)");
  static_assert(tile_rule_violation(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps,
                                    num_stages, SPLIT_K, kBytes, kBytes, kBlockScale) == nullptr,
                "config breaks tile_math::tile_rule_violation (see its reason on the host)");
  static_assert(GROUP_SIZE_M >= 1, "GROUP_SIZE_M must be >= 1");
  static_assert(BLOCK_SIZE_M % 16 == 0, "BLOCK_SIZE_M must be a multiple of 16");
  static_assert(BLOCK_SIZE_N % 16 == 0, "BLOCK_SIZE_N must be a multiple of 16");
  static_assert(kRowBytes % 64 == 0, "BLOCK_SIZE_K * bytes must be a multiple of 64");
  static_assert(num_stages >= 2, "num_stages must be >= 2");
  static_assert(SPLIT_K >= 1 && SPLIT_K <= kMaxSplitK, "SPLIT_K must be in 1..16");
  static_assert(kWarpsM > 0, "num_warps: no warps_m x warps_n grid gives 16 x 16 multiples of BLOCK_SIZE_M x BLOCK_SIZE_N");
  static_assert(K_RED * kBytes % 16 == 0, "rows of a and w must be whole 16-byte chunks");
  static_assert(!kBlockScale || (SCALE_BLOCK_K > 0 && kSBK % BLOCK_SIZE_K == 0),
                "block fp8: BLOCK_SIZE_K must divide block_k (a K-tile never straddles a scale group)");
  static_assert(!kBlockScale || (SCALE_BLOCK_N > 0 && K_RED % kSBK == 0 && N_OUT % kSBN == 0),
                "block fp8: N and K must be multiples of the scale block");
  static_assert(!kBlockScale || kSBN % 8 == 0,
                "block fp8: block_n must be a multiple of 8 (an MMA column pair shares a scale)");
  static_assert(!kBlockScale || BLOCK_SIZE_N % kSBN == 0 || kSBN % BLOCK_SIZE_N == 0,
                "block fp8: BLOCK_SIZE_N must divide block_n or be a multiple of it");

  extern __shared__ __align__(128) unsigned char smem[];
  int* s_slot = reinterpret_cast<int*>(smem + num_stages * kStageBytes);
  int* s_ticket = s_slot + BLOCK_SIZE_M;

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
  // The total and the block's expert are read together (one L2 round trip, not two): the grid
  // lies within the tables (gemm::gemm_max_m_blocks), so expert_ids[pid_m] is in bounds before
  // the total says whether the block has work.
  const int total_padded = __ldg(num_tokens_post_padded);
  const int expert = __ldg(expert_ids + pid_m);
  if (zero_out != nullptr)  // while the reads are in flight; before the exit below
    red::zero_share<kThreads>(zero_out, zero_vecs, (long long)blockIdx.y * gridDim.x + blockIdx.x,
                              (long long)gridDim.x * gridDim.y);
  // expert < 0: an expert of another rank (EP)
  if ((pid_m * BLOCK_SIZE_M >= total_padded) | (expert < 0)) return;
  const long long num_slots = M * TOPK;
  const int n_start = pid_n * BLOCK_SIZE_N;

  // ---- slot table ----------------------------------------------------------------------------
  for (int r = tid; r < BLOCK_SIZE_M; r += kThreads) {
    const int slot = __ldg(sorted_token_ids + (long long)pid_m * BLOCK_SIZE_M + r);
    s_slot[r] = (slot >= 0 && slot < num_slots) ? slot : -1;
  }
  __syncthreads();

  // ---- per-thread copy plan: global row pointers and swizzled shared offsets -------------------
  const unsigned char* a_bytes = static_cast<const unsigned char*>(a);
  const unsigned char* w_bytes = static_cast<const unsigned char*>(w);
  const unsigned char* a_src[kAIters];
  int a_dst[kAIters];
  int a_chunk[kAIters];
  bool a_ok[kAIters];
#pragma unroll
  for (int i = 0; i < kAIters; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx / kChunks, chunk = idx % kChunks;
    const bool in_tile = idx < BLOCK_SIZE_M * kChunks;
    const int slot = in_tile ? s_slot[row] : -1;
    const long long arow = kUp ? (long long)(slot / TOPK) : (long long)slot;
    a_ok[i] = slot >= 0;
    a_src[i] = a_bytes + (slot >= 0 ? arow * (long long)(K_RED * kBytes) + chunk * 16 : 0);
    a_dst[i] = in_tile ? row * kRowBytes + swizzle_chunk(row, chunk, kChunks) * 16 : -1;
    a_chunk[i] = chunk;
  }
  const unsigned char* b_src[kBIters];
  int b_dst[kBIters];
  int b_chunk[kBIters];
  bool b_ok[kBIters];
#pragma unroll
  for (int i = 0; i < kBIters; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx / kChunks, chunk = idx % kChunks;
    const bool in_tile = idx < BLOCK_SIZE_N * kChunks;
    int n = n_start + row;
    b_ok[i] = in_tile && (!kNTail || n < N_OUT);
    if constexpr (kAct) {  // warp slice: W/2 gate rows, then the W/2 up rows of the same columns
      const int r = row % kWarpTileN;
      const int col = n_start / 2 + (row / kWarpTileN) * kHalfW + r % kHalfW;
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
#pragma unroll
    for (int i = 0; i < kBIters; ++i) {
      if (b_dst[i] < 0) continue;
      const bool ok = b_ok[i] && (!kKTail || k_off + b_chunk[i] * 16 < K_RED * kBytes);
      ptx::cp_async_16(base + b_dst[i], ok ? b_src[i] + k_off : w_bytes, ok ? 16 : 0);
    }
  };

  // ---- warp's sub-tile and its ldmatrix lane addresses -----------------------------------------
  const int warp_m0 = (warp / kWarpsN) * kWarpTileM;
  const int warp_n0 = (warp % kWarpsN) * kWarpTileN;
  // A (x4: rows 0-7|8-15 x chunk 0|1 of a k-step): lane -> row (lane&7)+8*((lane>>3)&1), chunk lane>>4
  const int a_lrow = (lane & 7) + (((lane >> 3) & 1) << 3);
  const int a_lchunk = lane >> 4;
  // B (x4: n 0-7 x chunk 0|1, n 8-15 x chunk 0|1): lane -> n (lane&7)+8*(lane>>4), chunk (lane>>3)&1
  const int b_lrow = (lane & 7) + ((lane >> 4) << 3);
  const int b_lchunk = (lane >> 3) & 1;

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.f;

  // Block fp8: scale factors of this thread's rows (fixed for the tile) are looked up per K-tile.
  // Down: the rows' routed weights are loaded here, before the K loop, so that the epilogue does
  // not wait a DRAM round trip at the end of every short decode block (as the wgmma kernel's
  // kRowWeightsEarly). At most 4 registers (MT <= 2); taller warp tiles keep the epilogue load.
  constexpr bool kRowWeightsEarly = !kUp && !kAct && MT <= 2;
  long long scale_row[MT][2];
  float row_weight[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int slot = s_slot[warp_m0 + i * 16 + (lane >> 2) + 8 * h];
      scale_row[i][h] = slot < 0 ? -1 : (kUp ? (long long)(slot / TOPK) : (long long)slot);
      row_weight[i][h] = (kRowWeightsEarly && slot >= 0) ? __ldg(topk_weights + slot) : 0.f;
    }

  auto compute_tile = [&](int stage, float (&d)[MT][NT][4]) {
    const unsigned a_base = smem_base + stage * kStageBytes;
    const unsigned b_base = a_base + kATile;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      unsigned af[MT][4];
      unsigned bf[NT][2];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int row = warp_m0 + i * 16 + a_lrow;
        const int chunk = ks * 2 + a_lchunk;
        ptx::ldmatrix_x4(af[i], a_base + row * kRowBytes + swizzle_chunk(row, chunk, kChunks) * 16);
      }
#pragma unroll
      for (int j = 0; j < NT / 2; ++j) {
        const int row = warp_n0 + j * 16 + b_lrow;
        const int chunk = ks * 2 + b_lchunk;
        unsigned r[4];
        ptx::ldmatrix_x4(r, b_base + row * kRowBytes + swizzle_chunk(row, chunk, kChunks) * 16);
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          if constexpr (kFp8)
            ptx::mma_e4m3_16832(d[i][j], af[i], bf[j][0], bf[j][1]);
          else if constexpr (DTYPE == kDtypeFp16)
            ptx::mma_fp16_16816(d[i][j], af[i], bf[j][0], bf[j][1]);
          else
            ptx::mma_bf16_16816(d[i][j], af[i], bf[j][0], bf[j][1]);
        }
    }
  };

  // ---- main loop over this split's K-tiles ----------------------------------------------------
  constexpr int kPerSplit = (kKTiles + SPLIT_K - 1) / SPLIT_K;
  const int kt_begin = split * kPerSplit;
  const int kt_end = min(kKTiles, kt_begin + kPerSplit);
  const int n_kt = max(0, kt_end - kt_begin);

  // Block fp8: this thread's scale factors of one K-tile (rows' a_scale, columns' w_scale),
  // loaded one tile ahead so their latency hides behind a tile of MMAs.
  struct BlockScales {
    float a[MT][2];
    float w[NT];
  };
  auto load_scales = [&](int kt, BlockScales& sc) {
    constexpr int kGroups = K_RED / kSBK;
    const int g = kt * BLOCK_SIZE_K / kSBK;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        sc.a[m][h] = scale_row[m][h] < 0 ? 0.f : __ldg(a_scale + scale_row[m][h] * kGroups + g);
    const float* ws_e = w_scale + (long long)expert * (N_OUT / kSBN) * kGroups + g;
    if constexpr (BLOCK_SIZE_N <= kSBN) {  // one scale block covers the tile's columns
      const float v = __ldg(ws_e + (long long)(n_start / kSBN) * kGroups);
#pragma unroll
      for (int j = 0; j < NT; ++j) sc.w[j] = v;
    } else {
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int n = n_start + warp_n0 + j * 8;
        sc.w[j] = __ldg(ws_e + (long long)(min(n, N_OUT - 1) / kSBN) * kGroups);
      }
    }
  };
  BlockScales sc_cur, sc_next;
  if constexpr (kBlockScale) {
    if (n_kt > 0) load_scales(kt_begin, sc_cur);
  }

#pragma unroll
  for (int s = 0; s < num_stages - 1; ++s) {
    if (s < n_kt) load_tile(kt_begin + s, s);
    ptx::cp_async_commit();
  }
  for (int i = 0; i < n_kt; ++i) {
    ptx::cp_async_wait<num_stages - 2>();
    __syncthreads();
    const int next = i + num_stages - 1;
    if (next < n_kt) load_tile(kt_begin + next, next % num_stages);
    ptx::cp_async_commit();
    if constexpr (kBlockScale) {
      // the next tile's scales are loaded now and land while this tile computes
      if (i + 1 < n_kt) load_scales(kt_begin + i + 1, sc_next);
      float part[MT][NT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c) part[m][j][c] = 0.f;
      compute_tile(i % num_stages, part);
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            acc[m][j][c] += part[m][j][c] * (sc_cur.a[m][c >> 1] * sc_cur.w[j]);
      sc_cur = sc_next;
    } else {
      compute_tile(i % num_stages, acc);
    }
  }
  ptx::cp_async_wait<0>();
  // PDL: the K loop is done; the epilogue (and split-K reduction) does not need the SMs to itself,
  // so the next stage's blocks may be scheduled now (they wait for our completion).
  pdl_launch_dependents();

  // ---- split-K: publish the partial, the last block of the tile reduces in split order --------
  if constexpr (SPLIT_K > 1) {
    constexpr int kAcc = MT * NT * 4;
    const int tile = pid;  // one counter and SPLIT_K partial slots per grid tile
    int* counters = static_cast<int*>(workspace);
    const long long counter_bytes = ((long long)gridDim.x * 4 + 255) / 256 * 256;
    float4* partials = reinterpret_cast<float4*>(static_cast<unsigned char*>(workspace) + counter_bytes);
    auto part_ptr = [&](int s, int q) {
      return partials + (((long long)tile * SPLIT_K + s) * (kAcc / 4) + q) * kThreads + tid;
    };
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
        __stcg(part_ptr(split, i * NT + j), make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]));
    __threadfence();
    __syncthreads();
    if (tid == 0) *s_ticket = atomicAdd(counters + tile, 1);
    __syncthreads();
    if (*s_ticket != SPLIT_K - 1) return;
    __threadfence();
    float sum[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) sum[i][j][c] = 0.f;
    for (int s = 0; s < SPLIT_K; ++s) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          float4 v;
          if (s == split)
            v = make_float4(acc[i][j][0], acc[i][j][1], acc[i][j][2], acc[i][j][3]);
          else
            v = __ldcg(part_ptr(s, i * NT + j));
          sum[i][j][0] += v.x;
          sum[i][j][1] += v.y;
          sum[i][j][2] += v.z;
          sum[i][j][3] += v.w;
        }
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] = sum[i][j][c];
    if (tid == 0) counters[tile] = 0;  // ready for the next launch
  }

  // ---- fused epilogue: silu(gate) · up of the same columns, store valid slots -----------------
  if constexpr (kAct) {
    const int col0 = (n_start + warp_n0) / 2 + (lane & 3) * 2;  // this thread's first column
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int slot = s_slot[warp_m0 + i * 16 + (lane >> 2) + 8 * h];
        if (slot < 0) continue;
#pragma unroll
        for (int j = 0; j < NT / 2; ++j) {
          const int c = col0 + j * 8;
          if (kNTail && c >= N) continue;
          const float v0 = act::silu_mul(acc[i][j][2 * h], acc[i][j + NT / 2][2 * h]);
          const float v1 = act::silu_mul(acc[i][j][2 * h + 1], acc[i][j + NT / 2][2 * h + 1]);
          const long long off = (long long)slot * kOutCols + c;
          if constexpr (DTYPE == kDtypeFp16)
            *reinterpret_cast<__half2*>(static_cast<__half*>(out) + off) = __floats2half2_rn(v0, v1);
          else
            *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(out) + off) =
                __floats2bfloat162_rn(v0, v1);
        }
      }
    return;
  }

  // ---- epilogue: scale, routed weight, store valid slots ---------------------------------------
  float tensor_scale = 1.f;
  if constexpr (DTYPE == kDtypeFp8Tensor) tensor_scale = __ldg(a_scale) * __ldg(w_scale + expert);
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int slot = s_slot[warp_m0 + i * 16 + (lane >> 2) + 8 * h];
      if (slot < 0) continue;
      float row_scale = tensor_scale;
      if constexpr (kRowWeightsEarly) row_scale *= row_weight[i][h];
      else if constexpr (!kUp) row_scale *= __ldg(topk_weights + slot);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int n = n_start + warp_n0 + j * 8 + (lane & 3) * 2;
        if (kNTail && n >= N_OUT) continue;
        const float v0 = acc[i][j][2 * h] * row_scale;
        const float v1 = acc[i][j][2 * h + 1] * row_scale;
        if constexpr (kSumTopk) {  // into the token's row of the layer's output
          const long long off = (long long)(slot / TOPK) * N_OUT + n;
          if constexpr (DTYPE == kDtypeFp16) {
            const __half2 p = __floats2half2_rn(v0, v1);
            red::add2<true>(static_cast<__half*>(out) + off, *reinterpret_cast<const unsigned*>(&p));
          } else {
            const __nv_bfloat162 p = __floats2bfloat162_rn(v0, v1);
            red::add2<false>(static_cast<__nv_bfloat16*>(out) + off,
                             *reinterpret_cast<const unsigned*>(&p));
          }
          continue;
        }
        const long long off = (long long)slot * N_OUT + n;
        if constexpr (DTYPE == kDtypeFp16)
          *reinterpret_cast<__half2*>(static_cast<__half*>(out) + off) = __floats2half2_rn(v0, v1);
        else
          *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(out) + off) =
              __floats2bfloat162_rn(v0, v1);
      }
    }
}

}  // namespace moetune
