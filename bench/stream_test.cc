// The stream loops are the limit every case is measured against, so they must move exactly the bytes
// they claim: every element of [0, n) written with the loop's value, nothing outside touched, in
// every dtype, on one thread and on a team, for lengths that end anywhere in the unrolled body.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.hpp"
#include "stream.h"

namespace rmsnorm_bench {
namespace {

constexpr float kScalar = 0.5f;     // the loops' s (stream.cc)
constexpr float kSentinel = 96.0f;  // exact in every dtype, an 8-bit float's too
constexpr size_t kPad = 64;         // elements before and after each array

// An array of n elements of a dtype with kPad elements of sentinel on each side, its first element on a
// 64-byte boundary (as the benchmark's arrays are, which the non-temporal loops need).
class Padded {
 public:
  Padded(rmsnorm_dtype dtype, size_t n) : dtype_(dtype), n_(n), bytes_((n + 2 * kPad) * Size() + 64) {
    offset_ = (64 - reinterpret_cast<uintptr_t>(bytes_.data()) % 64) % 64;
    for (size_t i = 0; i < n + 2 * kPad; ++i) SetRaw(i, kSentinel);
  }
  void* data() { return bytes_.data() + offset_ + kPad * Size(); }
  float get(size_t i) const { return GetRaw(i + kPad); }
  void set(size_t i, float v) { SetRaw(i + kPad, v); }
  bool PadsIntact() const {
    for (size_t i = 0; i < kPad; ++i)
      if (GetRaw(i) != kSentinel || GetRaw(kPad + n_ + i) != kSentinel) return false;
    return true;
  }

 private:
  size_t Size() const { return rmsnorm::registry::DtypeSize(dtype_); }
  float GetRaw(size_t i) const {
    float v = 0.0f;
    rmsnorm::registry::WithStorage(dtype_, [&](auto storage) {
      std::memcpy(&storage, bytes_.data() + offset_ + i * Size(), sizeof storage);
      v = rmsnorm::registry::ToFloat(storage);
    });
    return v;
  }
  void SetRaw(size_t i, float v) {
    rmsnorm::registry::WithStorage(dtype_, [&](auto storage) {
      storage = rmsnorm::registry::FromFloat<decltype(storage)>(v);
      std::memcpy(bytes_.data() + offset_ + i * Size(), &storage, sizeof storage);
    });
  }

  rmsnorm_dtype dtype_;
  size_t n_;
  std::vector<uint8_t> bytes_;
  size_t offset_ = 0;
};

// Quarters in [-1, 1] and [-2, 2]: every sum, half and product below is exact in every dtype, so the
// loops' results compare exactly whatever rounding their narrowing uses.
float InputA(size_t i) { return float(int(i % 9) - 4) * 0.25f; }
float InputB(size_t i) { return float(int(i % 17) - 8) * 0.25f; }

struct Expected {
  float p;
  float q;  // only for the loops that write q
};

Expected Reference(StreamLoop loop, float a, float b) {
  switch (loop) {
    case StreamLoop::kScale: return {kScalar * a, 0};
    case StreamLoop::kTriad: return {a + kScalar * b, 0};
    case StreamLoop::kAddScale: return {kScalar * (a + b), a + b};
    case StreamLoop::kScaleThenTriad: return {b + kScalar * a, kScalar * a};
  }
  return {0, 0};
}

// v rounded to the dtype, as the library's storage types round: the identity for the quarters above in
// f32, bf16 and f16; a dtype of fewer significant bits holds the inputs but not every result.
float Rounded(rmsnorm_dtype dtype, float v) {
  float r = v;
  rmsnorm::registry::WithStorage(dtype, [&](auto storage) {
    r = rmsnorm::registry::ToFloat(rmsnorm::registry::FromFloat<decltype(storage)>(v));
  });
  return r;
}

// A loop's operands over n elements: a and b hold InputA and InputB, p and q only sentinels.
struct Operands {
  Operands(rmsnorm_dtype dtype, size_t n) : a(dtype, n), b(dtype, n), p(dtype, n), q(dtype, n) {
    for (size_t i = 0; i < n; ++i) {
      a.set(i, InputA(i));
      b.set(i, InputB(i));
    }
    view.a = a.data();
    view.b = b.data();
    view.p = p.data();
    view.q = q.data();
  }
  Padded a, b, p, q;
  StreamOperands view;
};

bool WritesQ(StreamLoop loop) { return loop == StreamLoop::kAddScale || loop == StreamLoop::kScaleThenTriad; }

TEST(StreamLoops, WriteExactlyTheirRange) {
  const StreamLoop loops[] = {StreamLoop::kScale, StreamLoop::kTriad, StreamLoop::kAddScale,
                              StreamLoop::kScaleThenTriad};
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 70; ++n) lengths.push_back(n);
  lengths.insert(lengths.end(), {127, 128, 129, 4096, 4096 + 13});
  for (StreamLoop loop : loops) {
    for (StreamStores stores : {StreamStores::kOrdinary, StreamStores::kNonTemporal}) {
      for (const rmsnorm::registry::DtypeInfo& info : rmsnorm::registry::kDtypes) {
        const rmsnorm_dtype dtype = info.code;
        for (size_t n : lengths) {
          for (int threads : {1, 2}) {
            SCOPED_TRACE(std::string(StreamLoopName(loop)) + ", " + StreamStoresName(stores) + " stores, " +
                         info.name + ", n " + std::to_string(n) + ", threads " + std::to_string(threads));
            Operands o(dtype, n);
            Padded &a = o.a, &b = o.b, &p = o.p, &q = o.q;
            RunStream(loop, stores, dtype, n, threads, o.view);
            for (size_t i = 0; i < n; ++i) {
              const Expected e = Reference(loop, InputA(i), InputB(i));
              ASSERT_EQ(p.get(i), Rounded(dtype, e.p)) << "p[" << i << "]";
              if (WritesQ(loop)) ASSERT_EQ(q.get(i), Rounded(dtype, e.q)) << "q[" << i << "]";
            }
            EXPECT_TRUE(p.PadsIntact());
            EXPECT_TRUE(q.PadsIntact());
            if (!WritesQ(loop))
              for (size_t i = 0; i < n; ++i) ASSERT_EQ(q.get(i), kSentinel) << "q[" << i << "] written";
            EXPECT_TRUE(a.PadsIntact() && b.PadsIntact());
          }
        }
      }
    }
  }
}

// The row-phased loops write what the stream loops write, row after row: rows of any length (ending
// anywhere in a vector, a 1 KiB piece, or off the streaming stores' alignment), one row or many, on
// one thread and on a team whose ranges of rows end anywhere.
TEST(RowPhasedStream, WritesEveryRowOnceWithTheLoopsValue) {
  const struct {
    size_t rows, cols;
  } shapes[] = {{1, 1}, {1, 4096}, {3, 17}, {5, 64}, {7, 300}, {4, 1024}, {9, 1037}, {2, 4096 + 13}};
  for (StreamLoop loop : {StreamLoop::kScale, StreamLoop::kTriad}) {
    for (const rmsnorm::registry::DtypeInfo& info : rmsnorm::registry::kDtypes) {
      const rmsnorm_dtype dtype = info.code;
      for (const auto& shape : shapes) {
        for (int threads : {1, 2, 3}) {
          SCOPED_TRACE(std::string(StreamLoopName(loop)) + ", " + info.name + ", " + std::to_string(shape.rows) +
                       "x" + std::to_string(shape.cols) + ", threads " + std::to_string(threads));
          const size_t n = shape.rows * shape.cols;
          Operands o(dtype, n);
          RunRowPhasedStream(loop, dtype, shape.rows, shape.cols, threads, o.view);
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(o.p.get(i), Rounded(dtype, Reference(loop, InputA(i), InputB(i)).p)) << "p[" << i << "]";
          EXPECT_TRUE(o.p.PadsIntact());
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(o.q.get(i), kSentinel) << "q[" << i << "] written";
          EXPECT_TRUE(o.a.PadsIntact() && o.b.PadsIntact());
        }
      }
    }
  }
}

}  // namespace
}  // namespace rmsnorm_bench
