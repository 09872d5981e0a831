// Host-side parallel loops for the fp64 references and the random inputs of check and bench
// (internal to src/moe).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace moetune::moe {

// Random inputs are drawn in this many chunks, each seeded from its index, whatever the machine's
// core count, so one seed gives the same inputs everywhere. 16 is the split that the one-GPU
// device machines' 16 cores (device README) gave when the chunks were per thread, so the inputs
// behind the figures already recorded are kept. The cost: at most 16 threads fill them (on a
// 128-core host DeepSeek-V3's check weights take about 2 s more).
inline constexpr int kSeedChunks = 16;

// One thread per core, at least one.
inline int hardware_threads() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// f(i) for every i in [0, n), handed out one at a time to up to `threads` threads (<= 0: one per
// core; never more than n). The calling thread works too. If any f throws, no further i is
// handed out and the first exception is rethrown here once every thread has joined.
template <typename F>
void parallel_for(std::int64_t n, int threads, F&& f) {
  if (threads <= 0) threads = hardware_threads();
  threads = static_cast<int>(std::min<std::int64_t>(threads, std::max<std::int64_t>(n, 1)));
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    try {
      for (std::int64_t i; (i = next.fetch_add(1)) < n;) f(i);
    } catch (...) {
      next.store(n);  // the others stop at their next index
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

// [0, n) in max(chunks, 1) contiguous ranges of ceil(n / chunks): f(lo, hi, chunk index) for
// each non-empty one, in parallel on up to `threads` threads (<= 0: one per core). The ranges
// depend on n and chunks only, so per-chunk seeds (kSeedChunks) do not depend on the machine.
template <typename F>
void parallel_chunks(std::int64_t n, int chunks, F&& f, int threads = 0) {
  chunks = std::max(chunks, 1);
  const std::int64_t size = (n + chunks - 1) / chunks;
  parallel_for(chunks, threads, [&](std::int64_t c) {
    const std::int64_t lo = c * size, hi = std::min(n, lo + size);
    if (lo < hi) f(lo, hi, static_cast<std::uint64_t>(c));
  });
}

}  // namespace moetune::moe
