// Scratch memory the kernels borrow for one call, on the calling thread. A buffer is kept for that
// thread's next call (a call should not pay an allocation and its page faults each time) as long as
// the buffers kept by all threads together stay within a process-wide limit; beyond it, a call's
// scratch is freed when the call ends. rmsnorm_release_thread_scratch frees a thread's kept buffers.
#ifndef RMSNORM_SRC_RUNTIME_SCRATCH_H_
#define RMSNORM_SRC_RUNTIME_SCRATCH_H_

#include <cstddef>
#include <cstdint>

namespace rmsnorm::runtime {

// One buffer per use, so that the uses within one call never share memory.
enum class ScratchSlot : int { kParamGradPartials, kGain, kBias, kPairedParams, kQuantizedRows, kCount };

// The bytes of scratch the threads may keep between calls, all threads together. The default is
// kDefaultScratchLimit, or RMSNORM_SCRATCH_BYTES from the environment.
constexpr int64_t kDefaultScratchLimit = int64_t{64} << 20;
void SetScratchLimit(int64_t bytes);
int64_t ScratchLimit();

// Frees the calling thread's kept buffers (none may be borrowed at the time).
void ReleaseThreadScratch();

// A borrowed buffer of the calling thread, returned when the lease ends. Not copyable; one borrow per
// lease.
class ScratchLease {
 public:
  ScratchLease() = default;
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  ~ScratchLease();

  // At least `floats` floats of unspecified contents, valid until the lease ends. Throws std::bad_alloc.
  float* Borrow(ScratchSlot slot, size_t floats);

 private:
  int slot_ = -1;
};

}  // namespace rmsnorm::runtime

#endif  // RMSNORM_SRC_RUNTIME_SCRATCH_H_
