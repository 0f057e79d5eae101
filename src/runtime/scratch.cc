#include "runtime/scratch.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>

namespace rmsnorm::runtime {
namespace {

int64_t DefaultScratchLimit() {
  if (const char* env = std::getenv("RMSNORM_SCRATCH_BYTES")) {
    char* end = nullptr;
    const long long bytes = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && bytes >= 0) return bytes;
  }
  return kDefaultScratchLimit;
}

std::atomic<int64_t>& Limit() {
  static std::atomic<int64_t> limit{DefaultScratchLimit()};
  return limit;
}

// The bytes all threads keep between calls. A buffer counts from the end of the call that first
// kept it until it is freed.
std::atomic<int64_t> kept_bytes{0};

// Scratch starts on a cache line. A backward's per-block dweight partials are read and written a vector
// at a time beside its streams: from new[]'s 16-byte alignment, every other AVX2 vector of them straddled
// two lines.
constexpr std::align_val_t kScratchAlignment{64};

struct AlignedDelete {
  void operator()(float* p) const { ::operator delete[](p, kScratchAlignment); }
};

struct Buffer {
  std::unique_ptr<float[], AlignedDelete> data;
  size_t floats = 0;
  bool counted = false;  // part of kept_bytes

  int64_t bytes() const { return int64_t(floats * sizeof(float)); }
  void Free() {
    if (counted) kept_bytes.fetch_sub(bytes());
    data.reset();
    floats = 0;
    counted = false;
  }
  // Counts the buffer as kept if the limit allows, else frees it.
  void KeepOrFree() {
    if (counted) {
      if (kept_bytes.load() > Limit().load()) Free();  // the limit was lowered since
      return;
    }
    int64_t kept = kept_bytes.load();
    do {
      if (kept + bytes() > Limit().load()) return Free();
    } while (!kept_bytes.compare_exchange_weak(kept, kept + bytes()));
    counted = true;
  }
};

// A thread's buffers; freed, and uncounted, when the thread exits.
struct ThreadBuffers {
  Buffer slots[int(ScratchSlot::kCount)];
  ~ThreadBuffers() {
    for (Buffer& b : slots) b.Free();
  }
};

ThreadBuffers& ThisThread() {
  static thread_local ThreadBuffers buffers;
  return buffers;
}

}  // namespace

void SetScratchLimit(int64_t bytes) { Limit().store(bytes); }
int64_t ScratchLimit() { return Limit().load(); }

void ReleaseThreadScratch() {
  for (Buffer& b : ThisThread().slots) b.Free();
}

float* ScratchLease::Borrow(ScratchSlot slot, size_t floats) {
  Buffer& b = ThisThread().slots[int(slot)];
  if (b.floats < floats) {
    b.Free();
    b.data.reset(static_cast<float*>(::operator new[](floats * sizeof(float), kScratchAlignment)));
    b.floats = floats;
  }
  slot_ = int(slot);
  return b.data.get();
}

ScratchLease::~ScratchLease() {
  if (slot_ >= 0) ThisThread().slots[slot_].KeepOrFree();
}

}  // namespace rmsnorm::runtime
