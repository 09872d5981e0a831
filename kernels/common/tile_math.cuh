// Tile arithmetic shared by the kernels (static_asserts) and the host validator: one formula
// for shared memory and one set of tiling rules, no drift. constexpr only, no CUDA includes, so
// host C++ (the config validator, src/gemm) and NVRTC (kernels/moe_gemm_mma.cuh) include it alike.
#pragma once

// Callable from host code and from kernels (nvcc and NVRTC define __CUDACC__).
#if defined(__CUDACC__)
#define MOETUNE_HD __host__ __device__
#else
#define MOETUNE_HD
#endif

namespace moetune {
namespace tile_math {

// Stage and dtype codes of the grouped GEMM's template parameters (STAGE, DTYPE).
constexpr int kStageUp = 0;    // GEMM1 with w13: out[slot, 0..2N) from hidden[token]
constexpr int kStageDown = 1;  // GEMM2 with w2: out[slot, 0..K) from intermediate[slot], x weight
constexpr int kDtypeBf16 = 0;       // bf16 a and w, fp32 accumulate, bf16 out
constexpr int kDtypeFp16 = 1;       // fp16 a and w, fp32 accumulate, fp16 out
constexpr int kDtypeFp8Block = 2;   // e4m3 a and w, per-(row, 128-group) a_scale, [bn, bk] w_scale
constexpr int kDtypeFp8Tensor = 3;  // e4m3 a and w, one a_scale, one w_scale per expert

// GEMM1 deriving the alignment itself (ALIGN_E > 0, kernels/common/inline_align.cuh): bounds on
// the call's slots (M * topk) and on the local experts, and the shared memory it borrows from
// the ring (a slot's expert, a count per expert, three results, a sum per warp; int32 each).
constexpr int kInlineAlignMaxSlots = 256;
constexpr int kInlineAlignMaxE = 512;
MOETUNE_HD constexpr int inline_align_scratch_bytes(int E) {
  return (kInlineAlignMaxSlots + E + 3 + 32) * 4;
}

MOETUNE_HD constexpr int ceil_div(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }

// Warp grid of one block: warps_m x warps_n = num_warps, each warp owning a
// (BLOCK_SIZE_M / warps_m) x (BLOCK_SIZE_N / warps_n) sub-tile that must be a multiple of 16 x 16
// (m16 MMA rows; two n8 MMA columns per ldmatrix.x4). Picks the most square warp tile (ties: more
// warps along M). Returns 0 when no split works.
MOETUNE_HD constexpr int gemm_warps_m(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int num_warps) {
  int best = 0;
  long long best_score = 0;
  for (int wm = 1; wm <= num_warps; wm *= 2) {
    if (num_warps % wm != 0) continue;
    const int wn = num_warps / wm;
    if (BLOCK_SIZE_M % (16 * wm) != 0 || BLOCK_SIZE_N % (16 * wn) != 0) continue;
    const long long tm = BLOCK_SIZE_M / wm, tn = BLOCK_SIZE_N / wn;
    const long long score = tm > tn ? tm * 1000 / tn : tn * 1000 / tm;  // aspect, x1000
    if (best == 0 || score <= best_score) {
      best = wm;
      best_score = score;
    }
  }
  return best;
}

// fp32 accumulators per thread. Block fp8 keeps a second set (the current scale group's sum).
MOETUNE_HD constexpr int gemm_acc_per_thread(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int num_warps) {
  return BLOCK_SIZE_M * BLOCK_SIZE_N / (32 * num_warps);
}
constexpr int kMaxAccPerThread = 128;  // beyond this the accumulators spill

// Bytes of one K-row of a tile (BLOCK_SIZE_K elements), and its 16-byte chunks.
MOETUNE_HD constexpr int gemm_row_bytes(int BLOCK_SIZE_K, int bytes) { return BLOCK_SIZE_K * bytes; }

// Swizzled position of 16-byte chunk `chunk` of tile row `row` (rows of `chunks` chunks, a power
// of two >= 4): ldmatrix reads 8 rows at one chunk column; the XOR spreads them over all 32 banks.
MOETUNE_HD constexpr int swizzle_chunk(int row, int chunk, int chunks) {
  return chunks >= 8 ? (chunk ^ (row & 7)) : (chunk ^ ((row >> 1) & 3));
}

// Shared memory of one block of moetune's grouped GEMM (kernels/moe_gemm_mma.cuh), all dynamic:
// num_stages ring slots, each an A tile [BLOCK_SIZE_M][BLOCK_SIZE_K] of activation elements and a
// B tile [BLOCK_SIZE_N][BLOCK_SIZE_K] of weight elements (rows of BLOCK_SIZE_K*bytes, 16-byte
// chunks swizzled by swizzle_chunk), then the slot table (BLOCK_SIZE_M int32: the token slot of
// each tile row, -1 for padding) and one 16-byte word (the split-K arrival ticket).
// a_bytes/b_bytes: element sizes (2 bf16/fp16, 1 fp8). Block-fp8 scales are read from global
// memory into registers; block fp8 (`block_scales`) adds two 8-byte mbarriers per ring slot
// (full, empty: the warp-specialized wgmma kernel's hand-off; the mma.sync kernel leaves them
// unused so that one formula serves both).
MOETUNE_HD constexpr int gemm_smem_bytes(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int BLOCK_SIZE_K, int num_stages,
                              int a_bytes, int b_bytes, bool block_scales) {
  const int stage = BLOCK_SIZE_M * BLOCK_SIZE_K * a_bytes + BLOCK_SIZE_N * BLOCK_SIZE_K * b_bytes;
  const int barriers = block_scales && a_bytes == 1 ? 16 * num_stages : 0;
  return num_stages * stage + BLOCK_SIZE_M * 4 + 16 + barriers;
}
// Byte offsets inside that layout.
MOETUNE_HD constexpr int gemm_smem_stage_bytes(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int BLOCK_SIZE_K,
                                    int a_bytes, int b_bytes) {
  return BLOCK_SIZE_M * BLOCK_SIZE_K * a_bytes + BLOCK_SIZE_N * BLOCK_SIZE_K * b_bytes;
}

// The reference Triton kernel's estimate, reported beside ours: (stages-1)*(BM+BN)*BK*bytes.
MOETUNE_HD constexpr int reference_smem_bytes(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int BLOCK_SIZE_K,
                                   int num_stages, int bytes) {
  return (num_stages - 1) * (BLOCK_SIZE_M + BLOCK_SIZE_N) * BLOCK_SIZE_K * bytes;
}

// --- the Hopper path (kernels/moe_gemm_wgmma_sm90a.cuh) --------------------------------------
// Same shared-memory layout and formula as above; warpgroups (4 warps) issue wgmma over it.
// Warpgroup grid: wg_m x wg_n = num_warps / 4, each warpgroup owning (BLOCK_SIZE_M / wg_m) rows
// (a multiple of 64: m64 wgmma) and (BLOCK_SIZE_N / wg_n) columns (one wgmma N of 64/128/256).
// Returns wg_m, or 0 when no split works.
MOETUNE_HD constexpr int gemm_wg_m(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int num_warps) {
  if (num_warps % 4 != 0) return 0;
  const int wgs = num_warps / 4;
  for (int wm = wgs; wm >= 1; wm /= 2) {
    if (wgs % wm != 0 || BLOCK_SIZE_M % (64 * wm) != 0) continue;
    const int wn = wgs / wm;
    if (BLOCK_SIZE_N % wn != 0) continue;
    const int n = BLOCK_SIZE_N / wn;
    if (n == 64 || n == 128 || n == 256) return wm;
  }
  return 0;
}
// True when the wgmma kernel runs this config on sm_90a: rows of exactly 128 bytes (bf16/fp16
// BLOCK_SIZE_K 64, fp8 BLOCK_SIZE_K 128: the 128-byte swizzle atom), a warpgroup grid, and the
// accumulators in registers (<= 128 per thread, block fp8 <= 64 because of the second set).
MOETUNE_HD constexpr bool gemm_wgmma_eligible(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int BLOCK_SIZE_K,
                                              int num_warps, int bytes, bool block_scales) {
  if (BLOCK_SIZE_K * bytes != 128) return false;
  const int wm = gemm_wg_m(BLOCK_SIZE_M, BLOCK_SIZE_N, num_warps);
  if (wm == 0) return false;
  const int acc = BLOCK_SIZE_M * BLOCK_SIZE_N / (32 * num_warps);
  return acc <= (bytes == 1 && block_scales ? kMaxAccPerThread / 2 : kMaxAccPerThread);
}

// Swap-AB (config key SWAP_AB = 1, decode): the weight tile is wgmma's A operand, the tile's token
// rows its B (wgmma N = BLOCK_SIZE_M), so a tile of a few tokens does not pad the MMA's 64 rows
// with empty slots and the weights stream as A. Same shared-memory layout and formula; each of
// num_warps / 4 warpgroups owns BLOCK_SIZE_N / (num_warps / 4) weight rows (a multiple of 64:
// m64 slices). Why this config cannot run swap-AB (rows of 128 bytes, BLOCK_SIZE_M 16 or 32, the
// slices, accumulators in registers; fused SiLU(gate)*up pairs a gate and an up slice, so a
// warpgroup needs an even number of slices), or nullptr.
MOETUNE_HD constexpr const char* gemm_swapab_violation(int BLOCK_SIZE_M, int BLOCK_SIZE_N,
                                                       int BLOCK_SIZE_K, int num_warps, int bytes,
                                                       bool block_scales, bool fused_act) {
  if (BLOCK_SIZE_K * bytes != 128)
    return "SWAP_AB=1 needs rows of 128 bytes (BLOCK_SIZE_K 64 for bf16/fp16, 128 for fp8)";
  if (BLOCK_SIZE_M != 16 && BLOCK_SIZE_M != 32)
    return "SWAP_AB=1 needs BLOCK_SIZE_M 16 or 32 (the tokens are the wgmma's N)";
  if (num_warps % 4 != 0) return "SWAP_AB=1 needs whole warpgroups (num_warps 4, 8 or 16)";
  const int rows = BLOCK_SIZE_N / (num_warps / 4);
  if (BLOCK_SIZE_N % (num_warps / 4) != 0 || rows % 64 != 0)
    return "SWAP_AB=1 needs BLOCK_SIZE_N / (num_warps / 4) to be a multiple of 64 (m64 slices)";
  if (fused_act && rows % 128 != 0)
    return "SWAP_AB=1 with fused SiLU(gate)*up needs BLOCK_SIZE_N / (num_warps / 4) to be a "
           "multiple of 128 (a gate and an up slice per warpgroup)";
  const int acc = BLOCK_SIZE_M * BLOCK_SIZE_N / (32 * num_warps);
  if (acc > (bytes == 1 && block_scales ? kMaxAccPerThread / 2 : kMaxAccPerThread))
    return "SWAP_AB=1: too many accumulators per thread";
  return nullptr;
}

// Block fp8 on the wgmma path is warp-specialized: num_warps consumer warps run the MMAs and
// fold the scales, one extra producer warpgroup copies the K-tiles (the fold must wait for each
// tile's MMAs; with the copies off the math warps and no block-wide barrier per tile, one
// consumer warpgroup's fold overlaps another's MMAs); gemm_wgmma_block_threads counts them.
// Only for long reductions: with few K-tiles per block (GEMM2's N = 256 is 2 tiles of 128) the
// pipeline never fills and the extra warpgroup only costs occupancy (measured 1.3-1.7x slower on
// the H200 for GEMM2, 5-10% faster for GEMM1 at K = 3072/7168).
constexpr int kWgmmaProducerThreads = 128;
constexpr int kWarpSpecializeMinKTiles = 8;
MOETUNE_HD constexpr bool gemm_wgmma_warp_specialized(bool block_fp8, int k_red, int BLOCK_SIZE_K,
                                                      int SPLIT_K) {
  return block_fp8 && ceil_div(ceil_div(k_red, BLOCK_SIZE_K), SPLIT_K) >= kWarpSpecializeMinKTiles;
}
MOETUNE_HD constexpr int gemm_wgmma_block_threads(int num_warps, bool warp_specialized) {
  return num_warps * 32 + (warp_specialized ? kWgmmaProducerThreads : 0);
}

// Blocks per SM of the warp-specialized kernel. Left alone, ptxas gives it about 90 registers a
// thread: with 256 threads that is 2 blocks per SM even where shared memory holds 3 (fp8 GEMM1
// m64n64k128 s4, 65,872 B; ncu on the H200: 2 blocks/SM by registers, 25% occupancy, stalls on
// latency). The producer warpgroup only issues cp.async and needs few registers, so where shared
// memory holds 3 or more blocks the kernel is compiled for that many (__launch_bounds__ min
// blocks) and splits the block's registers at run time (setmaxnreg): the producer gives back to
// kWsProducerRegs, the consumers take gemm_ws_consumer_regs. Applied only where the consumers
// keep 2 x their accumulators + 32 registers (the wgmma sum, the folded sum, addressing; m64n64
// w4 uses 92 unbounded and compiles to the 80-register launch with 48/112 without spilling,
// ptxas 13.0, at every num_stages with SPLIT_K 1 and 2, GEMM1 and GEMM2) and SPLIT_K <= 2 (at 4
// the bounded build spills 52-124 B: review, ptxas 13.0); otherwise no bound, no split.
// sm_90 limits (CUDA C++ Programming Guide, compute capability 9.0): 64 Ki 32-bit registers and
// 228 KiB of shared memory per SM, 1 KiB of it reserved per block; setmaxnreg takes 24..256 in
// steps of 8 (PTX ISA).
constexpr int kSm90RegsPerSm = 65536;
constexpr int kSm90SmemPerSm = 228 * 1024;
constexpr int kSm90SmemReservedPerBlock = 1024;
constexpr int kWsProducerRegs = 48;  // ptxas 13.0: 40 spills at num_stages 2; 48 not at SPLIT_K <= 2
constexpr int kWsMaxSplitK = 2;      // the bound's split-K limit (SPLIT_K 4 spills bounded)
// Registers a thread of the consumer warpgroups may take when `blocks` blocks of
// consumer_threads + the producer warpgroup share an SM.
MOETUNE_HD constexpr int gemm_ws_consumer_regs(int consumer_threads, int blocks) {
  const int threads = consumer_threads + kWgmmaProducerThreads;
  const int per_thread = kSm90RegsPerSm / (threads * blocks) / 8 * 8;  // the launch's count
  const int c = (per_thread * threads - kWsProducerRegs * kWgmmaProducerThreads) /
                consumer_threads / 8 * 8;
  return c > 256 ? 256 : c;
}
// The blocks per SM the warp-specialized kernel is compiled for (>= 3), or 0: no bound
// (__launch_bounds__(threads, 0) compiles to the same cubin as no minimum; 1 would not).
// smem_bytes: gemm_smem_bytes of the config; acc_per_thread: BLOCK_SIZE_M * BLOCK_SIZE_N /
// consumer threads.
MOETUNE_HD constexpr int gemm_ws_min_blocks(int consumer_threads, int smem_bytes,
                                            int acc_per_thread) {
  int b = kSm90SmemPerSm / (smem_bytes + kSm90SmemReservedPerBlock);
  if (b > 4) b = 4;
  for (; b >= 3; --b)
    if (gemm_ws_consumer_regs(consumer_threads, b) >= 2 * acc_per_thread + 32) return b;
  return 0;
}
// The same for the kernel's template parameters (0 where the kernel is not warp-specialized).
MOETUNE_HD constexpr int gemm_wgmma_min_blocks(bool block_fp8, int k_red, int BLOCK_SIZE_M,
                                               int BLOCK_SIZE_N, int BLOCK_SIZE_K, int num_warps,
                                               int num_stages, int SPLIT_K) {
  if (!gemm_wgmma_warp_specialized(block_fp8, k_red, BLOCK_SIZE_K, SPLIT_K)) return 0;
  if (SPLIT_K > kWsMaxSplitK) return 0;
  return gemm_ws_min_blocks(num_warps * 32,
                            gemm_smem_bytes(BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_stages,
                                            1, 1, true),
                            BLOCK_SIZE_M * BLOCK_SIZE_N / (num_warps * 32));
}

// Blocks per SM a swap-AB kernel without the producer warpgroup (short reductions: GEMM2 at
// decode) is compiled for: as many as shared memory holds, at most 8, and no more than leave
// each thread its accumulators and 40 registers, or for block fp8 twice its accumulators (the
// tile's partial sum), BLOCK_SIZE_M (its token columns' scale rows and scales) and 32 (ptxas
// 13.0 spilled m32n64 w4 s2 at 80 registers and fits every tile of the space this way); 0 (no
// bound) below 2. Its rate follows residency: ncu on the H200
// (Qwen3.5 TP4 fp8 GEMM2, M = 64, m16n128k128 s2/s3) found 97-120 registers, 4 blocks per SM,
// 25% occupancy and 62% of DRAM peak; ptxas 13.0 fits the bounded builds without spilling.
MOETUNE_HD constexpr int gemm_swapab_min_blocks(int smem_bytes, int threads, int acc_per_thread,
                                                int BLOCK_SIZE_M, bool block_fp8) {
  int b = kSm90SmemPerSm / (smem_bytes + kSm90SmemReservedPerBlock);
  if (b > 8) b = 8;
  const int need = block_fp8 ? 2 * acc_per_thread + BLOCK_SIZE_M + 32 : acc_per_thread + 40;
  while (b >= 2 && kSm90RegsPerSm / (b * threads) / 8 * 8 < need) --b;
  return b >= 2 ? b : 0;
}

constexpr int kMaxSplitK = 16;

// Why GEMM1 cannot fuse SiLU(gate)·up into its epilogue (FUSED_ACT), or nullptr. slice_cols: the
// columns of one warp (mma.sync: BLOCK_SIZE_N / warps_n) or warpgroup (wgmma: its wgmma N); its
// first half holds gate rows and its second half the up rows of the same intermediate columns, so
// each half must be whole n8 MMA chunks. Block fp8 also quantizes the activation per token and
// `group` (block_k) columns in the epilogue (GEMM2's input), so a block must hold whole groups
// (BLOCK_SIZE_N / 2 a multiple of block_k) and stage its tile in shared memory: the swap-AB
// wgmma path only. Per-tensor fp8 scales the activation by its global amax: never fused.
MOETUNE_HD constexpr const char* gemm_act_violation(bool up, int dtype, int N, int slice_cols,
                                                    bool swap_ab = false, int block_size_n = 0,
                                                    int group = 0) {
  if (!up) return "the fused SiLU(gate)*up epilogue belongs to GEMM1 (the up stage) only";
  if (dtype == kDtypeFp8Tensor)
    return "the fused SiLU(gate)*up epilogue is for bf16/fp16 and block fp8; per-tensor fp8 "
           "scales the intermediate by its global amax in its own stages";
  if (N % 8 != 0) return "fused SiLU(gate)*up needs N % 8 == 0 (whole n8 column chunks)";
  if (slice_cols < 16 || slice_cols % 16 != 0)
    return "fused SiLU(gate)*up needs half of each warp's (warpgroup's) column slice to be a "
           "multiple of 8 (gate and up halves of whole n8 chunks)";
  if (dtype == kDtypeFp8Block) {
    if (!swap_ab)
      return "block fp8 fuses SiLU(gate)*up and its quantization on the swap-AB path only "
             "(SWAP_AB=1, sm_90a)";
    if (group <= 0 || group % 128 != 0)
      return "block fp8 fused SiLU(gate)*up needs block_k to be a multiple of 128";
    if (N % group != 0)
      return "block fp8 fused SiLU(gate)*up needs N to be a multiple of block_k (whole groups)";
    if (block_size_n <= 0 || (block_size_n / 2) % group != 0)
      return "block fp8 fused SiLU(gate)*up needs BLOCK_SIZE_N / 2 to be a multiple of block_k "
             "(a block quantizes whole groups of its tokens' intermediate columns), e.g. "
             "BLOCK_SIZE_N 256 for block_k 128";
    if ((2 * N) % block_size_n != 0)
      return "block fp8 fused SiLU(gate)*up needs 2N to be a multiple of BLOCK_SIZE_N (its "
             "quantizing epilogue has no column tail)";
  }
  return nullptr;
}

// Why moetune's GEMM kernel cannot run this config (shape-independent rules), or nullptr.
// block_scales: fp8 block-wise (true by default, the stricter rule when a_bytes == 1).
// Shared memory against the GPU's limit and the fp8 scale-block rules are checked by the
// validator separately (they need the GPU and the block shape).
MOETUNE_HD constexpr const char* tile_rule_violation(int BLOCK_SIZE_M, int BLOCK_SIZE_N, int BLOCK_SIZE_K,
                                          int num_warps, int num_stages, int SPLIT_K, int a_bytes,
                                          int b_bytes, bool block_scales = true) {
  if (BLOCK_SIZE_M < 16 || BLOCK_SIZE_M % 16 != 0)
    return "BLOCK_SIZE_M must be a multiple of 16 (m16 MMA rows)";
  if (BLOCK_SIZE_N < 16 || BLOCK_SIZE_N % 16 != 0)
    return "BLOCK_SIZE_N must be a multiple of 16 (two n8 MMA columns per ldmatrix)";
  if (num_warps != 1 && num_warps != 2 && num_warps != 4 && num_warps != 8 && num_warps != 16)
    return "num_warps must be a power of two from 1 to 16";
  if (a_bytes != b_bytes || (a_bytes != 1 && a_bytes != 2))
    return "activation and weight element sizes must match (2 bf16/fp16, 1 fp8)";
  if (BLOCK_SIZE_K < 16 || (BLOCK_SIZE_K & (BLOCK_SIZE_K - 1)) != 0)
    return "BLOCK_SIZE_K must be a power of two >= 16";
  if (BLOCK_SIZE_K * a_bytes < 64)
    return "BLOCK_SIZE_K * element bytes must be >= 64 (4 swizzled 16-byte chunks per row)";
  if (num_stages < 2) return "num_stages must be >= 2 (cp.async double buffering at least)";
  if (SPLIT_K < 1 || SPLIT_K > kMaxSplitK) return "SPLIT_K must be in 1..16";
  if (gemm_warps_m(BLOCK_SIZE_M, BLOCK_SIZE_N, num_warps) == 0)
    return "no warp tiling: BLOCK_SIZE_M/warps_m and BLOCK_SIZE_N/warps_n must be multiples of 16 "
           "for some warps_m*warps_n = num_warps";
  const int acc = gemm_acc_per_thread(BLOCK_SIZE_M, BLOCK_SIZE_N, num_warps);
  if (acc > kMaxAccPerThread)
    return "BLOCK_SIZE_M*BLOCK_SIZE_N/(32*num_warps) > 128 fp32 accumulators per thread (spills)";
  if (a_bytes == 1 && block_scales && 2 * acc > kMaxAccPerThread)
    return "block fp8: BLOCK_SIZE_M*BLOCK_SIZE_N/(32*num_warps) > 64 (the scale group's sum needs "
           "a second accumulator set; spills)";
  return nullptr;
}

}  // namespace tile_math
}  // namespace moetune
