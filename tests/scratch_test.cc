// Bounded memory: the scratch the library keeps between calls stays within the process-wide limit
// however many threads call it, a thread can free its own, and the limit never changes a result.
// Heap use is measured by replacing the global operator new and delete in this program, which the
// library's allocations resolve to as well.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "rmsnorm/rmsnorm.h"

namespace {

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};
std::atomic<size_t> least_alignment_asked{0};  // over the aligned requests, 0 before the first

// The bytes asked for, kept in a header before the block: malloc's own rounding is not the library's.
// The header is a whole alignment unit, so the block keeps the alignment asked for.
constexpr size_t kHeader = alignof(std::max_align_t);

size_t HeaderBytes(size_t alignment) { return alignment > kHeader ? alignment : kHeader; }

void* Allocate(size_t n, size_t alignment = kHeader) {
  const size_t header = HeaderBytes(alignment);
  const size_t total = (header + n + header - 1) / header * header;  // aligned_alloc wants a multiple
  auto* block = static_cast<unsigned char*>(std::aligned_alloc(header, total));
  if (block == nullptr) throw std::bad_alloc();
  std::memcpy(block, &n, sizeof n);
  const int64_t live = live_bytes.fetch_add(int64_t(n)) + int64_t(n);
  int64_t peak = peak_bytes.load();
  while (live > peak && !peak_bytes.compare_exchange_weak(peak, live)) {
  }
  return block + header;
}

void Deallocate(void* p, size_t alignment = kHeader) {
  if (p == nullptr) return;
  unsigned char* block = static_cast<unsigned char*>(p) - HeaderBytes(alignment);
  size_t n;
  std::memcpy(&n, block, sizeof n);
  live_bytes.fetch_sub(int64_t(n));
  std::free(block);
}

}  // namespace

void* operator new(size_t n) { return Allocate(n); }
void* operator new[](size_t n) { return Allocate(n); }
void operator delete(void* p) noexcept { Deallocate(p); }
void operator delete[](void* p) noexcept { Deallocate(p); }
void operator delete(void* p, size_t) noexcept { Deallocate(p); }
void operator delete[](void* p, size_t) noexcept { Deallocate(p); }
// The library's scratch asks for cache-line alignment.
void* operator new(size_t n, std::align_val_t a) { return Allocate(n, size_t(a)); }
void* operator new[](size_t n, std::align_val_t a) {
  size_t least = least_alignment_asked.load();
  while ((least == 0 || size_t(a) < least) && !least_alignment_asked.compare_exchange_weak(least, size_t(a))) {
  }
  return Allocate(n, size_t(a));
}
void operator delete(void* p, std::align_val_t a) noexcept { Deallocate(p, size_t(a)); }
void operator delete[](void* p, std::align_val_t a) noexcept { Deallocate(p, size_t(a)); }
void operator delete(void* p, size_t, std::align_val_t a) noexcept { Deallocate(p, size_t(a)); }
void operator delete[](void* p, size_t, std::align_val_t a) noexcept { Deallocate(p, size_t(a)); }

namespace {

// Every thread waits until `count` threads have arrived, once per phase.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void ArriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t phase = phase_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++phase_;
      done_.notify_all();
    } else {
      done_.wait(lock, [&] { return phase_ != phase; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  const int count_;
  int arrived_ = 0;
  int64_t phase_ = 0;
};

// One thread's backward: 64 rows of 4096 f32 run in 8 row blocks, so the dweight and dbias partials
// take 2 x 8 x 4096 floats (256 KiB) of scratch, and weight_offset a copy of the gain (16 KiB).
struct Backward {
  static constexpr int64_t kRows = 64, kCols = 4096;
  std::vector<float> dy, x, weight, rstd, dx, dweight, dbias;

  explicit Backward(int seed)
      : dy(kRows * kCols), x(kRows * kCols), weight(kCols), rstd(kRows, 0.0f), dx(kRows * kCols),
        dweight(kCols), dbias(kCols) {
    for (int64_t i = 0; i < kRows * kCols; ++i) {
      x[size_t(i)] = float((i * 7 + seed) % 23) - 11.0f;
      dy[size_t(i)] = float((i * 5 + seed) % 17) * 0.125f - 1.0f;
    }
    for (int64_t i = 0; i < kCols; ++i) weight[size_t(i)] = float(i % 5) * 0.25f;
  }

  rmsnorm_status Run() {
    rmsnorm_config config = rmsnorm_config_init(kRows, kCols);
    config.weight_offset = 0.5f;
    return rmsnorm_backward(&config, dy.data(), x.data(), weight.data(), nullptr, dx.data(), dweight.data(),
                            dbias.data());
  }

  // What a call may hold while it runs (the header's bound): 2 bytes per element of x and 12 a column.
  static int64_t ScratchBoundOfACall() { return 2 * kRows * kCols + 12 * kCols; }
};

class Scratch : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_limit_ = rmsnorm_get_scratch_limit();
    saved_threads_ = rmsnorm_get_num_threads();
    rmsnorm_set_num_threads(1);  // the calling threads' own scratch only, no pool
    rmsnorm_release_thread_scratch();
  }
  void TearDown() override {
    rmsnorm_set_scratch_limit(saved_limit_);
    rmsnorm_set_num_threads(saved_threads_);
  }
  int64_t saved_limit_ = 0;
  int saved_threads_ = 0;
};

TEST_F(Scratch, SixteenThreadsKeepNoMoreThanTheLimit) {
  constexpr int kThreads = 16;
  constexpr int64_t kLimit = int64_t{1} << 20;  // a quarter of what 16 threads would otherwise keep
  // A first call per thread under a limit of 0 keeps no scratch, only what a thread allocates once
  // (the C++ runtime's per-thread bookkeeping), which the baseline then includes.
  ASSERT_EQ(rmsnorm_set_scratch_limit(0), RMSNORM_OK);

  std::vector<Backward> calls;
  for (int t = 0; t < kThreads; ++t) calls.emplace_back(t);
  Barrier barrier(kThreads + 1);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (calls[size_t(t)].Run() != RMSNORM_OK) ++failures;
      barrier.ArriveAndWait();  // 1: the tensors and threads exist, and each thread has called once
      barrier.ArriveAndWait();  // 1b: the baseline is measured and the limit set
      for (int repeat = 0; repeat < 3; ++repeat)
        if (calls[size_t(t)].Run() != RMSNORM_OK) ++failures;
      barrier.ArriveAndWait();  // 2: every call has returned; the threads live on
      barrier.ArriveAndWait();  // 3: measured
      rmsnorm_release_thread_scratch();
      barrier.ArriveAndWait();  // 4: released
      barrier.ArriveAndWait();  // 5: measured (a returning thread frees its std::thread state)
    });
  }
  barrier.ArriveAndWait();
  const int64_t baseline = live_bytes.load();
  peak_bytes.store(baseline);
  EXPECT_EQ(rmsnorm_set_scratch_limit(kLimit), RMSNORM_OK);  // not ASSERT: the threads wait
  barrier.ArriveAndWait();
  barrier.ArriveAndWait();
  const int64_t kept = live_bytes.load() - baseline;
  const int64_t peak = peak_bytes.load() - baseline;
  barrier.ArriveAndWait();
  barrier.ArriveAndWait();
  const int64_t after_release = live_bytes.load() - baseline;
  barrier.ArriveAndWait();
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(failures.load(), 0) << rmsnorm_last_error();
  EXPECT_GT(kept, 0) << "the limit admits a few threads' scratch";
  EXPECT_LE(kept, kLimit) << "kept between calls, all threads together";
  EXPECT_LE(peak, kLimit + kThreads * Backward::ScratchBoundOfACall())
      << "beyond the tensors: the kept scratch plus what the calls in flight hold";
  EXPECT_EQ(after_release, 0) << "each thread released its scratch";
}

TEST_F(Scratch, ReleaseFreesTheCallingThreadsScratch) {
  Backward call(1);
  const int64_t baseline = live_bytes.load();
  ASSERT_EQ(call.Run(), RMSNORM_OK) << rmsnorm_last_error();
  EXPECT_GE(live_bytes.load() - baseline, 2 * 8 * Backward::kCols * int64_t{sizeof(float)})
      << "under the default limit the partials are kept for the next call";
  // The partials are read and written a vector at a time: from a cache line, no vector straddles two.
  EXPECT_GE(least_alignment_asked.load(), size_t{64}) << "the scratch starts on a cache line";
  rmsnorm_release_thread_scratch();
  EXPECT_EQ(live_bytes.load() - baseline, 0);
}

TEST_F(Scratch, ZeroLimitKeepsNothingAndChangesNoResult) {
  Backward kept(2), fresh(2);
  ASSERT_EQ(kept.Run(), RMSNORM_OK) << rmsnorm_last_error();
  rmsnorm_release_thread_scratch();
  ASSERT_EQ(rmsnorm_set_scratch_limit(0), RMSNORM_OK);
  const int64_t baseline = live_bytes.load();
  ASSERT_EQ(fresh.Run(), RMSNORM_OK) << rmsnorm_last_error();
  EXPECT_EQ(live_bytes.load() - baseline, 0);
  EXPECT_EQ(std::memcmp(kept.dx.data(), fresh.dx.data(), kept.dx.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(kept.dweight.data(), fresh.dweight.data(), kept.dweight.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(kept.dbias.data(), fresh.dbias.data(), kept.dbias.size() * sizeof(float)), 0);
}

TEST_F(Scratch, LoweringTheLimitFreesWhatIsOverItAtTheNextCall) {
  Backward call(3);
  ASSERT_EQ(call.Run(), RMSNORM_OK) << rmsnorm_last_error();
  const int64_t baseline = live_bytes.load();
  ASSERT_EQ(rmsnorm_set_scratch_limit(0), RMSNORM_OK);
  EXPECT_EQ(live_bytes.load() - baseline, 0) << "nothing is freed before the next call";
  ASSERT_EQ(call.Run(), RMSNORM_OK) << rmsnorm_last_error();
  EXPECT_LT(live_bytes.load() - baseline, -2 * 8 * Backward::kCols * int64_t{sizeof(float)});
}

TEST_F(Scratch, NegativeLimitIsRefused) {
  ASSERT_EQ(rmsnorm_set_scratch_limit(12345), RMSNORM_OK);
  EXPECT_EQ(rmsnorm_set_scratch_limit(-1), RMSNORM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(rmsnorm_last_error(), "rmsnorm_set_scratch_limit"), nullptr) << rmsnorm_last_error();
  EXPECT_EQ(rmsnorm_get_scratch_limit(), 12345);
}

// Run by ctest with RMSNORM_SCRATCH_BYTES set (tests/CMakeLists.txt).
TEST(ScratchEnvironment, LimitComesFromTheEnvironment) {
  const char* env = std::getenv("RMSNORM_SCRATCH_BYTES");
  if (env == nullptr) GTEST_SKIP() << "RMSNORM_SCRATCH_BYTES is not set";
  EXPECT_EQ(rmsnorm_get_scratch_limit(), std::strtoll(env, nullptr, 10));
}

}  // namespace
