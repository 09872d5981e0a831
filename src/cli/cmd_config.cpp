// moetune config lookup FILE --batch M / config validate FILE.
#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "cli/commands.hpp"
#include "cli/text.hpp"
#include "moetune/config.hpp"
#include "moe/stages.hpp"
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
    fmt::print(stderr, "moetune: note: {}: skipped the non-batch-size key {}\n", shown(file),
               json_quoted(key));
  }
  return t;
}

std::string config_text(const KernelConfig& c) {
  std::string t = fmt::format(
      "BLOCK_SIZE_M={} BLOCK_SIZE_N={} BLOCK_SIZE_K={} GROUP_SIZE_M={} num_warps={} num_stages={}",
      c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.GROUP_SIZE_M, c.num_warps, c.num_stages);
  if (c.SPLIT_K != 1) t += fmt::format(" SPLIT_K={}", c.SPLIT_K);
  if (c.SWAP_AB != 0) t += fmt::format(" SWAP_AB={}", c.SWAP_AB);
  return t;
}

// The model options do not choose anything here (the table's file names the shape), but a bad
// value is still bad input: checked as every other command checks them, then not used.
void check_model_options(const GlobalOptions& g) {
  for (const char* name : {"model", "tp", "ep", "experts", "topk", "intermediate", "hidden"}) {
    if (g.given(name)) {
      (void)resolve_shape(g);
      return;
    }
  }
}

// What a server-style file name says about its target: device, dtype and fp8 block shape.
// dtype and block_shape are kept as written and checked where the target takes them from the
// name (a flag or --model may make them moot): a value moetune cannot model is bad input there,
// not a silent fallback (a "dtype=int4_w4a16" table used to be checked as bf16, "[0, 0]" passed).
struct NameHints {
  std::string device;
  std::optional<std::string> dtype;        // the text after "dtype="
  std::optional<std::string> block_shape;  // the text after "block_shape=", up to "]"
  // The dtype it names, or nullopt (none, or one moetune does not model).
  std::optional<Dtype> known_dtype() const { return dtype ? parse_dtype(*dtype) : std::nullopt; }
  Dtype checked_dtype() const {
    const std::optional<Dtype> d = known_dtype();
    if (!d)
      throw InputError("dtype (file name)", *dtype,
                       "moetune models bf16, fp16 and fp8_w8a8 tables; pass --dtype to check it "
                       "as one of them");
    return *d;
  }
  std::optional<std::array<int, 2>> checked_block_shape() const {
    if (!block_shape) return std::nullopt;
    return parse_block_shape(*block_shape, "block_shape (file name)");
  }
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
  // A word: "fp8_w8a8" in "...,dtype=fp8_w8a8_down.json" and in "...dtype=fp8_w8a8 (1).json".
  if (std::regex_search(name, m,
                        std::regex(R"(dtype=([A-Za-z0-9_]*?)(?=_down\.json$|[^A-Za-z0-9_]|$))"))) {
    h.dtype = m[1].str();
  }
  if (std::regex_search(name, m, std::regex(R"(block_shape=(\[[^\]]*\]|[^,]*?(?=_down\.json$|\.json$|,|$)))"))) {
    h.block_shape = m[1].str();
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
    r.block_shape = flag_block                        ? flag_block
                    : hints.known_dtype() == r.dtype ? hints.checked_block_shape()
                                                     : std::nullopt;
    r.from = "--dtype";
  } else if (hints.dtype) {
    r.dtype = hints.checked_dtype();
    r.block_shape = flag_block ? flag_block : hints.checked_block_shape();
    r.from = "the file name";
  } else {
    r.dtype = Dtype::bf16;
    r.from = "the default";
  }
  if (flag_block && r.dtype != Dtype::fp8_w8a8) {
    throw InputError("block-shape", g.block_shape,
                     fmt::format("a block shape applies to fp8_w8a8 weights only; the table is "
                                 "{} (from {})",
                                 to_string(r.dtype), r.from));
  }
  if (r.dtype != Dtype::fp8_w8a8) r.block_shape.reset();
  if (r.block_shape && !moe::block_k_runs((*r.block_shape)[1])) {
    // The tables configure moetune's kernels, which take these block_k only (as tune does).
    const std::string field = flag_block          ? "block-shape"
                              : g.given("model") ? "block_shape (model)"
                                                 : "block_shape (file name)";
    throw InputError(field,
                     fmt::format("[{}, {}]", (*r.block_shape)[0], (*r.block_shape)[1]),
                     "block_k must be 64, 128 or k*256 for moetune's kernels");
  }
  if (!g.given("gpu") && !hints.device.empty() && find_gpu(hints.device) != nullptr) {
    r.gpu = *find_gpu(hints.device);
  } else {
    r.gpu = resolve_gpu(g);
    // A device moetune has no spec for: its shared-memory limit is unknown, so say which GPU's
    // limit the entries are checked against (it was silent: a B300 table "passed" as an H200's).
    if (!g.given("gpu") && !hints.device.empty()) {
      fmt::print(stderr,
                 "moetune: note: device_name={} (file name) is not in moetune's GPU table; "
                 "checking against {} (choose with --gpu)\n",
                 hints.device, r.gpu.name);
    }
  }
  return r;
}

// The up/down sibling of a table file by name: "X.json" <-> "X_down.json" (DESIGN.md). Empty
// when the name does not end in ".json".
struct Sibling {
  std::string file;
  bool is_down = false;  // the sibling is the down table (the named file is the up table)
};
std::optional<Sibling> sibling_of(const std::string& file) {
  constexpr std::string_view kDown = "_down.json", kJson = ".json";
  const std::string_view name = file;
  if (name.ends_with(kDown)) {
    return Sibling{std::string(name.substr(0, name.size() - kDown.size())) + ".json", false};
  }
  if (name.ends_with(kJson)) {
    return Sibling{std::string(name.substr(0, name.size() - kJson.size())) + "_down.json", true};
  }
  return std::nullopt;
}

constexpr std::string_view kSharedAlignmentRule = "up and down share one alignment";

// The violations of the table in `file` (already read: `table`) for `target`: its own, and with
// its up/down sibling present the pair's (one alignment serves both GEMMs: the shared
// BLOCK_SIZE_M); the sibling's own are reported when it is validated itself. `sibling_file`
// receives the sibling's name when one was read (the report says so).
std::vector<Violation> violations_of(const std::string& file, const ParsedTable& table,
                                     const ValidationTarget& target,
                                     std::optional<Sibling>* sibling_file = nullptr) {
  std::optional<Sibling> sibling = sibling_of(file);
  std::error_code ec;
  if (sibling && !std::filesystem::is_regular_file(sibling->file, ec)) sibling.reset();
  if (sibling_file) *sibling_file = sibling;
  if (!sibling) return validate_table(table, target);
  std::vector<Violation> violations;
  const ParsedTable other = read_table_noting_skips(sibling->file);
  const bool named_is_down = !sibling->is_down;
  const std::vector<Violation> all =
      named_is_down ? validate_table(other, target, &table) : validate_table(table, target, &other);
  for (const Violation& v : all) {
    const bool pair_rule = v.rule == kSharedAlignmentRule;
    if (pair_rule || v.down == named_is_down) violations.push_back(v);
  }
  return violations;
}

int run_lookup(const GlobalOptions& g, const ConfigOptions& o) {
  check_model_options(g);
  const int M = parse_positive_int("batch", o.batch);
  const ParsedTable parsed = read_table_noting_skips(o.file);
  ConfigTable table = to_table(parsed);
  const int key = nearest_key(table, M);
  const KernelConfig& c = table.at(key);
  // The entry a server would take, checked as `config validate` checks it (same target, unknown
  // keys, the up/down pair): a note and "ok" in --json, not a refusal, since lookup answers
  // which entry and validate judges files. A target the flags cannot form (e.g. --block-shape
  // on a bf16 table) leaves it unchecked, said in a note.
  std::optional<bool> ok;
  try {
    const ResolvedTarget rt = validation_target(g, o.file);
    const ValidationTarget target{rt.dtype, rt.block_shape, &rt.gpu};
    std::vector<Violation> mine;
    for (const Violation& v : violations_of(o.file, parsed, target))
      if (v.M == key) mine.push_back(v);
    ok = mine.empty();
    if (!mine.empty()) {
      const Violation& v = mine.front();
      fmt::print(stderr,
                 "moetune: note: entry {} fails validation for {} {} (from {}): {}={} (limit {}): "
                 "{}; see moetune config validate\n",
                 key, rt.gpu.name, to_string(rt.dtype), rt.from, shown(v.key), shown(v.value),
                 one_line(v.limit), one_line(v.rule));
    }
  } catch (const InputError& e) {
    fmt::print(stderr, "moetune: note: entry {} not validated: {}={}: {}\n", key,
               one_line(e.field()), shown(e.value()), one_line(e.reason()));
  }
  if (g.json) {
    // The library's JSON of the config, in the classic key order that tables are written in.
    const auto written = nlohmann::ordered_json::parse(dump_config_table({{key, c}}));
    nlohmann::ordered_json j{{"key", key}, {"config", written.at(std::to_string(key))}};
    j["ok"] = ok ? nlohmann::ordered_json(*ok) : nlohmann::ordered_json(nullptr);
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("M={} -> key {} (nearest key; a tie goes to the smaller)\n", M, key);
  fmt::print("{}\n", config_text(c));
  return 0;
}

int run_validate(const GlobalOptions& g, const ConfigOptions& o) {
  check_model_options(g);
  ParsedTable table = read_table_noting_skips(o.file);
  ResolvedTarget rt = validation_target(g, o.file);
  ValidationTarget target{rt.dtype, rt.block_shape, &rt.gpu};
  std::optional<Sibling> sibling;
  const std::vector<Violation> violations = violations_of(o.file, table, target, &sibling);
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
    // ASCII only: a key from the file holding U+2028 or NEL stays escaped (\u2028) in the output.
    fmt::print("{}\n",
               nlohmann::ordered_json{{"ok", ok}, {"entries", entries}}.dump(2, ' ', true));
    return ok ? 0 : kExitProblems;
  }

  std::string block = rt.block_shape ? fmt::format(" block_shape [{}, {}]", (*rt.block_shape)[0],
                                                   (*rt.block_shape)[1])
                                     : (rt.dtype == Dtype::fp8_w8a8 ? " per-tensor" : "");
  fmt::print("{}: {} {}; target {} ({}{}, from {}), {} B shared memory per block\n", shown(o.file),
             table.entries.size(), table.entries.size() == 1 ? "entry" : "entries", rt.gpu.name,
             to_string(rt.dtype), block, rt.from, rt.gpu.smem_per_block_bytes);
  if (sibling) {
    fmt::print("checked with its {} table {}\n", sibling->is_down ? "down" : "up",
               shown(sibling->file));
  }
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
    // Keys come from the file: escaped, so that no key can forge a line of this report.
    fmt::print("violation: M={} {}={} (limit {}): {}\n", v.M, shown(v.key), shown(v.value),
               one_line(v.limit), one_line(v.rule));
  }
  if (ok) {
    fmt::print("{}\n", table.entries.size() == 1 ? std::string("the 1 entry is valid")
                                                  : fmt::format("all {} entries valid",
                                                                table.entries.size()));
  } else {
    fmt::print("{} of {} entr{} rejected\n", rejected, table.entries.size(),
               table.entries.size() == 1 ? "y" : "ies");
    // A name without dtype= (a hand-named table) is checked as bf16, whose rules differ.
    if (rt.from == "the default")
      fmt::print("note: the file name names no dtype, so the table was checked as bf16; for "
                 "fp8 pass --dtype fp8_w8a8 (and --block-shape N,K if block-wise)\n");
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
