// A small deterministic random number generator: the same seed gives the same stream on every machine,
// so a fixed seed gives the same initialization, the same batches and the same loss curve.
#ifndef RMSNORM_REPRO_COMMON_RNG_H_
#define RMSNORM_REPRO_COMMON_RNG_H_

#include <cmath>
#include <cstdint>

namespace repro {

// SplitMix64: a well-mixed 64-bit stream from any seed (Steele, Lea & Flood 2014).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // A generator for a sub-stream: same (seed, stream) -> same numbers, different streams -> unrelated.
  static Rng stream(uint64_t seed, uint64_t stream) { return Rng(mix(seed ^ mix(stream + 0x9E3779B97F4A7C15ull))); }

  uint64_t next_u64() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix(state_);
  }
  // Uniform in [0, n).
  uint64_t below(uint64_t n) { return next_u64() % n; }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  // Standard normal by Box-Muller, computed in double so the result does not depend on libm's float paths.
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

}  // namespace repro

#endif  // RMSNORM_REPRO_COMMON_RNG_H_
