// Which form of an L2 cache hint on cp.async runs on this GPU? (ninth session: GEMM kernels with
// `createpolicy.fractional.L2::evict_first` + `cp.async.cg.shared.global.L2::cache_hint` with a
// src-size operand stopped with CUDA_ERROR_ILLEGAL_INSTRUCTION.) One variant per process (the
// error is sticky): argv[1] = 0 plain cp.async, 1 createpolicy + src-size form, 2 createpolicy +
// no src-size, 3 createpolicy only (policy unused by the copy), 4 src-size form with the
// policy word loaded from memory (0x12F0000000000000), 5 createpolicy + src-size 0 on
// odd threads (the zero-fill the GEMMs use for padding rows). Prints "variant N: ok" or the
// error, and checks the copied bytes.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

template <int V>
__global__ void probe(const unsigned char* src, unsigned char* dst, const unsigned long long* pol) {
  __shared__ __align__(16) unsigned char s[16 * 128];
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(s + threadIdx.x * 16));
  const unsigned char* g = src + threadIdx.x * 16;
  unsigned long long policy = 0;
  if (V == 1 || V == 2 || V == 3 || V == 5)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  if (V == 4) policy = *pol;
  if (V == 0 || V == 3) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(g), "r"(16)
                 : "memory");
  } else if (V == 1 || V == 4 || V == 5) {
    const int bytes = V == 5 && (threadIdx.x & 1) ? 0 : 16;
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(d),
                 "l"(g), "r"(bytes), "l"(policy) : "memory");
  } else {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(d), "l"(g),
                 "l"(policy) : "memory");
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
  for (int i = 0; i < 16; ++i) dst[threadIdx.x * 16 + i] = s[threadIdx.x * 16 + i];
  if (V == 3 && threadIdx.x == 0 && policy == 0xdeadbeef) dst[0] = 0;  // keep the policy alive
}

int main(int argc, char** argv) {
  const int v = argc > 1 ? std::atoi(argv[1]) : 0;
  unsigned char *src, *dst;
  unsigned long long* pol;
  cudaMalloc(&src, 2048);
  cudaMalloc(&dst, 2048);
  cudaMalloc(&pol, 8);
  unsigned char h[2048];
  for (int i = 0; i < 2048; ++i) h[i] = static_cast<unsigned char>(i * 7 + 3);
  cudaMemcpy(src, h, 2048, cudaMemcpyHostToDevice);
  const unsigned long long evict_first_word = 0x12F0000000000000ull;  // an evict-first word
  cudaMemcpy(pol, &evict_first_word, 8, cudaMemcpyHostToDevice);
  switch (v) {
    case 0: probe<0><<<1, 128>>>(src, dst, pol); break;
    case 1: probe<1><<<1, 128>>>(src, dst, pol); break;
    case 2: probe<2><<<1, 128>>>(src, dst, pol); break;
    case 3: probe<3><<<1, 128>>>(src, dst, pol); break;
    case 4: probe<4><<<1, 128>>>(src, dst, pol); break;
    default: probe<5><<<1, 128>>>(src, dst, pol); break;
  }
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("variant %d: %s\n", v, cudaGetErrorString(e));
    return 1;
  }
  unsigned char o[2048];
  cudaMemcpy(o, dst, 2048, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (int i = 0; i < 2048; ++i) bad += o[i] != (v == 5 && (i / 16) % 2 ? 0 : h[i]);
  std::printf("variant %d: ok, %d bytes differ\n", v, bad);
  return bad != 0;
}
