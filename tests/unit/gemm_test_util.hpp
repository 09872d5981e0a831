// Shapes and kernel configs for the grouped-GEMM tests, written short: used by the unit test
// (test_gemm_spec.cpp) and the GPU tests (through tests/gpu/test_gemm_common.hpp). Host types
// only: no GPU header.
#pragma once
#include <array>

#include "moetune/config.hpp"
#include "moetune/model.hpp"

namespace moetune::gemm::testing {

// A shape of E experts (all on this rank), N and K, top-k, dtype; fp8 blocks of 128x128 if `block`.
inline MoeShape make_shape(int E, int N, int K, int topk, Dtype d, bool block) {
  MoeShape s;
  s.E = s.E_global = E;
  s.N = N;
  s.K = K;
  s.topk = topk;
  s.dtype = d;
  if (block) s.block_shape = std::array<int, 2>{128, 128};
  return s;
}

inline KernelConfig cfg(int bm, int bn, int bk, int g, int w, int st, int sk = 1) {
  KernelConfig c;
  c.BLOCK_SIZE_M = bm;
  c.BLOCK_SIZE_N = bn;
  c.BLOCK_SIZE_K = bk;
  c.GROUP_SIZE_M = g;
  c.num_warps = w;
  c.num_stages = st;
  c.SPLIT_K = sk;
  return c;
}
// The same tile with SWAP_AB = 1 (weights as the wgmma's A: sm_90a only).
inline KernelConfig swapped(KernelConfig c) {
  c.SWAP_AB = 1;
  return c;
}

}  // namespace moetune::gemm::testing
