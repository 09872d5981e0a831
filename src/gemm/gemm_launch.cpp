// launch_gemm: JIT-loads the instance for the current device and enqueues it. Never syncs,
// never allocates.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "gemm/gemm.hpp"
#include "moetune/error.hpp"

namespace moetune::gemm {

namespace {

struct DeviceFacts {
  std::string arch;     // NVRTC target
  int smem_optin = 0;   // max dynamic shared memory per block
};
// Facts of the current context's device, queried once per device.
const DeviceFacts& current_device() {
  static std::mutex mu;
  static std::map<int, DeviceFacts> facts;
  const int ordinal = cuda::Context::current().ordinal();
  std::lock_guard<std::mutex> lock(mu);
  auto it = facts.find(ordinal);
  if (it == facts.end()) {
    const auto info = cuda::query_device(ordinal);
    it = facts.emplace(ordinal, DeviceFacts{info.arch(), info.smem_per_block_optin_bytes}).first;
  }
  return it->second;
}

void require(const void* p, const char* name) {
  if (p == nullptr) throw InputError(name, "null", "required by this GEMM");
}

}  // namespace

void launch_gemm(const MoeShape& shape, const KernelConfig& c, const GemmArgs& args,
                 CUstream stream) {
  if (args.M < 0) throw InputError("M", std::to_string(args.M), "must be >= 0");
  const DeviceFacts& dev = current_device();
  const GemmLaunch g =
      gemm_launch_geometry(shape, c, args.stage, args.M, args.max_num_tokens_padded, dev.arch);
  if (g.grid.x == 0) return;  // no tokens: nothing to compute
  require(args.a, "a");
  require(args.w, "w");
  require(args.out, "out");
  require(args.sorted_token_ids, "sorted_token_ids");
  require(args.expert_ids, "expert_ids");
  require(args.num_tokens_post_padded, "num_tokens_post_padded");
  if (!gemm_stage_is_up(args.stage)) require(args.topk_weights, "topk_weights");
  if (args.zero_out != nullptr && args.zero_out_bytes % 16 != 0)
    throw InputError("zero_out_bytes", std::to_string(args.zero_out_bytes),
                     "the zeroed buffer must be whole 16-byte vectors");
  if (args.zero_out != nullptr && reinterpret_cast<std::uintptr_t>(args.zero_out) % 16 != 0)
    throw InputError("zero_out", "misaligned", "the zeroed buffer must be 16-byte aligned");
  // down_sum adds 16-byte vectors into out (kernels/common/red.cuh).
  if (args.stage == GemmStage::down_sum && reinterpret_cast<std::uintptr_t>(args.out) % 16 != 0)
    throw InputError("out", "misaligned", "GEMM2 adding the top-k sum needs it 16-byte aligned");
  const bool inline_align = args.topk_ids != nullptr;
  if (inline_align)
    if (const char* why = gemm_inline_align_violation(shape, c, args.stage, args.M, dev.arch))
      throw InputError("topk_ids", "given", why);
  if (args.stage == GemmStage::up_act && shape.block_shape && shape.dtype == Dtype::fp8_w8a8)
    require(args.out_scale, "out_scale");
  if (shape.dtype == Dtype::fp8_w8a8) {
    require(args.a_scale, "a_scale");
    require(args.w_scale, "w_scale");
  }
  const std::size_t ws = gemm_workspace_bytes_for_grid(c, g.grid.x);
  if (ws > 0 && (args.workspace == nullptr || args.workspace_bytes < ws))
    throw InputError("workspace_bytes", std::to_string(args.workspace_bytes),
                     fmt::format("SPLIT_K={} needs {} bytes (gemm_workspace_bytes)", c.SPLIT_K, ws));

  if (dev.smem_optin > 0 && g.smem_bytes > static_cast<std::size_t>(dev.smem_optin))
    throw InputError("smem_bytes", std::to_string(g.smem_bytes),
                     fmt::format("above this GPU's {} bytes of shared memory per block",
                                 dev.smem_optin));
  const cuda::KernelSpec spec = gemm_kernel_spec(shape, c, args.stage, dev.arch, inline_align);
  const auto kernel = cuda::Jit::instance().get(spec);
  const void* a = args.a;
  const float* a_scale = args.a_scale;
  const void* w = args.w;
  const float* w_scale = args.w_scale;
  void* out = args.out;
  const float* topk_weights = args.topk_weights;
  const int32_t* sorted = args.sorted_token_ids;
  const int32_t* expert_ids = args.expert_ids;
  const int32_t* ntpp = args.num_tokens_post_padded;
  long long M = args.M;
  void* workspace = args.workspace;
  float* out_scale = args.out_scale;
  void* zero_out = args.zero_out_bytes > 0 ? args.zero_out : nullptr;
  long long zero_vecs = static_cast<long long>(args.zero_out_bytes / 16);
  const int32_t* topk_ids = args.topk_ids;
  int expert_start = args.expert_start;
  void* params[] = {&a,          &a_scale, &w,         &w_scale,   &out,      &topk_weights,
                    &sorted,     &expert_ids, &ntpp,   &M,         &workspace, &out_scale,
                    &zero_out,   &zero_vecs, &topk_ids, &expert_start};
  cuda::LaunchOptions lo;
  lo.pdl = args.pdl;
  if (ws > 0 && !args.workspace_counters_zeroed) {
    const std::size_t counters = gemm_counter_bytes_for_grid(c, g.grid.x);
    MOETUNE_CU(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(args.workspace), 0u, counters / 4,
               stream);
    // The memset already waits for the kernel before in full (an ordinary stream dependency):
    // there is no kernel to overlap with, so the GEMM is an ordinary launch after it.
    lo.pdl = false;
  }
  kernel->launch(g.grid, g.block, g.smem_bytes, stream, params, lo);
}

}  // namespace moetune::gemm
