// The `shapes --json` object (DESIGN.md "The command line"), shared by every command that prints
// a shape: `shapes`, `bench`, `profile` and `tune --dry-run`.
#include <string>

#include <nlohmann/json.hpp>

#include "moetune/config.hpp"

namespace moetune {

nlohmann::ordered_json shape_json(const MoeShape& s, const std::string& device_name) {
  nlohmann::ordered_json j;
  j["architecture"] = s.architecture;
  j["E"] = s.E;
  j["E_global"] = s.E_global;
  j["N"] = s.N;
  j["K"] = s.K;
  j["topk"] = s.topk;
  j["dtype"] = std::string(to_string(s.dtype));
  if (!s.dtype_note.empty()) j["dtype_note"] = s.dtype_note;
  j["block_shape"] = s.block_shape
                         ? nlohmann::ordered_json{(*s.block_shape)[0], (*s.block_shape)[1]}
                         : nlohmann::ordered_json(nullptr);
  j["tp"] = s.tp;
  j["ep"] = s.ep;
  if (const std::string note = parallel_note(s); !note.empty()) j["parallel_note"] = note;
  j["routing"] = nlohmann::ordered_json{{"scoring", s.routing.scoring},
                                        {"renormalize", s.routing.renormalize},
                                        {"n_group", s.routing.n_group},
                                        {"topk_group", s.routing.topk_group},
                                        {"routed_scaling_factor", s.routing.routed_scaling_factor},
                                        {"correction_bias", s.routing.correction_bias}};
  if (!s.routing.note.empty()) j["routing"]["note"] = s.routing.note;
  // null, not 0, when the config gives no layer count (the text output says "unknown").
  j["moe_layers"] = s.num_layers > 0 ? nlohmann::ordered_json(s.moe_layers)
                                     : nlohmann::ordered_json(nullptr);
  j["config_file"] =
      nlohmann::ordered_json{{"sglang", config_file_name(s, device_name, Naming::sglang)},
                             {"vllm", config_file_name(s, device_name, Naming::vllm)}};
  return j;
}

}  // namespace moetune
