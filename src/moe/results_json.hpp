// Results of check / profile / bench as JSON objects (data for `--json` and records; the CLI
// prints). Times in µs at this edge, as DESIGN.md's `*_us` fields; internal structs hold seconds.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "moe/check.hpp"
#include "moe/profile.hpp"

namespace moetune::moe {

nlohmann::json to_json(const CheckResult& r);
// {"seed", "wall_s", "failures", "results": [...]}
nlohmann::json to_json(const CheckReport& r);
nlohmann::json to_json(const ProfileRow& r);
nlohmann::json to_json(const LayerBenchRow& r);
// {"M", "layer": {"ratio", "ci95_lo", "ci95_hi", "verdict"}, "gemm_phase": {...}}
nlohmann::json to_json(const LayerComparison& c);

}  // namespace moetune::moe
