// The fused MoE layer on the GPU, in CUTLASS-adapter steps: check (can it run?),
// workspace_bytes (how much scratch?), prepare (JIT-compile and load every kernel up front),
// forward / enqueue_* (launch on a stream: no allocation, no host synchronization, so a CUDA
// graph can capture it).
//
// Pipeline (DESIGN.md): routing -> alignment -> [fp8: quantize hidden] -> GEMM1 (w13) ->
// SiLU(gate)·up [fp8: quantize it] -> GEMM2 (w2, times the routed weight) -> sum over topk.
// At M <= 4 (2 or none on some shapes: decode_kernels_apply) forward() runs two decode kernels
// instead (FusedMoeOptions::decode_kernels): the same math, each GEMM a tensor-core product of a
// slot's expert with its one token, one stage boundary instead of five.
// bf16/fp16 at decode sizes (M*topk <= 8 slots per expert) run SiLU(gate)·up inside GEMM1's
// epilogue (gemm1_fuses_act): GEMM1 writes the [M*topk, N] activation directly, the
// [M*topk, 2N] intermediate never reaches memory and MoeStage::act launches nothing; block fp8
// does so too, quantized, where the up config allows it (swap-AB n256 tiles). Larger M, other
// fp8 tiles and per-tensor fp8 keep GEMM1 -> [M*topk, 2N] -> SiLU·up (+ fp8 quantization).
// Block fp8's activation stage is one kernel (SiLU·up and its per-token block_k quantization:
// MoeWorkspaceLayout::act_quant_fused); per-tensor fp8 needs the global amax first (three).
// The stage kernels (forward_staged, enqueue_stage; forward above M = 4) route and align in one
// single-block launch at M <= 5 (routing_fuses_align); block fp8 quantizes the hidden states in
// the routing launch (routing_fuses_quant).
// On sm_90+ each stage kernel is a programmatic dependent launch (FusedMoeOptions::pdl): it may
// start while the previous kernel on the stream (a stage, or the caller's last kernel) finishes,
// and waits on the GPU for its completion before touching memory.
//
// Layouts (row-major, last dim contiguous; all pointers are device pointers; "act" is the
// activation dtype: fp16 for Dtype::fp16, bf16 for bf16 and fp8_w8a8):
//   hidden          [M, K] act
//   router_logits   [M, E_global] fp32, or instead precomputed. A NaN choice score loses to
//                   every number; softmax spreads one NaN logit over the whole row (its weights
//                   NaN). Every slot names a distinct real expert: a row without a finite
//                   choice score takes experts 0..topk-1.
//   topk_ids        [M, topk] int32, global expert ids (EP: this rank holds [rank*E, (rank+1)*E);
//                   slots on other ranks add nothing to this rank's out), and
//   topk_weights    [M, topk] fp32 (already renormalized / scaled as the model wants)
//   w13             [E, 2N, K] (rows 0..N-1 gate, N..2N-1 up), w2 [E, K, N]: act dtype, or fp8
//                   e4m3 bytes for fp8_w8a8
//   w13_scale/w2_scale  fp32. block fp8 [bn, bk]: [E, 2N/bn, K/bk] and [E, K/bn, N/bk];
//                   per-tensor fp8: [E] (one scale per expert and weight); else unused
//   correction_bias [E_global] fp32, when shape.routing.correction_bias (DeepSeek noaux_tc)
//   out             [M, K] act:
//                   out[t] = Σ_j topk_weights[t, j] · w2[e_j] · silu_mul(w13[e_j] · x[t]),
//                   16-byte aligned. May be hidden itself (in place): a 16-bit layer then keeps
//                   the separate top-k sum (FusedMoeOptions::topk_sum_in_gemm2 zeroes out while
//                   GEMM1 still reads hidden).
//   workspace       workspace_bytes(max_M) bytes, 256-byte aligned, for any M <= max_M. Split-K
//                   GEMMs keep arrival counters there; the alignment of each call (or the
//                   routing+align kernel at M <= 5) zeroes the ones its GEMMs use (the layout
//                   moves with M), and the GEMMs leave them zero.
//                   init_workspace (zero-fill) is not needed, and harmless.
// Errors: InputError (field, value, reason) for shapes, configs or arguments the kernels cannot
// run (raised by check() and again by the enqueue calls); GpuUnavailable without a GPU;
// CudaError for a failed compile or launch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda.h>  // CUstream (types only; libcuda is loaded at run time)

#include "moetune/config.hpp"
#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune {

// The stages of one layer call, in order; each can be enqueued (and timed) on its own.
enum class MoeStage { routing, align, quant, gemm1, act, gemm2, reduce };

struct FusedMoeOptions {
  int rank = 0;      // expert-parallel rank: holds global experts [rank*E, (rank+1)*E)
  std::string arch;  // NVRTC target; "" = the GpuSpec's (e.g. "sm_90a" on an H200)
  // Programmatic dependent launch between the stage kernels: on sm_90 and newer every stage
  // kernel (routing, alignment, quantization, both GEMMs, activation, top-k sum) is launched with
  // programmatic stream serialization, so its blocks are scheduled while the previous stage
  // finishes instead of after it (saves most of each launch gap at decode sizes; the kernels wait
  // for the previous stage's results in griddepcontrol.wait, kernels/common/pdl.cuh). Results
  // are bit-identical either way, and CUDA graphs capture it. Ignored below sm_90 and on drivers
  // older than CUDA 12.3 (plain launches); `moetune bench/profile --no-pdl` turn it off.
  bool pdl = true;
  // The decode kernels (kernels/moe_decode.cuh): forward() runs the whole layer in two launches
  // for M <= 4 tokens (2 or none on some shapes) where the shape fits them
  // (decode_kernels_apply): routing, GEMM1 and SiLU·up in one, GEMM2 and the top-k sum in the
  // other, each GEMM on the tensor cores with the slot's one token. The stage kernels
  // (enqueue_stage, forward_staged) are unchanged. `--no-decode-kernels` turns it off (A/B).
  bool decode_kernels = true;
  // The persistent GEMM kernel (kernels/moe_gemms_persistent_sm90a.cuh): block fp8 on sm_90a at
  // M <= 32 (moe::persistent_applies), GEMM1 with its activation and GEMM2 in one launch of one
  // block per SM, GEMM2's weights streaming while GEMM1 finishes. The gemm1 stage then runs both
  // GEMMs and the act and gemm2 stages enqueue nothing. Off by default: on the H200 it is slower
  // than the two stage GEMMs at every size measured (Qwen3.5 fp8 TP4 M = 8: layer 54.0 against
  // 45.4 µs; bench/results/2026-12-02_h200_twentyfirst_session.md). `--persistent` turns it on.
  bool persistent_gemms = false;
  // The sliced GEMM kernel (kernels/moe_gemms_sliced_sm90a.cuh): block fp8 on sm_90a at M <= 64
  // (moe::sliced_applies), a block per (m-block, 128 columns of the intermediate) runs GEMM1,
  // SiLU·up and its quantization, and GEMM2's share over those columns, adding into out: one launch
  // for both GEMMs and the top-k sum, with GEMM2's weights streaming while GEMM1's epilogue runs
  // and no grid that must be resident at once. The gemm1 stage then runs it, the act, gemm2 and
  // reduce stages enqueue nothing; the kernel derives the alignment where M * topk <= 256 (see
  // alignment_in_gemm1), else the alignment launch writes its tables and resets its counters.
  // Unset: moetune's default (moetune_default_sliced_gemms: on the H100 SXM and H200 where its
  // blocks fit one wave, or 1.5..2.2 / 2.0 waves with N = 256, and it derives the alignment, M =
  // 6..8 and 14..24 / 14..20 on the anchors; off elsewhere); true: wherever it applies
  // (`--sliced`); false: never (`--no-sliced`). Never with topk_sum_in_gemm2 false: its adds land
  // in any order (true with it is an InputError, as `--sliced --deterministic` on the command
  // line).
  std::optional<bool> sliced_gemms;
  // The sliced kernel's ring slots of 36 KB (`--sliced-stages`): 0 for moetune's 4
  // (moe::kSlicedStages, measured on an H100 SXM), else 2..5 (fewer where the GPU's shared memory
  // per block holds fewer), for A/Bs on other GPUs. Else an InputError naming sliced_stages.
  int sliced_stages = 0;
  // The sliced kernel in pairs where N = 256 (`--sliced-pairs`; moe::sliced_pairs_fit): the
  // m-block's two slices as a cluster of two blocks that swap activation halves after GEMM1,
  // each then running GEMM2 over the whole intermediate for half of out's columns (w2 rows in
  // 256-byte runs). Other N: the plain instance.
  bool sliced_pairs = false;
  // The top-k sum folded into GEMM2 (gemm2_sums_topk_applies: sm_90+): GEMM1's blocks zero
  // `out`, GEMM2 adds each slot's row (times its routed weight, rounded to the output dtype) into
  // its token's row of out with bf16/fp16 atomics (red.global.add), and MoeStage::reduce
  // launches nothing: one launch and the [M*topk, K] round trip less. H200, layer, against the
  // separate sum (bench/results/2026-12-03_h200_twentyfifth_session.md, call 1): -2.6..-4.7% at
  // M = 8..256 and -5.5 / -9.9% at 1024 / 4096 on Qwen3.5 fp8 TP4, -1.2..-4.3% and -5.1 / -8.9%
  // on DeepSeek-V3 TP8, -1.2..-3.6% and -3.2 / -6.4% on Qwen3.5 bf16 TP4. Costs: the adds to an
  // element land in the order the blocks reach them, so out may differ in its last bits from one
  // run to the next, and each add rounds to bf16 (the bf16 layer's error against fp64 went from
  // ~2.8e-3 to ~4.4e-3 at M = 8 on those shapes; `moetune check` allows 1e-2). false keeps the
  // separate top-k sum (fp32, fixed order, one rounding: bit-reproducible); `--deterministic`
  // on the command line.
  bool topk_sum_in_gemm2 = true;
  // GEMM1 derives the alignment itself at decode sizes (FusedMoe::gemm1_aligns): each of its
  // blocks reads topk_ids and finds its expert and slots in shared memory, its first N-tile's
  // blocks write the tables for GEMM2, and MoeStage::align launches nothing (one launch and a
  // grid boundary less; kernels/common/inline_align.cuh). Same outputs (each expert's slots in
  // ascending order, which no output depends on). Unset: moetune's default
  // (moetune_default_alignment_in_gemm1: on the H100 SXM where GEMM1 fuses the activation, off
  // elsewhere); true: wherever it applies (`--align-in-gemm1`); false: never
  // (`--no-align-in-gemm1`). The sliced GEMM kernel (sliced_gemms) derives it too, unless
  // false: its blocks write no tables (they need none), and the routing launch zeroes its
  // counters instead of the alignment launch.
  std::optional<bool> alignment_in_gemm1;
};

// Device pointers of the layer's weights (see the layout comment above).
struct MoeWeights {
  const void* w13 = nullptr;
  const void* w2 = nullptr;
  const float* w13_scale = nullptr;
  const float* w2_scale = nullptr;
  const float* correction_bias = nullptr;
};

// Device pointers of one call's inputs: router_logits, or topk_ids + topk_weights.
struct MoeInputs {
  std::int64_t M = 0;
  const void* hidden = nullptr;
  const float* router_logits = nullptr;
  const std::int32_t* topk_ids = nullptr;
  const float* topk_weights = nullptr;
};

// Byte offsets of every intermediate inside the workspace for M tokens (each 256-aligned).
// Checks and profiles read the intermediates through it.
struct MoeWorkspaceLayout {
  std::int64_t M = 0;
  int BLOCK_SIZE_M = 0;                  // of the config chosen for M
  std::int64_t max_num_tokens_padded = 0;  // capacity of sorted_token_ids for that config
  std::int64_t max_num_m_blocks = 0;
  std::size_t topk_ids = 0;              // [M, topk] int32 (routing's output)
  std::size_t topk_weights = 0;          // [M, topk] fp32
  std::size_t sorted_token_ids = 0;      // [max_num_tokens_padded] int32
  std::size_t expert_ids = 0;            // [max_num_m_blocks] int32
  std::size_t num_tokens_post_padded = 0;  // [1] int32
  std::size_t a_q = 0;                   // fp8: [M, K] e4m3
  std::size_t a_scale = 0;               // fp8: [M, K/bk] or [1] fp32
  std::size_t partials = 0;              // per-tensor fp8: amax partials
  bool gemm1_fused_act = false;          // gemm1_fuses_act(shape, M, up config): GEMM1 writes
                                         // `act` (block fp8: act_q and act_scale) itself
  std::size_t h = 0;                     // GEMM1 out [M*topk, 2N] act; 0 bytes when fused
                                         // and every up config of the table can fuse
  bool act_quant_fused = false;          // block fp8: one kernel writes act_q/act_scale from h
                                         // (SiLU·up never in memory: `act` has 0 bytes)
  std::size_t act = 0;                   // SiLU(gate)·up [M*topk, N] act: GEMM1's out (fused)
                                         // or the silu_mul stage's (otherwise)
  std::size_t act_q = 0;                 // fp8: [M*topk, N] e4m3
  std::size_t act_scale = 0;             // fp8: [M*topk, N/bk] or [1] fp32
  std::size_t y = 0;                     // GEMM2 out [M*topk, K] act (times routed weight)
  bool gemm1_aligns = false;             // FusedMoe::gemm1_aligns(M): GEMM1 writes the
                                         // alignment's tables (the sliced kernel: needs none),
                                         // MoeStage::align does nothing (with precomputed
                                         // topk_ids and sliced: zeroes its counters)
  bool gemm2_sums_topk = false;          // FusedMoe::gemm2_sums_topk(M): GEMM1 zeroes out,
                                         // GEMM2 adds into it (y unused), reduce does nothing;
                                         // except a 16-bit call in place (out = hidden), which
                                         // writes y and sums it as without the flag
  std::size_t gemm_up = 0;               // GEMM1's split-K workspace (counters + partials)
  std::size_t gemm_up_bytes = 0;
  std::size_t gemm_down = 0;             // GEMM2's: apart, as each stage's counters and
  std::size_t gemm_down_bytes = 0;       // partials have their own grid-dependent layout
  bool decode = false;                   // forward runs the decode kernels at this M (and then
                                         // writes only topk_ids/weights and decode_act)
  std::size_t decode_act = 0;            // their SiLU(gate)·up [M*topk, N] act (0 bytes when
                                         // the shape does not fit them; sized for min(M, 4))
  bool persistent = false;               // the gemm1 stage runs the persistent GEMM kernel
  std::size_t persistent_ws = 0;         // its counters and partials (sized for min(M, 32);
  std::size_t persistent_ws_bytes = 0;   // 0 bytes where it never runs)
  bool sliced = false;                   // the gemm1 stage runs the sliced GEMM kernel
  std::size_t sliced_ws = 0;             // its counters (12 bytes; 0 where it cannot run:
                                         // not sm_90a block fp8, sliced_gemms false, or
                                         // topk_sum_in_gemm2 false)
  std::size_t total = 0;                 // bytes needed
};

class FusedMoe {
 public:
  // Empty `up` = moetune's default configs for this GPU; empty `down` = fall back to `up`.
  // Throws InputError when check() fails.
  FusedMoe(const MoeShape& shape, const GpuSpec& gpu, ConfigTable up = {}, ConfigTable down = {},
           FusedMoeOptions opts = {});
  ~FusedMoe();
  FusedMoe(FusedMoe&&) noexcept;
  FusedMoe& operator=(FusedMoe&&) noexcept;
  FusedMoe(const FusedMoe&) = delete;
  FusedMoe& operator=(const FusedMoe&) = delete;

  // Can these kernels run this shape with these tables on this GPU? Throws InputError naming the
  // first problem (stage limits, config violations, up/down BLOCK_SIZE_M mismatch, fp8 < sm_89).
  static void check(const MoeShape& shape, const GpuSpec& gpu, const ConfigTable& up,
                    const ConfigTable& down, const FusedMoeOptions& opts = {});

  const MoeShape& shape() const;
  const std::string& arch() const;
  int rank() const;
  // Whether the stage launches ask for PDL: options.pdl on an sm_90+ arch (arch_supports_pdl).
  bool pdl() const;
  const ConfigTable& up_table() const;
  const ConfigTable& down_table() const;  // the effective one (up when no down table was given)
  const KernelConfig& up_config(std::int64_t M) const;    // nearest-M lookup
  const KernelConfig& down_config(std::int64_t M) const;

  // Scratch for any M <= max_M (no GPU needed).
  std::size_t workspace_bytes(std::int64_t max_M) const;
  MoeWorkspaceLayout workspace_layout(std::int64_t M) const;
  // Zero-fills a workspace on `stream`. Not needed (each call zeroes what it uses; see the
  // workspace contract above); kept for callers that want a defined initial state.
  static void init_workspace(void* workspace, std::size_t bytes, CUstream stream);

  // Compiles (NVRTC, disk cache) and loads every kernel that a call with M <= max_M can use.
  // Needs a GPU. After it, enqueue calls for M <= max_M do no compilation.
  void prepare(std::int64_t max_M);

  // The whole layer: out [M, K]. Where the decode kernels run (uses_decode_kernels(M)) it writes
  // only topk_ids/topk_weights (when routing) and decode_act in the workspace: the stage
  // intermediates (alignment tables, a_q, h, act, y) are left as they were, so enqueue_stage and
  // enqueue_gemm_phase need a forward_staged() of the same inputs first.
  void forward(const MoeInputs& in, const MoeWeights& w, void* out, void* workspace,
               std::size_t workspace_bytes, CUstream stream) const;
  // The stage kernels one after another (enqueue_stage for every MoeStage) at any M: what
  // forward runs where the decode kernels do not apply. Checks run it to read each stage's
  // intermediates from the workspace (the decode kernels keep only topk ids/weights and act).
  void forward_staged(const MoeInputs& in, const MoeWeights& w, void* out, void* workspace,
                      std::size_t workspace_bytes, CUstream stream) const;
  // Whether forward runs the decode kernels for M tokens (options.decode_kernels and
  // decode_kernels_apply(shape, M)).
  bool uses_decode_kernels(std::int64_t M) const;
  // Whether the gemm1 stage runs the persistent GEMM kernel for M tokens (options.persistent_gemms,
  // the GPU's SMs and shared memory, and moe::persistent_applies at M with M's up config).
  bool uses_persistent_gemms(std::int64_t M) const;
  // Whether the gemm1 stage runs the sliced GEMM kernel for M tokens (options.sliced_gemms and
  // topk_sum_in_gemm2, the GPU's shared memory, moe::sliced_applies at M with M's up config, not
  // the persistent one; unset: moetune_default_sliced_gemms, where the kernel derives the
  // alignment).
  bool uses_sliced_gemms(std::int64_t M) const;
  // The sliced kernel's ring slots where it runs (FusedMoeOptions::sliced_stages, or 4; fewer
  // where the shared memory per block holds fewer); 0 where it never can.
  int sliced_stages() const;
  // Whether the sliced kernel runs in pairs (options.sliced_pairs where moe::sliced_pairs_fit).
  bool sliced_pairs() const;
  // Which kernels forward() runs for M tokens, the name bench and profile report: "decode" (the
  // two decode kernels, uses_decode_kernels), "persistent" (one kernel runs both GEMMs,
  // uses_persistent_gemms), "sliced" (uses_sliced_gemms), else "stages" (a kernel per stage).
  // Where it is "decode" or "sliced", the config tables' tiles are not what runs (the sliced
  // kernel runs only where the up config's BLOCK_SIZE_M is 16), so two tables time alike there.
  const char* layer_kernels(std::int64_t M) const;
  // Whether the stage path folds the top-k sum into GEMM2 for M tokens
  // (options.topk_sum_in_gemm2, gemm2_sums_topk_applies, not the persistent kernel). A 16-bit
  // call whose out overlaps hidden keeps the separate sum all the same (see `out` above).
  bool gemm2_sums_topk(std::int64_t M) const;
  // Whether GEMM1 derives the alignment for M tokens (options.alignment_in_gemm1 and PDL's
  // arch aside): where routing and alignment do not share a launch (routing_fuses_align's
  // sizes), not the persistent kernel, both GEMMs without split-K (the alignment launch zeroes
  // their counters), and gemm::gemm_inline_align_violation holds nothing for M's up config
  // (sm_90a's kernel, M * topk <= 256, E <= 512). The tables then come from the gemm1 stage.
  // Where the sliced kernel runs: unless options.alignment_in_gemm1 is false, wherever it can
  // derive it (moe::sliced_derives_alignment: M * topk <= 256, E <= 512).
  bool gemm1_aligns(std::int64_t M) const;
  // One stage, reading its inputs from `in`/`w` and the workspace (earlier stages' outputs);
  // `out` is used by MoeStage::reduce, and where gemm2_sums_topk(M) by gemm1 (which zeroes it)
  // and gemm2 (which adds into it; reduce then does nothing): give those two the same out, never
  // null (InputError). Where the sliced kernel runs after a routing launch that the call
  // makes (router_logits given, the kernel deriving the alignment, out 16-byte aligned and not
  // overlapping hidden or the logits), the routing stage zeroes out and gemm1 only adds into
  // it: give both the same out (a null one to routing there is an InputError). Where
  // workspace_layout(M).gemm1_fused_act: gemm1 writes SiLU(gate)·up into the workspace's `act`
  // (block fp8: act_q, act_scale) and MoeStage::act does nothing.
  void enqueue_stage(MoeStage stage, const MoeInputs& in, const MoeWeights& w, void* out,
                     void* workspace, std::size_t workspace_bytes, CUstream stream) const;
  // "The GEMM phase" (DESIGN.md): from the alignment's output to GEMM2's output before the top-k
  // sum: GEMM1 (with SiLU·up fused where gemm1_fuses_act), [else SiLU·up; fp8: and its
  // quantization], GEMM2 (writing y: never with the top-k sum folded in). Needs the routing,
  // alignment and (fp8) hidden quantization of the same call in the workspace.
  void enqueue_gemm_phase(const MoeInputs& in, const MoeWeights& w, void* workspace,
                          std::size_t workspace_bytes, CUstream stream) const;

 private:
  // enqueue_stage's body; gemm_phase: GEMM1 and GEMM2 as without the folded top-k sum.
  void enqueue(MoeStage stage, const MoeInputs& in, const MoeWeights& w, void* out,
               void* workspace, std::size_t workspace_bytes, CUstream stream,
               bool gemm_phase) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

const char* to_string(MoeStage s);
// True when the decode kernels run the layer for M tokens: bf16, fp16 or block-wise fp8, the
// hidden state and a token's activations within their shared memory (src/moe/decode.hpp says
// what else; per-tensor fp8 never: it needs the global amax first), and 1 <= M <= 4, 2 or none
// by the length of a w13 row (src/moe/decode.hpp decode_max_tokens: DeepSeek-V3 at TP8 takes
// them up to M = 2 in block fp8 and never in bf16, where its stage kernels are faster).
bool decode_kernels_apply(const MoeShape& shape, std::int64_t M);
// True for NVRTC targets of sm_90 and newer ("sm_90a", "sm_100a", "sm_120"), where the
// griddepcontrol instructions of programmatic dependent launch exist; false otherwise (and for
// anything that is not "sm_<digits>...").
bool arch_supports_pdl(const std::string& arch);
// True when GEMM1 with the up config `up` computes SiLU(gate)·up in its epilogue for M tokens:
// M*topk <= 8 * max(E_global, E), and bf16/fp16, or block fp8 where `up` can also quantize it
// there (SWAP_AB 1, BLOCK_SIZE_N / 2 a multiple of block_k); never per-tensor fp8
// (gemm::gemm1_stage says why).
bool gemm1_fuses_act(const MoeShape& shape, std::int64_t M, const KernelConfig& up);
// True when one launch routes and aligns M tokens (decode sizes: M <= 5 and M*topk <= 512)
// given router logits (precomputed topk_ids go to the alignment alone): MoeStage::routing then
// writes the alignment's tables too and MoeStage::align launches nothing.
bool routing_fuses_align(const MoeShape& shape, std::int64_t M, bool router_logits);
// True when the routing launch also quantizes the hidden states (block fp8 given router logits:
// routing and quantization are independent, so its spare blocks do it and MoeStage::quant
// launches nothing; per-tensor fp8 needs the global amax first, precomputed topk_ids no routing).
bool routing_fuses_quant(const MoeShape& shape, bool router_logits);
// True when GEMM2 can fold the top-k sum for M tokens on `arch` (gemm::GemmStage::down_sum):
// M >= 1 and sm_90 or newer (red.global.add of bf16/fp16). No bound on M: the gain grew with M
// up to the largest measured, 4096 (FusedMoeOptions::topk_sum_in_gemm2).
bool gemm2_sums_topk_applies(std::int64_t M, const std::string& arch);
// The stage's name in reports: to_string(s), except "gemm1+act" and "act (in gemm1)" where
// gemm1_fuses_act(shape, M, up) (the activation's time is inside gemm1's), "routing+align" and
// "align (in routing)" where routing_fuses_align(shape, M, true), "+quant" on the routing
// and "quant (in routing)" where routing_fuses_quant(shape, true), "gemm2+reduce" and
// "reduce (in gemm2)" where sums_topk (FusedMoe::gemm2_sums_topk(M)), and "align (in gemm1)"
// where gemm1_aligns (FusedMoe::gemm1_aligns(M)).
const char* stage_name(MoeStage s, const MoeShape& shape, std::int64_t M, const KernelConfig& up,
                       bool sums_topk = false, bool gemm1_aligns = false);
inline constexpr MoeStage kAllMoeStages[] = {MoeStage::routing, MoeStage::align, MoeStage::quant,
                                             MoeStage::gemm1,   MoeStage::act,   MoeStage::gemm2,
                                             MoeStage::reduce};

}  // namespace moetune
