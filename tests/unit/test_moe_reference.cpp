// The fp64 reference on tiny shapes with hand-checkable values (src/moe/reference.cpp).
#include "moe/reference.hpp"

#include <cmath>
#include <limits>
#include <set>

#include <gtest/gtest.h>

#include "moetune/error.hpp"

namespace moetune::moe {
namespace {

TEST(MoeReferenceFormats, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 0x1p-8f), 0x3f80);       // halfway, even stays
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);   // halfway, odd rounds up
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_FLOAT_EQ(bf16_to_float(0x3fc0), 1.5f);
}

TEST(MoeReferenceFormats, Fp16) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(1e6f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-0.5f), 0xb800);
  EXPECT_EQ(float_to_fp16(1e-7f), 0x0002);  // subnormal: 1e-7 / 2^-24 = 1.68 -> 2
  EXPECT_EQ(float_to_fp16(1.0f + 0x1p-11f), 0x3c00);  // halfway, even
  EXPECT_FLOAT_EQ(fp16_to_float(0x0002), 0x1p-23f);
  EXPECT_FLOAT_EQ(fp16_to_float(0x3e00), 1.5f);
  for (int b = 0; b < 0x7c00; b += 7)
    EXPECT_EQ(float_to_fp16(fp16_to_float(static_cast<std::uint16_t>(b))), b);
}

TEST(MoeReferenceFormats, E4m3) {
  EXPECT_EQ(double_to_e4m3(448.0), 0x7e);
  EXPECT_EQ(double_to_e4m3(1000.0), 0x7e);  // saturates
  EXPECT_EQ(double_to_e4m3(-448.0), 0xfe);
  EXPECT_EQ(double_to_e4m3(1.0), 0x38);
  EXPECT_EQ(double_to_e4m3(0x1p-9), 0x01);  // smallest subnormal
  EXPECT_DOUBLE_EQ(e4m3_to_double(0x7e), 448.0);
  EXPECT_DOUBLE_EQ(e4m3_to_double(0x01), 0x1p-9);
  EXPECT_TRUE(std::isnan(e4m3_to_double(0x7f)));
  EXPECT_DOUBLE_EQ(round_e4m3(1.0625), 1.0);   // halfway between 1 and 1.125: even
  EXPECT_DOUBLE_EQ(round_e4m3(1.1875), 1.25);  // halfway between 1.125 and 1.25: even
  EXPECT_DOUBLE_EQ(round_e4m3(300.0), 288.0);  // quantum 32 above 256
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    const double v = e4m3_to_double(static_cast<std::uint8_t>(b));
    if (b == 0x80) continue;  // -0 encodes as 0x80 too, but compare values
    EXPECT_EQ(double_to_e4m3(v), b) << b;
  }
}

// Logits whose softmax over 4 experts is 0.1, 0.2, 0.3, 0.4.
std::vector<float> softmax_logits() {
  return {std::log(1.0f), std::log(2.0f), std::log(3.0f), std::log(4.0f)};
}

TEST(MoeReferenceRouting, SoftmaxRenormalize) {
  const auto logits = softmax_logits();
  Routing r;
  const RoutingResult out = route_reference(logits.data(), 1, 4, 2, r, nullptr);
  EXPECT_EQ(out.topk_ids, (std::vector<std::int32_t>{3, 2}));
  EXPECT_NEAR(out.topk_weights[0], 4.0 / 7.0, 1e-7);
  EXPECT_NEAR(out.topk_weights[1], 3.0 / 7.0, 1e-7);
}

TEST(MoeReferenceRouting, SoftmaxNoRenormalizeScaled) {
  const auto logits = softmax_logits();
  Routing r;
  r.renormalize = false;
  r.routed_scaling_factor = 2.5;
  const RoutingResult out = route_reference(logits.data(), 1, 4, 2, r, nullptr);
  EXPECT_NEAR(out.topk_weights[0], 1.0, 1e-7);
  EXPECT_NEAR(out.topk_weights[1], 0.75, 1e-7);
}

TEST(MoeReferenceRouting, SoftmaxTieGoesToSmallerId) {
  const std::vector<float> logits = {0, 1, 1, 0};
  const RoutingResult out = route_reference(logits.data(), 1, 4, 1, Routing{}, nullptr);
  EXPECT_EQ(out.topk_ids[0], 1);
  EXPECT_DOUBLE_EQ(out.topk_weights[0], 1.0);
}

// NaN choice scores lose to every number, as in the routing kernel (kernels/routing.cuh):
// sigmoid keeps a NaN logit's expert out; softmax spreads one NaN over the row, which then has
// no finite score and takes experts 0..topk-1 (weights NaN); an all -inf row does the same.
TEST(MoeReferenceRouting, NanScoresLose) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Routing sig;
  sig.scoring = "sigmoid";
  const std::vector<float> one_nan = {nan, 1.0f, 3.0f, 2.0f};
  EXPECT_EQ(route_reference(one_nan.data(), 1, 4, 2, sig, nullptr).topk_ids,
            (std::vector<std::int32_t>{2, 3}));
  const RoutingResult soft = route_reference(one_nan.data(), 1, 4, 2, Routing{}, nullptr);
  EXPECT_EQ(soft.topk_ids, (std::vector<std::int32_t>{0, 1}));
  EXPECT_TRUE(std::isnan(soft.topk_weights[0]));
  const std::vector<float> masked = {-inf, -inf, -inf, -inf};
  EXPECT_EQ(route_reference(masked.data(), 1, 4, 2, sig, nullptr).topk_ids,
            (std::vector<std::int32_t>{0, 1}));
}

float logit(double s) { return static_cast<float>(std::log(s / (1 - s))); }

// Sigmoid scoring over 4 groups (of 2 experts in these tests), 2 kept, with or without a
// correction bias (DeepSeek-style grouped routing at toy size).
Routing grouped_sigmoid(bool bias) {
  Routing r;
  r.scoring = "sigmoid";
  r.n_group = 4;
  r.topk_group = 2;
  r.correction_bias = bias;
  return r;
}

// 8 experts in 4 groups of 2. Sigmoid scores s and a bias that lifts expert 6.
TEST(MoeReferenceRouting, GroupedSigmoidWithBias) {
  const std::vector<double> s = {0.9, 0.1, 0.6, 0.6, 0.8, 0.3, 0.2, 0.7};
  std::vector<float> logits;
  for (double v : s) logits.push_back(logit(v));
  const std::vector<float> bias = {0, 0, 0, 0, 0, 0, 0.5f, 0};
  Routing r = grouped_sigmoid(true);
  r.routed_scaling_factor = 2.5;
  // choice c = s + bias = .9 .1 | .6 .6 | .8 .3 | .7 .7; group top-2 sums 1.0, 1.2, 1.1, 1.4:
  // groups 3 and 1 stay, so expert 0 (0.9) is out; top-2 of {2,3,6,7} = 6, 7 (tie -> 6 first).
  const RoutingResult out = route_reference(logits.data(), 1, 8, 2, r, bias.data());
  EXPECT_EQ(out.topk_ids, (std::vector<std::int32_t>{6, 7}));
  // weights from the unbiased scores 0.2, 0.7, renormalized, times 2.5.
  EXPECT_NEAR(out.topk_weights[0], 0.2 / 0.9 * 2.5, 1e-6);
  EXPECT_NEAR(out.topk_weights[1], 0.7 / 0.9 * 2.5, 1e-6);
  EXPECT_TRUE(std::isinf(out.choice[0]));  // masked
}

TEST(MoeReferenceRouting, GroupedWithoutBiasUsesGroupMax) {
  const std::vector<double> s = {0.9, 0.1, 0.6, 0.6, 0.8, 0.3, 0.2, 0.7};
  std::vector<float> logits;
  for (double v : s) logits.push_back(logit(v));
  Routing r = grouped_sigmoid(false);
  // group maxima .9 .6 .8 .7 -> groups 0 and 2 -> experts 0 (0.9) and 4 (0.8).
  const RoutingResult out = route_reference(logits.data(), 1, 8, 2, r, nullptr);
  EXPECT_EQ(out.topk_ids, (std::vector<std::int32_t>{0, 4}));
  EXPECT_NEAR(out.topk_weights[0], 0.9 / 1.7, 1e-6);
  const std::int32_t ids[2] = {4, 0};
  const auto w = routing_weights_for(logits.data(), 8, ids, 2, r);
  EXPECT_NEAR(w[0], 0.8 / 1.7, 1e-6);
}

// Groups whose score is -inf or NaN still fill the topk_group kept places, smaller id first
// (the routing kernel once kept fewer groups there), and a NaN choice never sets a group's max.
TEST(MoeReferenceRouting, DegenerateGroupsStillFillTheKeptPlaces) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 8 experts in 4 groups of 2, sigmoid with bias 0, keep 2 groups, topk 3. Group 0 .3 .3
  // (sum .6); groups 1..3 one finite choice and a NaN (sum NaN: -inf). Kept: 0 and 1 (the
  // smallest id among the -inf groups); picks 2 (.9), 0, 1.
  std::vector<float> logits = {logit(0.3), logit(0.3), logit(0.9), nan,
                               nan,        logit(0.8), logit(0.7), nan};
  const std::vector<float> bias(8, 0.f);
  Routing r = grouped_sigmoid(true);
  RoutingResult out = route_reference(logits.data(), 1, 8, 3, r, bias.data());
  EXPECT_EQ(out.topk_ids, (std::vector<std::int32_t>{2, 0, 1}));
  // -inf groups tie exactly: keeping group 2 instead of 1 (picks 5, 0, 1) is no near-tie.
  const std::int32_t other_group[3] = {5, 0, 1};
  EXPECT_FALSE(routing_near_tie(out, 0, other_group, 8, 3, r, 1e-5));
  const std::int32_t same[3] = {0, 1, 2};
  EXPECT_TRUE(routing_near_tie(out, 0, same, 8, 3, r, 1e-5));
  // Without a bias a group scores its largest choice, NaN skipped wherever it stands: group 2's
  // NaN first element does not hide its .8 (groups kept: 1 (.9) and 2 (.8)).
  r.correction_bias = false;
  out = route_reference(logits.data(), 1, 8, 3, r, nullptr);
  EXPECT_EQ(out.topk_ids[0], 2);
  EXPECT_EQ(out.topk_ids[1], 5);
  EXPECT_NEAR(out.group_score[2], 0.8, 1e-6);
}

// A kernel's selection may differ from the reference only at a near-tie: of experts (picks
// within the tolerance of the k-th choice) or of groups (a group whose score is within the
// tolerance of the topk_group-th best, and the picks the top-k over the groups they come from).
TEST(MoeReferenceRouting, NearTiesOfExpertsAndOfGroups) {
  // 8 experts in 4 groups of 2, sigmoid, bias, topk 2, topk_group 2. Choices (s + bias):
  // .9 .1 | .6 .6 | .55 .55 | .7 .7; group sums 1.0, 1.2, 1.1, 1.4 -> groups 3 and 1 stay;
  // the reference picks 6, 7 (c = .7, .7).
  std::vector<double> s = {0.9, 0.1, 0.6, 0.6, 0.55, 0.55, 0.7, 0.7};
  std::vector<float> logits;
  for (double v : s) logits.push_back(logit(v));
  const std::vector<float> bias(8, 0.f);
  Routing r = grouped_sigmoid(true);
  RoutingResult ref = route_reference(logits.data(), 1, 8, 2, r, bias.data());
  ASSERT_EQ(ref.topk_ids, (std::vector<std::int32_t>{6, 7}));
  const std::int32_t same[2] = {7, 6};
  EXPECT_TRUE(routing_near_tie(ref, 0, same, 8, 2, r, 1e-5));
  const std::int32_t wrong_expert[2] = {6, 2};  // .6 against a k-th choice of .7: not a tie
  EXPECT_FALSE(routing_near_tie(ref, 0, wrong_expert, 8, 2, r, 1e-5));
  const std::int32_t other_group[2] = {6, 4};  // group 2 (1.1) is not near group 1 (1.2)
  EXPECT_FALSE(routing_near_tie(ref, 0, other_group, 8, 2, r, 1e-5));
  // Groups 1 and 2 tied up to 1e-7 (1.2 and 1.2 + 1e-7), topk 3: the reference keeps groups 3
  // and 2 and picks 6, 7, 4; the other way of the tie keeps 3 and 1 and picks 6, 7, 2.
  s = {0.9, 0.1, 0.6, 0.6, 0.6 + 5e-8, 0.6 + 5e-8, 0.7, 0.7};
  logits.clear();
  for (double v : s) logits.push_back(logit(v));
  ref = route_reference(logits.data(), 1, 8, 3, r, bias.data());
  ASSERT_EQ(ref.topk_ids, (std::vector<std::int32_t>{6, 7, 4}));
  const std::int32_t flipped[3] = {6, 7, 2};
  EXPECT_TRUE(routing_near_tie(ref, 0, flipped, 8, 3, r, 1e-5));
  const std::int32_t three_groups[3] = {6, 2, 4};  // groups 3, 1 and 2: more than topk_group
  EXPECT_FALSE(routing_near_tie(ref, 0, three_groups, 8, 3, r, 1e-5));
  const std::int32_t misses_7[3] = {6, 2, 3};  // 7 (0.7) left out for 3 (0.6): not a tie
  EXPECT_FALSE(routing_near_tie(ref, 0, misses_7, 8, 3, r, 1e-5));
  const std::int32_t without_best_group[3] = {2, 3, 4};  // group 3 (1.4) must stay
  EXPECT_FALSE(routing_near_tie(ref, 0, without_best_group, 8, 3, r, 1e-5));
  const std::int32_t far_group[3] = {6, 7, 0};  // group 0 (1.0) ties with nothing
  EXPECT_FALSE(routing_near_tie(ref, 0, far_group, 8, 3, r, 1e-5));
  // Picks from fewer groups than topk_group: the kernel kept another group too, and whichever
  // near-tied one it was holds a choice the picks must include. Groups 0 (1.0 + 0.5 = 1.5) and
  // 1, 2 tied at 0.9 + 0.0: topk_group 2, topk 2. Picking both of group 0 (1.0, 0.5) leaves out
  // a 0.9 from the second kept group, whichever it was.
  s = {0.5, 0.25, 0.45, 0.0001, 0.45, 0.0001, 0.0001, 0.0001};
  logits.clear();
  for (double v : s) logits.push_back(logit(v));
  const std::vector<float> lift = {0.5f, 0.25f, 0.45f, 0.f, 0.45f, 0.f, 0.f, 0.f};  // c = 2s
  ref = route_reference(logits.data(), 1, 8, 2, r, lift.data());
  const std::int32_t one_group[2] = {0, 1};
  EXPECT_FALSE(routing_near_tie(ref, 0, one_group, 8, 2, r, 1e-5));
  const std::int32_t either_tie[2] = {0, 2};
  EXPECT_TRUE(routing_near_tie(ref, 0, either_tie, 8, 2, r, 1e-5));
  const std::int32_t other_tie[2] = {0, 4};
  EXPECT_TRUE(routing_near_tie(ref, 0, other_tie, 8, 2, r, 1e-5));
}

TEST(MoeReferenceRouting, RejectsBadGroups) {
  const std::vector<float> logits(8, 0.f);
  Routing r;
  r.n_group = 3;
  EXPECT_THROW(route_reference(logits.data(), 1, 8, 2, r, nullptr), InputError);
}

// Rank 1 of EP holds global experts 4..7 (E = 4 local). Slots 2 and 5 go to rank 0.
TEST(MoeReferenceAlign, ExpertParallelWithPadding) {
  const std::vector<std::int32_t> ids = {4, 5, 0, 4, 7, 1};  // M=3, topk=2
  const Alignment a = align_reference(ids.data(), 3, 2, 4, 1, 4);
  const std::int32_t S = 6;  // sentinel M*topk
  EXPECT_EQ(a.num_tokens_post_padded, 12);
  ASSERT_EQ(a.sorted_token_ids.size(), 20u);  // 6 + min(4,6)*3 = 18, rounded up to 20
  const std::vector<std::int32_t> head(a.sorted_token_ids.begin(), a.sorted_token_ids.begin() + 12);
  EXPECT_EQ(head, (std::vector<std::int32_t>{0, 3, S, S, 1, S, S, S, 4, S, S, S}));
  EXPECT_EQ(a.expert_ids, (std::vector<std::int32_t>{0, 1, 3, -1, -1}));
  EXPECT_EQ(max_num_tokens_padded(1, 8, 256, 64), 512);  // 8 + 8*63 = 512
}

TEST(MoeReferenceAlign, CompareAcceptsAnyOrderWithinExpert) {
  const std::vector<std::int32_t> ids = {4, 5, 0, 4, 7, 1};
  const Alignment ref = align_reference(ids.data(), 3, 2, 4, 1, 4);
  Alignment got = ref;
  std::swap(got.sorted_token_ids[0], got.sorted_token_ids[1]);
  EXPECT_EQ(compare_alignment(got, ref, 3, 2), "");
  got.sorted_token_ids[4] = 6;  // slot 1 lost
  EXPECT_NE(compare_alignment(got, ref, 3, 2), "");
  got = ref;
  got.expert_ids[1] = 2;
  EXPECT_NE(compare_alignment(got, ref, 3, 2).find("expert_ids[1]"), std::string::npos);
}

TEST(MoeReferenceAlign, EveryLocalSlotOnceAtScale) {
  const int M = 5000, topk = 8, E = 64;
  std::vector<std::int32_t> ids(M * topk);
  for (int i = 0; i < M * topk; ++i) ids[i] = (i * 37 + i / 7) % 128;  // half on rank 0
  const Alignment a = align_reference(ids.data(), M, topk, E, 0, 16);
  std::set<std::int32_t> seen;
  for (std::int32_t i = 0; i < a.num_tokens_post_padded; ++i) {
    const std::int32_t s = a.sorted_token_ids[i];
    if (s == M * topk) continue;
    EXPECT_TRUE(seen.insert(s).second);
    EXPECT_EQ(ids[s], a.expert_ids[i / 16]);
  }
  int local = 0;
  for (std::int32_t id : ids) local += id < E;
  EXPECT_EQ(static_cast<int>(seen.size()), local);
  EXPECT_EQ(a.num_tokens_post_padded % 16, 0);
}

TEST(MoeReferenceQuant, GroupScalesAndValues) {
  const std::vector<double> x = {1, -2, 0.5, 0.25, 0, 0, 0, 0};
  std::vector<double> deq(8), scale(2);
  quant_fp8_group_reference(x.data(), 1, 8, 4, deq.data(), scale.data());
  EXPECT_NEAR(scale[0], 2.0 / 448, 1e-9);
  EXPECT_NEAR(scale[1], 1e-10 / 448, 1e-18);  // all-zero group: floor
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(deq[i], x[i], 1e-7);  // 224, -448, 112, 56 exact
  EXPECT_EQ(deq[5], 0.0);
}

TEST(MoeReferenceQuant, TensorScale) {
  const std::vector<double> x = {3, -448 * 3.0 / 448, 1.3};
  std::vector<double> deq(3);
  const double s = quant_fp8_tensor_reference(x.data(), 3, deq.data());
  EXPECT_NEAR(s, 3.0 / 448, 1e-9);
  EXPECT_NEAR(deq[0], 3.0, 1e-7);
  // 1.3 / s = 194.13 -> quantum 16 in [128, 256) -> 192 -> 1.2857
  EXPECT_NEAR(deq[2], 192 * s, 1e-9);
}

// E=2, N=1, K=2, topk=1; token 0 -> expert 0, token 1 -> expert 1.
TEST(MoeReferenceLayer, TinyBf16ByHand) {
  MoeShape shape;
  shape.E = shape.E_global = 2;
  shape.N = 1;
  shape.K = 2;
  shape.topk = 1;
  auto b = [](double v) { return float_to_bf16(static_cast<float>(v)); };
  // w13[e] = [[gate row], [up row]]; w2[e] = [[k0], [k1]].
  const std::vector<std::uint16_t> w13 = {b(1), b(0), b(0), b(1),    // expert 0: gate=x0, up=x1
                                          b(0), b(1), b(1), b(1)};   // expert 1: gate=x1, up=x0+x1
  const std::vector<std::uint16_t> w2 = {b(1), b(-1), b(2), b(0.5)};
  const std::vector<std::uint16_t> hidden = {b(1), b(2), b(-1), b(3)};
  const std::vector<std::int32_t> ids = {0, 1};
  const std::vector<float> weights = {0.5f, 2.0f};
  HostWeights w;
  w.w13 = w13.data();
  w.w2 = w2.data();
  const auto out = layer_reference(shape, w, 2, hidden.data(), ids.data(), weights.data(), {0, 1});
  const double a0 = silu(1.0) * 2.0;  // token 0
  const double a1 = silu(3.0) * 2.0;  // token 1: gate = 3, up = -1 + 3
  ASSERT_EQ(out.size(), 4u);
  EXPECT_NEAR(out[0], 0.5 * a0, 1e-12);
  EXPECT_NEAR(out[1], -0.5 * a0, 1e-12);
  EXPECT_NEAR(out[2], 2.0 * 2 * a1, 1e-12);
  EXPECT_NEAR(out[3], 2.0 * 0.5 * a1, 1e-12);
  // Under EP rank 1 (experts 2..3) nothing is local: zeros.
  LayerReferenceOptions o;
  o.rank = 1;
  const auto none = layer_reference(shape, w, 2, hidden.data(), ids.data(), weights.data(), {0, 1}, o);
  for (double v : none) EXPECT_EQ(v, 0.0);
}

// Per-tensor fp8: weights with one scale per expert, activations one dynamic scale per tensor.
TEST(MoeReferenceLayer, TinyFp8PerTensor) {
  MoeShape shape;
  shape.E = shape.E_global = 1;
  shape.N = 1;
  shape.K = 2;
  shape.topk = 1;
  shape.dtype = Dtype::fp8_w8a8;
  const std::vector<std::uint8_t> w13 = {double_to_e4m3(2), double_to_e4m3(0), double_to_e4m3(0),
                                         double_to_e4m3(1)};
  const std::vector<std::uint8_t> w2 = {double_to_e4m3(1), double_to_e4m3(-4)};
  const std::vector<float> s13 = {0.5f}, s2 = {0.25f};
  const std::vector<std::uint16_t> hidden = {float_to_bf16(1.0f), float_to_bf16(2.0f)};
  const std::vector<std::int32_t> ids = {0};
  const std::vector<float> weights = {1.0f};
  HostWeights w;
  w.dtype = Dtype::fp8_w8a8;
  w.w13 = w13.data();
  w.w2 = w2.data();
  w.w13_scale = s13.data();
  w.w2_scale = s2.data();
  EXPECT_DOUBLE_EQ(w13_at(shape, w, 0, 0, 0), 1.0);
  EXPECT_DOUBLE_EQ(w2_at(shape, w, 0, 1, 0), -1.0);
  const auto out = layer_reference(shape, w, 1, hidden.data(), ids.data(), weights.data(), {0});
  // x scale 2/448: 1 -> 224, 2 -> 448, exact. gate = 1*1 = 1, up = 2*0.5 = 1; act = silu(1)
  // rounded to bf16 as the kernels store it (0.73046875), quantized with its own scale (exact at
  // the max), out = act * (0.25, -1).
  const double act = bf16_to_float(float_to_bf16(static_cast<float>(silu(1.0))));
  EXPECT_DOUBLE_EQ(act, 0.73046875);
  EXPECT_NEAR(out[0], act * 0.25, 1e-6);
  EXPECT_NEAR(out[1], -act, 1e-6);
}

TEST(MoeReferenceSample, AllRowsOrASortedSample) {
  EXPECT_EQ(sample_rows(5, 256, 1), (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  const auto s = sample_rows(40000, 256, 7);
  ASSERT_EQ(s.size(), 256u);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_EQ(std::set<std::int64_t>(s.begin(), s.end()).size(), 256u);
  EXPECT_LT(s.back(), 40000);
  EXPECT_EQ(sample_rows(40000, 256, 7), s);
}

TEST(MoeReferenceError, FrobeniusAndNaN) {
  EXPECT_NEAR(rel_error({1, 2, 2}, {1, 2, 3}), 1.0 / std::sqrt(14.0), 1e-12);
  EXPECT_TRUE(std::isnan(rel_error({NAN, 0}, {1, 1})));
}

}  // namespace
}  // namespace moetune::moe
