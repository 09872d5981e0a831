// moetune config lookup FILE --batch M / config validate FILE.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/commands.hpp"
#include "moetune/config.hpp"
#include "moetune/error.hpp"

namespace moetune::cli {
namespace {

struct ConfigOptions {
  std::string file;
  std::string batch;
};

// Reads a table; skipped keys are noted on stderr, a table without batch-size keys is refused.
ParsedTable read_table_noting_skips(const std::string& file) {
  ParsedTable t = read_config_table(file);
  if (t.entries.empty()) {
    throw InputError("config", file, "no batch-size keys: not a config table");
  }
  for (const std::string& key : t.skipped_keys) {
    fmt::print(stderr, "moetune: note: {}: skipped the non-batch-size key \"{}\"\n", file, key);
  }
  return t;
}

// The config in classic key order (then SPLIT_K when it is not 1), as tables are written.
nlohmann::ordered_json config_json(const KernelConfig& c) {
  nlohmann::ordered_json j{{"BLOCK_SIZE_M", c.BLOCK_SIZE_M}, {"BLOCK_SIZE_N", c.BLOCK_SIZE_N},
                           {"BLOCK_SIZE_K", c.BLOCK_SIZE_K}, {"GROUP_SIZE_M", c.GROUP_SIZE_M},
                           {"num_warps", c.num_warps},       {"num_stages", c.num_stages}};
  if (c.SPLIT_K != 1) j["SPLIT_K"] = c.SPLIT_K;
  return j;
}

std::string config_text(const KernelConfig& c) {
  std::string t = fmt::format(
      "BLOCK_SIZE_M={} BLOCK_SIZE_N={} BLOCK_SIZE_K={} GROUP_SIZE_M={} num_warps={} num_stages={}",
      c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.GROUP_SIZE_M, c.num_warps, c.num_stages);
  if (c.SPLIT_K != 1) t += fmt::format(" SPLIT_K={}", c.SPLIT_K);
  return t;
}

int run_lookup(const GlobalOptions& g, const ConfigOptions& o) {
  const int M = parse_positive_int("batch", o.batch);
  ConfigTable table = to_table(read_table_noting_skips(o.file));
  const int key = nearest_key(table, M);
  const KernelConfig& c = table.at(key);
  if (g.json) {
    nlohmann::ordered_json j{{"key", key}, {"config", config_json(c)}};
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("M={} -> key {} (nearest key; a tie goes to the smaller)\n", M, key);
  fmt::print("{}\n", config_text(c));
  return 0;
}

// What a server-style file name says about its target: device, dtype and fp8 block shape.
struct NameHints {
  std::string device;
  std::optional<Dtype> dtype;
  std::optional<std::array<int, 2>> block_shape;
};

NameHints hints_from_file_name(const std::string& file) {
  NameHints h;
  const std::string name = std::filesystem::path(file).filename().string();
  std::smatch m;
  if (std::regex_search(
          name, m,
          std::regex(R"(device_name=(.+?)(,dtype=|,block_shape=|_down\.json$|\.json$))"))) {
    h.device = m[1].str();
  }
  if (std::regex_search(name, m, std::regex(R"(dtype=([A-Za-z0-9_]+))"))) {
    h.dtype = parse_dtype(m[1].str());
  }
  if (std::regex_search(name, m, std::regex(R"(block_shape=\[(\d{1,6}), ?(\d{1,6})\])"))) {
    h.block_shape = std::array<int, 2>{std::stoi(m[1].str()), std::stoi(m[2].str())};
  }
  return h;
}

// The validation target: flags first, then --model's shape, then the file name, then defaults.
struct ResolvedTarget {
  GpuSpec gpu;
  Dtype dtype = Dtype::bf16;
  std::optional<std::array<int, 2>> block_shape;
  std::string from;  // how it was chosen, for the text report
};

ResolvedTarget validation_target(const GlobalOptions& g, const std::string& file) {
  ResolvedTarget r;
  const NameHints hints = hints_from_file_name(file);
  std::optional<std::array<int, 2>> flag_block;
  if (g.given("block-shape")) flag_block = parse_block_shape(g.block_shape, "block-shape");
  const std::string dtype_flag = parse_dtype_option(g.dtype);
  if (g.given("model")) {
    MoeShape s = resolve_shape(g);
    r.dtype = s.dtype;
    r.block_shape = s.block_shape;
    r.from = "the model";
  } else if (dtype_flag != "auto") {
    r.dtype = *parse_dtype(dtype_flag);
    r.block_shape =
        flag_block ? flag_block : (hints.dtype == r.dtype ? hints.block_shape : std::nullopt);
    r.from = "--dtype";
  } else if (hints.dtype) {
    r.dtype = *hints.dtype;
    r.block_shape = flag_block ? flag_block : hints.block_shape;
    r.from = "the file name";
  } else {
    r.dtype = Dtype::bf16;
    r.from = "the default";
  }
  if (r.dtype != Dtype::fp8_w8a8) r.block_shape.reset();
  if (!g.given("gpu") && !hints.device.empty() && find_gpu(hints.device) != nullptr) {
    r.gpu = *find_gpu(hints.device);
  } else {
    r.gpu = resolve_gpu(g);
  }
  return r;
}

int run_validate(const GlobalOptions& g, const ConfigOptions& o) {
  ParsedTable table = read_table_noting_skips(o.file);
  ResolvedTarget rt = validation_target(g, o.file);
  ValidationTarget target{rt.dtype, rt.block_shape, &rt.gpu};
  std::vector<Violation> violations = validate_table(table, target);
  const bool ok = violations.empty();

  if (g.json) {
    nlohmann::ordered_json entries = nlohmann::ordered_json::array();
    for (const auto& [M, entry] : table.entries) {
      nlohmann::ordered_json vs = nlohmann::ordered_json::array();
      for (const Violation& v : violations) {
        if (v.M != M) continue;
        vs.push_back(nlohmann::ordered_json{
            {"key", v.key}, {"value", v.value}, {"limit", v.limit}, {"rule", v.rule}});
      }
      entries.push_back(nlohmann::ordered_json{
          {"M", M},
          {"ok", vs.empty()},
          {"smem_bytes", moetune_smem_bytes(entry.config, target)},
          {"reference_smem_bytes", reference_smem_bytes(entry.config, target)},
          {"violations", vs}});
    }
    fmt::print("{}\n", nlohmann::ordered_json{{"ok", ok}, {"entries", entries}}.dump(2));
    return ok ? 0 : kExitProblems;
  }

  std::string block = rt.block_shape ? fmt::format(" block_shape [{}, {}]", (*rt.block_shape)[0],
                                                   (*rt.block_shape)[1])
                                     : (rt.dtype == Dtype::fp8_w8a8 ? " per-tensor" : "");
  fmt::print("{}: {} {}; target {} ({}{}, from {}), {} B shared memory per block\n", o.file,
             table.entries.size(), table.entries.size() == 1 ? "entry" : "entries", rt.gpu.name,
             to_string(rt.dtype), block, rt.from, rt.gpu.smem_per_block_bytes);
  fmt::print("{:>6}  {:<4}  {:>10}  {:>16}\n", "M", "", "smem_B", "reference_smem_B");
  int rejected = 0;
  for (const auto& [M, entry] : table.entries) {
    bool entry_ok = true;
    for (const Violation& v : violations) entry_ok = entry_ok && v.M != M;
    rejected += entry_ok ? 0 : 1;
    fmt::print("{:>6}  {:<4}  {:>10}  {:>16}\n", M, entry_ok ? "ok" : "FAIL",
               moetune_smem_bytes(entry.config, target),
               reference_smem_bytes(entry.config, target));
  }
  for (const Violation& v : violations) {
    fmt::print("violation: M={} {}={} (limit {}): {}\n", v.M, v.key, v.value, v.limit, v.rule);
  }
  if (ok) {
    fmt::print("all {} entries valid\n", table.entries.size());
  } else {
    fmt::print("{} of {} entries rejected\n", rejected, table.entries.size());
  }
  return ok ? 0 : kExitProblems;
}

}  // namespace

Commands register_config(CLI::App& app, const GlobalOptions& g) {
  CLI::App* config = app.add_subcommand("config", "config tables: lookup and validation");
  config->require_subcommand(1);

  auto lo = std::make_shared<ConfigOptions>();
  CLI::App* lookup = config->add_subcommand("lookup", "which entry the nearest-M rule picks");
  lookup->add_option("file", lo->file, "config table (JSON)")->required();
  lookup->add_option("--batch", lo->batch, "batch size M")->required();

  auto vo = std::make_shared<ConfigOptions>();
  CLI::App* validate = config->add_subcommand(
      "validate",
      "rejects entries that overflow shared memory, straddle an fp8 scale block or name unknown "
      "keys (target: --gpu, --dtype, --block-shape; no model needed)");
  validate->add_option("file", vo->file, "config table (JSON)")->required();

  return {{lookup, [&g, lo] { return run_lookup(g, *lo); }},
          {validate, [&g, vo] { return run_validate(g, *vo); }}};
}

}  // namespace moetune::cli
