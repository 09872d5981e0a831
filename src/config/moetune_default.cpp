// moetune's own default config for its GEMM kernels (mma.sync, and wgmma on sm_90a), following
// what was measured on one H200 (bench/results/2026-11-30_h200_gemm.md and the two jsonl files
// beside it: every candidate of each GEMM timed alone, cold, per shape and M; "the data" below).
// Measured shapes: Qwen3.5-122B TP4 (E=256, N=256, K=3072, topk 8) bf16 and fp8 block [128,128],
// DeepSeek-V3 TP8 (K=7168) fp8 block, at M = 1, 8, 64, 256, 1024, 4096, i.e. slots per expert
// spe = M*topk/E_global = 0.03, 0.25, 2, 8, 32, 128. Every rule is one commented step below.
#include <algorithm>
#include <cmath>
#include <utility>

#include "config/kernel_rules.hpp"
#include "moetune/config.hpp"

namespace moetune {
namespace {

// Decode GEMM2's shared-memory ring budget (see its rule): when its grid outgrows one wave,
// more resident blocks beat a deeper ring. Measured boundary: between 25.8 KB (fp8 s5, kept)
// and 51.3 KB (bf16 s5, lost).
constexpr int kDecodeDownRingBytes = 32 * 1024;

// Blocks resident at once by shared memory alone. An SM holds the per-block opt-in maximum plus
// the 1 KB the driver reserves per block (tile_math::kSm90SmemReservedPerBlock; the same 1 KB on
// sm_80 163+1, sm_86/89/120 99+1 KB: CUDA C++ Programming Guide, "Compute Capabilities").
double resident_blocks(const GpuSpec& gpu, int smem_bytes) {
  constexpr int kReserved = tile_math::kSm90SmemReservedPerBlock;
  const int per_sm = (gpu.smem_per_block_bytes + kReserved) / (smem_bytes + kReserved);
  return static_cast<double>(gpu.sm_count) * per_sm;
}

// Whether BLOCK_SIZE_N keeps a weight tile inside whole fp8 scale blocks (or whole blocks
// inside a tile), as validation requires.
bool fits_block_n(const MoeShape& shape, int BLOCK_SIZE_N) {
  if (shape.dtype != Dtype::fp8_w8a8 || !shape.block_shape) return true;
  const int block_n = (*shape.block_shape)[0];
  return block_n % BLOCK_SIZE_N == 0 || BLOCK_SIZE_N % block_n == 0;
}

// Block-fp8 GEMM2 at spe > 8 on sm_90a: m64 n64 k128 s3 where its reduction (N) is short enough
// for the plain wgmma kernel (< kWarpSpecializeMinKTiles K-tiles; 128 threads, 49.5 KB: 4 blocks
// per SM), as on both measured shapes (N = 256 per rank: 2 K-tiles). Layer A/B against the former
// m64n128 s4 (bench --vs, H200, bench/results/2026-11-30_h200_final_call.md): Qwen3.5 TP4 M=1024
// 0.958, M=4096 0.983; DeepSeek-V3 TP8 0.972, 0.988 (95% CIs below 1; the GEMM phase alone
// faster at M=1024, within noise at 4096). Not measured, so unchanged (n128 s4): a wide expert's
// warp-specialized GEMM2 (N >= 1024 per rank), the mma.sync GPUs, per-tensor fp8.
bool block_fp8_down_n64(const MoeShape& shape, const GpuSpec& gpu, long long depth) {
  return shape.dtype == Dtype::fp8_w8a8 && shape.block_shape && gpu.arch() == "sm_90a" &&
         !tile_math::gemm_wgmma_warp_specialized(true, static_cast<int>(depth), 128, 1);
}
// Block-fp8 decode GEMM2 at n128 s3 (its rule in the decode band): sm_90a, spe >= 1.
bool block_fp8_decode_down_n128(const MoeShape& shape, const GpuSpec& gpu, double spe) {
  return shape.dtype == Dtype::fp8_w8a8 && shape.block_shape && gpu.arch() == "sm_90a" &&
         spe >= 1.0;
}
// Swap-AB at decode (its rule in moetune_default_config): block fp8 on sm_90a from 1/16 of a
// token slot per expert (spe; M = 2 on the anchors) to 8 (M = 256). Measured on one H200
// (bench/results/2026-11-30_h200_swapab.md): GEMMs alone, m16n128k128 s3 swap-AB / the
// unswapped m16n64k128 s4 up: Qwen3.5 TP4 M = 8, 64, 256 0.91, 0.99, 0.89; DeepSeek-V3 TP8 0.89,
// 1.00, 0.91. Layer A/B with both GEMMs swapped, before the kernel's occupancy bound: M = 8..256
// 0.85-0.99 except M = 32, 1.02 / 1.04 (Qwen / DeepSeek); after it (GEMM2 from 4 to 6 blocks
// per SM), M = 32 0.902 / 0.922 and 48 0.874 / 0.862. Down at s2 (its reduction, N = 256, is two
// K-tiles: a third slot only costs residency): layer 0.989, 0.996, 0.988 of s3 at M = 8, 64,
// 256 (Qwen). Below spe 0.25 (M = 2..7 on the anchors; the ninth session,
// bench/results/2026-12-01_h200_ninth_session.md call 2, stage kernels, layer against the
// unswapped split-K tiles, with the tiles this rule picks): Qwen3.5 M = 2..6 -9, -24, -19, -15,
// -25%, DeepSeek-V3 -8, -20, -14, -13, -25% (M = 2, 3 with the up GEMM split in two:
// kSwapSplitTiles). Not measured: spe below 1/16 (M = 1 keeps the unswapped SPLIT_K 8 tiles),
// 16-bit dtypes (GEMM1 fused with SiLU·up in the layer), per-tensor fp8. Its K-tile is 128 deep
// (128-byte fp8 rows), so block_k must be a multiple of 128.
bool block_fp8_decode_swap(const MoeShape& shape, const GpuSpec& gpu, double spe) {
  return shape.dtype == Dtype::fp8_w8a8 && shape.block_shape &&
         (*shape.block_shape)[1] % 128 == 0 && gpu.arch() == "sm_90a" && spe >= 1.0 / 16 &&
         spe <= 8.0;
}
// The H100 SXM (80 GB HBM3 at 3.35 TB/s, the same 132-SM GH100 as the H200's 4.8 TB/s), where
// three of the H200-measured block-fp8 decode rules below lose: GEMM2's GROUP_SIZE_M 32 from 4
// slots per expert, the fused n256 up ring's 3 stages from 3 slots per expert (5 win), and the
// unfused n128 up tile at 0.5..1 slot per expert. Measured on this board only
// (bench/results/2026-12-05_h100_twentyeighth_session.md, calls 3 and 4;
// bench/results/2026-12-05_h100_twentyninth_session.md); other boards keep the H200's rules.
bool h100_sxm(const GpuSpec& gpu) { return gpu.name == "NVIDIA H100 80GB HBM3"; }
// Token slots per expert from which the H100 SXM's fused n256 up tile takes 5 stages (174 KB, one
// block per SM) instead of 3. Layer A/B, three interleaved runs a side, Qwen3.5 TP4 / DeepSeek-V3
// TP8 fp8 (calls 3, 4): s5 against s3 at M = 96, 128, 192, 256 (spe 3..8) -0.8..-0.9% /
// -0.6..-1.2%, beside GEMM2 at g1 -0.6..-0.9% / -0.6..-1.2%; M = 48 (spe 1.5) -0.9% / -1.7% but
// M = 64 (spe 2) +0.6% / +0.8%, so the rule starts above both; M <= 32 within +-0.2%.
constexpr double kH100DeepUpMinSpe = 3.0;
// Where the H100 SXM's band of block_fp8_fused_act_up ends: from 0.5 slots per expert (M = 16 on
// the anchors) the fused n256 up tile, at 4 stages (kH100FusedBandStages), where the one-wave s2
// rule does not take it first (M = 23..46 on the anchors). Layer A/B on one H100 SXM (twenty-ninth
// session, call 3: bench/tables/fp8_up_fused_band, three interleaved runs a side, ranges <= 0.5%),
// Qwen3.5 TP4 / DeepSeek-V3 TP8 fp8, against n128 and the activation stage: s4 at M = 16 -1.6% /
// -2.0%, M = 20 -1.5% / -1.0% (s3 -1.2 / -0.6%, -1.4 / -0.2%); at M = 12 (spe 0.375) s3 -0.7% /
// +0.9%, s4 +2.2% / +3.8%: the band keeps [0.375, 0.5). The tuner picked the same tile at M = 16
// (call 2).
constexpr double kH100FusedBandEnd = 0.5;
constexpr int kH100FusedBandStages = 4;
// Whether a block-fp8 up tile can fuse the activation at all: block_k 128, N whole groups.
bool block_fp8_up_can_fuse(const MoeShape& shape) {
  return shape.block_shape && (*shape.block_shape)[1] == 128 && shape.N % 128 == 0;
}
// The swap-AB up tile n256 (instead of n128), whose blocks each hold a whole 128-column group
// of gate and up, so that GEMM1's epilogue writes the quantized SiLU(gate)·up (no activation
// stage: 1.7-2.4 µs of the layer at M = 8..64). Layer A/B on one H200 against the n128 tile and
// its activation stage (bench/results/2026-12-01_h200_twelfth_session.md, call 15, two
// interleaved runs a side), Qwen3.5 TP4 / DeepSeek-V3 TP8 fp8: spe 0.09, 0.125 (M = 3, 4,
// DeepSeek-V3) -0.6%, -0.2%; spe 0.25 (M = 8) -1.8% / -0.5%; 1 (M = 32) -1.5% / -0.2%; 2
// -1.6% / -1.3%; 4 -0.7% / -0.4%; 8 -1.1% / -0.7%; but spe 0.5 (M = 16) +0.3% / +1.9%, and
// (call 16) spe 0.75 (M = 24) +0.9% / +3.0%, 1.5 (M = 48) -1.1% / +0.2%: the band [0.375, 1)
// (M = 12..31 on the anchors) keeps n128 and the activation stage. Measured on E = 256, topk 8
// only (the wave count of the n256 grid, 2 blocks per SM, is the likely cause of the band); not
// measured: block_k other than 128 (the group must fill half the tile), other GPUs (swap-AB is
// sm_90a only). The H100 SXM's band is [0.375, 0.5) (kH100FusedBandEnd).
constexpr double kFusedBandStart = 0.375, kFusedBandEnd = 1.0;
bool block_fp8_fused_act_up(const MoeShape& shape, const GpuSpec& gpu, double spe) {
  const double band_end = h100_sxm(gpu) ? kH100FusedBandEnd : kFusedBandEnd;
  return block_fp8_up_can_fuse(shape) && !(spe >= kFusedBandStart && spe < band_end);
}
// Whether spe lies in the part of the H200's band that the H100 SXM fuses (0.5..1).
bool h100_fused_in_band(const GpuSpec& gpu, double spe) {
  return h100_sxm(gpu) && spe >= kH100FusedBandEnd && spe < kFusedBandEnd;
}
// The fused n256 up tile at num_stages 2 (3 blocks per SM by shared memory on the H200, 70 KB)
// instead of 3 (2 per SM, 105 KB) where its grid outgrows one wave at 3 stages but fits one at
// 2; this also takes the n256 tile (and the fused activation) into the band above from that
// point. Layer A/B on one H200 against the defaults before this rule
// (bench/results/2026-12-01_h200_thirteenth_session.md, call 4, tables
// bench/tables/fp8_up_n256s2, two interleaved runs a side), Qwen3.5 TP4 / DeepSeek-V3 TP8 fp8,
// expected up blocks (2 per active expert) in parentheses, 264 resident at s3, 396 at s2:
// M = 24 (273) -2.4% / -0.7%, 28 (302) -5.4% / -3.8%, 32 (327) -2.0% / -2.4%, 40 (368)
// -0.7% / -1.2%; outside it s2 lost: M = 8 (115) +3.4% / +4.6%, 20 (241) -0.5% / +0.4%, 48
// (400) +3.5% / +3.1%, 64 (445) +5.2% / +6.0%, 128, 256 +1.6..+2.8%. The rule itself against
// the defaults before it (call 5, another H200): M = 23, 24, 32, 40 -1.8, -2.5, -1.6, -0.9%
// (Qwen3.5) and -0.4, -0.8, -2.5, -1.4% (DeepSeek-V3); the sizes it leaves alone within
// +-0.2%. M = 41..46 (376-393 blocks) are not measured (call 5's M = 46 ran the table entry of
// 48 before the dense default table reached 64). Measured on E = 256, topk 8, the H200 only:
// with fewer SMs the range moves down into the band (H20: M = 12..19, H100 PCIe: 19..34).
bool n256_up_one_wave_at_s2(double blocks, const GpuSpec& gpu, int smem_s3, int smem_s2) {
  return blocks > resident_blocks(gpu, smem_s3) && blocks <= resident_blocks(gpu, smem_s2);
}
// Swap-AB up GEMM tiles (M-tiles x N-tiles: blocks) below this share of the SMs: SPLIT_K 2.
// Calibrated with n128 tiles (below); with the n256 tile of block_fp8_fused_act_up the same
// block count splits at M = 2..6 on the anchors, measured at M = 3, 4 only (DeepSeek-V3, layer
// -0.6%, -0.2% against n128 at SPLIT_K 2, 1: twelfth session, call 15). Measured
// (same call, layer, SPLIT_K 1 / 2 / 4 / 8): at about 62 and 93 tiles on 132 SMs (M = 2, 3 on
// both anchors) split 2 was 4-10% ahead of split 1 (Qwen3.5 M = 3: 0.4% behind), split 4 within
// 3% of 2, split 8 behind; at 122 tiles (M = 4) 1 and 2 were within 3.5% either way; from about
// 150 tiles (M = 5) split 1 won by 1.4-5%.
constexpr double kSwapSplitTiles = 0.75;
// The longest GEMM2 reduction (N) at which 16-bit decode GEMM2 takes swap-AB: the one measured.
// Above it swap-AB lost on Mixtral-8x7B TP2 (N = 7168: +6.5..+23.8% at M = 2..32) and was mixed
// on Qwen3-30B-A3B, OLMoE and gpt-oss-20b bf16 (N = 768, 1024, 2880: -2.4..+2.7%;
// bench/results/2026-12-01_h200_fifteenth_session.md, call 1).
constexpr long long kSwap16DownMaxDepth = 256;
// 16-bit up takes m16 n256 k128 w8 s3 from this many token slots per expert (see its rule).
constexpr double kW8UpMinSpe = 2.5;
void set_block_fp8_down(KernelConfig& c) {
  c.BLOCK_SIZE_N = 64;
  c.num_stages = 3;
}

}  // namespace

// Layer A/B on H100 SXMs, Qwen3.5 TP4 / DeepSeek-V3 TP8 fp8, three interleaved runs a side
// (twenty-eighth session call 2, twenty-ninth session calls 2 and 3; three GPUs): with the fused
// n256 up tile M = 8 -1.1 / -0.7%, -0.9 / -0.8%; M = 16 and 20 on the fused s4 tile -1.2 / -0.5%,
// -0.8 / -0.5% against that tile alone; M = 24..32 (fused s2) -0.7..-1.5% / -0.1..-1.1%. With
// the unfused n128 tile (M = 12) it loses: +0.8 / +2.5%, +1.1 / +2.5% (the derivation costs
// that kernel 2.4 µs on DeepSeek-V3). On the H200 mixed (Qwen3.5 -0.3..-1.9%, DeepSeek-V3
// +0.9..+1.7% at M = 7..16; bench/results/2026-12-06_thirtyfifth_session.md), so the H200's stage
// GEMM1 keeps the align launch (its sliced kernel, the default at M = 6..8 and 14..20, derives it).
bool moetune_default_alignment_in_gemm1(const GpuSpec& gpu, bool gemm1_fuses_act) {
  return h100_sxm(gpu) && gemm1_fuses_act;
}

bool moetune_default_sliced_gemms(const GpuSpec& gpu, const MoeShape& shape, int M) {
  // The two GPUs it was measured on (the same 132-SM GH100); other boards keep the stage path.
  if (!(h100_sxm(gpu) || gpu.name == "NVIDIA H200") || M < 1 || shape.E <= 0 ||
      shape.N % 128 != 0)
    return false;
  // Uniform routing: this rank's experts with any slot, and one standard deviation of that count.
  const int E_global = std::max(shape.E_global, shape.E);
  const double share = static_cast<double>(shape.topk) / E_global;
  const double p = 1.0 - std::pow(std::max(0.0, 1.0 - share), static_cast<double>(M));
  const double active = shape.E * p, sd = std::sqrt(shape.E * p * (1.0 - p));
  // A block per (active expert, 128-column slice) while one more m-block per expert is rare.
  const double slots_per_active = active > 0 ? M * share * shape.E / active : 0.0;
  if (slots_per_active > 16.0) return false;
  // Its blocks in waves of one per SM: one wave, or 1.5..2.2 waves on the H100 SXM (2.0 on the
  // H200), the band where it was measured to win (a wave and a sliver waits a whole block on few
  // SMs while the stage path's smaller blocks fill in). Measured with two slices only (N = 256):
  // wider shapes (more blocks and bf16 adds per slot) keep the one-wave rule. Layer A/B, --sliced
  // against the stage path, both fp8 anchors (2 slices, the waves in parentheses), fortieth session
  // on an H100 SXM after routing-zeroes-out: M = 10 (1.16) +10.5 / +11.7%, 12 (1.34) +1.4 / +6.7%,
  // 14 (1.51) -3.9 / -0.1%, 16..22 (1.66..2.07) -3.0..-4.6% / -1.0..-2.6%, 24 (2.19) -1.6 / -2.5%,
  // 28 (2.40) +0.9 / +1.9%. On the H200 (thirty-fifth session, before the 256-byte units and
  // routing-zeroes-out, which gained 1.6..2.8% on the H100): M = 16 +0.8 / +0.1%, 20 -3.2 / -3.4%,
  // 24 +7.9 / +4.8%; so its second wave ends at 2.0 (M = 14..20 on the anchors; M = 14..16
  // predicted from the H100).
  const double waves = (active + sd) * (shape.N / 128) / gpu.sm_count;
  const double band_end = h100_sxm(gpu) ? 2.2 : 2.0;
  return waves <= 1.0 || (shape.N == 256 && waves >= 1.5 && waves <= band_end);
}

KernelConfig moetune_default_config(const MoeShape& shape, const GpuSpec& gpu, int M, bool down) {
  const bool fp8 = shape.dtype == Dtype::fp8_w8a8;
  const ValidationTarget target{shape.dtype, shape.block_shape, &gpu};
  const bool block_fp8_down = down && block_fp8_down_n64(shape, gpu, shape.N);
  const int bytes = weight_bytes(shape.dtype);
  // The GEMM: up writes 2N columns reducing over K; down writes K columns reducing over N.
  const long long cols = down ? shape.K : 2LL * shape.N;
  const long long depth = down ? shape.N : shape.K;
  const int E_global = std::max(shape.E_global, shape.E);
  const double share = E_global > 0 ? static_cast<double>(shape.topk) / E_global : 0.0;
  // Uniform routing: token slots per expert (spe), and experts of this rank that get any token.
  const double spe = static_cast<double>(M) * share;
  const double active_experts =
      shape.E * (1.0 - std::pow(std::max(0.0, 1.0 - share), static_cast<double>(M)));
  const double slots_per_active = active_experts > 0 ? spe * shape.E / active_experts : 0.0;

  // The three bands below depend on spe only, so up and down always get the same BLOCK_SIZE_M
  // (one alignment serves both GEMMs); only N, K-depth, stages and SPLIT_K differ per GEMM.
  // BLOCK_SIZE_K x element bytes = 128 for every tile of >= 64 rows: on sm_90a that is what
  // selects the wgmma kernel (gemm_uses_wgmma); every 64/128-row winner in the data has it.
  const int k128_bytes = 128 / bytes;  // 64 for bf16/fp16, 128 for fp8
  // A rule's tile is taken only where the kernel accepts it, whole K-tiles cover the reduction
  // and its ring fits the GPU's shared memory.
  auto valid_tile = [&](const KernelConfig& k) {
    return config::kernel_rule_violation(k, target) == nullptr && depth % k.BLOCK_SIZE_K == 0 &&
           moetune_smem_bytes(k, target) <= gpu.smem_per_block_bytes;
  };
  KernelConfig c;
  if (spe <= 8) {
    // Decode (M = 1..256 measured): BLOCK_SIZE_M 16, GROUP_SIZE_M 1, 4 warps, both GEMMs (block
    // fp8's swap-AB GEMM2 takes g32 from 4 slots per expert, below). Every
    // winner of every shape at M <= 256 is m16 g1; m32 lost everywhere (up +5..+24%, down
    // +15..+75%), and so did BLOCK_SIZE_N 128 for down (+5..+92%, at k128 s4 in that data; the
    // block-fp8 n128 k64 s3 rule below came later from a layer A/B).
    c.BLOCK_SIZE_M = 16;
    c.GROUP_SIZE_M = 1;
    c.num_warps = 4;
    c.BLOCK_SIZE_N = 64;
    if (!down) {
      // Up: n64 k128 s4 won M = 8..64 on all three shapes (bf16 M=256: tie with k64 s5, 0.3%),
      // GEMM1 alone and unfused; the 16-bit one-wave rule below takes shallower rings at M = 5..17.
      // The data differs from the recommendation (n64) at fp8 M=256 (both shapes, both runs)
      // and DeepSeek fp8 M=8 (prefetch run), where m16n128k128 w8 s5 was 1-4% ahead: within the
      // run-to-run noise (~5%), while that config lost by 1-8% at M = 8..64 elsewhere; n64 stays.
      c.BLOCK_SIZE_K = 128;
      c.num_stages = 4;
    } else {
      // Down: n64 k64 for every dtype. bf16: 22-56% ahead of k128 s4. fp8: it won 12 of the
      // 16 fp8 (shape, M <= 256, run) cases; k128 s4 won Qwen M=1 in both runs (4.0 vs 4.3 us)
      // and M=8 in the first run on both shapes (19.5 vs 19.9, 40.9 vs 41.0), all within 0.4 us
      // and the M=8 ones reversed in the second run: no separate fp8 rule for k (block fp8
      // takes n128 s3 from one slot per expert on: its rule at the end of this branch).
      // Stages: 5, unless the launch has more blocks than 5 stages keep resident; then the
      // most whose ring fits kDecodeDownRingBytes. fp8 s5 is 25.8 KB (8 blocks per SM on an
      // H200): 5 here. 16-bit s5 is 51.3 KB (4 per SM), s3 30.8 KB (7): from M = 2 on the
      // three anchors' grids outgrow 4 x 132 blocks. Layer A/B, bf16 Qwen TP4, s3 against s5
      // (bench --vs, 2026-11-30_h200_final_call.md): M=1 (384 blocks, all resident at s5)
      // 1.036, so s5; M=2, 8, 64, 256 0.930, 0.956, 0.967, 0.944. fp8 s3 vs s5 in the tuner
      // (2026-11-30_h200_decode_stages.md): -7..+1.3%, no consistent sign.
      c.BLOCK_SIZE_K = 64;
      c.num_stages = 5;
      const double blocks = active_experts * std::ceil(slots_per_active / c.BLOCK_SIZE_M) *
                            std::ceil(static_cast<double>(cols) / c.BLOCK_SIZE_N);
      if (blocks > resident_blocks(gpu, moetune_smem_bytes(c, target))) {
        while (c.num_stages > 2 && moetune_smem_bytes(c, target) > kDecodeDownRingBytes) --c.num_stages;
      }
      // Block fp8 on sm_90a from one token slot per expert on: n128 s3 (a 27.6 KB ring, half
      // the blocks). Layer A/B against n64 s5 (bench --vs, H200,
      // bench/results/2026-11-30_h200_fourth_session_call1.md): DeepSeek-V3 TP8 M=32..256
      // 0.960-0.975, Qwen3.5 TP4 0.982-0.990 (95% CIs below 1); below spe 1 it split (DeepSeek
      // M=8/16 0.991/0.979, Qwen 1.029/1.001), so there n64 s5 stays. 16-bit n128 s3 would be a
      // 55 KB ring (not measured); per-tensor fp8 and the mma.sync GPUs were not measured.
      if (block_fp8_decode_down_n128(shape, gpu, spe)) {
        c.BLOCK_SIZE_N = 128;
        c.num_stages = 3;
      }
      // 16-bit on sm_90a from 1/4 token slot per expert (M = 8 at topk 8 of 256): swap-AB
      // (weights as the wgmma's A) n128 k64 s2, what `moetune tune` picked for GEMM2 at every
      // M = 8..20 (Qwen3.5 bf16 TP4, GEMM2 alone -0.7..-3.4%). Layer, tables against the
      // defaults (bench/results/2026-12-01_h200_fourteenth_session.md, call 6), M = 8..256:
      // Qwen3.5 bf16 TP4 -0.1..-1.9%, DeepSeek-V3 TP8 bf16 -0.2..-1.1%, at each of 9 sizes
      // (call 7, another H200, with the up rule below: M = 12..256 -0.1..-0.6% / +0.1..-0.7%).
      // Measured on E = 256, topk 8, N = 256 only (a reduction of 4 K-tiles, all in flight at
      // once in the s2 ring's two stages of the non-warp-specialized kernel): longer reductions
      // (Mixtral's N = 7168 per rank at TP2) keep the unswapped tiles, as do M < 8 and the
      // mma.sync GPUs. fp16 follows bf16 (same element width; not measured).
      if (!fp8 && gpu.arch() == "sm_90a" && spe >= 0.25 && depth <= kSwap16DownMaxDepth) {
        KernelConfig sw = c;
        sw.BLOCK_SIZE_N = 128;
        sw.BLOCK_SIZE_K = 64;
        sw.num_stages = 2;
        sw.SWAP_AB = 1;
        if (valid_tile(sw)) c = sw;
      }
    }
  } else if (spe <= 64) {
    // spe 32 (M=1024) measured: m64 n128 g8 w4 s4 won both GEMMs of every shape (fp8 s3 and s4
    // within 1%); 16-bit k64, fp8 k128 (128-byte rows: wgmma). Not measured between spe 8 and
    // 32: the band starts right above the last spe at which m16 won (M=256, spe 8).
    // fp8 up since the warp-specialized wgmma kernel (bench/results/2026-11-30_h200_gemm_ws.md):
    // n64 ahead of n128 by 8% (Qwen, 130.7 vs 142.3 us) and 5% (DeepSeek, 289.4 vs 305.8);
    // block-fp8 down on sm_90a with a short reduction: n64 s3 (block_fp8_down_n64).
    c.BLOCK_SIZE_M = 64;
    c.BLOCK_SIZE_N = fp8 && !down ? 64 : 128;
    c.BLOCK_SIZE_K = k128_bytes;
    c.GROUP_SIZE_M = 8;
    c.num_warps = 4;
    c.num_stages = 4;
    if (block_fp8_down) set_block_fp8_down(c);
  } else if (!fp8) {
    // spe 128 (M=4096) bf16: up m128n128k64 g16 w8 s4 (next best +6%); down m128n256k64 g16 w8
    // s3 (m64n128 +4%, m128n128 s4 +11%). fp16: same element width, same rule (not measured).
    c.BLOCK_SIZE_M = 128;
    c.BLOCK_SIZE_K = 64;
    c.GROUP_SIZE_M = 16;
    c.num_warps = 8;
    c.BLOCK_SIZE_N = down ? 256 : 128;
    c.num_stages = down ? 3 : 4;
  } else {
    // spe 128 fp8 block: m64 stays (every m128 fp8 config lost: +4..+18%), k128 g8 w4 s4; up
    // n64 (first run: ahead by 2-8%; prefetch run: n64 and n128 within 1.5% either way, so the
    // recommendation's n64 stands), down n128 (n64 s4 +9..+15%); block-fp8 down on sm_90a with
    // a short reduction: n64 s3 (block_fp8_down_n64). Per-tensor fp8 (not measured) takes the
    // same tiles as block fp8 did before that rule.
    c.BLOCK_SIZE_M = 64;
    c.BLOCK_SIZE_K = 128;
    c.GROUP_SIZE_M = 8;
    c.num_warps = 4;
    c.num_stages = 4;
    c.BLOCK_SIZE_N = down ? 128 : 64;
    if (block_fp8_down) set_block_fp8_down(c);
    // Block fp8 on sm_90a, after the wgmma kernel's two-register copy plan (d651a2f): what the
    // tuner picked at M = 4096 (`moetune tune --batch 4096 --budget 55s`, one H200,
    // bench/results/2026-11-30_h200_swapab.md section 8): up m64 n256 k128 g16 w8 (two consumer
    // warpgroups) s4 (Qwen3.5 TP4; DeepSeek-V3 TP8 picked s5), down m64 n128 k128 g16 w4 s3 (both
    // shapes). Layer against these rules' former tiles (bench --vs): Qwen 0.876, DeepSeek 0.836
    // (GEMM phase 0.821, 0.797). Measured at spe 128 only; the band starts above spe 64.
    if (shape.dtype == Dtype::fp8_w8a8 && shape.block_shape &&
        (*shape.block_shape)[1] % 128 == 0 && gpu.arch() == "sm_90a") {
      c.GROUP_SIZE_M = 16;
      if (down) {
        c.BLOCK_SIZE_N = 128;
        c.num_warps = 4;
        c.num_stages = 3;
      } else {
        c.BLOCK_SIZE_N = 256;
        c.num_warps = 8;
        c.num_stages = 4;
      }
    }
  }

  // Block fp8: a K-tile never straddles a scale group, so BLOCK_SIZE_K divides block_k (the
  // largest of the band's depth, 64, 32 that does; off the wgmma path when block_k < 128), and
  // BLOCK_SIZE_N divides block_n or is a multiple of it.
  if (fp8 && shape.block_shape) {
    const int block_k = (*shape.block_shape)[1];
    while (c.BLOCK_SIZE_K > 32 && block_k % c.BLOCK_SIZE_K != 0) c.BLOCK_SIZE_K /= 2;
    while (c.BLOCK_SIZE_N > 32 && !fits_block_n(shape, c.BLOCK_SIZE_N)) c.BLOCK_SIZE_N /= 2;
  }
  // No deeper than the reduction (a longer K-tile multiplies padding zeros), down to the
  // kernel's minimum row of 64 bytes.
  const int min_block_k = 64 / bytes;
  while (c.BLOCK_SIZE_K > min_block_k && c.BLOCK_SIZE_K > depth) c.BLOCK_SIZE_K /= 2;

  // SPLIT_K, decode up only (down's reduction is N, short: split down lost, e.g. bf16 M=1 k64 s6
  // SPLIT_K 4 14.3 us vs 5.0 unsplit). The largest of 8/4/2/1 such that the launch's blocks
  // (M-tiles of the active experts x N-tiles x SPLIT_K) stay within a budget of 2 x SMs for
  // 16-bit and 4 x SMs for fp8 (2 x SMs x 2/bytes), and every split keeps >= 3 whole K-tiles
  // (equal splits). The recommendation said 2 x SMs for every dtype; the data disagrees for fp8:
  // at M=1 (64 tiles) that gives SPLIT_K 4, but SPLIT_K 8 was faster on both fp8 shapes (Qwen
  // 8.6 vs 9.0 us, DeepSeek 14.4 vs 16.2, both runs), while bf16 best is 4 (10.2 us; SPLIT_K 8
  // 11.2-14.6). An fp8 K-tile row is half the bytes, so twice the blocks keep as many bytes in
  // flight. At M=8 (459 Qwen tiles) this gives 1: measured best (SPLIT_K 2/4 +11..+30%).
  if (!down && spe <= 8) {
    const double m_tiles = active_experts * std::ceil(slots_per_active / c.BLOCK_SIZE_M);
    const double tiles = m_tiles * static_cast<double>((cols + c.BLOCK_SIZE_N - 1) / c.BLOCK_SIZE_N);
    const double budget = 2.0 * gpu.sm_count * (2.0 / bytes);
    const long long k_tiles = (depth + c.BLOCK_SIZE_K - 1) / c.BLOCK_SIZE_K;
    for (int s : {8, 4, 2}) {
      if (tiles * s <= budget && k_tiles >= 3LL * s && depth % (1LL * s * c.BLOCK_SIZE_K) == 0) {
        c.SPLIT_K = s;
        break;
      }
    }
    // num_stages 3 at SPLIT_K 8: the winner on both fp8 shapes at M=1 (Qwen's splits hold only
    // 3 K-tiles, so a 4th stage has nothing to load); 4 stages at SPLIT_K 8 was not measured.
    if (c.SPLIT_K == 8) c.num_stages = 3;
    // 16-bit up, unsplit, on sm_90a (measured on the H200 only): when the k128 s4 grid outgrows
    // one wave of resident blocks (80 KB each, 2 per H200 SM), a shallower ring that holds it in
    // one wave — as for down above, more resident blocks beat a deeper ring: below 3 blocks per
    // SM k64 s5 (51 KB, 4 per SM: the deepest ring keeps the few blocks' bytes in flight), else
    // k128 s2 (40 KB, 5 per SM: half the K-steps of k64 per byte), else k64 s3 (31 KB, 7 per SM).
    // "Holds" with one standard deviation of the active-expert count to spare (the grid varies
    // with the routing: at Qwen3.5 M = 12, 649 expected tiles +-59 against 660 resident, k64 s4
    // gained 3.6% and k64 s3 7.6%). Layer A/B, GEMM1 with SiLU·up fused, against the defaults
    // of the time, Qwen3.5 TP4 bf16 / DeepSeek-V3 TP8 bf16: k64 s5 against k128 s4 (ninth
    // session, calls 5, 6) M = 5..8 (300..456 tiles) -21..-3% / -22..-0.4%, M = 4 (244 tiles,
    // one wave either way) within 0.1%; (bench/results/2026-12-01_h200_fourteenth_session.md)
    // k64 s3 at M = 12, 16 -7.6, -5.5% / -5.6, -0.9% (call 2); k128 s2, the tuner's pick at
    // M = 8, 10 (call 5), against k64 s5 at M = 5..8 (call 7, with GEMM2 swap-AB from M = 8):
    // M = 5, 6 (300, 355 tiles) +6.8, +0.3% / +7.0, +1.8%, M = 7, 8 (408, 456) -0.6, -3.4% /
    // -2.1, -3.6%, and against k64 s4 at M = 10: -4.4% / -5.5%. Past one wave (M = 20..32,
    // 960..1304 tiles) no ring won on both shapes (1.04..1.24 waves lost 6-12%): k128 s4 stays.
    if (!fp8 && c.SPLIT_K == 1 && gpu.arch() == "sm_90a" &&
        tiles > resident_blocks(gpu, moetune_smem_bytes(c, target)) && active_experts > 0) {
      const double p = active_experts / shape.E;  // each expert's chance of any token
      const double spare = std::sqrt(shape.E * p * (1.0 - p)) * tiles / active_experts;
      const bool few_per_sm = tiles < 3.0 * gpu.sm_count;
      for (const auto& [block_k, stages] : {std::pair{64, 5}, std::pair{128, 2}, std::pair{64, 3}}) {
        if (block_k > depth || (stages == 5 && !few_per_sm)) continue;
        KernelConfig ring = c;
        ring.BLOCK_SIZE_K = block_k;
        ring.num_stages = stages;
        if (tiles + spare <= resident_blocks(gpu, moetune_smem_bytes(ring, target)) &&
            config::kernel_rule_violation(ring, target) == nullptr) {
          c = ring;
          break;
        }
      }
    }
  }

  // 16-bit up from 2.5 token slots per expert (M = 80 at topk 8 of 256) to the end of decode:
  // m16 n256 k128 w8 s3 (two warps per 16-row slice; 209 KB, one block per SM), which `moetune
  // tune` picked at M = 20 (Qwen3.5 bf16 TP4, fourteenth session). Layer, tables against the
  // defaults, two interleaved runs each (bench/results/2026-12-01_h200_fifteenth_session.md,
  // calls 2 and 3, two H200s), Qwen3.5 TP4 bf16 / DeepSeek-V3 TP8 bf16: M = 80 -2.9 / -0.9%,
  // 96 -4.0 / -2.3%, 112 -3.2 / -1.9%, 128 -2.7 / -1.5%, 160 -2.0 / -0.9%, 192 -1.7 / -0.8%,
  // 224 -1.8 / -0.7%, 256 -1.8 / -0.7% (call 3; call 2 agrees at 96..256); at M = 64 it lost
  // (+3.8 / +5.9%), and below that it won or lost by the wave (12: +21 / +21%, 20: -2.9 / -1.8%,
  // 32: +0.5 / +4.2%); fp16 Qwen3.5 TP4 (call 5, with the session's other changes): M = 80..256
  // -2.2..-4.6%. Measured at N = 256 (2N = 512 columns) only: other N keep n64 k128 s4.
  if (!fp8 && !down && spe >= kW8UpMinSpe && spe <= 8 && cols == 512 && c.SPLIT_K == 1 &&
      gpu.arch() == "sm_90a") {
    KernelConfig w8 = c;
    w8.BLOCK_SIZE_N = 256;
    w8.BLOCK_SIZE_K = 128;
    w8.num_warps = 8;
    w8.num_stages = 3;
    if (valid_tile(w8)) c = w8;
  }

  // Swap-AB (SWAP_AB 1: weights as the wgmma's A, the tile's 16 token rows as its N) for block
  // fp8 on sm_90a at decode (block_fp8_decode_swap says where, and what was measured): m16 n128
  // k128 w4 (up n256 where block_fp8_fused_act_up, at s2 where n256_up_one_wave_at_s2), up s3
  // otherwise (SPLIT_K 2 where its tiles fill less than kSwapSplitTiles of the SMs, else 1),
  // down s2.
  if (block_fp8_decode_swap(shape, gpu, spe)) {
    KernelConfig sw = c;
    sw.BLOCK_SIZE_N = 128;
    sw.BLOCK_SIZE_K = 128;
    sw.num_warps = 4;
    sw.num_stages = down ? 2 : 3;
    sw.SPLIT_K = 1;
    sw.SWAP_AB = 1;
    // Down from 4 token slots per expert (M = 128, 256 on the anchors): GROUP_SIZE_M 32 (32
    // experts' M-blocks sweep each N-tile together instead of one expert's N-tiles in a row).
    // Measured on one H200, on these two shapes only (bench/results/
    // 2026-12-01_h200_eleventh_session.md, call 5: `moetune tune`, GEMM2 alone against g1 in the
    // same run): DeepSeek-V3 TP8 M = 128, 256 -2.6%, -5.3% (its pick), Qwen3.5 TP4 -1.1%, -1.2%
    // (it picked g64, g32 next). Below spe 4 the gain is at most 0.5% (DeepSeek-V3 picked g32 at
    // M = 32, 64 by 0.5%; Qwen3.5 kept g1), within a run's spread: g1 stays there. Layer A/B
    // (call 6): M = 128, 256 -0.5%, -1.6% (DeepSeek-V3), -0.35%, -0.3% (Qwen3.5). Not on the
    // H100 SXM: there g1 beat g32 at M = 128, 192, 256 by 0.9-1.0% (Qwen3.5) and 1.5-1.8%
    // (DeepSeek-V3), g8 in between, also with the separate top-k sum (--deterministic) that the
    // H200's rule was measured with (bench/results/2026-12-05_h100_twentyeighth_session.md,
    // call 4: three interleaved runs a side, ranges <= 0.3%).
    if (down && spe >= 4.0 && !h100_sxm(gpu)) sw.GROUP_SIZE_M = 32;
    auto swap_fits = [&](const KernelConfig& k) {
      return config::kernel_rule_violation(k, target) == nullptr &&
             fits_block_n(shape, k.BLOCK_SIZE_N) && depth % 128 == 0 &&
             moetune_smem_bytes(k, target) <= gpu.smem_per_block_bytes;
    };
    // Up tiles (M-tiles x N-tiles: blocks) of a config.
    auto up_tiles = [&](const KernelConfig& k) {
      return active_experts * std::ceil(slots_per_active / k.BLOCK_SIZE_M) *
             std::ceil(static_cast<double>(cols) / k.BLOCK_SIZE_N);
    };
    // Up: n256 (block_fp8_fused_act_up and n256_up_one_wave_at_s2 say where, the latter at 2
    // stages), so that a block holds a whole block_k group of gate and up columns and GEMM1's
    // epilogue writes the quantized SiLU(gate)·up itself (gemm::gemm1_stage): no activation
    // stage. The n128 tile where n256 does not fit.
    if (!down && block_fp8_up_can_fuse(shape)) {
      KernelConfig wide = sw, wide_s2 = sw;
      wide.BLOCK_SIZE_N = wide_s2.BLOCK_SIZE_N = 256;
      wide_s2.num_stages = 2;
      if (swap_fits(wide) && swap_fits(wide_s2) &&
          n256_up_one_wave_at_s2(up_tiles(wide), gpu, moetune_smem_bytes(wide, target),
                                 moetune_smem_bytes(wide_s2, target)))
        sw = wide_s2;
      else if (block_fp8_fused_act_up(shape, gpu, spe) && swap_fits(wide))
        sw = wide;
      // The H100 SXM's deeper rings: 4 stages in its narrower band, 5 from 3 slots per expert.
      KernelConfig deep = wide;
      deep.num_stages = h100_fused_in_band(gpu, spe) ? kH100FusedBandStages
                        : spe >= kH100DeepUpMinSpe ? 5 : wide.num_stages;
      if (sw == wide && h100_sxm(gpu) && swap_fits(deep)) sw = deep;
    }
    if (!down) {
      const double tiles = up_tiles(sw);
      // Two equal splits of >= 3 K-tiles each.
      if (tiles < kSwapSplitTiles * gpu.sm_count && depth % (2 * sw.BLOCK_SIZE_K) == 0 &&
          depth / sw.BLOCK_SIZE_K >= 6)
        sw.SPLIT_K = 2;
    }
    if (swap_fits(sw)) c = sw;
  }

  // Fit shared memory (e.g. the RTX PRO 6000's 101,376 B): fewer stages first (down to 2), then
  // narrower N-tiles, then shallower K-tiles, each step only to a tile the kernel accepts;
  // BLOCK_SIZE_M stays, as the other GEMM must share it.
  auto acceptable = [&](const KernelConfig& k) {
    return fits_block_n(shape, k.BLOCK_SIZE_N) && k.BLOCK_SIZE_N >= 32 && k.BLOCK_SIZE_K >= 32 &&
           k.num_stages >= 2 && config::kernel_rule_violation(k, target) == nullptr &&
           (k.SPLIT_K == 1 || depth % (1LL * k.SPLIT_K * k.BLOCK_SIZE_K) == 0);
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
