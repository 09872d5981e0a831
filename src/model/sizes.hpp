// The four model-wide sizes of a MoE layer, from the config's synonyms or the overrides.
#pragma once
#include <string>

#include "model/config_view.hpp"
#include "moetune/model.hpp"

namespace moetune::model {

// A size and where it came from: the JSON path ("text_config.num_experts") or the override
// flag ("--experts"), so that messages name what the user wrote.
struct Size {
  int value = 0;
  std::string from;
};

struct GlobalSizes {
  Size experts;  // E_global
  Size topk;
  Size intermediate;  // expert intermediate size before TP
  Size hidden;        // K
};

// Overrides win; otherwise the first synonym present. A config with no expert count (or <= 1)
// is refused as "not a MoE model"; any other missing size names the field and its override.
GlobalSizes read_sizes(const ConfigView& view, const ModelOptions& opts);

}  // namespace moetune::model
