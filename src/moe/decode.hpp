// Host side of the decode kernels (kernels/moe_decode.cuh): the whole layer in two launches for
// M <= kDecodeMaxTokens tokens, each GEMM a tensor-core product of a slot's expert with its one
// token (mma.sync, the token in column 0). Their geometry (the only place
// that knows the kernels' template parameter lists), whether a shape fits them, their specs and
// their launch. No sync, no allocation.
#pragma once
#include <cstdint>
#include <string>

#include <cuda.h>

#include "cuda/jit.hpp"
#include "moetune/model.hpp"

namespace moetune::moe {

// The most tokens the decode kernels ever take (decode_max_tokens says how many for a shape).
// Above it the staged pipeline's tensor-core GEMMs serve several tokens per weight read.
inline constexpr std::int64_t kDecodeMaxTokens = 4;
// Weight row bytes of w13 (K x element bytes) up to which the decode kernels take 4 tokens, and
// up to which they take 2 (decode_max_tokens); longer rows: none.
inline constexpr int kDecodeRowBytes4 = 6144;
inline constexpr int kDecodeRowBytes2 = 8192;
// Static shared memory of either kernel (the default per-block limit, no opt-in needed).
inline constexpr int kDecodeSmemBytes = 48 * 1024;

struct DecodeGeometry {
  int wpt = 0;           // moe_decode_up: warps per 16-row tile (each a 1/wpt slice of K)
                         // (up to 8; the unfit test holds for any of 1, 2, 4)
  int threads_up = 0;    // 64 * wpt: a gate and an up tile
  int batch = 0;         // moe_decode_up: 64-byte chunks per row in flight per lane
  int threads_down = 0;  // moe_decode_down: 32 * topk, one warp per slot
  int cols = 16;         // act columns per moe_decode_up block, outputs per moe_decode_down block
  int pieces = 0;        // moe_decode_up: > 0, its weights by bulk copies into shared memory,
                         // in this many pieces per warp slice (each with its own mbarrier)
  int smem_up = 0;       // moe_decode_up's dynamic shared memory in bytes (pieces > 0)
};
// Shared memory a block may have in all (opt-in) by compute capability (cc, e.g. 90), 0 where
// moe_decode_up takes no bulk copies: 227 KB on 9.0 and 10.x (228 KB per SM less the 1 KB the
// driver keeps per block), 99 KB on 12.x (CUDA C++ Programming Guide, "Technical Specifications
// per Compute Capability"); 0 before 9.0 (no cp.async.bulk) and on capabilities not listed here.
int decode_bulk_smem_bytes(int cc);
// Shared memory the driver keeps per resident block (same table): an SM of 9.0 holds 228 KB.
inline constexpr int kSmemReservedPerBlock = 1024;

// "" when the decode kernels can run `shape` (bf16, fp16 or block-wise fp8 with block_k a
// multiple of 128 dividing N and K and block_n a multiple of 16 dividing K and 2N; 16-bit: N and
// K multiples of 32; fp8: of 64; N <= 4096; topk <= 32; the hidden state and a token's
// activations within kDecodeSmemBytes), else why not.
// M plays no part (forward adds M <= decode_max_tokens(shape)).
std::string decode_kernels_unfit(const MoeShape& shape);
// The geometry for `shape` at M tokens (decode_kernels_unfit(shape) must be ""; InputError
// otherwise). moe_decode_up's depends on M: 16 warps per block at M = 1 where each warp's slice
// of K stays >= 14 chunks (one block per SM there), else 8; load batches that divide the slice.
// At M = 1 on sm_90+ (cc, the compute capability; 0: unknown), where a block's rows with their
// padding fit decode_bulk_smem_bytes(cc) (and gpu.smem_per_block where known), the weights come
// by bulk copies instead (pieces > 0); where gpu.sms is known, only when the M = 1 grid
// (N / 16 * topk blocks) then runs in one wave: the bulk blocks take most of an SM's shared
// memory, where the register batches keep several blocks per SM (measured only on grids of one
// wave: Qwen3.5 TP4's 128 blocks on 132 SMs).
struct DecodeGpu {
  int sms = 0;             // SMs (0: unknown, e.g. when listing kernels)
  int smem_per_block = 0;  // opt-in shared memory per block in bytes (0: unknown)
};
DecodeGeometry decode_geometry(const MoeShape& shape, std::int64_t M, int cc = 0,
                               const DecodeGpu& gpu = {});
// Tokens up to which FusedMoe::forward runs the decode kernels for `shape` (0 when they do not
// fit it or lose at every M): by the length of a w13 row, which each warp of moe_decode_up
// streams a slice of, one 16-row tile per block: kDecodeMaxTokens up to kDecodeRowBytes4, 2 up
// to kDecodeRowBytes2, else 0. Measured (bench/results/2026-12-01_h200_ninth_session.md, calls 4
// and 9, layer µs, decode kernels against the stage kernels): Qwen3.5 TP4 fp8 (3072-byte rows)
// and bf16 (6144) ahead up to M = 4 (31.4 against 34.6, 46.2 against 49.0 at M = 4);
// DeepSeek-V3 TP8 fp8 (7168) ahead at M = 2 (40.3 against 45.3), behind at M = 3 and 4 (57.1
// against 53.8, 70.6 against 66.0); DeepSeek-V3 TP8 bf16 (14336) behind at every M (M = 1 41.8
// against 39.6, M = 4 120.3 against 98.5). Four shapes: the thresholds lie anywhere between
// these row lengths; other shapes are not measured.
std::int64_t decode_max_tokens(const MoeShape& shape);

// route: the kernels route from router logits (else they read precomputed topk ids/weights).
// gpu: as decode_geometry takes it (launch_decode must be given the same to run this kernel).
cuda::KernelSpec decode_up_spec(const MoeShape& shape, const std::string& arch, bool route,
                                std::int64_t M, const DecodeGpu& gpu = {});
// The down kernel depends on M through the up kernel's path at M (UP_BULK).
cuda::KernelSpec decode_down_spec(const MoeShape& shape, const std::string& arch, bool route,
                                  std::int64_t M, const DecodeGpu& gpu = {});

struct DecodeArgs {
  std::int64_t M = 0;
  int rank = 0;
  const float* router_logits = nullptr;  // or, when null, topk_ids_in / topk_weights_in
  const float* correction_bias = nullptr;
  const std::int32_t* topk_ids_in = nullptr;
  const float* topk_weights_in = nullptr;
  std::int32_t* topk_ids_out = nullptr;  // [M, topk] (written when routing)
  float* topk_weights_out = nullptr;
  const void* x = nullptr;               // [M, K] act
  const void* w13 = nullptr;
  const float* w13_scale = nullptr;
  const void* w2 = nullptr;
  const float* w2_scale = nullptr;
  void* act = nullptr;                   // [M * topk, N] act (workspace)
  void* out = nullptr;                   // [M, K] act
};
// Both launches (the second a programmatic dependent of the first when pdl). Throws InputError
// when M is outside [1, kDecodeMaxTokens] or the shape does not fit.
void launch_decode(const MoeShape& shape, const std::string& arch, const DecodeArgs& a,
                   CUstream stream, bool pdl, const DecodeGpu& gpu = {});

}  // namespace moetune::moe
