// The tuner's GPU backend where no GPU is needed: the worker protocol without a GPU (one-line
// errors, the worker keeps serving), routing-set generation and its host-side alignment.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda/driver.hpp"
#include "moe/reference.hpp"
#include "moe/tune_backend.hpp"
#include "moetune/error.hpp"
#include "tune/gpu_evaluator.hpp"

namespace moetune::moe {
namespace {

MoeShape shape(int E, int E_global, int topk) {
  MoeShape s;
  s.E = E;
  s.E_global = E_global;
  s.N = 256;
  s.K = 512;
  s.topk = topk;
  s.dtype = Dtype::bf16;
  return s;
}

std::vector<nlohmann::json> replies_of(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(TuneBackendWorker, WithoutGpuAnswersOneLineErrorsAndKeepsServing) {
  if (cuda::gpu_available()) GTEST_SKIP() << "a GPU is usable here: this test is for CPU machines";
  const MoeShape s = shape(8, 8, 2);
  const nlohmann::json config = {{"BLOCK_SIZE_M", 16}, {"BLOCK_SIZE_N", 64}, {"BLOCK_SIZE_K", 64},
                                 {"GROUP_SIZE_M", 1},  {"num_warps", 4},     {"num_stages", 2}};
  std::ostringstream requests;
  requests << nlohmann::json({{"id", 1}, {"op", "hello"}}).dump() << "\n";
  requests << nlohmann::json({{"id", 2},
                              {"op", "measure"},
                              {"shape", tune::shape_to_wire(s)},
                              {"M", 4},
                              {"stage", "up"},
                              {"config", config},
                              {"replays", 8}})
                  .dump()
           << "\n";
  requests << nlohmann::json({{"id", 3},
                              {"op", "check"},
                              {"shape", tune::shape_to_wire(s)},
                              {"M", 4},
                              {"stage", "down"},
                              {"config", config}})
                  .dump()
           << "\n";
  requests << nlohmann::json({{"id", 4}, {"op", "quit"}}).dump() << "\n";
  std::istringstream in(requests.str());
  std::ostringstream out;
  GemmWorkerBackend backend;
  EXPECT_EQ(tune::run_worker(in, out, backend), 0);
  const std::vector<nlohmann::json> replies = replies_of(out.str());
  ASSERT_EQ(replies.size(), 4u);
  std::string why;
  ASSERT_FALSE(cuda::gpu_available(&why));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(replies[i].at("id"), i + 1);
    EXPECT_EQ(replies[i].at("ok"), false);
    const std::string error = replies[i].at("error").get<std::string>();
    EXPECT_EQ(error, why);  // the GpuUnavailable line itself
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
  EXPECT_EQ(replies[3].at("id"), 4);
  EXPECT_EQ(replies[3].at("ok"), true);
  EXPECT_FALSE(backend.context_lost());
}

TEST(TuneBackendRouting, DistinctExpertsPerTokenInRangeWithWeights) {
  const MoeShape s = shape(16, 16, 8);
  const RoutingSet r = make_routing_set(s, 300, 32, 7);
  ASSERT_EQ(r.topk_ids.size(), 300u * 8);
  ASSERT_EQ(r.topk_weights.size(), 300u * 8);
  std::map<int, int> per_expert;
  for (int t = 0; t < 300; ++t) {
    std::set<int> seen(r.topk_ids.begin() + t * 8, r.topk_ids.begin() + (t + 1) * 8);
    EXPECT_EQ(seen.size(), 8u) << "token " << t;
    for (int e : seen) {
      EXPECT_GE(e, 0);
      EXPECT_LT(e, 16);
      ++per_expert[e];
    }
  }
  // Uniform: 2400 slots over 16 experts, 150 each on average; every expert is used.
  ASSERT_EQ(per_expert.size(), 16u);
  for (const auto& [e, n] : per_expert) {
    EXPECT_GT(n, 90) << "expert " << e;
    EXPECT_LT(n, 210) << "expert " << e;
  }
  for (float w : r.topk_weights) {
    EXPECT_GE(w, 0.05f);
    EXPECT_LT(w, 1.0f);
  }
}

TEST(TuneBackendRouting, DeterministicPerSeedAndSharedAcrossBlockSizes) {
  const MoeShape s = shape(64, 64, 4);
  const RoutingSet a = make_routing_set(s, 33, 16, 42);
  const RoutingSet b = make_routing_set(s, 33, 16, 42);
  const RoutingSet c = make_routing_set(s, 33, 16, 43);
  const RoutingSet d = make_routing_set(s, 33, 128, 42);
  EXPECT_EQ(a.topk_ids, b.topk_ids);
  EXPECT_EQ(a.topk_weights, b.topk_weights);
  EXPECT_EQ(a.alignment.sorted_token_ids, b.alignment.sorted_token_ids);
  EXPECT_NE(a.topk_ids, c.topk_ids);
  // Another BLOCK_SIZE_M times the same routing, aligned differently.
  EXPECT_EQ(a.topk_ids, d.topk_ids);
  EXPECT_EQ(a.topk_weights, d.topk_weights);
  EXPECT_NE(a.alignment.num_tokens_post_padded, d.alignment.num_tokens_post_padded);
}

TEST(TuneBackendRouting, AlignmentMatchesTheCpuReference) {
  for (int BM : {16, 64, 256}) {
    const MoeShape s = shape(32, 32, 6);
    const std::int64_t M = 157;
    const RoutingSet r = make_routing_set(s, M, BM, 11);
    const Alignment ref = align_reference(r.topk_ids.data(), M, s.topk, s.E, 0, BM);
    EXPECT_EQ(compare_alignment(r.alignment, ref, M, s.topk), "") << "BM " << BM;
    // Independently: each expert's slots padded to a multiple of BM.
    std::vector<int> count(s.E, 0);
    for (int e : r.topk_ids) ++count[e];
    int padded = 0;
    for (int n : count) padded += (n + BM - 1) / BM * BM;
    EXPECT_EQ(r.alignment.num_tokens_post_padded, padded) << "BM " << BM;
    EXPECT_EQ(static_cast<std::int64_t>(r.alignment.sorted_token_ids.size()),
              max_num_tokens_padded(M, s.topk, s.E, BM));
    // Every slot appears exactly once before num_tokens_post_padded; the rest is the sentinel.
    std::vector<int> seen(M * s.topk, 0);
    for (int i = 0; i < r.alignment.num_tokens_post_padded; ++i) {
      const int slot = r.alignment.sorted_token_ids[i];
      if (slot == M * s.topk) continue;
      ASSERT_GE(slot, 0);
      ASSERT_LT(slot, M * s.topk);
      ++seen[slot];
      EXPECT_EQ(r.topk_ids[slot], r.alignment.expert_ids[i / BM]) << "position " << i;
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST(TuneBackendRouting, ExpertParallelRankZeroKeepsItsExperts) {
  const MoeShape s = shape(4, 16, 2);  // rank 0 holds global experts 0..3
  const std::int64_t M = 64;
  const RoutingSet r = make_routing_set(s, M, 16, 3);
  int local = 0;
  bool remote = false;
  for (int e : r.topk_ids) {
    EXPECT_LT(e, 16);
    if (e < 4) ++local;
    remote = remote || e >= 4;
  }
  EXPECT_TRUE(remote);  // ids are drawn over E_global
  int emitted = 0;
  for (int i = 0; i < r.alignment.num_tokens_post_padded; ++i) {
    emitted += r.alignment.sorted_token_ids[i] != M * s.topk;
  }
  EXPECT_EQ(emitted, local);
}

TEST(TuneBackendRouting, RejectsImpossibleRequests) {
  try {
    make_routing_set(shape(4, 4, 5), 8, 16, 0);
    FAIL() << "topk > E_global accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "topk");
  }
  try {
    make_routing_set(shape(8, 8, 2), 0, 16, 0);
    FAIL() << "M = 0 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "M");
  }
}

}  // namespace
}  // namespace moetune::moe
