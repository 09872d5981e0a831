// SplitMix64 (Steele, Lea & Flood, OOPSLA 2014; constants of Vigna's reference code): one 64-bit
// state, a full-period generator good enough for test data and for seeding or hashing. The same
// sequence on every machine, so a seed reproduces a check's or a bench's inputs bit for bit.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace moetune {

// Advances `state` and returns the next output (also a strong 64-bit mix of the old state).
constexpr std::uint64_t splitmix64_next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The generator as a value: `SplitMix64 r{seed}`; `s` is the state.
struct SplitMix64 {
  std::uint64_t s;
  std::uint64_t next() { return splitmix64_next(s); }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  double normal() {  // Box-Muller, one of the pair
    const double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

}  // namespace moetune
