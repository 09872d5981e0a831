// The routing launch's L2 prefetch of GEMM1's first weight bytes (FusedMoeOptions::
// routing_prefetch_lines, `--route-prefetch`). From the routing's first instruction to GEMM1's
// first weight copy the layer reads almost nothing from DRAM: the top-k, the stage boundary, the
// alignment (its launch, or GEMM1 deriving it) and the tables come first. The routing knows the
// experts as soon as a token's top-k is done, so it asks L2 for the first `lines` 128-byte
// columns of every row of each picked local expert's w13 (the K-tiles GEMM1's ring copies
// first), and GEMM1 finds them there.
//
// The TMA's tensor prefetch (cp.async.bulk.prefetch.tensor.2d.L2, sm_90+): one instruction per
// box of box_rows rows x 128 bytes, so the routing's own warps issue all of it (a thread-per-line
// `prefetch.global.L2` needed the routing blocks copied about once per SM and lost:
// bench/results/2026-12-06_h100_thirtysecond_session.md). Nothing comes back and nothing waits
// for it; the outputs do not change.
//
// Plain data, the same layout in host C++ (src/moe/stages.cpp fills it; the map with
// cuTensorMapEncodeTiled) and in NVRTC (the kernel takes it as a __grid_constant__ parameter).
// lines == 0: no prefetch.
#pragma once

// As common/tile_math.cuh defines it (the same tokens: a permitted redefinition); this header
// includes nothing, so host C++ and NVRTC both take it as it is.
#if defined(__CUDACC__)
#define MOETUNE_HD __host__ __device__
#else
#define MOETUNE_HD
#endif

namespace moetune {

// cuda.h's CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) RoutePrefetchMap {
  unsigned long long opaque[16];
};

struct alignas(64) RoutePrefetch {
  // w13 of the local experts as a 2-D byte tensor: dim 0 the row's bytes (K times the element
  // size), dim 1 the rows of all local experts (local_experts * rows); box 128 x box_rows.
  RoutePrefetchMap map;
  int rows = 0;           // 2N: gate and up rows of one expert
  int box_rows = 0;       // rows of one box: min(rows, 256) (the TMA's box limit)
  int lines = 0;          // 128-byte columns from the start of each row (and split); 0: none
  int splits = 1;         // GEMM1's SPLIT_K: each split's first columns
  int split_bytes = 0;    // row bytes / splits
  int expert_start = 0;   // global id of local expert 0 (EP; 0 otherwise)
  int local_experts = 0;
};

// Bytes of one prefetched column of a box (GEMM1's K-tile of 128 fp8 or 64 16-bit elements).
constexpr int kRoutePrefetchLineBytes = 128;
// Rows of one box at most (the TMA's limit on a box dimension).
constexpr int kRoutePrefetchMaxBoxRows = 256;

// Boxes of one expert's rows (the last may reach into the next expert's first rows).
MOETUNE_HD inline int route_prefetch_row_boxes(const RoutePrefetch& pf) {
  return pf.box_rows > 0 ? (pf.rows + pf.box_rows - 1) / pf.box_rows : 0;
}
// Boxes asked for one picked expert.
MOETUNE_HD inline int route_prefetch_boxes_per_expert(const RoutePrefetch& pf) {
  return route_prefetch_row_boxes(pf) * pf.lines * pf.splits;
}
// Coordinates {byte column, row} of box i (< route_prefetch_boxes_per_expert) of local expert
// e: row box i % row_boxes, split (i / row_boxes) % splits, column (i / row_boxes) / splits
// of it. Consecutive i walk the rows, so every row's first column comes before any second.
MOETUNE_HD inline void route_prefetch_box(const RoutePrefetch& pf, int e, int i, int& col,
                                          int& row) {
  const int nb = route_prefetch_row_boxes(pf);
  const int b = i % nb, js = i / nb;
  col = (js % pf.splits) * pf.split_bytes + (js / pf.splits) * kRoutePrefetchLineBytes;
  row = e * pf.rows + b * pf.box_rows;
}

}  // namespace moetune
