// The GPU spec table: datasheet numbers with their sources, looked up by the name CUDA reports
// or a short alias. Rates are dense (no sparsity). Units: bytes/s, FLOP/s, bytes.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "moetune/dtype.hpp"

namespace moetune {

struct GpuSpec {
  std::string name;                  // as CUDA reports it, e.g. "NVIDIA H200"
  std::vector<std::string> aliases;  // short names accepted by --gpu, e.g. "H200", "h200"
  double mem_bandwidth_Bps = 0;      // HBM/GDDR bandwidth, bytes per second
  double bf16_flops = 0;             // dense bf16 tensor-core peak, FLOP/s
  double fp16_flops = 0;             // dense fp16 (fp32 accumulate) tensor-core peak, FLOP/s
  std::optional<double> fp8_flops;   // dense fp8 peak, FLOP/s (only from sm_89)
  int sm_count = 0;
  int smem_per_block_bytes = 0;      // max dynamic shared memory per block (opt-in)
  int l2_bytes = 0;
  int cc_major = 0, cc_minor = 0;    // compute capability
  std::string source;                // where the numbers come from (datasheet, CUDA guide)
  // The NVRTC target kernels are built for when it is not the GPU's own (gpu_for_arch); "" =
  // the rule of arch() below.
  std::string target_arch;

  int compute_capability() const { return cc_major * 10 + cc_minor; }
  // NVRTC target: target_arch if set, else "sm_90a" on Hopper (wgmma), "sm_100a" on B200, else
  // "sm_<cc>".
  std::string arch() const;
  // Dense tensor-core peak for the dtype in FLOP/s; nullopt if the GPU cannot run it.
  std::optional<double> peak_flops(Dtype d) const;
};

// The compute capability an NVRTC target names: "sm_89" -> 89, "sm_100a" -> 100, "compute_90"
// -> 90; nullopt when it names none ("", "sm_", "90").
std::optional<int> arch_compute_capability(std::string_view arch);

// The GPU as the config rules see it when its kernels are built for `arch` ("sm_89", "sm_90",
// "compute_90", ...) instead of its own target: arch() returns `arch`, and the compute
// capability is the one `arch` names (unchanged if it names none). An empty `arch`, or the
// GPU's own, returns the GPU unchanged. So that, e.g., an H200 told to build sm_90 (not sm_90a)
// kernels gets no wgmma-only default tile.
GpuSpec gpu_for_arch(const GpuSpec& gpu, const std::string& arch);

// All entries of the table.
const std::vector<GpuSpec>& gpu_specs();
// Exact CUDA name, or alias, case-insensitive; spaces, underscores and hyphens equivalent
// ("NVIDIA_H200", "rtx-pro-6000"). nullptr if unknown.
const GpuSpec* find_gpu(std::string_view name_or_alias);
// find_gpu or throw InputError("gpu", name, "unknown GPU; known: ...").
const GpuSpec& require_gpu(std::string_view name_or_alias);
// The spec used when no GPU is present and no --gpu is given.
inline constexpr const char* kFallbackGpu = "NVIDIA H200";

}  // namespace moetune
