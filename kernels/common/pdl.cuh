// Programmatic dependent launch (PDL, sm_90+): the host launches each stage kernel with
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (src/cuda/jit.hpp LaunchOptions), so its
// blocks may be scheduled while the previous kernel of the stream still runs. Both calls compile
// to nothing below sm_90, and both are no-ops for a launch without the attribute.
//
// pdl_wait(): blocks until every prerequisite grid has completed and its memory is visible
//   (griddepcontrol.wait). A kernel calls it before its first global read of anything an earlier
//   kernel wrote and before its first global write (the previous kernel may still read what it
//   would overwrite). The stage kernels call it first thing, unconditionally, in every thread:
//   a kernel that finished without waiting could complete before its own predecessor, and a
//   later kernel that waits only on it would then race that predecessor.
//   One exception, kernels/moe_decode.cuh's moe_decode_down: it reads the router logits and
//   the weights before its wait. Its only predecessor, moe_decode_up, lets it start only once
//   every moe_decode_up thread has passed its own wait, so the kernel that wrote those inputs
//   has completed; moe_decode_down writes nothing before its wait.
// pdl_launch_dependents(): lets the next kernel's blocks be scheduled once every block of this
//   grid has called it or exited (griddepcontrol.launch_dependents). Only a scheduling hint:
//   the dependents still pdl_wait() for this grid's completion and memory flush. The small
//   stage kernels call it right after pdl_wait() (their blocks never need the SMs to themselves,
//   and it fires only once all of them run); the GEMMs after their K loop.
#pragma once

namespace moetune {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace moetune
