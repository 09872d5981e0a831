// FusedMoe: see include/moetune/fused_moe.hpp.
#include "moetune/fused_moe.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "cuda/device.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "gemm/gemm.hpp"
#include "kernels/common/tile_math.cuh"
#include "moe/decode.hpp"
#include "moe/persistent.hpp"
#include "moe/sliced.hpp"
#include "moe/reference.hpp"
#include "moe/stages.hpp"
#include "moetune/error.hpp"

namespace moetune {

const char* to_string(MoeStage s) {
  switch (s) {
    case MoeStage::routing: return "routing";
    case MoeStage::align: return "align";
    case MoeStage::quant: return "quant";
    case MoeStage::gemm1: return "gemm1";
    case MoeStage::act: return "act";
    case MoeStage::gemm2: return "gemm2";
    case MoeStage::reduce: return "reduce";
  }
  return "?";
}

bool gemm1_fuses_act(const MoeShape& shape, std::int64_t M, const KernelConfig& up) {
  return gemm::gemm1_stage(shape, M, up) == gemm::GemmStage::up_act;
}

bool arch_supports_pdl(const std::string& arch) {
  const std::optional<int> cc = arch_compute_capability(arch);
  return arch.rfind("sm_", 0) == 0 && cc && *cc >= 90;  // a real target, not a virtual compute_
}

bool routing_fuses_align(const MoeShape& shape, std::int64_t M, bool router_logits) {
  return router_logits && moe::route_align_fits(shape, M);
}

namespace {
// Whether the sliced kernel, where it runs at M, derives the alignment (FusedMoe::gemm1_aligns):
// not switched off, not where the routing launch aligns, within the derivation's limits.
bool sliced_derives(const FusedMoeOptions& o, const MoeShape& shape, std::int64_t M) {
  return o.alignment_in_gemm1 != false && !moe::route_align_fits(shape, M) &&
         moe::sliced_derives_alignment(shape, M);
}
}  // namespace

bool decode_kernels_apply(const MoeShape& shape, std::int64_t M) {
  // forward() asks at every call: above kDecodeMaxTokens the shape's checks are not needed.
  return M >= 1 && M <= moe::kDecodeMaxTokens && M <= moe::decode_max_tokens(shape);
}

bool routing_fuses_quant(const MoeShape& shape, bool router_logits) {
  return router_logits && shape.dtype == Dtype::fp8_w8a8 && shape.block_shape.has_value();
}

bool gemm2_sums_topk_applies(std::int64_t M, const std::string& arch) {
  return M >= 1 && arch_supports_pdl(arch);  // sm_90+, as PDL
}

const char* stage_name(MoeStage s, const MoeShape& shape, std::int64_t M, const KernelConfig& up,
                       bool sums_topk, bool gemm1_aligns) {
  if (gemm1_aligns && s == MoeStage::align) return "align (in gemm1)";
  if (sums_topk) {
    if (s == MoeStage::gemm2) return "gemm2+reduce";
    if (s == MoeStage::reduce) return "reduce (in gemm2)";
  }
  const bool quant = routing_fuses_quant(shape, true);
  if (routing_fuses_align(shape, M, true)) {
    if (s == MoeStage::routing) return quant ? "routing+align+quant" : "routing+align";
    if (s == MoeStage::align) return "align (in routing)";
  }
  if (quant) {
    if (s == MoeStage::routing) return "routing+quant";
    if (s == MoeStage::quant) return "quant (in routing)";
  }
  if (gemm1_fuses_act(shape, M, up)) {
    if (s == MoeStage::gemm1) return "gemm1+act";
    if (s == MoeStage::act) return "act (in gemm1)";
  }
  return to_string(s);
}

namespace {

constexpr std::size_t kAlign = 256;
std::size_t round_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

bool fp8(const MoeShape& s) { return s.dtype == Dtype::fp8_w8a8; }
bool block_fp8(const MoeShape& s) { return fp8(s) && s.block_shape.has_value(); }
int block_k(const MoeShape& s) { return block_fp8(s) ? (*s.block_shape)[1] : 0; }
// What the decode kernels' geometry takes of the GPU (its SMs and shared memory per block).
moe::DecodeGpu decode_gpu(const GpuSpec& g) { return {g.sm_count, g.smem_per_block_bytes}; }

// GEMM1's (up) or GEMM2's weights, and for fp8 their scales: InputError when null.
void require_weights(const MoeShape& s, const MoeWeights& w, bool up) {
  if ((up ? w.w13 : w.w2) == nullptr) throw InputError(up ? "w13" : "w2", "null", "needed");
  if (fp8(s) && (up ? w.w13_scale : w.w2_scale) == nullptr)
    throw InputError(up ? "w13_scale" : "w2_scale", "null", "fp8 weights need their scales");
}

// The distinct configs of `table` that the nearest-M lookup can pick for some M in
// [1, max_M] (the default tables repeat a few configs over hundreds of keys).
std::vector<KernelConfig> reachable(const ConfigTable& table, std::int64_t max_M) {
  std::vector<KernelConfig> out;
  for (const auto& [key, c] : table) {
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    if (key > max_M) break;  // the first key above max_M can still be nearest
  }
  return out;
}

// The defaults are rules of M: evaluated at every M up to kDenseDefaultM, where they change from
// one M to the next (a grid that outgrows one wave of resident blocks, the swap-AB and split-K
// thresholds), then at default_batch_sizes(). With only those, the nearest-M lookup served M = 5
// and 6 with M = 4's tiles (bf16 Qwen3.5 TP4 M = 5: 72.4 µs on them against 56.7 on its own,
// bench/results/2026-12-01_h200_ninth_session.md, calls 5 and 7). 64: block fp8's n256 s2 up
// band reaches M = 46 on the anchors, which the entry at 48 served before. 256: the 16-bit w8 up
// tile starts at 2.5 token slots per expert (M = 80 on the anchors), which 64's entry served.
// Past 256 the nearest-M lookup serves M = 257..384 with 256's entry (its m16 decode tiles; the
// rules give m64 tiles from 257: neither measured there).
constexpr int kDenseDefaultM = 256;

ConfigTable default_table(const MoeShape& shape, const GpuSpec& gpu, bool down) {
  ConfigTable t;
  for (int M = 1; M <= kDenseDefaultM; ++M) t[M] = moetune_default_config(shape, gpu, M, down);
  for (int M : default_batch_sizes()) t[M] = moetune_default_config(shape, gpu, M, down);
  return t;
}

int lookup_M(std::int64_t M) {
  return static_cast<int>(std::clamp<std::int64_t>(M, 1, 1 << 30));
}

}  // namespace

struct FusedMoe::Impl {
  MoeShape shape;
  GpuSpec gpu;
  ConfigTable up, down;
  // The tables' distinct configs and BLOCK_SIZE_M values, set once: workspace_layout runs once
  // per stage launch and sizes its regions over them (the default tables hold ~260 entries).
  std::vector<KernelConfig> up_configs, down_configs;
  std::set<int> block_sizes_m;
  // Every up config can fuse the activation at small M (gemm1_fuses_act): then h needs no room
  // where GEMM1 fuses (workspace_layout). Fixed with the table, so set once.
  bool every_up_fuses = true;
  FusedMoeOptions opts;
  std::string arch;
  bool pdl = false;  // opts.pdl on an sm_90+ arch: every stage launch asks for PDL
  // The persistent GEMM kernel: ring slots (0: it never runs here) and the grid the workspace
  // is sized for (the GpuSpec's SMs); launches take at most the device's SMs (launch_grid).
  int persistent_stages = 0;
  int persistent_grid = 0;
  // The sliced GEMM kernel's ring slots (0: it never runs here), and whether in pairs.
  int sliced_stages = 0;
  bool sliced_pairs = false;
  int launch_grid() const;
  std::vector<std::shared_ptr<cuda::LoadedKernel>> loaded;  // kept alive after prepare()

  struct Ptrs {
    const std::int32_t* topk_ids;
    const float* topk_weights;
    char* ws;
  };
  Ptrs pointers(const MoeInputs& in, const MoeWorkspaceLayout& L, void* workspace,
                std::size_t bytes) const {
    if (workspace == nullptr && L.total > 0)
      throw InputError("workspace", "null", "a workspace of workspace_bytes(M) is needed");
    if (bytes < L.total)
      throw InputError("workspace_bytes", std::to_string(bytes),
                       fmt::format("M={} needs {} bytes", L.M, L.total));
    if (in.hidden == nullptr) throw InputError("hidden", "null", "the input is needed");
    char* ws = static_cast<char*>(workspace);
    if (in.router_logits != nullptr)
      return {reinterpret_cast<const std::int32_t*>(ws + L.topk_ids),
              reinterpret_cast<const float*>(ws + L.topk_weights), ws};
    if (in.topk_ids == nullptr || in.topk_weights == nullptr)
      throw InputError("router_logits", "null",
                       "give router_logits, or topk_ids and topk_weights");
    return {in.topk_ids, in.topk_weights, ws};
  }
};

// One block per SM of the current device (asked at each launch: the object may serve another
// device later), at most persistent_grid: every block of the persistent kernel must be resident
// at once (its GEMM2 waits on other blocks' GEMM1 tiles).
int FusedMoe::Impl::launch_grid() const {
  int sms = 0;
  CUdevice dev = 0;
  MOETUNE_CU(cuCtxGetDevice, &dev);
  MOETUNE_CU(cuDeviceGetAttribute, &sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  return std::min(sms, persistent_grid);
}

FusedMoe::FusedMoe(const MoeShape& shape, const GpuSpec& gpu, ConfigTable up, ConfigTable down,
                   FusedMoeOptions opts)
    : impl_(std::make_unique<Impl>()) {
  if (up.empty()) {
    const GpuSpec target = gpu_for_arch(gpu, opts.arch);
    up = default_table(shape, target, false);
    if (down.empty()) down = default_table(shape, target, true);
  }
  if (down.empty()) down = up;
  check(shape, gpu, up, down, opts);
  impl_->shape = shape;
  impl_->gpu = gpu;
  impl_->up = std::move(up);
  impl_->down = std::move(down);
  const std::int64_t every_key = std::numeric_limits<std::int64_t>::max();
  impl_->up_configs = reachable(impl_->up, every_key);
  impl_->down_configs = reachable(impl_->down, every_key);
  for (const auto& c : impl_->up_configs) {
    impl_->every_up_fuses = impl_->every_up_fuses && gemm1_fuses_act(shape, 1, c);
    impl_->block_sizes_m.insert(c.BLOCK_SIZE_M);
  }
  for (const auto& c : impl_->down_configs) impl_->block_sizes_m.insert(c.BLOCK_SIZE_M);
  impl_->arch = opts.arch.empty() ? gpu.arch() : opts.arch;
  impl_->pdl = opts.pdl && arch_supports_pdl(impl_->arch);
  if (opts.persistent_gemms && impl_->arch == "sm_90a" && moe::persistent_unfit(shape).empty() &&
      gpu.sm_count > 0) {
    impl_->persistent_stages = moe::persistent_stages(shape, gpu.smem_per_block_bytes);
    impl_->persistent_grid = impl_->persistent_stages > 0 ? gpu.sm_count : 0;
  }
  // Stages (and its workspace) only where it may run: not asked off, and not where out must be
  // bit-reproducible (its adds land in any order), so such a layer's workspace is the stage
  // path's.
  if (opts.sliced_gemms != false && opts.topk_sum_in_gemm2 && impl_->arch == "sm_90a" &&
      moe::sliced_unfit(shape).empty())
    impl_->sliced_stages = moe::sliced_stages(
        gpu.smem_per_block_bytes, opts.sliced_stages > 0 ? opts.sliced_stages : moe::kSlicedStages);
  impl_->sliced_pairs =
      impl_->sliced_stages > 0 && opts.sliced_pairs && moe::sliced_pairs_fit(shape);
  impl_->opts = std::move(opts);
}

FusedMoe::~FusedMoe() = default;
FusedMoe::FusedMoe(FusedMoe&&) noexcept = default;
FusedMoe& FusedMoe::operator=(FusedMoe&&) noexcept = default;

void FusedMoe::check(const MoeShape& shape, const GpuSpec& gpu, const ConfigTable& up,
                     const ConfigTable& down_in, const FusedMoeOptions& opts) {
  moe::check_stage_shape(shape, opts.rank);
  if (fp8(shape) && gpu.compute_capability() > 0 &&
      gpu.compute_capability() < min_compute_capability(Dtype::fp8_w8a8))
    throw InputError("dtype", "fp8_w8a8",
                     fmt::format("needs sm_89 or newer; {} is sm_{}", gpu.name,
                                 gpu.compute_capability()));
  if (up.empty()) throw InputError("config", "{}", "the up table is empty");
  if (opts.sliced_stages != 0) {
    if (const std::string why = moe::sliced_stages_violation(opts.sliced_stages); !why.empty())
      throw InputError("sliced_stages", std::to_string(opts.sliced_stages), why + " (0: 4)");
  }
  if (opts.sliced_gemms == true && !opts.topk_sum_in_gemm2)
    throw InputError("sliced_gemms", "true",
                     "the sliced kernel adds into out in any order; topk_sum_in_gemm2 false "
                     "(a bit-reproducible output) excludes it");
  const ConfigTable& down = down_in.empty() ? up : down_in;
  const std::string arch = opts.arch.empty() ? gpu.arch() : opts.arch;
  ValidationTarget target;
  target.dtype = shape.dtype;
  target.block_shape = shape.block_shape;
  target.gpu = &gpu;
  auto validate = [&](const ConfigTable& t, gemm::GemmStage stage) {
    for (const auto& [M, c] : t) {
      const auto v = validate_config(c, target, M);
      if (!v.empty())
        throw InputError(v[0].key, v[0].value,
                         fmt::format("{} table entry M={}: {} (limit {})", gemm::to_string(stage),
                                     M, v[0].rule, v[0].limit));
      (void)gemm::gemm_kernel_spec(shape, c, stage, arch);  // throws InputError
    }
  };
  validate(up, gemm::GemmStage::up);  // either GEMM1 may run an entry (gemm1_stage depends on M)
  for (const auto& [M, c] : up) {  // and the fused one wherever it may (any M up to the band)
    if (gemm::gemm1_stage(shape, 1, c) != gemm::GemmStage::up_act) continue;
    try {
      (void)gemm::gemm_kernel_spec(shape, c, gemm::GemmStage::up_act, arch);
    } catch (const InputError& e) {
      throw InputError(e.field(), e.value(),
                       fmt::format("up_act table entry M={}: {}", M, e.reason()));
    }
  }
  validate(down, gemm::GemmStage::down);
  if (opts.topk_sum_in_gemm2 && gemm2_sums_topk_applies(1, arch))
    validate(down, gemm::GemmStage::down_sum);
  std::set<int> keys;
  for (const auto& [k, c] : up) keys.insert(k);
  for (const auto& [k, c] : down) keys.insert(k);
  for (int M : keys) {
    const int bu = lookup(up, M).BLOCK_SIZE_M, bd = lookup(down, M).BLOCK_SIZE_M;
    if (bu != bd)
      throw InputError("BLOCK_SIZE_M", std::to_string(bd),
                       fmt::format("down table at M={} differs from up's {} (one alignment serves "
                                   "both GEMMs)",
                                   M, bu));
  }
}

const MoeShape& FusedMoe::shape() const { return impl_->shape; }
const std::string& FusedMoe::arch() const { return impl_->arch; }
int FusedMoe::rank() const { return impl_->opts.rank; }
bool FusedMoe::pdl() const { return impl_->pdl; }
const ConfigTable& FusedMoe::up_table() const { return impl_->up; }
const ConfigTable& FusedMoe::down_table() const { return impl_->down; }
const KernelConfig& FusedMoe::up_config(std::int64_t M) const {
  return lookup(impl_->up, lookup_M(M));
}
const KernelConfig& FusedMoe::down_config(std::int64_t M) const {
  return lookup(impl_->down, lookup_M(M));
}

MoeWorkspaceLayout FusedMoe::workspace_layout(std::int64_t M) const {
  const MoeShape& s = impl_->shape;
  if (M < 0) throw InputError("M", std::to_string(M), "must be >= 0");
  MoeWorkspaceLayout L;
  L.M = M;
  L.BLOCK_SIZE_M = up_config(M).BLOCK_SIZE_M;
  L.max_num_tokens_padded = moe::max_num_tokens_padded(M, s.topk, s.E, L.BLOCK_SIZE_M);
  L.max_num_m_blocks = moe::max_num_m_blocks(M, s.topk, s.E, L.BLOCK_SIZE_M);
  // Regions are sized for every BLOCK_SIZE_M of the tables, so offsets grow with M only.
  std::int64_t sorted_cap = 0, blocks_cap = 0;
  for (int bm : impl_->block_sizes_m) {
    sorted_cap = std::max(sorted_cap, moe::max_num_tokens_padded(M, s.topk, s.E, bm));
    blocks_cap = std::max(blocks_cap, moe::max_num_m_blocks(M, s.topk, s.E, bm));
  }
  std::size_t gemm_up_bytes = 0, gemm_down_bytes = 0;
  for (const auto& c : impl_->up_configs)
    gemm_up_bytes =
        std::max(gemm_up_bytes, gemm::gemm_workspace_bytes(s, c, gemm::gemm1_stage(s, M, c), M));
  for (const auto& c : impl_->down_configs)
    gemm_down_bytes =
        std::max(gemm_down_bytes, gemm::gemm_workspace_bytes(s, c, gemm::GemmStage::down, M));

  const std::size_t slots = static_cast<std::size_t>(M) * s.topk;
  const std::size_t act_bytes = 2;
  const int bk = block_k(s);
  std::size_t off = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t o = off;
    off += round_up(bytes);
    return o;
  };
  L.topk_ids = take(slots * 4);
  L.topk_weights = take(slots * 4);
  L.sorted_token_ids = take(static_cast<std::size_t>(sorted_cap) * 4);
  L.expert_ids = take(static_cast<std::size_t>(blocks_cap) * 4);
  L.num_tokens_post_padded = take(4);
  L.a_q = take(fp8(s) ? static_cast<std::size_t>(M) * s.K : 0);
  L.a_scale = take(block_fp8(s) ? static_cast<std::size_t>(M) * (s.K / bk) * 4 : fp8(s) ? 4 : 0);
  L.partials = take(fp8(s) && !block_fp8(s) ? moe::kAmaxPartials * 4 : 0);
  L.gemm1_fused_act = gemm1_fuses_act(s, M, up_config(M));
  // h has no room where GEMM1 fuses, if every up config can fuse: fusion then depends on M
  // alone (up to a size), so h grows from 0 with M and offsets stay monotone. A table with a
  // config that cannot (block fp8's unswapped or n128 tiles) keeps h's room at every M.
  L.h = take(L.gemm1_fused_act && impl_->every_up_fuses ? 0 : slots * 2 * s.N * act_bytes);
  L.act_quant_fused = block_fp8(s);  // the activation stage writes act_q directly
  L.act = take(L.act_quant_fused ? 0 : slots * s.N * act_bytes);
  L.act_q = take(fp8(s) ? slots * s.N : 0);
  L.act_scale = take(block_fp8(s) ? slots * (s.N / bk) * 4 : fp8(s) ? 4 : 0);
  L.y = take(slots * s.K * act_bytes);
  L.gemm_up = take(gemm_up_bytes);
  L.gemm_up_bytes = gemm_up_bytes;
  L.gemm_down = take(gemm_down_bytes);
  L.gemm_down_bytes = gemm_down_bytes;
  // Sized for min(M, decode_max_tokens) tokens so that the total never shrinks as M grows.
  const std::int64_t decode_tokens = std::min<std::int64_t>(M, moe::decode_max_tokens(s));
  const bool decode_fits = decode_kernels_apply(s, 1);
  L.decode = impl_->opts.decode_kernels && decode_kernels_apply(s, M);
  L.decode_act =
      take(impl_->opts.decode_kernels && decode_fits
               ? static_cast<std::size_t>(decode_tokens) * s.topk * s.N * act_bytes
               : 0);
  // Sized for min(M, kPersistentMaxTokens) tokens wherever the kernel can run at all, so that
  // the total never shrinks as M grows.
  if (impl_->persistent_grid > 0) {
    const std::int64_t pm = std::min<std::int64_t>(M, moe::kPersistentMaxTokens);
    L.persistent_ws_bytes = moe::persistent_workspace_bytes(
        s, moe::max_num_m_blocks(pm, s.topk, s.E, 16), impl_->persistent_grid);
    L.persistent_ws = take(L.persistent_ws_bytes);
    L.persistent = uses_persistent_gemms(M);
  }
  if (impl_->sliced_stages > 0) {  // at every M, so that offsets grow with M only
    L.sliced_ws = take(static_cast<std::size_t>(moe::sliced_counter_ints()) * 4);
    L.sliced = uses_sliced_gemms(M);
  }
  L.gemm2_sums_topk = gemm2_sums_topk(M);
  L.gemm1_aligns = gemm1_aligns(M);
  L.total = off;
  return L;
}

std::size_t FusedMoe::workspace_bytes(std::int64_t max_M) const {
  return workspace_layout(max_M).total;
}

void FusedMoe::init_workspace(void* workspace, std::size_t bytes, CUstream stream) {
  if (workspace == nullptr || bytes == 0) return;
  MOETUNE_CU(cuMemsetD8Async, reinterpret_cast<CUdeviceptr>(workspace), 0, bytes, stream);
}

void FusedMoe::prepare(std::int64_t max_M) {
  const MoeShape& s = impl_->shape;
  const std::string& arch = impl_->arch;
  std::vector<cuda::KernelSpec> specs;
  specs.push_back(moe::routing_spec(s, arch, routing_fuses_quant(s, true)));
  std::set<int> bms;
  // GEMM1 fuses the activation up to a size where its config can (gemm1_stage): both variants
  // of a config when max_M passes that size, and the activation stage where any runs unfused.
  bool act_stage = false;
  for (const auto& c : reachable(impl_->up, max_M)) {
    const bool fused_small = gemm1_fuses_act(s, 1, c), fused_all = gemm1_fuses_act(s, max_M, c);
    if (fused_small) specs.push_back(gemm::gemm_kernel_spec(s, c, gemm::GemmStage::up_act, arch));
    if (!fused_all) specs.push_back(gemm::gemm_kernel_spec(s, c, gemm::GemmStage::up, arch));
    act_stage = act_stage || !fused_all;
    bms.insert(c.BLOCK_SIZE_M);
  }
  // GEMM1 deriving the alignment (gemm1_aligns): its instance at each M where it does (a few
  // dozen sizes at most: M * topk <= tile_math::kInlineAlignMaxSlots).
  if (impl_->opts.alignment_in_gemm1 != false) {
    std::set<std::string> names;
    for (std::int64_t M = 1; M <= max_M && M * s.topk <= tile_math::kInlineAlignMaxSlots; ++M) {
      if (!gemm1_aligns(M) || uses_sliced_gemms(M)) continue;  // sliced: below
      const KernelConfig& c = up_config(M);
      cuda::KernelSpec spec = gemm::gemm_kernel_spec(s, c, gemm::gemm1_stage(s, M, c), arch, true);
      if (names.insert(spec.name).second) specs.push_back(std::move(spec));
    }
  }
  // The plain GEMM2 also where it folds the top-k sum: the GEMM phase (enqueue_gemm_phase) runs it.
  for (const auto& c : reachable(impl_->down, max_M)) {
    specs.push_back(gemm::gemm_kernel_spec(s, c, gemm::GemmStage::down, arch));
    if (impl_->opts.topk_sum_in_gemm2 && gemm2_sums_topk_applies(1, arch))
      specs.push_back(gemm::gemm_kernel_spec(s, c, gemm::GemmStage::down_sum, arch));
  }
  for (int bm : bms) {
    if (routing_fuses_align(s, 1, true))
      specs.push_back(moe::route_align_spec(s, bm, arch, routing_fuses_quant(s, true)));
    specs.push_back(moe::align_spec(bm, moe::kAlignSmallThreads, arch));
    if (max_M * s.topk > moe::kAlignSmallSlots)
      specs.push_back(moe::align_spec(bm, moe::kAlignLargeThreads, arch));
  }
  if (fp8(s)) {
    specs.push_back(moe::quant_spec(s.dtype, block_k(s), arch));
    if (!block_fp8(s)) specs.push_back(moe::amax_spec(s.dtype, arch));
  }
  if (act_stage)
    specs.push_back(block_fp8(s) ? moe::silu_mul_quant_spec(s, arch) : moe::silu_mul_spec(s, arch));
  specs.push_back(moe::topk_reduce_spec(s, arch));
  if (impl_->opts.decode_kernels && decode_kernels_apply(s, 1)) {
    for (bool route : {true, false}) {  // router logits, or precomputed ids
      std::set<std::string> names;  // moe_decode_up's geometry may differ at M = 1 and above
      for (std::int64_t M = 1; M <= std::min<std::int64_t>(max_M, moe::decode_max_tokens(s)); ++M) {
        cuda::KernelSpec up = moe::decode_up_spec(s, arch, route, M, decode_gpu(impl_->gpu));
        if (names.insert(up.name).second) specs.push_back(std::move(up));
        cuda::KernelSpec down = moe::decode_down_spec(s, arch, route, M, decode_gpu(impl_->gpu));
        if (names.insert(down.name).second) specs.push_back(std::move(down));
      }
    }
  }

  if (impl_->persistent_grid > 0)
    for (std::int64_t M = 1; M <= std::min(max_M, moe::kPersistentMaxTokens); ++M)
      if (uses_persistent_gemms(M)) {
        specs.push_back(moe::persistent_spec(s, arch, impl_->persistent_stages));
        break;
      }

  if (impl_->sliced_stages > 0) {  // its instances: reading the tables, deriving them
    std::set<std::string> names;
    for (std::int64_t M = 1; M <= std::min(max_M, moe::kSlicedMaxTokens); ++M) {
      if (!uses_sliced_gemms(M)) continue;
      cuda::KernelSpec spec =
          moe::sliced_spec(s, arch, impl_->sliced_stages, gemm1_aligns(M), impl_->sliced_pairs);
      if (names.insert(spec.name).second) specs.push_back(std::move(spec));
    }
  }

  auto& jit = cuda::Jit::instance();
  const auto compiled = jit.compile_many(specs);
  for (const auto& c : compiled)
    if (c.cubin.empty())
      throw CudaError(fmt::format("compiling {} for {} failed: {}", c.spec.name, arch, c.log));
  impl_->loaded.clear();
  for (const auto& spec : specs) impl_->loaded.push_back(jit.get(spec));
}

void FusedMoe::enqueue_stage(MoeStage stage, const MoeInputs& in, const MoeWeights& w, void* out,
                             void* workspace, std::size_t workspace_bytes,
                             CUstream stream) const {
  enqueue(stage, in, w, out, workspace, workspace_bytes, stream, false);
}

void FusedMoe::enqueue(MoeStage stage, const MoeInputs& in, const MoeWeights& w, void* out,
                       void* workspace, std::size_t workspace_bytes, CUstream stream,
                       bool gemm_phase) const {
  const MoeShape& s = impl_->shape;
  const std::int64_t M = in.M;
  if (M < 0) throw InputError("M", std::to_string(M), "must be >= 0");
  if (M == 0) return;
  const MoeWorkspaceLayout L = workspace_layout(M);
  const auto p = impl_->pointers(in, L, workspace, workspace_bytes);
  char* ws = p.ws;
  const std::string& arch = impl_->arch;
  const int rank = impl_->opts.rank;
  // Every stage kernel pdl_wait()s before its first global access, so each may be launched as a
  // programmatic dependent of the one before (also the first: of the caller's last kernel).
  const bool pdl = impl_->pdl;
  const std::int64_t slots = M * s.topk;
  // The top-k sum folded into GEMM2: GEMM1 zeroes out, GEMM2 adds into it, reduce does nothing.
  // Not where out overlaps a 16-bit hidden state (an in-place call): GEMM1 reads it while its
  // blocks zero out. (Block fp8's GEMM1 reads the routing's quantized copy.)
  const std::size_t rows_bytes = static_cast<std::size_t>(M) * s.K * 2;
  const auto ob = reinterpret_cast<std::uintptr_t>(out);
  const auto hb = reinterpret_cast<std::uintptr_t>(in.hidden);
  const bool overlaps_hidden = ob != 0 && hb != 0 && ob < hb + rows_bytes && hb < ob + rows_bytes;
  const bool in_place = !fp8(s) && overlaps_hidden;
  const bool sums_topk = L.gemm2_sums_topk && !gemm_phase && !in_place;
  // The sliced kernel after a routing launch (its blocks derive the alignment): the routing's
  // blocks zero out, so the kernel takes no ticket on entry and counts nothing on exit (about
  // an atomic round trip at each end of its critical path). Not where out overlaps what the
  // routing launch reads (the hidden states its spare blocks quantize, the logits), nor for
  // the GEMM phase alone (no routing; its adds go to y). Decided without out's null-ness, so
  // that a routing stage given no out is refused rather than leaving gemm1 an unzeroed out.
  const auto lb = reinterpret_cast<std::uintptr_t>(in.router_logits);
  const std::size_t logit_bytes = static_cast<std::size_t>(M) * s.E_global * 4;
  const bool overlaps_logits = ob != 0 && ob < lb + logit_bytes && lb < ob + rows_bytes;
  const bool routing_zeroes_out = L.sliced && L.gemm1_aligns && lb != 0 &&
                                  !routing_fuses_align(s, M, true) && !gemm_phase &&
                                  ob % 16 == 0 && !overlaps_hidden && !overlaps_logits;
  if (sums_topk && out == nullptr &&
      (stage == MoeStage::gemm1 || stage == MoeStage::gemm2 || stage == MoeStage::reduce))
    throw InputError("out", "null",
                     "GEMM2 adds the top-k sum into the output at this M: gemm1 and gemm2 need it");
  auto* sorted = reinterpret_cast<std::int32_t*>(ws + L.sorted_token_ids);
  auto* expert_ids = reinterpret_cast<std::int32_t*>(ws + L.expert_ids);
  auto* ntpp = reinterpret_cast<std::int32_t*>(ws + L.num_tokens_post_padded);
  auto gemm_args = [&](gemm::GemmStage st) {
    gemm::GemmArgs a;
    a.stage = st;
    a.sorted_token_ids = sorted;
    a.expert_ids = expert_ids;
    a.num_tokens_post_padded = ntpp;
    a.M = M;
    a.max_num_tokens_padded = L.max_num_tokens_padded;
    const bool up = gemm::gemm_stage_is_up(st);
    const std::size_t bytes = up ? L.gemm_up_bytes : L.gemm_down_bytes;
    a.workspace = bytes > 0 ? ws + (up ? L.gemm_up : L.gemm_down) : nullptr;
    a.workspace_bytes = bytes;
    // This call's alignment (or routing+align where routing_fuses_align) zeroed the split-K
    // counters (counters() below; every GEMM stage needs the alignment of the same call
    // anyway): no memset before a split-K GEMM, one graph
    // node less, and the GEMM stays a programmatic dependent launch (decode's GEMM1 is split-K:
    // 8 ways for fp8 at M = 1).
    a.workspace_counters_zeroed = true;
    a.pdl = pdl;
    return a;
  };

  // The split-K counters of this M's GEMMs: the layout moves with M, so another M's call
  // may have left data there.
  auto counters = [&](bool up) -> std::pair<std::int32_t*, int> {
    if (L.sliced) {  // the sliced kernel's tickets (GEMM2 has no launch)
      if (!up) return {nullptr, 0};
      return {reinterpret_cast<std::int32_t*>(ws + L.sliced_ws), moe::sliced_counter_ints()};
    }
    if (L.persistent) {  // the persistent kernel's tickets and ready words (GEMM2's: none)
      if (!up) return {nullptr, 0};
      return {reinterpret_cast<std::int32_t*>(ws + L.persistent_ws),
              moe::persistent_counter_ints(s, L.max_num_m_blocks)};
    }
    const std::size_t bytes = up ? L.gemm_up_bytes : L.gemm_down_bytes;
    if (bytes == 0) return {nullptr, 0};
    const KernelConfig& c = up ? up_config(M) : down_config(M);
    const gemm::GemmStage st = up ? gemm::gemm1_stage(s, M, c) : gemm::GemmStage::down;
    const auto g = gemm::gemm_launch_geometry(s, c, st, M, L.max_num_tokens_padded, arch);
    const std::size_t n = gemm::gemm_counter_bytes_for_grid(c, g.grid.x) / 4;
    return {reinterpret_cast<std::int32_t*>(ws + (up ? L.gemm_up : L.gemm_down)),
            static_cast<int>(n)};
  };
  switch (stage) {
    case MoeStage::routing: {
      if (in.router_logits == nullptr) return;  // precomputed topk_ids / topk_weights
      // Block fp8: the routing launch's spare blocks quantize the hidden states too.
      moe::RoutingQuant rq{in.hidden, reinterpret_cast<std::uint8_t*>(ws + L.a_q),
                           reinterpret_cast<float*>(ws + L.a_scale)};
      const moe::RoutingQuant* quant = routing_fuses_quant(s, true) ? &rq : nullptr;
      if (routing_fuses_align(s, M, true)) {  // decode: one block routes and aligns
        const auto [za, na] = counters(true);   // and zeroes the counters, as the alignment
        const auto [zb, nb] = counters(false);
        moe::launch_route_align(s, L.BLOCK_SIZE_M, arch, in.router_logits, w.correction_bias,
                                reinterpret_cast<std::int32_t*>(ws + L.topk_ids),
                                reinterpret_cast<float*>(ws + L.topk_weights), M, rank, sorted,
                                expert_ids, ntpp, L.max_num_tokens_padded, L.max_num_m_blocks,
                                stream, pdl, za, na, zb, nb, quant);
        return;
      }
      if (routing_zeroes_out && out == nullptr)
        throw InputError("out", "null",
                         "the routing zeroes it for the sliced GEMM kernel: give routing and gemm1 "
                         "the same out");
      // The sliced kernel deriving the alignment: no alignment launch zeroes its counters.
      const auto [zc, nc] = L.sliced && L.gemm1_aligns ? counters(true)
                                                       : std::pair<std::int32_t*, int>{nullptr, 0};
      moe::launch_routing(s, arch, in.router_logits, w.correction_bias,
                          reinterpret_cast<std::int32_t*>(ws + L.topk_ids),
                          reinterpret_cast<float*>(ws + L.topk_weights), M, stream, pdl, quant,
                          zc, nc, routing_zeroes_out ? out : nullptr,
                          routing_zeroes_out ? rows_bytes : 0);
      return;
    }
    case MoeStage::align: {
      // GEMM1 derives it and writes the tables; the sliced kernel derives it too, but without
      // a routing launch (precomputed topk_ids) its counters are zeroed here.
      if (L.gemm1_aligns && !(L.sliced && in.router_logits == nullptr)) return;
      if (routing_fuses_align(s, M, in.router_logits != nullptr)) return;  // routing aligned
      const auto [za, na] = counters(true);
      const auto [zb, nb] = counters(false);
      moe::launch_align(L.BLOCK_SIZE_M, arch, p.topk_ids, M, s.topk, s.E, rank, sorted, expert_ids,
                        ntpp, L.max_num_tokens_padded, L.max_num_m_blocks, stream, pdl, za, na,
                        zb, nb);
      return;
    }
    case MoeStage::quant:
      if (!fp8(s)) return;
      if (routing_fuses_quant(s, in.router_logits != nullptr)) return;  // the routing did it
      moe::launch_quant(s.dtype, block_k(s), arch, in.hidden, M, s.K,
                        reinterpret_cast<std::uint8_t*>(ws + L.a_q),
                        reinterpret_cast<float*>(ws + L.a_scale),
                        reinterpret_cast<float*>(ws + L.partials), stream, pdl);
      return;
    case MoeStage::gemm1: {
      require_weights(s, w, true);
      if (L.persistent) {  // both GEMMs and the activation in one launch
        require_weights(s, w, false);
        moe::PersistentArgs a;
        a.M = M;
        a.max_m_blocks = L.max_num_m_blocks;
        a.a_q = reinterpret_cast<const std::uint8_t*>(ws + L.a_q);
        a.a_scale = reinterpret_cast<const float*>(ws + L.a_scale);
        a.w13 = w.w13;
        a.w13_scale = w.w13_scale;
        a.w2 = w.w2;
        a.w2_scale = w.w2_scale;
        a.act_q = reinterpret_cast<std::uint8_t*>(ws + L.act_q);
        a.act_scale = reinterpret_cast<float*>(ws + L.act_scale);
        a.y = ws + L.y;
        a.topk_weights = p.topk_weights;
        a.sorted_token_ids = sorted;
        a.expert_ids = expert_ids;
        a.num_tokens_post_padded = ntpp;
        a.workspace = ws + L.persistent_ws;
        moe::launch_persistent(s, arch, impl_->persistent_stages, impl_->launch_grid(), a, stream,
                               pdl);
        return;
      }
      if (L.sliced) {  // both GEMMs, the activation and the top-k sum in one launch
        require_weights(s, w, false);
        // The GEMM phase alone (no out): the adds go to y, which is larger than [M, K].
        if (out == nullptr && !gemm_phase)
          throw InputError("out", "null", "the sliced GEMM kernel adds the layer's output into it");
        moe::SlicedArgs a;
        a.M = M;
        a.max_m_blocks = L.max_num_m_blocks;
        a.a_q = reinterpret_cast<const std::uint8_t*>(ws + L.a_q);
        a.a_scale = reinterpret_cast<const float*>(ws + L.a_scale);
        a.w13 = w.w13;
        a.w13_scale = w.w13_scale;
        a.w2 = w.w2;
        a.w2_scale = w.w2_scale;
        a.out = gemm_phase ? static_cast<void*>(ws + L.y) : out;
        a.topk_weights = p.topk_weights;
        a.sorted_token_ids = sorted;
        a.expert_ids = expert_ids;
        a.num_tokens_post_padded = ntpp;
        a.counters = reinterpret_cast<std::int32_t*>(ws + L.sliced_ws);
        if (L.gemm1_aligns) {  // its blocks derive the alignment from topk_ids
          a.topk_ids = p.topk_ids;
          a.expert_start = rank * s.E;
        }
        a.out_zeroed = routing_zeroes_out;
        a.pairs = impl_->sliced_pairs;
        moe::launch_sliced(s, arch, impl_->sliced_stages, a, stream, pdl);
        return;
      }
      // Fused: SiLU(gate)·up in the epilogue, straight into the activation buffer (block fp8:
      // its quantization and scales, GEMM2's input).
      const gemm::GemmStage st =
          L.gemm1_fused_act ? gemm::GemmStage::up_act : gemm::GemmStage::up;
      gemm::GemmArgs a = gemm_args(st);
      if (L.gemm1_aligns) {  // no alignment launch: GEMM1's blocks derive it from topk_ids
        a.topk_ids = p.topk_ids;
        a.expert_start = rank * s.E;
      }
      if (sums_topk) {  // GEMM2 adds into out: GEMM1's blocks clear it first
        a.zero_out = out;
        a.zero_out_bytes = rows_bytes;
      }
      a.a = fp8(s) ? static_cast<const void*>(ws + L.a_q) : in.hidden;
      a.a_scale = fp8(s) ? reinterpret_cast<const float*>(ws + L.a_scale) : nullptr;
      a.w = w.w13;
      a.w_scale = fp8(s) ? w.w13_scale : nullptr;
      if (st == gemm::GemmStage::up) {
        a.out = ws + L.h;
      } else if (block_fp8(s)) {
        a.out = ws + L.act_q;
        a.out_scale = reinterpret_cast<float*>(ws + L.act_scale);
      } else {
        a.out = ws + L.act;
      }
      gemm::launch_gemm(s, up_config(M), a, stream);
      return;
    }
    case MoeStage::act:
      if (L.gemm1_fused_act || L.persistent || L.sliced) return;  // GEMM1's epilogue wrote it
      if (block_fp8(s)) {  // one kernel: SiLU(gate)·up and its per-token group quantization
        moe::launch_silu_mul_quant(s, arch, ws + L.h, reinterpret_cast<std::uint8_t*>(ws + L.act_q),
                                   reinterpret_cast<float*>(ws + L.act_scale), p.topk_ids, M, rank,
                                   stream, pdl);
        return;
      }
      moe::launch_silu_mul(s, arch, ws + L.h, ws + L.act, p.topk_ids, M, rank, stream, pdl);
      if (fp8(s))
        moe::launch_quant(s.dtype, block_k(s), arch, ws + L.act, slots, s.N,
                          reinterpret_cast<std::uint8_t*>(ws + L.act_q),
                          reinterpret_cast<float*>(ws + L.act_scale),
                          reinterpret_cast<float*>(ws + L.partials), stream, pdl);
      return;
    case MoeStage::gemm2: {
      require_weights(s, w, false);
      if (L.persistent || L.sliced) return;  // the gemm1 stage's kernel ran GEMM2 too
      gemm::GemmArgs a = gemm_args(sums_topk ? gemm::GemmStage::down_sum : gemm::GemmStage::down);
      a.a = fp8(s) ? static_cast<const void*>(ws + L.act_q) : ws + L.act;
      a.a_scale = fp8(s) ? reinterpret_cast<const float*>(ws + L.act_scale) : nullptr;
      a.w = w.w2;
      a.w_scale = fp8(s) ? w.w2_scale : nullptr;
      a.out = sums_topk ? out : ws + L.y;
      a.topk_weights = p.topk_weights;
      gemm::launch_gemm(s, down_config(M), a, stream);
      return;
    }
    case MoeStage::reduce:
      if (sums_topk || L.sliced) return;  // GEMM2 added the top-k rows into out
      if (out == nullptr) throw InputError("out", "null", "the output is needed");
      moe::launch_topk_reduce(s, arch, ws + L.y, out, p.topk_ids, M, rank, stream, pdl);
      return;
  }
}

bool FusedMoe::uses_persistent_gemms(std::int64_t M) const {
  return impl_->persistent_grid > 0 &&
         moe::persistent_applies(impl_->shape, M, impl_->arch, up_config(M).BLOCK_SIZE_M,
                                 impl_->persistent_grid, impl_->gpu.smem_per_block_bytes);
}

int FusedMoe::sliced_stages() const { return impl_->sliced_stages; }
bool FusedMoe::sliced_pairs() const { return impl_->sliced_pairs; }

bool FusedMoe::uses_sliced_gemms(std::int64_t M) const {
  const MoeShape& s = impl_->shape;
  // No stages: asked off, or out must be bit-reproducible (see the constructor).
  if (impl_->sliced_stages <= 0 ||
      !moe::sliced_applies(s, M, impl_->arch, up_config(M).BLOCK_SIZE_M, impl_->sliced_stages) ||
      uses_persistent_gemms(M))
    return false;
  if (impl_->opts.sliced_gemms.has_value()) return true;  // asked for (false: no stages)
  // moetune's default: measured only with the kernel deriving the alignment.
  return sliced_derives(impl_->opts, s, M) &&
         moetune_default_sliced_gemms(impl_->gpu, s, static_cast<int>(M));
}

bool FusedMoe::gemm2_sums_topk(std::int64_t M) const {
  return impl_->opts.topk_sum_in_gemm2 && gemm2_sums_topk_applies(M, impl_->arch) &&
         !uses_persistent_gemms(M);
}

bool FusedMoe::gemm1_aligns(std::int64_t M) const {
  const MoeShape& s = impl_->shape;
  const std::optional<bool>& asked = impl_->opts.alignment_in_gemm1;
  if (asked == false || M < 1 || moe::route_align_fits(s, M) || uses_persistent_gemms(M))
    return false;
  // The sliced kernel (asked for, or the H100 SXM's and H200's default) derives it wherever
  // that fits.
  if (uses_sliced_gemms(M)) return sliced_derives(impl_->opts, s, M);
  if (down_config(M).SPLIT_K != 1) return false;
  const KernelConfig& up = up_config(M);
  if (!asked.has_value() &&
      !moetune_default_alignment_in_gemm1(impl_->gpu, gemm1_fuses_act(s, M, up)))
    return false;
  return gemm::gemm_inline_align_violation(s, up, gemm::gemm1_stage(s, M, up), M,
                                           impl_->arch) == nullptr;
}

bool FusedMoe::uses_decode_kernels(std::int64_t M) const {
  return impl_->opts.decode_kernels && decode_kernels_apply(impl_->shape, M);
}

const char* FusedMoe::layer_kernels(std::int64_t M) const {
  if (uses_decode_kernels(M)) return "decode";
  if (uses_persistent_gemms(M)) return "persistent";
  return uses_sliced_gemms(M) ? "sliced" : "stages";
}

void FusedMoe::forward_staged(const MoeInputs& in, const MoeWeights& w, void* out,
                              void* workspace, std::size_t workspace_bytes,
                              CUstream stream) const {
  if (in.M > 0 && out == nullptr) throw InputError("out", "null", "the output is needed");
  for (MoeStage st : kAllMoeStages)
    enqueue_stage(st, in, w, out, workspace, workspace_bytes, stream);
}

void FusedMoe::forward(const MoeInputs& in, const MoeWeights& w, void* out, void* workspace,
                       std::size_t workspace_bytes, CUstream stream) const {
  if (!uses_decode_kernels(in.M)) {
    forward_staged(in, w, out, workspace, workspace_bytes, stream);
    return;
  }
  const MoeShape& s = impl_->shape;
  if (out == nullptr) throw InputError("out", "null", "the output is needed");
  require_weights(s, w, true);
  require_weights(s, w, false);
  const MoeWorkspaceLayout L = workspace_layout(in.M);
  const auto p = impl_->pointers(in, L, workspace, workspace_bytes);
  moe::DecodeArgs a;
  a.M = in.M;
  a.rank = impl_->opts.rank;
  a.router_logits = in.router_logits;
  a.correction_bias = w.correction_bias;
  a.topk_ids_in = in.topk_ids;
  a.topk_weights_in = in.topk_weights;
  a.topk_ids_out = reinterpret_cast<std::int32_t*>(p.ws + L.topk_ids);
  a.topk_weights_out = reinterpret_cast<float*>(p.ws + L.topk_weights);
  a.x = in.hidden;
  a.w13 = w.w13;
  a.w13_scale = w.w13_scale;
  a.w2 = w.w2;
  a.w2_scale = w.w2_scale;
  a.act = p.ws + L.decode_act;
  a.out = out;
  moe::launch_decode(s, impl_->arch, a, stream, impl_->pdl, decode_gpu(impl_->gpu));
}

void FusedMoe::enqueue_gemm_phase(const MoeInputs& in, const MoeWeights& w, void* workspace,
                                  std::size_t workspace_bytes, CUstream stream) const {
  for (MoeStage st : {MoeStage::gemm1, MoeStage::act, MoeStage::gemm2})
    enqueue(st, in, w, nullptr, workspace, workspace_bytes, stream, true);
}

}  // namespace moetune
