// The alignment (kernels/moe_align.cuh's tables) derived by each GEMM1 block for itself, from
// topk_ids in shared memory, at decode sizes: the align launch and its grid boundary go, and
// each block learns its expert and slots from one read of topk_ids instead of the three table
// reads. Same math as moe_align (counts per local expert, each run padded to BLOCK_SIZE_M,
// experts in order), so the block finds the same expert for its M-block and the same set of
// slots; within an expert the slots come in ascending order (moe_align's are in arrival order;
// the GEMMs' rows are independent, so outputs do not change).
//
// derive_block: every thread of the block calls it (it has five __syncthreads), right after the
// block's PDL wait. topk_ids [num_slots] (global expert ids, num_slots <= kInlineAlignMaxSlots),
// expert_start the rank's first expert (EP; 0 otherwise), ALIGN_E the local experts.
// scratch: inline_align_scratch_bytes(ALIGN_E) bytes of shared memory (the GEMM's ring, unused
// until its first copy). Out: s_slot[0, BLOCK_SIZE_M) the M-block's slots (-1 pads), `expert`
// its local expert (-1: past the last expert's run: no work), `total_padded` =
// num_tokens_post_padded. on_expert(expert) is called by every thread as soon as the expert is
// known, before the slot list (one warp's pass over topk_ids and a barrier): a caller may start
// the expert's weight copies there (into shared memory other than scratch and s_slot).
#pragma once
#include "common/tile_math.cuh"
#include "common/warp_scan.cuh"

namespace moetune::inline_align {

struct NoHook {
  __device__ void operator()(int) const {}
};

template <int BLOCK_SIZE_M, int THREADS, int ALIGN_E, typename OnExpert = NoHook>
__device__ __forceinline__ void derive_block(const int* __restrict__ topk_ids, int num_slots,
                                             int expert_start, int pid_m, int* scratch,
                                             int* s_slot, int& expert, int& total_padded,
                                             OnExpert on_expert = {}) {
  static_assert(ALIGN_E > 0 && ALIGN_E <= tile_math::kInlineAlignMaxE, "ALIGN_E out of range");
  static_assert(THREADS % 32 == 0, "THREADS must be whole warps");
  int* s_ids = scratch;                                       // local expert of each slot
  int* s_count = scratch + tile_math::kInlineAlignMaxSlots;   // slots per local expert
  int* s_res = s_count + ALIGN_E;  // this M-block's expert, its first M-block, all M-blocks
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (num_slots > tile_math::kInlineAlignMaxSlots) __trap();  // the host refuses it (src/gemm)

  for (int i = tid; i < num_slots; i += THREADS) s_ids[i] = __ldg(topk_ids + i) - expert_start;
  for (int e = tid; e < ALIGN_E; e += THREADS) s_count[e] = 0;
  for (int r = tid; r < BLOCK_SIZE_M; r += THREADS) s_slot[r] = -1;
  if (tid == 0) s_res[0] = -1;
  __syncthreads();
  for (int i = tid; i < num_slots; i += THREADS) {
    const int e = s_ids[i];
    if (static_cast<unsigned>(e) < static_cast<unsigned>(ALIGN_E)) atomicAdd(&s_count[e], 1);
  }
  __syncthreads();

  // The padded runs' M-block offsets, an exclusive scan as moe_align's: thread tid sums the
  // M-blocks of experts [tid * per, tid * per + per), warps scan those sums, and every warp scans
  // the warp totals itself (no warp waits on another's second pass); the thread whose run holds
  // pid_m records the expert.
  constexpr int kWarps = THREADS / 32;
  static_assert(kWarps <= 32, "one warp scans the warp totals");
  int* s_warp = s_res + 3;  // [kWarps] inclusive warp sums
  constexpr int per = (ALIGN_E + THREADS - 1) / THREADS;
  const int e0 = tid * per;
  int local = 0;
#pragma unroll
  for (int i = 0; i < per; ++i)
    if (e0 + i < ALIGN_E) local += (s_count[e0 + i] + BLOCK_SIZE_M - 1) / BLOCK_SIZE_M;
  const int incl = warp_inclusive_sum(local, lane);
  if (lane == 31) s_warp[warp] = incl;
  __syncthreads();
  const int w_incl = warp_inclusive_sum(lane < kWarps ? s_warp[lane] : 0, lane);
  const int w_before = __shfl_sync(0xffffffffu, w_incl, (warp + 31) & 31);  // warps before this one
  int first = (warp > 0 ? w_before : 0) + incl - local;
#pragma unroll
  for (int i = 0; i < per; ++i) {
    if (e0 + i >= ALIGN_E) break;
    const int nb = (s_count[e0 + i] + BLOCK_SIZE_M - 1) / BLOCK_SIZE_M;
    if (nb > 0 && first <= pid_m && pid_m < first + nb) {  // one thread at most
      s_res[0] = e0 + i;
      s_res[1] = first;
    }
    first += nb;
  }
  const int all_blocks = __shfl_sync(0xffffffffu, w_incl, kWarps - 1);
  if (tid == 0) s_res[2] = all_blocks;
  __syncthreads();
  on_expert(s_res[0]);

  // One warp: the expert's slots in slot order from rank (pid_m - first block) * BLOCK_SIZE_M on.
  if (warp == 0) {
    const int e = s_res[0];
    if (e >= 0) {
      const int lo = (pid_m - s_res[1]) * BLOCK_SIZE_M;  // rank of the M-block's first slot
      int seen = 0;                                      // slots of e before this step's
      for (int base = 0; base < num_slots && seen < lo + BLOCK_SIZE_M; base += 32) {
        const int i = base + lane;
        const bool match = i < num_slots && s_ids[i] == e;
        const unsigned ballot = __ballot_sync(0xffffffffu, match);
        const int r = seen + __popc(ballot & ((1u << lane) - 1u));
        if (match && r >= lo && r < lo + BLOCK_SIZE_M) s_slot[r - lo] = i;
        seen += __popc(ballot);
      }
    }
  }
  __syncthreads();
  expert = s_res[0];
  total_padded = s_res[2] * BLOCK_SIZE_M;
}

}  // namespace moetune::inline_align
