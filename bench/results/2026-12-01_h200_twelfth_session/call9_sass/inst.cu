#include "moe_gemm_wgmma_sm90a.cuh"
template __global__ void moetune::moe_gemm_wgmma<0,2,256,3072,8,128,128,16,256,128,1,4,3,1,0,1>(const void*, const float*, const void*, const float*, void*, const float*, const int*, const int*, const int*, long long, void*, float*);
template __global__ void moetune::moe_gemm_wgmma<0,2,256,3072,8,128,128,16,256,128,1,4,3,1,1,1>(const void*, const float*, const void*, const float*, void*, const float*, const int*, const int*, const int*, long long, void*, float*);
