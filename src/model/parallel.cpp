#include "model/parallel.hpp"

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune::model {

void check_parallel_options(const ModelOptions& opts) {
  if (opts.tp < 1) throw InputError("tp", std::to_string(opts.tp), "must be >= 1");
  if (opts.ep < 1) throw InputError("ep", std::to_string(opts.ep), "must be >= 1");
}

void apply_parallel(MoeShape& shape, const GlobalSizes& sizes, const ModelOptions& opts) {
  check_parallel_options(opts);
  if (sizes.intermediate.value % opts.tp != 0) {
    throw InputError("tp", std::to_string(opts.tp),
                     fmt::format("{} {} is not divisible by --tp {}", sizes.intermediate.from,
                                 sizes.intermediate.value, opts.tp));
  }
  if (sizes.experts.value % opts.ep != 0) {
    throw InputError("ep", std::to_string(opts.ep),
                     fmt::format("{} experts ({}) are not divisible by --ep {}",
                                 sizes.experts.value, sizes.experts.from, opts.ep));
  }
  shape.tp = opts.tp;
  shape.ep = opts.ep;
  shape.E_global = sizes.experts.value;
  shape.E = sizes.experts.value / opts.ep;
  shape.N = sizes.intermediate.value / opts.tp;
  shape.K = sizes.hidden.value;
  shape.topk = sizes.topk.value;
}

void check_block_divisible(const MoeShape& shape, const GlobalSizes& sizes) {
  if (!shape.block_shape) return;
  const auto [block_n, block_k] = *shape.block_shape;
  const std::string block = fmt::format("[{}, {}]", block_n, block_k);
  if (shape.N % block_n != 0) {
    // Blame what the user can change: the TP split when the whole size divides; else an
    // overridden intermediate size (--intermediate); else the block.
    const bool split = shape.tp > 1 && sizes.intermediate.value % block_n == 0;
    const bool flag = sizes.intermediate.from.starts_with("--");
    throw InputError(
        split ? "tp" : (flag ? sizes.intermediate.from.substr(2) : "block-shape"),
        split  ? std::to_string(shape.tp)
        : flag ? std::to_string(sizes.intermediate.value)
               : fmt::format("{},{}", block_n, block_k),
        fmt::format("per-rank N {} ({} {} / tp {}) is not divisible by the fp8 block_n {} of "
                    "block_shape {}",
                    shape.N, sizes.intermediate.from, sizes.intermediate.value, shape.tp, block_n,
                    block));
  }
  if (shape.K % block_k != 0) {
    // Blame an overridden hidden size (--hidden) where the user gave one; else the block.
    const bool flag = sizes.hidden.from.starts_with("--");
    throw InputError(flag ? sizes.hidden.from.substr(2) : "block-shape",
                     flag ? std::to_string(sizes.hidden.value) : fmt::format("{},{}", block_n, block_k),
                     fmt::format("K {} ({}) is not divisible by the fp8 block_k {} of "
                                 "block_shape {}",
                                 shape.K, sizes.hidden.from, block_k, block));
  }
}

}  // namespace moetune::model

namespace moetune {

std::string parallel_note(const MoeShape& shape) {
  const int T = shape.tp, P = shape.ep;
  if (T <= 1 || P <= 1) return {};
  // Each server mapping only where it is a valid moetune command for this model.
  const std::string sglang =
      T % P == 0 ? fmt::format("; SGLang's --tp {0} --ep-size {1} is --tp {2} --ep {1} here", T, P,
                               T / P)
                 : std::string();
  const std::string vllm =
      shape.E_global % T == 0
          ? fmt::format("; vLLM's tensor parallel size {0} with expert parallelism is --ep {0} "
                        "alone",
                        T)
          : std::string();
  return fmt::format("--tp {0} and --ep {1} split one layer over {2} ranks (intermediate / {0}, "
                     "experts / {1}){3}{4}",
                     T, P, T * P, sglang, vllm);
}

}  // namespace moetune
