// Internal to the harness: counter-based random numbers. Draw i of stream s under a seed is a
// pure function of (seed, s, i), so a tensor is the same whatever order (or thread) fills it.
#pragma once

#include <cmath>
#include <cstdint>

namespace gdn::harness {

class Random {
 public:
  Random(uint64_t seed, uint64_t stream)
      : key_(mix(mix(seed) ^ (stream * 0xd1b54a32d192ed03ull))) {}

  uint64_t bits(uint64_t i) const { return mix(key_ + i * 0x9e3779b97f4a7c15ull); }
  // Uniform in (0, 1): 53 random bits, offset by half a step so 0 never occurs.
  double uniform(uint64_t i) const { return (double(bits(i) >> 11) + 0.5) * 0x1.0p-53; }
  // N(0, 1) by Box-Muller on draws 2i and 2i + 1.
  double normal(uint64_t i) const {
    const double r = std::sqrt(-2.0 * std::log(uniform(2 * i)));
    return r * std::cos(6.283185307179586 * uniform(2 * i + 1));
  }

 private:
  // splitmix64's finaliser: a bijection on 64 bits that mixes every input bit into every output bit
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t key_;
};

}  // namespace gdn::harness
