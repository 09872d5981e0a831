// The routing launch's L2 prefetch of GEMM1's first weight bytes (FusedMoeOptions::
// routing_prefetch_lines, `--route-prefetch`). From the routing's first instruction to GEMM1's
// first weight copy the layer reads almost nothing from DRAM: the top-k, the stage boundary, the
// alignment (its launch, or GEMM1 deriving it) and the tables come first. The routing knows the
// experts as soon as a token's top-k is done, so it asks L2 for the first `lines` 128-byte lines
// of every row of each picked local expert's w13 (the K-tiles GEMM1's ring copies first), and
// GEMM1 finds them there. Plain `prefetch.global.L2`: no data comes back to the SM, nothing to
// wait for, and the outputs do not change.
//
// Plain data, the same layout in host C++ (src/moe/stages.cpp fills it) and in NVRTC (the kernel
// takes it by value). lines == 0: no prefetch (slices must then be 1).
#pragma once

// As common/tile_math.cuh defines it (the same tokens: a permitted redefinition); this header
// includes nothing, so host C++ and NVRTC both take it as it is.
#if defined(__CUDACC__)
#define MOETUNE_HD __host__ __device__
#else
#define MOETUNE_HD
#endif

namespace moetune {

struct RoutePrefetch {
  const unsigned char* w = nullptr;  // w13 of the local experts [local_experts, rows, row_bytes]
  long long expert_bytes = 0;        // rows * row_bytes
  int row_bytes = 0;                 // K times the weight's element size
  int rows = 0;                      // 2N: gate and up rows of one expert
  int lines = 0;                     // 128-byte lines from the start of each row (and split)
  int split_bytes = 0;               // row_bytes / GEMM1's SPLIT_K: each split's start is fetched
  int splits = 1;                    // GEMM1's SPLIT_K
  int expert_start = 0;              // global id of local expert 0 (EP; 0 otherwise)
  int local_experts = 0;
  int slices = 1;  // blocks that route the same tokens and share their lines (only slice 0 writes)
};

// Bytes of one prefetched line (the L2's line; prefetch.global.L2 fetches the line holding the
// address).
constexpr int kRoutePrefetchLineBytes = 128;

// Lines asked for one picked expert: each row's first `lines` lines of each split.
MOETUNE_HD inline int route_prefetch_lines_per_expert(const RoutePrefetch& pf) {
  return pf.rows * pf.lines * pf.splits;
}
// Byte offset from pf.w of line i (< route_prefetch_lines_per_expert) of local expert e: row
// i % rows, split (i / rows) % splits, line (i / rows) / splits of it. Consecutive i walk the
// rows, so the first lines of every row come before any row's second line.
MOETUNE_HD inline long long route_prefetch_offset(const RoutePrefetch& pf, int e, int i) {
  const int r = i % pf.rows, js = i / pf.rows;
  return e * pf.expert_bytes + static_cast<long long>(r) * pf.row_bytes +
         static_cast<long long>(js % pf.splits) * pf.split_bytes +
         static_cast<long long>(js / pf.splits) * kRoutePrefetchLineBytes;
}

}  // namespace moetune
