// Tensor and expert parallelism: the per-rank E and N of a layer, and the refusals that go with
// them (TP must divide the expert size, EP the experts, the fp8 block the per-rank N and K).
#pragma once
#include "model/sizes.hpp"
#include "moetune/model.hpp"

namespace moetune::model {

// tp and ep >= 1; throws InputError on "tp"/"ep".
void check_parallel_options(const ModelOptions& opts);

// Sets shape.tp, ep, E, E_global, N, K, topk from the model-wide sizes. Throws InputError("tp")
// when the expert size is not divisible by tp, InputError("ep") when the experts are not
// divisible by ep (each message holds both numbers).
void apply_parallel(MoeShape& shape, const GlobalSizes& sizes, const ModelOptions& opts);

// For fp8 block-wise weights: block_n divides the per-rank N and block_k divides K.
void check_block_divisible(const MoeShape& shape, const GlobalSizes& sizes);

}  // namespace moetune::model
