// The stream loops, compiled once per Highway target and dispatched to the best the CPU has, exactly
// as the library's kernels are: the limit must not be handicapped by a weaker instruction set.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "stream.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include "hwy/cache_control.h"
#include "hwy/highway.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "stream.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm_bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// bf16 and f16 are widened to f32 and narrowed back, the least any kernel over them must do.
HWY_INLINE VF LoadF32(DF d, const float* p) { return hn::LoadU(d, p); }
HWY_INLINE VF LoadF32(DF d, const hwy::bfloat16_t* p) { return hn::PromoteTo(d, hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), p)); }
HWY_INLINE VF LoadF32(DF d, const hwy::float16_t* p) { return hn::PromoteTo(d, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p)); }

HWY_INLINE void StoreF32(DF d, VF v, float* p) { hn::StoreU(v, d, p); }
HWY_INLINE void StoreF32(DF, VF v, hwy::bfloat16_t* p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dbf;
  hn::StoreU(hn::DemoteTo(dbf, v), dbf, p);
}
HWY_INLINE void StoreF32(DF, VF v, hwy::float16_t* p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  hn::StoreU(hn::DemoteTo(dh, v), dh, p);
}

// The same with a non-temporal store: the line goes to memory without being read first. p is aligned
// to the stored vector (RunOne starts every range on a 64-element boundary of page-aligned buffers).
// Highway 1.0.3 streams a vector narrower than a register as a whole register, past its end, so such
// a vector (bf16 / f16 on SSE4) is stored normally, as the library's kernels do.
HWY_INLINE void StreamF32(DF d, VF v, float* p) { hn::Stream(v, d, p); }
template <class T>
HWY_INLINE void StreamF32(DF d, VF v, T* p) {
  const hn::Rebind<T, DF> dt;
  const hn::Rebind<uint16_t, DF> du16;
  if constexpr (hn::MaxLanes(du16) * sizeof(uint16_t) >= 16) {
    hn::Stream(hn::BitCast(du16, hn::DemoteTo(dt, v)), du16, reinterpret_cast<uint16_t*>(p));
  } else {
    StoreF32(d, v, p);
  }
}

template <bool kNonTemporal, class T>
HWY_INLINE void StoreOut(DF d, VF v, T* p) {
  if constexpr (kNonTemporal) {
    StreamF32(d, v, p);
  } else {
    StoreF32(d, v, p);
  }
}

// The bodies handed to FullVectors must inline into it (a call per vector would be the bottleneck).
#ifndef STREAM_INLINE_LAMBDA
#if defined(__GNUC__)
#define STREAM_INLINE_LAMBDA __attribute__((always_inline))
#else
#define STREAM_INLINE_LAMBDA
#endif
#endif

// body(i) for every full vector [i, i + N) of [0, n), four per iteration; returns where the full
// vectors end. Four, because a loop of one vector per iteration runs at the speed of its placement:
// on Zen 3, one that straddles a 64-byte line of code stores every other cycle, and a 4096-float copy
// took 330 ns instead of 165 in this tool. The reference must be the limit wherever the linker puts it.
template <class Body>
HWY_INLINE size_t FullVectors(DF d, size_t n, const Body& body) {
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    body(i);
    body(i + N);
    body(i + 2 * N);
    body(i + 3 * N);
  }
  for (; i + N <= n; i += N) body(i);
  return i;
}

// Each loop runs full vectors, then passes a last partial vector through zero-padded copies so that
// nothing outside [0, n) is touched.
template <bool kNT, class T>
void ScaleRange(const T* a, T* p, size_t n, float s) {
  const DF d;
  const VF vs = hn::Set(d, s);
  const size_t i = FullVectors(d, n, [&](size_t j) STREAM_INLINE_LAMBDA {
    StoreOut<kNT>(d, hn::Mul(LoadF32(d, a + j), vs), p + j);
  });
  if (i == n) return;
  HWY_ALIGN T in[hn::MaxLanes(d)] = {};
  HWY_ALIGN T out[hn::MaxLanes(d)];
  std::memcpy(in, a + i, (n - i) * sizeof(T));
  StoreF32(d, hn::Mul(LoadF32(d, in), vs), out);
  std::memcpy(p + i, out, (n - i) * sizeof(T));
}

template <bool kNT, class T>
void TriadRange(const T* a, const T* b, T* p, size_t n, float s) {
  const DF d;
  const VF vs = hn::Set(d, s);
  const size_t i = FullVectors(d, n, [&](size_t j) STREAM_INLINE_LAMBDA {
    StoreOut<kNT>(d, hn::MulAdd(LoadF32(d, b + j), vs, LoadF32(d, a + j)), p + j);
  });
  if (i == n) return;
  HWY_ALIGN T in_a[hn::MaxLanes(d)] = {};
  HWY_ALIGN T in_b[hn::MaxLanes(d)] = {};
  HWY_ALIGN T out[hn::MaxLanes(d)];
  std::memcpy(in_a, a + i, (n - i) * sizeof(T));
  std::memcpy(in_b, b + i, (n - i) * sizeof(T));
  StoreF32(d, hn::MulAdd(LoadF32(d, in_b), vs, LoadF32(d, in_a)), out);
  std::memcpy(p + i, out, (n - i) * sizeof(T));
}

template <bool kNT, class T>
void AddScaleRange(const T* a, const T* b, T* p, T* q, size_t n, float s) {
  const DF d;
  const VF vs = hn::Set(d, s);
  const size_t i = FullVectors(d, n, [&](size_t j) STREAM_INLINE_LAMBDA {
    const VF sum = hn::Add(LoadF32(d, a + j), LoadF32(d, b + j));
    StoreOut<kNT>(d, sum, q + j);
    StoreOut<kNT>(d, hn::Mul(sum, vs), p + j);
  });
  if (i == n) return;
  HWY_ALIGN T in_a[hn::MaxLanes(d)] = {};
  HWY_ALIGN T in_b[hn::MaxLanes(d)] = {};
  HWY_ALIGN T out_p[hn::MaxLanes(d)];
  HWY_ALIGN T out_q[hn::MaxLanes(d)];
  std::memcpy(in_a, a + i, (n - i) * sizeof(T));
  std::memcpy(in_b, b + i, (n - i) * sizeof(T));
  const VF sum = hn::Add(LoadF32(d, in_a), LoadF32(d, in_b));
  StoreF32(d, sum, out_q);
  StoreF32(d, hn::Mul(sum, vs), out_p);
  std::memcpy(q + i, out_q, (n - i) * sizeof(T));
  std::memcpy(p + i, out_p, (n - i) * sizeof(T));
}

// The loops' s. Inputs are never written, so any s keeps repeated runs finite; 0.5 also avoids
// subnormals.
constexpr float kScalar = 0.5f;

// Elements [begin, end) of one loop (kScaleThenTriad is run as its two halves by the caller).
template <bool kNT, class T>
void RangeOf(StreamLoop loop, size_t begin, size_t end, const StreamOperands& o) {
  const T* a = static_cast<const T*>(o.a) + begin;
  const T* b = static_cast<const T*>(o.b) + begin;
  T* p = static_cast<T*>(o.p) + begin;
  T* q = static_cast<T*>(o.q) + begin;
  const size_t n = end - begin;
  if constexpr (kNT) {  // an output off a vector boundary cannot stream (callers align them: RunStream)
    constexpr uintptr_t kVectorBytes = 64;
    if (reinterpret_cast<uintptr_t>(p) % kVectorBytes != 0 || reinterpret_cast<uintptr_t>(q) % kVectorBytes != 0)
      return RangeOf<false, T>(loop, begin, end, o);
  }
  switch (loop) {
    case StreamLoop::kScale: return ScaleRange<kNT>(a, p, n, kScalar);
    case StreamLoop::kTriad: return TriadRange<kNT>(a, b, p, n, kScalar);
    case StreamLoop::kAddScale: return AddScaleRange<kNT>(a, b, p, q, n, kScalar);
    case StreamLoop::kScaleThenTriad: return;
  }
}

template <bool kNT>
void StreamRangeOf(StreamLoop loop, rmsnorm_dtype dtype, size_t begin, size_t end, const StreamOperands& operands) {
  switch (dtype) {
#define RMSNORM_DTYPE(Id, code, name, Storage, KernelStorage, ...) \
  case code:                                                     \
    return RangeOf<kNT, KernelStorage>(loop, begin, end, operands);
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE
  }
}

void StreamRange(int loop, int dtype, int stores, size_t begin, size_t end, const StreamOperands& operands) {
  const auto l = static_cast<StreamLoop>(loop);
  const auto t = static_cast<rmsnorm_dtype>(dtype);
  if (static_cast<StreamStores>(stores) == StreamStores::kOrdinary) return StreamRangeOf<false>(l, t, begin, end, operands);
  StreamRangeOf<true>(l, t, begin, end, operands);
  hwy::FlushStream();  // non-temporal stores are weakly ordered: done before the range counts as written
}

// ---- RunRowPhasedStream ----

// How far ahead the row-phased loops prefetch, counted over every input: the library's
// kPrefetchAheadBytes (src/cpu/row_plan.h). Bytes of a row between two bursts of those prefetches:
// 16 lines.
constexpr size_t kRowPhasedAheadBytes = size_t{16} << 10;
constexpr size_t kRowPhasedPieceBytes = 1024;

// Pass one: reads a row's whole vectors of a (and b, or null) with four sums in flight, and keeps
// their total, so the loads cannot be dropped. The last columns (less than a vector) are read by the
// second pass only.
template <class T>
void ReadRow(const T* a, const T* b, size_t cols) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  size_t i = 0;
  for (; i + 4 * N <= cols; i += 4 * N) {
    s0 = hn::Add(s0, LoadF32(d, a + i));
    s1 = hn::Add(s1, LoadF32(d, a + i + N));
    s2 = hn::Add(s2, LoadF32(d, a + i + 2 * N));
    s3 = hn::Add(s3, LoadF32(d, a + i + 3 * N));
    if (b) {
      s0 = hn::Add(s0, LoadF32(d, b + i));
      s1 = hn::Add(s1, LoadF32(d, b + i + N));
      s2 = hn::Add(s2, LoadF32(d, b + i + 2 * N));
      s3 = hn::Add(s3, LoadF32(d, b + i + 3 * N));
    }
  }
  for (; i + N <= cols; i += N) {
    s0 = hn::Add(s0, LoadF32(d, a + i));
    if (b) s0 = hn::Add(s0, LoadF32(d, b + i));
  }
  volatile float kept = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  (void)kept;
}

// Prefetches the lines of [p, p + n) into L2.
template <class T>
void PrefetchIntoL2(const T* p, size_t n) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(p + n);
  for (uintptr_t line = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63}; line < end; line += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(line), 0, 2);
}

// Rows [first, last) of kScale (p = s·a) or kTriad (p = a + s·b): each row read, then written.
template <class T>
void RowPhasedRows(StreamLoop loop, size_t first, size_t last, size_t cols, const StreamOperands& o) {
  const bool triad = loop == StreamLoop::kTriad;
  const T* a = static_cast<const T*>(o.a);
  const T* b = triad ? static_cast<const T*>(o.b) : nullptr;
  T* p = static_cast<T*>(o.p);
  const size_t inputs = triad ? 2 : 1;
  const size_t rows_ahead = HWY_MAX(size_t{1}, kRowPhasedAheadBytes / (cols * sizeof(T) * inputs));
  const size_t piece = HWY_MAX(size_t{1}, kRowPhasedPieceBytes / sizeof(T));
  for (size_t row = first; row < last; ++row) {
    const T* row_a = a + row * cols;
    const T* row_b = triad ? b + row * cols : nullptr;
    T* row_p = p + row * cols;
    ReadRow(row_a, row_b, cols);
    // A row off a vector boundary (cols * sizeof(T) not a multiple of 64) is written with ordinary
    // stores, as RangeOf does.
    const bool stream = reinterpret_cast<uintptr_t>(row_p) % 64 == 0;
    const size_t ahead = row + rows_ahead;
    for (size_t c = 0; c < cols; c += piece) {
      const size_t n = HWY_MIN(piece, cols - c);
      if (ahead < last) {
        PrefetchIntoL2(a + ahead * cols + c, n);
        if (triad) PrefetchIntoL2(b + ahead * cols + c, n);
      }
      if (triad) {
        stream ? TriadRange<true>(row_a + c, row_b + c, row_p + c, n, kScalar)
               : TriadRange<false>(row_a + c, row_b + c, row_p + c, n, kScalar);
      } else {
        stream ? ScaleRange<true>(row_a + c, row_p + c, n, kScalar)
               : ScaleRange<false>(row_a + c, row_p + c, n, kScalar);
      }
    }
  }
}

void RowPhasedRange(int loop, int dtype, size_t first, size_t last, size_t cols, const StreamOperands& operands) {
  switch (static_cast<rmsnorm_dtype>(dtype)) {
#define RMSNORM_DTYPE(Id, code, name, Storage, KernelStorage, ...)                         \
  case code:                                                                                 \
    RowPhasedRows<KernelStorage>(static_cast<StreamLoop>(loop), first, last, cols, operands); \
    break;
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE
  }
  hwy::FlushStream();  // as StreamRange
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace rmsnorm_bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rmsnorm_bench {
HWY_EXPORT(StreamRange);
HWY_EXPORT(RowPhasedRange);
HWY_EXPORT(TargetName);

namespace {

// Each thread's range starts on a 64-element boundary, so no two threads write one cache line.
constexpr size_t kSplitAlignment = 64;

void RunOne(StreamLoop loop, StreamStores stores, rmsnorm_dtype dtype, size_t n, int threads,
            const StreamOperands& operands) {
  // Resolve the dispatch once, on one thread, before any team calls through the table.
  static const bool resolved = (HWY_DYNAMIC_DISPATCH(StreamRange)(0, 0, 0, 0, 0, StreamOperands{}), true);
  (void)resolved;
  if (threads <= 1) {
    HWY_DYNAMIC_DISPATCH(StreamRange)(int(loop), int(dtype), int(stores), 0, n, operands);
    return;
  }
  const size_t per_thread = (n + size_t(threads) - 1) / size_t(threads);
  const size_t chunk = (per_thread + kSplitAlignment - 1) / kSplitAlignment * kSplitAlignment;
#pragma omp parallel num_threads(threads)
  {
    const size_t begin = std::min(n, size_t(omp_get_thread_num()) * chunk);
    const size_t end = std::min(n, begin + chunk);
    if (begin < end) HWY_DYNAMIC_DISPATCH(StreamRange)(int(loop), int(dtype), int(stores), begin, end, operands);
  }
}

}  // namespace

int StreamTensors(StreamLoop loop) {
  switch (loop) {
    case StreamLoop::kScale: return 2;
    case StreamLoop::kTriad: return 3;
    case StreamLoop::kAddScale: return 4;
    case StreamLoop::kScaleThenTriad: return 5;
  }
  return 0;
}

const char* StreamLoopName(StreamLoop loop) {
  switch (loop) {
    case StreamLoop::kScale: return "scale y=s*x";
    case StreamLoop::kTriad: return "triad dx=dy+s*x";
    case StreamLoop::kAddScale: return "add+scale h=x+r, y=s*h";
    case StreamLoop::kScaleThenTriad: return "scale, then triad";
  }
  return "?";
}

void RunStream(StreamLoop loop, StreamStores stores, rmsnorm_dtype dtype, size_t n, int threads,
               const StreamOperands& operands) {
  if (loop != StreamLoop::kScaleThenTriad) return RunOne(loop, stores, dtype, n, threads, operands);
  StreamOperands forward;
  forward.a = operands.a;
  forward.p = operands.q;
  RunOne(StreamLoop::kScale, stores, dtype, n, threads, forward);
  StreamOperands backward;
  backward.a = operands.b;
  backward.b = operands.a;
  backward.p = operands.p;
  RunOne(StreamLoop::kTriad, stores, dtype, n, threads, backward);
}

void RunRowPhasedStream(StreamLoop loop, rmsnorm_dtype dtype, size_t rows, size_t cols, int threads,
                        const StreamOperands& operands) {
  static const bool resolved = (HWY_DYNAMIC_DISPATCH(RowPhasedRange)(0, 0, 0, 0, 1, StreamOperands{}), true);
  (void)resolved;
  if (threads <= 1) return HWY_DYNAMIC_DISPATCH(RowPhasedRange)(int(loop), int(dtype), 0, rows, cols, operands);
#pragma omp parallel num_threads(threads)
  {
    const size_t t = size_t(omp_get_thread_num()), team = size_t(omp_get_num_threads());
    HWY_DYNAMIC_DISPATCH(RowPhasedRange)(int(loop), int(dtype), rows * t / team, rows * (t + 1) / team, cols, operands);
  }
}

const char* StreamStoresName(StreamStores stores) {
  switch (stores) {
    case StreamStores::kOrdinary: return "ordinary";
    case StreamStores::kNonTemporal: return "non-temporal";
    case StreamStores::kRowPhased: return "row-phased non-temporal";
  }
  return "?";
}

const char* StreamTarget() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace rmsnorm_bench
#endif  // HWY_ONCE
