// The logic of `moetune check`: every stage and the whole layer against the fp64 reference
// (src/moe/reference.hpp), for each dtype (bf16, fp16, fp8 block-wise [128,128], fp8 per-tensor),
// batch size and config, on fresh random inputs with every output poisoned first (0xFF bytes:
// NaN for bf16/fp16/fp32/e4m3, -1 for int32). Results are data; the CLI prints them.
// Also the representative kernel set of `moetune kernels --compile-only`.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cuda/jit.hpp"
#include "moetune/config.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune::moe {

// A shape to check, with a name for the report (e.g. "deepseek-v3 tp8").
struct CheckShape {
  std::string name;
  MoeShape shape;  // its dtype is replaced by each checked dtype
  int rank = 0;    // expert-parallel rank (shape.E < shape.E_global)
};

// The anchor shapes (shared/ANCHORS.md and the brief): Qwen3.5-122B-A10B TP4 (E=256, N=256,
// K=3072, topk 8, softmax), DeepSeek-V3 TP8 (E=256, N=256, K=7168, topk 8, grouped sigmoid with
// a correction bias, 8 groups / 4 kept, routed_scaling_factor 2.5), Mixtral-8x7B TP2 (E=8,
// N=7168, K=4096, topk 2, softmax).
std::vector<CheckShape> anchor_check_shapes();

// Dtype variants by name: "bf16", "fp16", "fp8_block" ([128,128]), "fp8_tensor".
inline const std::vector<std::string> kCheckDtypes = {"bf16", "fp16", "fp8_block", "fp8_tensor"};
MoeShape with_dtype_variant(const MoeShape& shape, const std::string& variant);

// DESIGN.md thresholds on ||out - ref|| / ||ref||: 1e-2 for bf16/fp16, 5e-2 for fp8.
double error_threshold(const MoeShape& shape);

struct CheckOptions {
  std::vector<std::string> dtypes = kCheckDtypes;
  std::vector<std::int64_t> batch = {1, 3, 8, 64, 257, 1024, 4096};
  int random_configs = 1;     // per (shape, dtype, M), beside moetune's default config
  bool stages = true;         // check every stage, not only the layer
  std::int64_t max_reference_rows = 256;  // tokens the layer reference computes at larger M
  std::int64_t stage_rows = 32;           // tokens the GEMM/act/reduce stage checks compute
  std::uint64_t seed = 0;     // 0: fresh random inputs (the seed used is reported)
  std::string arch;           // "" = the GPU's
  int reference_threads = 0;  // 0 = all cores
  // FusedMoeOptions::topk_sum_in_gemm2 of the layers checked (false: `check --deterministic`,
  // the separate top-k sum; true: GEMM2's atomic adds on sm_90+, the default).
  bool topk_sum_in_gemm2 = true;
  // FusedMoeOptions::alignment_in_gemm1 of the layers checked (unset: the GPU's default;
  // `check --align-in-gemm1`: true; `--no-align-in-gemm1`: false).
  std::optional<bool> alignment_in_gemm1;
  // FusedMoeOptions::sliced_gemms of the layers checked (`check --sliced`, `--no-sliced`;
  // unset: moetune's default for the default config's layer, off for random configs' layers,
  // whose stage GEMMs are what they check).
  std::optional<bool> sliced_gemms;
  // FusedMoeOptions::sliced_stages of every layer checked (`check --sliced-stages`; 0: 4).
  int sliced_stages = 0;
  // FusedMoeOptions::sliced_pairs of every layer checked (`check --sliced-pairs`).
  bool sliced_pairs = false;
};

struct CheckResult {
  std::string shape;    // CheckShape::name
  std::string dtype;    // variant name
  std::int64_t M = 0;
  std::string stage;    // "routing", "align", "quant", "gemm1", "act", "act_quant", "gemm2",
                        // "reduce" (or "gemm2+reduce" where GEMM2 adds the top-k sum), "layer",
                        // "layer (decode kernels)", "decode routing"
  std::string config;   // "up <json> down <json>" of the configs used
  double error = 0;     // relative Frobenius error (NaN when the output held NaN/inf)
  double threshold = 0;
  bool ok = false;
  std::string detail;   // what differs, when not ok; notes (near-ties) otherwise
  std::int64_t rows = 0;  // tokens compared
};

struct CheckReport {
  std::vector<CheckResult> results;
  std::uint64_t seed = 0;
  double wall_s = 0;
  int failures() const;
};

using CheckCallback = std::function<void(const CheckResult&)>;

// Checks one shape over opts.dtypes x opts.batch x (default + random configs). Needs a GPU.
CheckReport check_shape(const CheckShape& shape, const GpuSpec& gpu, const CheckOptions& opts,
                        const CheckCallback& on_result = {});
// The default plan of `moetune check`: every anchor shape, then DeepSeek-V3 TP8 fp8 block-wise
// at M = 40000 (the 32-bit-overflow case; the reference checks a sample of >= 256 tokens).
CheckReport run_check(const GpuSpec& gpu, const CheckOptions& opts,
                      const CheckCallback& on_result = {});

// A random config pair (up, down sharing BLOCK_SIZE_M) from the valid search space for this
// shape and GPU (validate_config + the kernel's own rules), swap-AB included (a third of the
// draws; sm_90a only). Deterministic in `seed`.
std::pair<KernelConfig, KernelConfig> random_valid_configs(const MoeShape& shape,
                                                           const GpuSpec& gpu,
                                                           const std::string& arch,
                                                           std::uint64_t seed);

// A representative set of every kernel for `moetune kernels --compile-only --arch ARCH`: each
// stage kernel of the anchor shapes (both routings, every alignment block size, the fp8
// quantizations, act and reduce) and the GEMM (gemm_kernel_spec) in every dtype the arch runs
// (fp8 from sm_89), up and down, with a few configs.
std::vector<cuda::KernelSpec> kernel_specs_for_compile_only(const std::string& arch);

}  // namespace moetune::moe
