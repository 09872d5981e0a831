// GEMM-phase timing of the grouped expert GEMM (GEMM1 + GEMM2, no routing/alignment/activation),
// cold: a CUDA graph of 16 calls over 16 different routing sets and inputs, replayed; median per
// call. By default a quick check (one shape and M: the graph runs and times something sane).
// With MOETUNE_GEMM_BENCH_OUT=<dir>: the sweep over the anchor shapes at M in {1, 8, 64, 256,
// 1024, 4096} (MOETUNE_GEMM_BENCH_M=1,8 to choose; MOETUNE_GEMM_BENCH_SHAPES=fp8b to keep shapes
// whose name contains it; MOETUNE_GEMM_BENCH_CONFIGS=m64n64k128_g8_w4_s4_sk1,... keeps only those
// candidates) and a candidate set of configs per M, writing <dir>/gemm_speed.jsonl (one record
// per shape, M, stage, config) and <dir>/gemm_speed.md (the best per M against the floor).
// bench/scripts/gemm_speed.sh runs it on a device machine.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cuda/context.hpp"
#include "cuda/driver.hpp"
#include "cuda/jit.hpp"
#include "cuda/kernel_sources.hpp"
#include "moetune/error.hpp"
#include "test_gemm_common.hpp"

namespace moetune::gemm::testing {
namespace {

constexpr int kSets = 16;     // routing sets per graph (one call each)
constexpr int kReplays = 15;  // timed replays (after one warm-up)

std::string cfg_json(const KernelConfig& c) {
  return fmt::format(
      "{{\"BLOCK_SIZE_M\": {}, \"BLOCK_SIZE_N\": {}, \"BLOCK_SIZE_K\": {}, \"GROUP_SIZE_M\": {}, "
      "\"num_warps\": {}, \"num_stages\": {}, \"SPLIT_K\": {}, \"SWAP_AB\": {}}}",
      c.BLOCK_SIZE_M, c.BLOCK_SIZE_N, c.BLOCK_SIZE_K, c.GROUP_SIZE_M, c.num_warps, c.num_stages,
      c.SPLIT_K, c.SWAP_AB);
}

// Candidate configs for M (both stages; the ones a stage cannot run are skipped).
std::vector<KernelConfig> candidates(const MoeShape& s, int64_t M) {
  std::vector<KernelConfig> v;
  const bool fp8 = s.dtype == Dtype::fp8_w8a8;
  if (M <= 16) {
    v.push_back(cfg(16, 64, 64, 1, 4, 6, 4));
    v.push_back(cfg(16, 64, 64, 1, 4, 5, 8));
    v.push_back(cfg(16, 64, 128, 1, 4, 3, 8));
    v.push_back(cfg(16, 64, 128, 1, 4, 5, 4));
    v.push_back(cfg(16, 64, 64, 1, 4, 8, 2));
  }
  if (M <= 256) {
    for (int sk : {1, 2, 4}) v.push_back(cfg(16, 64, 128, 1, 4, 4, sk));
    for (int sk : {1, 2}) v.push_back(cfg(16, 128, 128, 1, 4, 4, sk));
    v.push_back(cfg(16, 128, 128, 1, 8, 5));
    v.push_back(cfg(16, 64, 64, 1, 4, 5));
    v.push_back(cfg(16, 128, 64, 1, 4, 5, 2));
    v.push_back(cfg(32, 64, 128, 1, 4, 4));
    v.push_back(cfg(32, 128, 128, 1, 8, 4));
    // swap-AB (sm_90a): weights as the wgmma's A, 128-byte rows
    const int bk = fp8 ? 128 : 64;
    for (int st : {2, 3, 4, 5}) v.push_back(swapped(cfg(16, 128, bk, 1, 4, st)));
    v.push_back(swapped(cfg(16, 64, bk, 1, 4, 4)));
    v.push_back(swapped(cfg(16, 256, bk, 1, 4, 3)));
    v.push_back(swapped(cfg(16, 256, bk, 1, 8, 4)));
    v.push_back(swapped(cfg(32, 128, bk, 1, 4, 4)));
    v.push_back(swapped(cfg(16, 128, bk, 1, 4, 4, 2)));
  }
  if (M >= 64) {
    // mma.sync tiles
    v.push_back(cfg(64, 64, 128, 8, 4, 4));
    v.push_back(cfg(64, 128, 128, 8, 4, 3));
    v.push_back(cfg(32, 128, 128, 8, 4, 4));
    // wgmma tiles on sm_90a (rows of 128 bytes)
    if (!fp8) {
      v.push_back(cfg(64, 128, 64, 8, 4, 4));
      v.push_back(cfg(64, 256, 64, 8, 4, 4));
      v.push_back(cfg(128, 128, 64, 16, 8, 4));
      v.push_back(cfg(128, 128, 64, 8, 4, 4));
      v.push_back(cfg(128, 256, 64, 16, 8, 3));
      v.push_back(cfg(256, 128, 64, 16, 8, 3));
      v.push_back(cfg(64, 64, 64, 8, 4, 6));
    } else {
      v.push_back(cfg(64, 64, 128, 8, 4, 6));
      v.push_back(cfg(64, 128, 128, 8, 4, 4));
      v.push_back(cfg(128, 64, 128, 8, 4, 4));
      v.push_back(cfg(128, 128, 128, 16, 8, 4));
      v.push_back(cfg(128, 128, 128, 8, 8, 3));
      v.push_back(cfg(64, 128, 128, 1, 4, 5));
      // block fp8 GEMM1 at 3 blocks per SM (tile_math::gemm_wgmma_min_blocks), with s4 above
      for (int st : {2, 3}) v.push_back(cfg(64, 64, 128, 8, 4, st));
      // block fp8: warp-specialized (two consumer warpgroups beside a producer warpgroup)
      for (int st : {4, 5, 6}) v.push_back(cfg(128, 128, 128, 8, 8, st));
      for (int st : {4, 6}) v.push_back(cfg(64, 256, 128, 8, 8, st));
      v.push_back(cfg(64, 128, 128, 8, 8, 5));
      v.push_back(cfg(128, 64, 128, 8, 8, 6));
    }
  }
  return v;
}

// Routing sets and inputs of one (shape, M), aligned for one BLOCK_SIZE_M, on the device.
struct DeviceSet {
  cuda::DeviceBuffer a_up, as_up, a_down, as_down, tw, sorted, eids, ntpp;
  int64_t capacity = 0;
};

struct Sweep {
  MoeShape s;
  std::string name;
  double copy_Bps = 4.23e12;
  cuda::DeviceBuffer w13, w13s, w2, w2s, out_up, out_down, work;
  std::map<int, std::vector<DeviceSet>> sets;  // by BLOCK_SIZE_M

  GemmArgs args(GemmStage st, const DeviceSet& d, int64_t M) const {
    GemmArgs g;
    g.stage = st;
    const bool up = st == GemmStage::up;
    g.a = reinterpret_cast<const void*>((up ? d.a_up : d.a_down).ptr());
    g.a_scale = s.dtype == Dtype::fp8_w8a8 ? (up ? d.as_up : d.as_down).as<const float>() : nullptr;
    g.w = reinterpret_cast<const void*>((up ? w13 : w2).ptr());
    g.w_scale = s.dtype == Dtype::fp8_w8a8 ? (up ? w13s : w2s).as<const float>() : nullptr;
    g.out = reinterpret_cast<void*>((up ? out_up : out_down).ptr());
    g.topk_weights = d.tw.as<const float>();
    g.sorted_token_ids = d.sorted.as<const int32_t>();
    g.expert_ids = d.eids.as<const int32_t>();
    g.num_tokens_post_padded = d.ntpp.as<const int32_t>();
    g.M = M;
    g.max_num_tokens_padded = d.capacity;
    g.workspace = reinterpret_cast<void*>(work.ptr());
    g.workspace_bytes = work.bytes();
    g.workspace_counters_zeroed = true;  // dedicated workspace, zeroed once: no memset timed
    return g;
  }
};

// Median per-call time (seconds) of `enqueue` captured kSets times into one graph.
template <class F>
double time_graph(cuda::Stream& stream, F&& enqueue_all) {
  cuda::Graph graph;
  graph.begin_capture(stream);
  enqueue_all();
  graph.end_capture();
  graph.launch(stream);  // warm-up
  stream.synchronize();
  std::vector<double> t;
  cuda::Event e0, e1;
  for (int r = 0; r < kReplays; ++r) {
    e0.record(stream);
    graph.launch(stream);
    e1.record(stream);
    e1.synchronize();
    t.push_back(cuda::Event::elapsed_ms(e0, e1) * 1e-3 / kSets);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double measure_copy_Bps(cuda::Stream& stream) {
  const std::size_t bytes = std::size_t{2} << 30;
  cuda::DeviceBuffer a(bytes), b(bytes);
  a.fill_u8(1);
  std::vector<double> t;
  cuda::Event e0, e1;
  for (int r = 0; r < 6; ++r) {
    e0.record(stream);
    b.copy_from_async(a, bytes, stream);
    e1.record(stream);
    e1.synchronize();
    t.push_back(cuda::Event::elapsed_ms(e0, e1) * 1e-3);
  }
  std::sort(t.begin(), t.end());
  return 2.0 * bytes / t[t.size() / 2];
}

// Expected active experts' weight bytes (DESIGN roofline, weights only, as ANCHORS' floor).
double weight_bytes_active(const MoeShape& s, int64_t M) {
  const double active = s.E * (1.0 - std::pow(1.0 - static_cast<double>(s.topk) / s.E_global,
                                              static_cast<double>(M)));
  double per = 3.0 * s.N * s.K * weight_bytes(s.dtype);
  if (block_fp8(s)) per += ((2.0 * s.N / 128) * (s.K / 128) + (s.K / 128.0) * (s.N / 128)) * 4;
  return active * per;
}

void run_sweep(const std::string& out_dir, const std::vector<int64_t>& Ms,
               const std::vector<std::pair<std::string, MoeShape>>& shapes, bool quick) {
  std::string why;
  if (!cuda::gpu_available(&why)) GTEST_SKIP() << why;
  cuda::Context::get(0);
  const auto dev = cuda::query_device(0);
  const std::string arch = dev.arch();
  cuda::Stream stream;
  const double copy_Bps = measure_copy_Bps(stream);
  std::ofstream jsonl, md;
  if (!quick) {
    jsonl.open(out_dir + "/gemm_speed.jsonl");
    md.open(out_dir + "/gemm_speed.md");
    md << fmt::format("GPU {} ({}), copy {:.0f} GB/s, kernel hash {}\n\n", dev.name, arch,
                      copy_Bps / 1e9, std::string(cuda::kernel_source_hash()).substr(0, 12));
    md << "| shape | M | best up config | up µs | best down config | down µs | phase µs (graph) | "
          "floor µs | % of floor |\n|---|---|---|---|---|---|---|---|---|\n";
  }
  for (const auto& [name, s] : shapes) {
    // weights once per shape
    Sweep sw;
    sw.s = s;
    sw.name = name;
    {
      HostWeights h13 = make_weights(s, GemmStage::up, 17), h2 = make_weights(s, GemmStage::down, 23);
      sw.w13 = upload(h13.w);
      sw.w13s = upload(h13.w_scale);
      sw.w2 = upload(h2.w);
      sw.w2s = upload(h2.w_scale);
    }
    for (int64_t M : Ms) {
      // compile every candidate first (thread pool), skipping what a stage cannot run
      auto cands = candidates(s, M);
      if (quick && cands.size() > 2) cands.resize(2);
      // MOETUNE_GEMM_BENCH_CONFIGS=m64n64k128_g8_w4_s4_sk1,...: only these (e.g. under ncu).
      if (const char* keep = std::getenv("MOETUNE_GEMM_BENCH_CONFIGS"); keep && *keep) {
        // fmt, not operator+: GCC 12 gives a -Wrestrict false positive on "," + std::string.
        const std::string list = fmt::format(",{},", keep);
        std::erase_if(cands, [&](const KernelConfig& c) {
          return list.find(fmt::format(",{},", config_name(c))) == std::string::npos;
        });
      }
      std::vector<cuda::KernelSpec> specs;
      for (const auto& c : cands)
        for (GemmStage st : {GemmStage::up, GemmStage::down}) try {
            specs.push_back(gemm_kernel_spec(s, c, st, arch));
          } catch (const InputError&) {
          }
      (void)cuda::Jit::instance().compile_many(specs, 0);

      // inputs per routing set (independent of BLOCK_SIZE_M), outputs and workspace
      std::vector<HostInput> in_up, in_down;
      for (int r = 0; r < kSets; ++r) {
        in_up.push_back(make_input(s, GemmStage::up, M, 1000 + r));
        in_down.push_back(make_input(s, GemmStage::down, M, 2000 + r));
      }
      sw.out_up = cuda::DeviceBuffer(static_cast<std::size_t>(M) * s.topk * 2 * s.N * 2);
      sw.out_down = cuda::DeviceBuffer(static_cast<std::size_t>(M) * s.topk * s.K * 2);
      std::size_t ws = 16;
      for (const auto& c : cands)
        for (GemmStage st : {GemmStage::up, GemmStage::down})
          ws = std::max(ws, gemm_workspace_bytes(s, c, st, M));
      sw.work = cuda::DeviceBuffer(ws);
      sw.work.fill_u8(0);
      sw.sets.clear();
      auto sets_for = [&](int BM) -> const std::vector<DeviceSet>& {
        auto it = sw.sets.find(BM);
        if (it != sw.sets.end()) return it->second;
        std::vector<DeviceSet> v(kSets);
        for (int r = 0; r < kSets; ++r) {
          const Routing rt = make_routing(s, M, BM, 500 + r);  // same routing for every BM
          v[r].a_up = upload(in_up[r].a);
          v[r].as_up = upload(in_up[r].a_scale);
          v[r].a_down = upload(in_down[r].a);
          v[r].as_down = upload(in_down[r].a_scale);
          v[r].tw = upload(rt.topk_weights);
          v[r].sorted = upload(rt.sorted_token_ids);
          v[r].eids = upload(rt.expert_ids);
          v[r].ntpp = upload(std::vector<int32_t>{rt.num_tokens_post_padded});
          v[r].capacity = rt.capacity;
        }
        return sw.sets.emplace(BM, std::move(v)).first->second;
      };

      struct Best {
        double t = 1e30;
        KernelConfig c;
      };
      std::map<int, Best> best_up, best_down;  // by BLOCK_SIZE_M
      for (const auto& c : cands) {
        const auto& sets = sets_for(c.BLOCK_SIZE_M);
        for (GemmStage st : {GemmStage::up, GemmStage::down}) {
          double t = 0;
          try {
            (void)gemm_kernel_spec(s, c, st, arch);
            launch_gemm(s, c, sw.args(st, sets[0], M), stream);  // throws InputError if no fit
            t = time_graph(stream, [&] {
              for (int r = 0; r < kSets; ++r) launch_gemm(s, c, sw.args(st, sets[r], M), stream);
            });
          } catch (const InputError& e) {
            std::printf("[skip] %s M=%lld %s %s: %s\n", name.c_str(), static_cast<long long>(M),
                        to_string(st), config_name(c).c_str(), e.what());
            continue;
          }
          auto& b = (st == GemmStage::up ? best_up : best_down)[c.BLOCK_SIZE_M];
          if (t < b.t) b = {t, c};
          if (jsonl.is_open())
            jsonl << fmt::format(
                "{{\"shape\": \"{}\", \"M\": {}, \"stage\": \"{}\", \"config\": {}, \"mode\": "
                "\"cold\", \"sets\": {}, \"replays\": {}, \"median_us\": {:.3f}}}\n",
                name, M, to_string(st), cfg_json(c), kSets, kReplays, t * 1e6);
          std::printf("[time] %-18s M=%-5lld %-4s %-28s %9.2f us\n", name.c_str(),
                      static_cast<long long>(M), to_string(st), config_name(c).c_str(), t * 1e6);
          std::fflush(stdout);
        }
      }
      // best pair sharing BLOCK_SIZE_M, timed together as the GEMM phase
      int bm_best = -1;
      double sum_best = 1e30;
      for (const auto& [bm, u] : best_up) {
        auto d = best_down.find(bm);
        if (d == best_down.end()) continue;
        if (u.t + d->second.t < sum_best) {
          sum_best = u.t + d->second.t;
          bm_best = bm;
        }
      }
      ASSERT_GE(bm_best, 0);
      const auto& cu = best_up[bm_best].c;
      const auto& cd = best_down[bm_best].c;
      const auto& sets = sets_for(bm_best);
      const double phase = time_graph(stream, [&] {
        for (int r = 0; r < kSets; ++r) {
          launch_gemm(s, cu, sw.args(GemmStage::up, sets[r], M), stream);
          launch_gemm(s, cd, sw.args(GemmStage::down, sets[r], M), stream);
        }
      });
      const double floor_s = weight_bytes_active(s, M) / copy_Bps;
      std::printf("[phase] %-18s M=%-5lld up %s (%.2f) + down %s (%.2f) = %.2f us graph; floor "
                  "%.2f us (%.0f%%)\n",
                  name.c_str(), static_cast<long long>(M), config_name(cu).c_str(),
                  best_up[bm_best].t * 1e6, config_name(cd).c_str(), best_down[bm_best].t * 1e6,
                  phase * 1e6, floor_s * 1e6, 100 * floor_s / phase);
      std::fflush(stdout);
      EXPECT_GT(phase, 0);
      EXPECT_LT(phase, 1.0);
      if (md.is_open()) {
        md << fmt::format("| {} | {} | {} | {:.1f} | {} | {:.1f} | {:.1f} | {:.1f} | {:.0f}% |\n",
                          name, M, config_name(cu), best_up[bm_best].t * 1e6, config_name(cd),
                          best_down[bm_best].t * 1e6, phase * 1e6, floor_s * 1e6,
                          100 * floor_s / phase);
        md.flush();
        jsonl << fmt::format(
            "{{\"shape\": \"{}\", \"M\": {}, \"stage\": \"phase\", \"up_config\": {}, "
            "\"down_config\": {}, \"mode\": \"cold\", \"sets\": {}, \"replays\": {}, "
            "\"median_us\": {:.3f}, \"floor_us\": {:.3f}, \"copy_GBps\": {:.1f}}}\n",
            name, M, cfg_json(cu), cfg_json(cd), kSets, kReplays, phase * 1e6, floor_s * 1e6,
            copy_Bps / 1e9);
        jsonl.flush();
      }
    }
  }
}

TEST(GemmSpeed, PhaseGraphTimes) {
  const char* out = std::getenv("MOETUNE_GEMM_BENCH_OUT");
  const std::vector<std::pair<std::string, MoeShape>> anchors = {
      {"qwen3.5-tp4-bf16", make_shape(256, 256, 3072, 8, Dtype::bf16, false)},
      {"qwen3.5-tp4-fp8b", make_shape(256, 256, 3072, 8, Dtype::fp8_w8a8, true)},
      {"dsv3-tp8-fp8b", make_shape(256, 256, 7168, 8, Dtype::fp8_w8a8, true)},
  };
  if (out == nullptr || *out == 0) {
    run_sweep("", {8}, {anchors[0]}, true);
    return;
  }
  std::vector<int64_t> Ms = {1, 8, 64, 256, 1024, 4096};
  if (const char* m = std::getenv("MOETUNE_GEMM_BENCH_M")) {
    Ms.clear();
    std::string t(m);
    for (std::size_t p = 0; p < t.size();) {
      const std::size_t q = t.find(',', p);
      Ms.push_back(std::stoll(t.substr(p, q - p)));
      if (q == std::string::npos) break;
      p = q + 1;
    }
  }
  std::vector<std::pair<std::string, MoeShape>> shapes;  // MOETUNE_GEMM_BENCH_SHAPES: substring
  const char* only = std::getenv("MOETUNE_GEMM_BENCH_SHAPES");
  for (const auto& a : anchors)
    if (only == nullptr || *only == 0 || a.first.find(only) != std::string::npos) shapes.push_back(a);
  run_sweep(out, Ms, shapes, false);
}

}  // namespace
}  // namespace moetune::gemm::testing
