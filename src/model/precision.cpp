#include "model/precision.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "moetune/error.hpp"

namespace moetune::model {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string block_text(const std::array<int, 2>& b) { return fmt::format("{},{}", b[0], b[1]); }

// weight_block_size: [block_n, block_k], two positive integers, or absent/null (per-tensor).
std::optional<std::array<int, 2>> read_block(const Field& qc, const ConfigView& view) {
  const auto it = qc.value->find("weight_block_size");
  if (it == qc.value->end() || it->is_null()) return std::nullopt;
  const Field f{qc.path + ".weight_block_size", &*it};
  if (!it->is_array() || it->size() != 2) {
    throw InputError(f.path, value_text(*it),
                     fmt::format("must be [block_n, block_k] (in {})", view.label()));
  }
  const Field n{f.path + "[0]", &(*it)[0]};
  const Field k{f.path + "[1]", &(*it)[1]};
  return std::array<int, 2>{read_positive(n, view), read_positive(k, view)};
}

// A string member of the quantization object, or "" when absent or null.
std::string member(const Field& qc, const char* key, const ConfigView& view) {
  const auto it = qc.value->find(key);
  if (it == qc.value->end() || it->is_null()) return "";
  return read_string(Field{qc.path + "." + key, &*it}, view);
}

Quantization read_modelopt(const Field& qc, const ConfigView& view) {
  const std::string algo = member(qc, "quant_algo", view);
  if (algo.empty()) return {};  // e.g. only the KV cache is quantized
  // modelopt FP8 is one static scale per tensor.
  if (lower(algo) == "fp8") return {Quantization::Kind::fp8, algo, std::nullopt};
  return {Quantization::Kind::unsupported, algo, std::nullopt};
}

[[noreturn]] void refuse(const Quantization& q) {
  throw InputError(
      "quantization", q.method,
      fmt::format("{} quantization is not run by moetune's kernels (they run bf16, fp16 and "
                  "fp8_w8a8 e4m3, per-tensor or block-wise); pass --dtype bf16 to analyse the "
                  "model as bf16",
                  q.method));
}

// The unquantized dtype: fp16 only when the config says so; otherwise bf16 (float32
// checkpoints are served in bf16).
// The checkpoint's 16-bit dtype. A 32-bit checkpoint is analysed as bf16 (moetune's kernels
// are 16-bit or fp8, as servers run such models) and says so in `note`; a value that names no
// dtype is bad input (it read as bf16 before, whatever it held).
Dtype config_dtype(const ConfigView& view, std::string& note) {
  const auto f = view.find_top_first({"dtype", "torch_dtype"});
  if (!f) return Dtype::bf16;
  if (f->value->is_string() && lower(f->value->get<std::string>()) == "auto") return Dtype::bf16;
  const std::string text = f->value->is_string() ? lower(f->value->get<std::string>()) : "";
  if (const auto d = parse_dtype(text); d && *d != Dtype::fp8_w8a8) return *d;
  if (text == "float32" || text == "float" || text == "fp32" || text == "float64") {
    note = fmt::format("{} is {}: analysed as bf16 (moetune's kernels are bf16, fp16 or fp8; "
                       "--dtype chooses)",
                       f->path, text);
    return Dtype::bf16;
  }
  throw InputError(f->path, value_text(*f->value),
                   fmt::format("must be the checkpoint's 16- or 32-bit dtype (\"bfloat16\", "
                               "\"float16\", \"float32\"; an fp8 checkpoint names its "
                               "quantization_config) in {}; pass --dtype",
                               view.label()));
}

}  // namespace

Quantization read_quantization(const ConfigView& view) {
  const auto qc = view.find_top_first({"quantization_config", "compression_config"});
  if (!qc) return {};
  if (!qc->value->is_object()) {
    throw InputError(qc->path, value_text(*qc->value),
                     fmt::format("must be an object (in {})", view.label()));
  }
  std::string method = member(*qc, "quant_method", view);
  if (method.empty()) {
    method = qc->path.ends_with("compression_config") ? "compressed-tensors" : "unknown";
  }
  const std::string m = lower(method);
  if (m == "modelopt") return read_modelopt(*qc, view);
  if (m != "fp8") return {Quantization::Kind::unsupported, method, std::nullopt};
  const std::string fmt_name = member(*qc, "fmt", view);
  if (!fmt_name.empty() && lower(fmt_name) != "e4m3") {
    return {Quantization::Kind::unsupported, "fp8 " + fmt_name, std::nullopt};
  }
  return {Quantization::Kind::fp8, method, read_block(*qc, view)};
}

Precision resolve_precision(const ConfigView& view, const ModelOptions& opts) {
  const std::string requested = lower(opts.dtype);
  std::optional<Dtype> explicit_dtype;
  if (requested != "auto") {
    explicit_dtype = parse_dtype(requested);
    if (!explicit_dtype) {
      throw InputError("dtype", opts.dtype, "expected auto, bf16, fp16 or fp8_w8a8");
    }
  }

  Precision p;
  if (explicit_dtype && *explicit_dtype != Dtype::fp8_w8a8) {
    p.dtype = *explicit_dtype;  // analysed as 16-bit whatever the checkpoint holds
  } else {
    const Quantization q = read_quantization(view);
    if (q.kind == Quantization::Kind::fp8) {
      p = {Dtype::fp8_w8a8, q.block_shape};
    } else if (explicit_dtype) {
      p = {Dtype::fp8_w8a8, std::nullopt};  // fp8 asked of a 16-bit model: per-tensor
    } else if (q.kind == Quantization::Kind::unsupported) {
      refuse(q);
    } else {
      p.dtype = config_dtype(view, p.note);
    }
  }

  if (opts.block_shape) {
    const auto& b = *opts.block_shape;
    if (b[0] <= 0 || b[1] <= 0) {
      throw InputError("block-shape", block_text(b), "block_n and block_k must be positive");
    }
    if (p.dtype != Dtype::fp8_w8a8) {
      throw InputError("block-shape", block_text(b),
                       fmt::format("a block shape applies to fp8_w8a8 weights only; the dtype is "
                                   "{} (pass --dtype fp8_w8a8)",
                                   to_string(p.dtype)));
    }
    p.block_shape = b;
  }
  return p;
}

}  // namespace moetune::model
