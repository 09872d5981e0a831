// Pruning counts (H200 fp8 block: BLOCK_SIZE_K 256 by block_k; RTX PRO 6000: shared memory),
// the model ranking, and the dry-run JSON's exact keys.
#include <algorithm>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "moetune/tuner.hpp"
#include "tune/cost_model.hpp"
#include "tune/prune.hpp"
#include "tune/strategy.hpp"

namespace moetune::tune {
namespace {

// Qwen3.5-122B-A10B at TP4 (ANCHORS.md): E=256, N=256, K=3072, topk=8.
MoeShape qwen_tp4(bool fp8) {
  MoeShape s;
  s.architecture = "Qwen3_5MoeForCausalLM";
  s.E = s.E_global = 256;
  s.N = 256;
  s.K = 3072;
  s.topk = 8;
  s.dtype = fp8 ? Dtype::fp8_w8a8 : Dtype::bf16;
  if (fp8) s.block_shape = std::array<int, 2>{128, 128};
  s.moe_layers = 48;
  s.tp = 4;
  return s;
}

TuneOptions options(const MoeShape& shape, const char* gpu, std::vector<int> batch) {
  TuneOptions o;
  o.shape = shape;
  o.gpu = require_gpu(gpu);
  o.batch = std::move(batch);
  return o;
}

long total(const std::map<std::string, long>& m) {
  long t = 0;
  for (const auto& [k, v] : m) t += v;
  return t;
}

TEST(Prune, H200Fp8BlockPrunesBlockK256ByBlockK) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {1, 64, 1024});
  for (int M : o.batch) {
    for (Stage stage : {Stage::up, Stage::down}) {
      const StagePlan p = plan_stage(o, M, stage, std::nullopt);
      // A third of the 15,360 configs have BLOCK_SIZE_K 256 > block_k 128: every one is
      // counted under block_k, whatever else is wrong with it.
      EXPECT_EQ(p.pruned.at("block_k"), 5120) << M;
      for (const KernelConfig& c : p.candidates) {
        EXPECT_NE(c.BLOCK_SIZE_K, 256);
        EXPECT_EQ(validation_reason(c, o.shape, o.gpu, M, stage), "") << M;
      }
      // Every config of the space is either a candidate or counted once; a default outside
      // the space (e.g. GROUP_SIZE_M 8) joins this stage's space.
      const bool default_in_space = [&] {
        const auto all = default_space().configs();
        return std::find(all.begin(), all.end(), p.default_config) != all.end();
      }();
      EXPECT_EQ(p.space, 15360 + (default_in_space ? 0 : 1)) << M;
      EXPECT_EQ(long(p.candidates.size()) + total(p.pruned), p.space) << M;
      // The default is always measured.
      EXPECT_NE(std::find(p.candidates.begin(), p.candidates.end(), p.default_config),
                p.candidates.end());
      // Ranked by the model.
      EXPECT_TRUE(std::is_sorted(p.predicted_s.begin(), p.predicted_s.end()));
      EXPECT_GT(p.pruned.at("dominated_by_model"), 0);
    }
  }
}

TEST(Prune, SplitKLongerThanTheReductionIsATileRule) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {1});
  // down reduces over N = 256: SPLIT_K 4 x BLOCK_SIZE_K 128 = 512 > 256.
  const KernelConfig c{16, 64, 128, 1, 4, 3, 4};
  EXPECT_EQ(validation_reason(c, o.shape, o.gpu, 1, Stage::down), "tile_rule");
  EXPECT_EQ(validation_reason(c, o.shape, o.gpu, 1, Stage::up), "");
}

TEST(Prune, RtxPro6000PrunesMoreBySharedMemory) {
  const TuneOptions h200 = options(qwen_tp4(false), "H200", {256});
  const TuneOptions rtx = options(qwen_tp4(false), "RTX PRO 6000", {256});
  const StagePlan ph = plan_stage(h200, 256, Stage::up, std::nullopt);
  const StagePlan pr = plan_stage(rtx, 256, Stage::up, std::nullopt);
  EXPECT_GT(pr.pruned.at("smem"), ph.pruned.at("smem"));
  EXPECT_GT(pr.pruned.at("smem"), 0);
  // A bf16 64x128x128 3-stage tile: fits 232,448 B, not 101,376 B.
  const KernelConfig c{64, 128, 128, 1, 4, 3, 1};
  const ValidationTarget th{Dtype::bf16, std::nullopt, &h200.gpu};
  const int smem = moetune_smem_bytes(c, th);
  ASSERT_GT(smem, rtx.gpu.smem_per_block_bytes);
  ASSERT_LE(smem, h200.gpu.smem_per_block_bytes);
  EXPECT_EQ(validation_reason(c, rtx.shape, rtx.gpu, 256, Stage::up), "smem");
  EXPECT_EQ(validation_reason(c, h200.shape, h200.gpu, 256, Stage::up), "");
}

TEST(Prune, GroupSizeIsADuplicateWithOneMTilePerExpert) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {1});
  const StagePlan p = plan_stage(o, 1, Stage::up, std::nullopt);
  // At M=1 every expert holds one token: GROUP_SIZE_M 16/32/64 act like 1.
  EXPECT_GT(p.pruned.at("duplicate_effect"), 0);
  for (const KernelConfig& c : p.candidates) {
    if (!(c == p.default_config)) {
      EXPECT_EQ(c.GROUP_SIZE_M, 1);
    }
  }
}

TEST(Prune, DownFollowsTheUpBlockSizeM) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {64});
  const StagePlan p = plan_stage(o, 64, Stage::down, 32);
  EXPECT_GT(p.pruned.at("block_m_alignment"), 0);
  for (const KernelConfig& c : p.candidates) EXPECT_EQ(c.BLOCK_SIZE_M, 32);
}

TEST(Prune, WarmStartSeedsAreMeasuredEvenWhenTheModelWouldDropThem) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {64});
  const StagePlan plain = plan_stage(o, 64, Stage::up, std::nullopt);
  // The model's worst valid config: surely dominated.
  TuneOptions all = o;
  all.exhaustive = true;
  const KernelConfig worst = plan_stage(all, 64, Stage::up, std::nullopt).candidates.back();
  ASSERT_EQ(std::find(plain.candidates.begin(), plain.candidates.end(), worst),
            plain.candidates.end());
  const StagePlan seeded = plan_stage(o, 64, Stage::up, std::nullopt, {worst});
  EXPECT_NE(std::find(seeded.candidates.begin(), seeded.candidates.end(), worst),
            seeded.candidates.end());
  EXPECT_EQ(seeded.candidates.size(), plain.candidates.size() + 1);
  // Counted once: no longer under the reason it was dropped for (dominated or duplicate).
  EXPECT_EQ(total(seeded.pruned) + 1, total(plain.pruned));
  EXPECT_EQ(seeded.space, plain.space);
  // Down keeps only seeds with the shared BLOCK_SIZE_M.
  KernelConfig other_bm = worst;
  other_bm.BLOCK_SIZE_M = worst.BLOCK_SIZE_M == 16 ? 32 : 16;
  const StagePlan down = plan_stage(o, 64, Stage::down, worst.BLOCK_SIZE_M, {other_bm});
  for (const KernelConfig& c : down.candidates) EXPECT_EQ(c.BLOCK_SIZE_M, worst.BLOCK_SIZE_M);
}

// The tuner learns SWAP_AB: on an H200 both the swapped and the unswapped decode tiles reach
// the candidates (the model cannot tell them apart, the hedge keeps both), for both dtypes; on
// the RTX PRO 6000 (sm_120, no wgmma) every SWAP_AB 1 config is a tile_rule prune.
TEST(Prune, SwapAbCandidatesOnlyOnHopper) {
  for (bool fp8 : {true, false}) {
    const TuneOptions h200 = options(qwen_tp4(fp8), "H200", {64});
    const TuneOptions rtx = options(qwen_tp4(fp8), "RTX PRO 6000", {64});
    for (Stage stage : {Stage::up, Stage::down}) {
      const StagePlan p = plan_stage(h200, 64, stage, std::nullopt);
      const auto swapped = std::count_if(p.candidates.begin(), p.candidates.end(),
                                         [](const KernelConfig& c) { return c.SWAP_AB == 1; });
      EXPECT_GT(swapped, 0) << fp8 << to_string(stage);
      EXPECT_LT(swapped, static_cast<long>(p.candidates.size())) << fp8 << to_string(stage);
      for (const KernelConfig& c : p.candidates) {
        if (c.SWAP_AB == 1) {
          EXPECT_LE(c.BLOCK_SIZE_M, 32) << config_name(c);
        }
      }
      const StagePlan q = plan_stage(rtx, 64, stage, std::nullopt);
      for (const KernelConfig& c : q.candidates) EXPECT_EQ(c.SWAP_AB, 0) << config_name(c);
    }
  }
}

// Down follows up's BLOCK_SIZE_M; a swap-AB down default moved to 64 rows (which swap-AB cannot
// run) is judged unswapped, as a config that runs (it was a failing baseline before).
TEST(Prune, DownBaselineAtAnotherBlockMStaysRunnable) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {64});
  ASSERT_EQ(default_config(o, 64, Stage::down).SWAP_AB, 1);
  const StagePlan p = plan_stage(o, 64, Stage::down, 64);
  EXPECT_EQ(p.default_config.BLOCK_SIZE_M, 64);
  EXPECT_EQ(p.default_config.SWAP_AB, 0);
  EXPECT_EQ(validation_reason(p.default_config, o.shape, o.gpu, 64, Stage::down), "");
  EXPECT_EQ(down_baseline_for(o, 64, 64), p.default_config);
  EXPECT_EQ(down_baseline_for(o, 64, 32).SWAP_AB, 1);  // 32 rows: still swap-AB
  // From 4 slots per expert the swap-AB default sweeps with GROUP_SIZE_M 32; unswapped, it is
  // the decode tiles' GROUP_SIZE_M 1 again.
  const TuneOptions o256 = options(qwen_tp4(true), "H200", {256});
  ASSERT_EQ(default_config(o256, 256, Stage::down).GROUP_SIZE_M, 32);
  EXPECT_EQ(down_baseline_for(o256, 256, 32).GROUP_SIZE_M, 32);
  const KernelConfig m64 = down_baseline_for(o256, 256, 64);
  EXPECT_EQ(m64.SWAP_AB, 0);
  EXPECT_EQ(m64.GROUP_SIZE_M, 1);
}

TEST(Prune, ExhaustiveKeepsEveryValidConfig) {
  TuneOptions o = options(qwen_tp4(true), "H200", {64});
  o.exhaustive = true;
  const StagePlan p = plan_stage(o, 64, Stage::up, std::nullopt);
  EXPECT_EQ(p.pruned.count("dominated_by_model"), 0u);
  EXPECT_EQ(p.pruned.count("duplicate_effect"), 0u);
  EXPECT_GT(p.candidates.size(), 500u);
}

TEST(CostModel, DecodePrefersSplitKAndSmallTiles) {
  const MoeShape s = qwen_tp4(true);
  const GpuSpec& g = require_gpu("H200");
  // M=1: 8 experts x 512/BN N-tiles fill few SMs; split-K adds blocks.
  const KernelConfig no_split{16, 64, 128, 1, 4, 4, 1};
  KernelConfig split = no_split;
  split.SPLIT_K = 4;
  const CostBreakdown a = predict(s, g, 1, Stage::up, no_split);
  const CostBreakdown b = predict(s, g, 1, Stage::up, split);
  EXPECT_NEAR(a.active_experts, 256 * (1 - std::pow(1 - 8.0 / 256, 1)), 1e-9);
  EXPECT_DOUBLE_EQ(a.tiles, 8.0 * 1 * (512 / 64));
  EXPECT_DOUBLE_EQ(b.tiles, 4 * a.tiles);
  EXPECT_LT(b.predicted_s, a.predicted_s);
  // Padding waste: one token in a 256-row tile.
  const CostBreakdown big = predict(s, g, 1, Stage::up, KernelConfig{256, 64, 128, 1, 8, 4, 1});
  EXPECT_NEAR(big.padding_waste, 255.0 / 256.0, 1e-9);
  // Never below the stage's floor.
  EXPECT_GT(a.predicted_s, stage_floor_s(s, g, 1, Stage::up));
}

TEST(Plan, DryRunJsonKeysExactly) {
  TuneOptions o = options(qwen_tp4(true), "H200", {1, 8, 64});
  o.shape_json = {{"E", 256}, {"note", "from the CLI"}};
  const TunePlan p = plan(o);
  const nlohmann::json j = to_json(p);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"shape", "batch", "plan", "estimated_seconds"}));
  EXPECT_EQ(j.at("shape"), o.shape_json);
  EXPECT_EQ(j.at("batch"), nlohmann::json({1, 8, 64}));
  ASSERT_EQ(j.at("plan").size(), 3u);
  for (const auto& row : j.at("plan")) {
    std::set<std::string> rk;
    for (const auto& [k, v] : row.items()) rk.insert(k);
    EXPECT_EQ(rk, (std::set<std::string>{"M", "space", "candidates", "pruned"}));
    EXPECT_EQ(row.at("space"), 30720);
    EXPECT_TRUE(row.at("candidates").is_number_integer());
    EXPECT_GT(row.at("candidates").get<long>(), 2);
    EXPECT_LT(row.at("candidates").get<long>(), 30720 / 5);
    EXPECT_EQ(row.at("pruned").at("block_k"), 10240);
    long pruned = 0;
    for (const auto& [reason, count] : row.at("pruned").items()) pruned += count.get<long>();
    EXPECT_EQ(row.at("candidates").get<long>() + pruned, row.at("space").get<long>());
  }
  EXPECT_TRUE(j.at("estimated_seconds").is_number());
  EXPECT_GT(j.at("estimated_seconds").get<double>(), 1.0);
}

// space == candidates + sum(pruned), per stage and per row, for every M of the common 18.
void expect_accounting_holds(const TuneOptions& o) {
  const TunePlan p = plan(o);
  ASSERT_EQ(p.batch, default_batch_sizes());
  const auto all = default_space().configs();
  const std::set<KernelConfig> space(all.begin(), all.end());
  for (const PlanRow& r : p.rows) {
    for (const StagePlan* s : {&r.up, &r.down}) {
      EXPECT_EQ(long(s->candidates.size()) + total(s->pruned), s->space)
          << "M=" << r.M << " " << to_string(s->stage);
      // The space grows only by forced configs outside it (the default here: no seeds).
      const long outside = space.count(s->default_config) ? 0 : 1;
      EXPECT_EQ(s->space, long(all.size()) + outside) << "M=" << r.M << " " << to_string(s->stage);
    }
    EXPECT_EQ(r.space, r.up.space + r.down.space) << r.M;
    EXPECT_EQ(r.candidates + total(r.pruned), r.space) << r.M;
    const nlohmann::json row = to_json(p).at("plan").at(&r - p.rows.data());
    long pruned = 0;
    for (const auto& [reason, count] : row.at("pruned").items()) pruned += count.get<long>();
    EXPECT_EQ(row.at("candidates").get<long>() + pruned, row.at("space").get<long>()) << r.M;
  }
}

TEST(Plan, AccountingHoldsForTheDefaultModelOnH200) {
  ModelOptions mo;
  mo.tp = kDefaultTp;
  TuneOptions o = options(load_model(kDefaultPreset, mo), "H200", {});
  ASSERT_EQ(o.shape.dtype, Dtype::fp8_w8a8);
  expect_accounting_holds(o);
  // The default at M=1 (fp8 up: SPLIT_K 8) is inside the space: the row is exactly 2 x 15,360.
  EXPECT_EQ(default_config(o, 1, Stage::up).SPLIT_K, 8);
  EXPECT_EQ(plan_stage(o, 1, Stage::up).space, 15360);
}

TEST(Plan, AccountingHoldsForBf16MixtralTp2OnH200) {
  ModelOptions mo;
  mo.tp = 2;
  mo.dtype = "bf16";
  TuneOptions o = options(load_model("mixtral-8x7b", mo), "H200", {});
  ASSERT_EQ(o.shape.dtype, Dtype::bf16);
  expect_accounting_holds(o);
}

TEST(Plan, ForcedConfigOutsideTheSpaceJoinsTheSpace) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {64});
  const StagePlan plain = plan_stage(o, 64, Stage::up, std::nullopt);
  // GROUP_SIZE_M 8 is not among the classic {1, 16, 32, 64}.
  KernelConfig outsider = plain.candidates.front();
  outsider.GROUP_SIZE_M = 8;
  const auto all = default_space().configs();
  ASSERT_EQ(std::find(all.begin(), all.end(), outsider), all.end());
  const StagePlan seeded = plan_stage(o, 64, Stage::up, std::nullopt, {outsider, outsider});
  EXPECT_NE(std::find(seeded.candidates.begin(), seeded.candidates.end(), outsider),
            seeded.candidates.end());
  EXPECT_EQ(seeded.candidates.size(), plain.candidates.size() + 1);
  EXPECT_EQ(seeded.space, plain.space + 1);
  EXPECT_EQ(total(seeded.pruned), total(plain.pruned));
  EXPECT_EQ(long(seeded.candidates.size()) + total(seeded.pruned), seeded.space);
}

TEST(Plan, ShapeJsonWhenTheCliGivesNone) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {1});
  const nlohmann::json j = to_json(plan(o));
  EXPECT_EQ(j.at("shape").at("E"), 256);
  EXPECT_EQ(j.at("shape").at("block_shape"), nlohmann::json({128, 128}));
  EXPECT_EQ(j.at("shape").at("config_file").at("sglang"),
            "E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128, 128].json");
  // The one `shapes --json` schema (moetune::shape_json), keys as sorted by nlohmann::json.
  EXPECT_EQ(j.at("shape"), nlohmann::json(shape_json(o.shape, "NVIDIA H200")));
}

TEST(Plan, DefaultBatchSizesAndBudgetCap) {
  TuneOptions o = options(qwen_tp4(true), "H200", {});
  const TunePlan p = plan(o);
  EXPECT_EQ(p.batch, default_batch_sizes());
  o.budget_s = 30;
  EXPECT_LE(plan(o).estimated_seconds, 30.0);
}

// The measurement model follows bench::measure: 10 µs calls -> R = 32 calls per replay; probes
// (32 + 2R calls), a 20 ms warm-up floor, 8 timed replays of R calls, the fixed overhead.
TEST(Plan, MeasurementTimeFollowsTheMeasureProtocol) {
  const double t = 10e-6;
  EXPECT_NEAR(measurement_s(t, 8), (32 + 64) * t + 0.02 + 8 * 32 * t + kOverheadSPerMeasurement,
              1e-12);
  // 1 ms calls: R = 16 (the minimum), the warm-up is 3 replays (48 ms > 20 ms).
  EXPECT_NEAR(measurement_s(1e-3, 8), (32 + 32) * 1e-3 + 48e-3 + 8 * 16e-3 + kOverheadSPerMeasurement,
              1e-12);
}

// A kernel compiles once per sweep: the same stage plan at a second M adds no compile time.
TEST(Plan, EachKernelCompilesOncePerSweep) {
  const TuneOptions o = options(qwen_tp4(true), "H200", {64});
  const StagePlan p = plan_stage(o, 64, Stage::up, std::nullopt);
  std::set<std::pair<int, KernelConfig>> compiled;
  const double first = estimate_stage_s(p, o, &compiled);
  const double again = estimate_stage_s(p, o, &compiled);
  EXPECT_NEAR(first - again, double(p.candidates.size()) * kCompileSPerConfig / kCompileThreads,
              1e-9);
  EXPECT_DOUBLE_EQ(estimate_stage_s(p, o), first);  // no set: every config compiles
}

// On several GPUs the batch sizes are taken in order by the first GPU free: the estimate is the
// busiest GPU's sum, never below the longest batch size (it divided the total by the GPU count:
// 33 s for rows of 26 and 39 s on two GPUs).
TEST(Plan, SeveralGpusEndWithTheBusiestOne) {
  TuneOptions o = options(qwen_tp4(true), "H200", {1, 4096});
  o.gpus = 2;
  const TunePlan two = plan(o);
  ASSERT_EQ(two.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(two.estimated_seconds,
                   std::max(two.rows[0].estimated_s, two.rows[1].estimated_s));
  o.batch = {1, 64, 4096};
  const TunePlan three = plan(o);  // GPU 0: M=1 then M=4096; GPU 1: M=64
  EXPECT_DOUBLE_EQ(three.estimated_seconds,
                   std::max(three.rows[0].estimated_s + three.rows[2].estimated_s,
                            three.rows[1].estimated_s));
  o.batch = {};
  o.gpus = 18;
  const TunePlan wide = plan(o);
  double longest = 0;
  for (const PlanRow& r : wide.rows) longest = std::max(longest, r.estimated_s);
  EXPECT_DOUBLE_EQ(wide.estimated_seconds, longest);
}

// Calibration guard: the default sweep of the default model on one H200 from a cold cache
// measured 254.6 s before the neighbourhood step existed (bench/results/2026-11-30_h200_tune_sweep.md)
// and 260.5 s with it and the halving fixed (2026-11-30_h200_fifth_session.md; 146.8 s on two
// GPUs); the plan says each within 40%, and the two-GPU plan within 40% of its measured time.
TEST(Plan, DefaultSweepEstimateMatchesTheMeasuredH200Sweep) {
  TuneOptions o = options(qwen_tp4(true), "H200", {});
  const double with_neighbourhood = plan(o).estimated_seconds;
  EXPECT_GT(with_neighbourhood, 260.5 / 1.4);
  EXPECT_LT(with_neighbourhood, 260.5 * 1.4);
  TuneOptions two = o;
  two.gpus = 2;
  EXPECT_GT(plan(two).estimated_seconds, 146.8 / 1.4);
  EXPECT_LT(plan(two).estimated_seconds, 146.8 * 1.4);
  o.neighbourhood_rounds = 0;
  const double halving_only = plan(o).estimated_seconds;
  EXPECT_GT(halving_only, 254.6 / 1.4);
  EXPECT_LT(halving_only, 254.6 * 1.4);
  // The step's own share: 46.9 s measured (two machines of one kind, cold), within 2x.
  EXPECT_GT(with_neighbourhood - halving_only, 46.9 / 2);
  EXPECT_LT(with_neighbourhood - halving_only, 46.9 * 2);
}

}  // namespace
}  // namespace moetune::tune
