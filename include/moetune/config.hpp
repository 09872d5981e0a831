// Kernel configs and config tables: file names (SGLang/vLLM style), JSON read and atomic write,
// nearest-M lookup, defaults (moetune's own and `sglang-default`) and validation.
#pragma once
#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "moetune/gpu_spec.hpp"
#include "moetune/model.hpp"

namespace moetune {

// One kernel launch configuration. Key names keep their JSON spelling.
struct KernelConfig {
  int BLOCK_SIZE_M = 64;  // token slots per tile (also the alignment's padding unit)
  int BLOCK_SIZE_N = 64;  // output columns per tile
  int BLOCK_SIZE_K = 64;  // reduction depth per pipeline stage
  int GROUP_SIZE_M = 1;   // M-tiles sharing a weight tile in launch order (L2 reuse)
  int num_warps = 4;      // warps per block (threads = 32 * num_warps)
  int num_stages = 3;     // shared-memory pipeline depth
  int SPLIT_K = 1;        // moetune: K split across blocks (fp32 partials reduced after)
  int SWAP_AB = 0;        // moetune: 1 = weights as the MMA's A, tokens as its N (sm_90a wgmma,
                          // BLOCK_SIZE_M 16/32: decode); 0 = tokens as A

  bool operator==(const KernelConfig&) const = default;
  auto operator<=>(const KernelConfig&) const = default;
};

// M (tokens in the batch) -> config. Sorted by M.
using ConfigTable = std::map<int, KernelConfig>;

// The six classic keys, and moetune's own. JSON spelling.
extern const std::array<const char*, 6> kClassicKeys;
extern const std::array<const char*, 2> kMoetuneKeys;

// --- file names -------------------------------------------------------------------------------
// The short name of a config in logs, reports, notes and kernel names: every key, e.g.
// "m16n64k128_g1_w4_s3_sk1" (BLOCK_SIZE_M/N/K, GROUP_SIZE_M, num_warps, num_stages, SPLIT_K),
// with "_ab1" appended when SWAP_AB is 1 (names of SWAP_AB 0 configs predate the key).
std::string config_name(const KernelConfig& c);

enum class Naming { sglang, vllm };
// "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json"
// (vllm: "[128,128]"); `down` appends "_down" before ".json". Spaces in device -> '_'; any
// device of the H200 family (a '_'-separated token "H200": H200 NVL, ...) -> "NVIDIA_H200", as
// both servers' get_config_file_name do.
std::string config_file_name(const MoeShape& shape, const std::string& device_name,
                             Naming naming = Naming::sglang, bool down = false);
// "x.json" -> "x.meta.json" (a name without ".json" gets ".meta.json" appended).
std::string sidecar_name(const std::string& table_file_name);

// The `shapes --json` object (DESIGN.md's keys, in its order): architecture, E, E_global, N, K,
// topk, dtype, block_shape ([bn, bk] or null), tp, ep, routing {scoring, renormalize, n_group,
// topk_group, routed_scaling_factor, correction_bias}, moe_layers (null when the config gives
// no layer count), config_file {sglang, vllm} (config_file_name for device_name). The one copy
// of that schema: `shapes`, `bench`, `profile` and `tune --dry-run` all print this.
nlohmann::ordered_json shape_json(const MoeShape& shape, const std::string& device_name);

// --- JSON -------------------------------------------------------------------------------------
// One parsed entry: unknown keys are kept in `unknown_keys` for validation to reject.
struct ParsedEntry {
  KernelConfig config;
  std::vector<std::string> unknown_keys;
};
struct ParsedTable {
  std::map<int, ParsedEntry> entries;
  std::vector<std::string> skipped_keys;  // non-integer top-level keys (e.g. "triton_version")
};
// Top-level keys: a plain positive decimal ("16") is a batch size; a key whose first non-blank
// character is not a digit or sign ("triton_version") is skipped and listed in skipped_keys; a
// numeric-looking key that is not a plain positive decimal int ("-4", "0", "01", "+8", "1e3",
// "1.5", "99999999999") throws InputError("config key", "\"<key>\"", reason), because servers
// int() their keys and would read it differently from a skip.
// Config values: positive JSON integers only (not 64.0, not "64"); otherwise
// InputError("config[<M>].<KEY>", <value as JSON>, ...); a missing classic key likewise with
// value "(missing)"; SPLIT_K is optional (default 1), SWAP_AB too (default 0; 0 or more here,
// validation allows 0 and 1). An entry that is not an object throws
// InputError("config[<M>]", <value>, ...).
// Throws InputError("config", path, reason) if the file is unreadable, not JSON, or not an object.
ParsedTable read_config_table(const std::filesystem::path& path);
// `source` names the table in messages (usually its path).
ParsedTable parse_config_table(const nlohmann::json& j, const std::string& source);
// `source` is the field prefix of this entry in messages, e.g. "config[16]".
KernelConfig parse_kernel_config(const nlohmann::json& j, std::vector<std::string>* unknown,
                                 const std::string& source);
nlohmann::json to_json(const KernelConfig& c);  // classic keys, then SPLIT_K / SWAP_AB if set
nlohmann::json to_json(const ConfigTable& t);   // only batch-size keys
ConfigTable to_table(const ParsedTable& p);
// The table as servers write it: 4-space indent, keys in numeric order, config keys in classic
// order (then SPLIT_K when != 1, SWAP_AB when != 0), ending in a newline. (nlohmann::json
// would sort "1024" < "16".)
std::string dump_config_table(const ConfigTable& t);
// dump_config_table, written with write_file_atomic.
void write_config_table(const std::filesystem::path& path, const ConfigTable& t);
// Writes text to path atomically: a temp file in the same folder, fsync, rename, fsync folder.
// Throws InputError("path", path, reason) when that fails (no temp file is left behind).
void write_file_atomic(const std::filesystem::path& path, const std::string& text);

// --- lookup -----------------------------------------------------------------------------------
// The key nearest to M by absolute difference; a tie goes to the smaller key.
// Throws InputError("config", "{}", "empty table") for an empty table.
int nearest_key(const std::map<int, KernelConfig>& table, int M);
const KernelConfig& lookup(const ConfigTable& table, int M);
// The down table when it has entries, else the up table (a missing _down falls back).
const KernelConfig& lookup_down(const ConfigTable& up, const ConfigTable& down, int M);

// --- defaults ---------------------------------------------------------------------------------
// SGLang's published default rules (DESIGN.md), the named reference "sglang-default".
KernelConfig sglang_default_config(const MoeShape& shape, int M);
// moetune's own default for its kernel on this GPU: GEMM1 (up) and GEMM2 (down).
KernelConfig moetune_default_config(const MoeShape& shape, const GpuSpec& gpu, int M,
                                    bool down = false);
// Whether moetune's defaults have GEMM1 derive the alignment (FusedMoeOptions::alignment_in_gemm1
// unset) where FusedMoe::gemm1_aligns allows it, for an up tile that does (`gemm1_fuses_act`) or
// does not fuse the activation: only on the H100 SXM and only with the fused tile, where it was
// measured to win (bench/results/2026-12-05_h100_twentyninth_session.md; mixed on the H200). The
// sliced kernel, where it is the default (moetune_default_sliced_gemms), derives it regardless.
bool moetune_default_alignment_in_gemm1(const GpuSpec& gpu, bool gemm1_fuses_act);
// Whether moetune's defaults run the sliced GEMM kernel (FusedMoeOptions::sliced_gemms unset) at M
// tokens where FusedMoe can (block fp8, sm_90a, the kernel deriving the alignment): only on the
// H100 SXM and the H200, and only where its blocks (one per active expert and 128 columns of N,
// active experts counted for uniform routing plus one standard deviation) fit one wave of the GPU's
// SMs, or, with two slices (N = 256, the only width measured past one wave), come to 1.5..2.2 waves
// on the H100 SXM or 1.5..2.0 on the H200, where it was measured to win. Layer A/B, Qwen3.5 fp8 TP4
// / DeepSeek-V3 fp8 TP8: at M = 6, 7, 8 (one wave) one H100 SXM, three interleaved runs a side
// (bench/results/2026-12-06_thirtyfourth_session.md) -13.1 / -5.6%, -4.7 / +0.2%, -5.1..-5.3 /
// -1.3..-1.5% (two calls); one H200, two runs (bench/results/2026-12-06_thirtyfifth_session.md)
// -13.4 / -5.9%, -5.9 / -2.6%, -6.7 / -3.0%. Past one wave, on an H100 SXM after the routing launch
// zeroes out for it (two runs a side, bench/results/2026-12-07_fortieth_session.md): M = 10 +10.5 /
// +11.7%, 12 +1.4 / +6.7%, 14 -3.9 / -0.1%, 16..22 -3.0..-4.6 / -1.0..-2.6%, 24 -1.6 / -2.5%, 28
// +0.9 / +1.9%; on the H200 before that change and the 256-byte units (which gained 1.6..2.8% on
// the H100) M = 16 +0.8 / +0.1%, 20 -3.2 / -3.4%, 24 +7.9 / +4.8%. The anchors take it at M = 6..8
// and 14..24 on the H100 SXM, M = 6..8 and 14..20 on the H200 (14..16 there predicted, not yet
// measured).
bool moetune_default_sliced_gemms(const GpuSpec& gpu, const MoeShape& shape, int M);
// The common 18 batch sizes: 1, 2, 4, ..., 4096.
const std::vector<int>& default_batch_sizes();

// --- validation -------------------------------------------------------------------------------
struct Violation {
  int M = 0;
  std::string key;    // config key at fault, e.g. "BLOCK_SIZE_K" or "smem_bytes"
  std::string value;  // its value as text
  std::string limit;  // the limit it breaks, as text
  std::string rule;   // one-line reason
  bool down = false;  // found in the down (GEMM2) table of validate_table
};
// What validation needs to know about the target; model-free (config validate has no model).
struct ValidationTarget {
  Dtype dtype = Dtype::bf16;
  std::optional<std::array<int, 2>> block_shape;
  const GpuSpec* gpu = nullptr;
};
// Shared-memory bytes of one block of moetune's GEMM kernel (kernels/common/tile_math.cuh).
// Both byte counts saturate at INT_MAX for configs too large for an int (no GPU has that much).
int moetune_smem_bytes(const KernelConfig& c, const ValidationTarget& t);
// The reference (Triton) kernel's estimate: (stages-1)*(BM+BN)*BK*bytes.
int reference_smem_bytes(const KernelConfig& c, const ValidationTarget& t);

// All violations of one config for entry M (empty = valid), in this order: a key outside the
// values the kernel is built for (limit names the set); else the kernel's own tile rule
// (tile_math::tile_rule_violation: warp grid, accumulators per thread; key = the first key the
// rule names, limit "moetune's GEMM kernel"); threads per block > 1024, shared memory
// over gpu->smem_per_block_bytes (key "smem_bytes"; moetune's formula decides), for block fp8
// BLOCK_SIZE_K not dividing block_k / BLOCK_SIZE_N neither dividing nor a multiple of block_n,
// a dtype the GPU's tensor cores cannot run (key "dtype"), one per unknown key (rule "unknown
// key"). block_shape is ignored unless dtype is fp8_w8a8. Allowed values: BLOCK_SIZE_M
// {16..256}, BLOCK_SIZE_N and BLOCK_SIZE_K {32..256} (powers of two), GROUP_SIZE_M >= 1,
// num_warps {4, 8}, num_stages 2..5, SPLIT_K {1, 2, 4, 8}, SWAP_AB {0, 1}. t.gpu must be set.
std::vector<Violation> validate_config(const KernelConfig& c, const ValidationTarget& t, int M,
                                       const std::vector<std::string>& unknown_keys = {});
// All violations of a table, plus, when `down` is given, its entries' (marked down) and the
// rule "up and down share one alignment": down's BLOCK_SIZE_M equals up's at each key in both.
std::vector<Violation> validate_table(const ParsedTable& up, const ValidationTarget& t,
                                      const ParsedTable* down = nullptr);

}  // namespace moetune
