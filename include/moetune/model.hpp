// Model configs -> MoE layer shapes. Parses a Hugging Face config.json by field (never by
// architecture name), applies TP/EP, and refuses what the kernels cannot run (InputError).
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "moetune/dtype.hpp"

namespace moetune {

struct GpuSpec;  // moetune/gpu_spec.hpp

// Routing of tokens to experts (DeepSeek-style grouped sigmoid, or softmax top-k).
struct Routing {
  std::string scoring = "softmax";       // "softmax" or "sigmoid" (config `scoring_func`)
  bool renormalize = true;               // `norm_topk_prob` when present, else true
  int n_group = 1;                       // expert groups for grouped top-k (1 = no grouping)
  int topk_group = 1;                    // groups kept per token
  double routed_scaling_factor = 1.0;    // multiplies the routed weights
  bool correction_bias = false;          // `topk_method: noaux_tc`: a per-expert bias in selection
  // When config.json names no `scoring_func`, where the scoring came from: the architecture's
  // known router (e.g. Glm4Moe: sigmoid with a correction bias), or a warning that softmax was
  // assumed for an architecture moetune does not know. "" when the config names it.
  std::string note;
};

// One MoE layer on one rank. All sizes in elements.
struct MoeShape {
  std::string architecture;  // `architectures[0]` of the config, or "" for overrides-only
  int E = 0;                 // experts on this rank (E_global / ep)
  int E_global = 0;          // experts in the model
  int N = 0;                 // per-rank expert intermediate size (moe_intermediate_size / tp)
  int K = 0;                 // hidden size
  int topk = 0;              // experts per token
  Dtype dtype = Dtype::bf16;
  // Why dtype is not the checkpoint's own, when a preset chose it (the gpt-oss presets analyse
  // their mxfp4 weights as bf16); "" otherwise.
  std::string dtype_note;
  std::optional<std::array<int, 2>> block_shape;  // fp8 block-wise [block_n, block_k]
  Routing routing;
  int num_layers = 0;        // num_hidden_layers (0: the config does not say)
  int moe_layers = 0;        // layers that hold a MoE block (rules: src/model/layers.hpp)
  int tp = 1, ep = 1;
  std::string source;        // preset name or file path it came from
};

// Command-line choices applied to a config. Sizes are model-wide (before TP/EP).
struct ModelOptions {
  int tp = 1;
  int ep = 1;
  std::string dtype = "auto";  // auto|bf16|fp16|fp8_w8a8
  std::optional<int> experts, topk, intermediate, hidden;
  std::optional<std::array<int, 2>> block_shape;
};

// The embedded default model and its parallelism ("qwen3.5-122b-a10b-fp8" at TP4).
inline constexpr const char* kDefaultPreset = "qwen3.5-122b-a10b-fp8";
inline constexpr int kDefaultTp = 4;

// When tp and ep are both above 1: that they multiply (tp x ep ranks), and how the servers'
// flags of the same names map (SGLang's --tp T --ep-size P splits the intermediate by T/P;
// vLLM's TP with expert parallelism splits the experts only, named where E_global allows it);
// "" otherwise. Derived from shape.tp, ep and E_global (src/model/parallel.cpp).
std::string parallel_note(const MoeShape& shape);

// Parses a config.json object. Throws InputError naming the field and value at fault.
MoeShape parse_hf_config(const nlohmann::json& config, const ModelOptions& opts,
                         const std::string& source = "");

// `path_or_preset`: an HF config.json, a folder holding one (and maybe hf_quant_config.json,
// read when config.json has no quantization_config), or an embedded preset name (any case).
// An existing path wins over a preset name. A preset may imply a dtype for --dtype auto (the
// gpt-oss presets load as bf16). Throws InputError, never a JSON or file-system exception.
MoeShape load_model(const std::string& path_or_preset, const ModelOptions& opts);

// Names of the embedded presets, and the config JSON of one (nullopt if unknown).
std::vector<std::string> preset_names();
std::optional<std::string> preset_json(const std::string& name);

// Parses "BN,BK" (e.g. "128,128"; "[128, 128]" too) for --block-shape; throws InputError on
// field `name`.
std::array<int, 2> parse_block_shape(const std::string& text, const std::string& name);

// Throws InputError("dtype", ...) when the GPU's tensor cores cannot run the shape's dtype
// ("fp8 needs compute capability >= 8.9; <gpu name> is <x.y>").
void check_dtype_on_gpu(const MoeShape& shape, const GpuSpec& gpu);

}  // namespace moetune
