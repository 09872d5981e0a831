// Which decoder layers hold a MoE block, from the config's layer rules.
#pragma once
#include "model/config_view.hpp"

namespace moetune::model {

struct LayerCount {
  int num_layers = 0;  // num_hidden_layers (0 when the config does not say)
  int moe_layers = 0;  // layers with a MoE block (0 when num_layers is 0)
};

// Layer i (0-based) holds a MoE block when every rule present allows it (rules combine by AND,
// each as its own family defines it):
//   first_k_dense_replace k        i >= k                                   (DeepSeek, GLM, Kimi)
//   moe_layer_freq f               i % f == 0                               (DeepSeek)
//   moe_layer_freq [0|1, ...]      flag i is 1                              (per-layer list)
//   decoder_sparse_step s          (i + 1) % s == 0                         (Qwen2/3 MoE)
//   interleave_moe_layer_step s    (i + 1) % s == 0                         (Llama-4)
//   mlp_only_layers [...]          i not listed                             (Qwen)
//   moe_layers [...]               i listed                                 (Llama-4 text)
//   moe_layer_start_index a        i >= a                                   (ERNIE-4.5)
//   moe_layer_end_index b          i <= b (-1: the last layer)              (ERNIE-4.5)
//   moe_layer_interval v           (i + 1) % v == 0                         (ERNIE-4.5)
// Start and end given per modality (lists, ERNIE-4.5-VL) take the widest range.
// Throws InputError naming the field for a malformed rule, when no layer is left, or for more
// than 1,000,000 layers (counted one by one; no model comes near).
LayerCount count_moe_layers(const ConfigView& view);

}  // namespace moetune::model
