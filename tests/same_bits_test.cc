// The same bits everywhere: every SIMD target, every buffer alignment, in place or not.
//
// SameBits.EveryTargetAndTheRecordedHash runs a fixed set of cases (every op and dtype, odd widths,
// multi-chunk rows, grouped rows, the gain offset) on every target this machine runs, and requires
// equal bytes from all of them. Its inputs come from integer arithmetic, so they are the same on any
// CPU, and the hash of all outputs must be kRecordedHash: the x86-64 targets (SCALAR, SSE4, AVX2,
// AVX3) and the aarch64 ones under qemu (NEON, SVE, SVE2) all give it, with 1 thread or 2, with or
// without streaming stores (the suite runs again with RMSNORM_STREAM_BYTES=0).
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "rmsnorm/rmsnorm.h"
#include "test_util.h"

namespace rmsnorm::test {
namespace {

// The hash of every output of AllCases() (see the top of the file). A change that alters any bit of
// any kernel's output changes it: such a change is a new canonical order, to be made on purpose and
// on every target at once.
constexpr uint64_t kRecordedHash = 0x6c68a9870500971d;

// FNV-1a over bytes.
struct Hash {
  uint64_t value = 0xcbf29ce484222325ull;
  void Add(const void* data, size_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < bytes; ++i) value = (value ^ p[i]) * 0x100000001b3ull;
  }
  void Add(const RowTensor& t) { Add(t.data(), t.bytes()); }
  void Add(const std::vector<float>& v) { Add(v.data(), v.size() * sizeof(float)); }
};

std::vector<Case> AllCases() {
  struct Shape {
    int64_t rows, cols;
  };
  // Below, at and above every vector width and the 64-column sum block; a decode row; a row of two
  // reduction chunks (split over threads); narrow rows run in groups.
  const Shape shapes[] = {{3, 1}, {3, 7}, {2, 63}, {2, 100}, {4, 129}, {3, 1000}, {1, 4096}, {2, 16461}, {64, 96}};
  struct OpCase {
    Op op;
    float partial;
  };
  const OpCase ops[] = {{Op::kRmsNorm, 1.0f}, {Op::kRmsNorm, 0.3f}, {Op::kL2Norm, 1.0f}, {Op::kLayerNorm, 1.0f}, {Op::kAddRmsNorm, 1.0f}};
  std::vector<Case> cases;
  uint32_t seed = 1;
  for (size_t o = 0; o < std::size(ops); ++o) {
    // The recorded cases' dtypes, named rather than taken from the registry: a dtype added later gets
    // its own cases without changing this record.
    for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16, RMSNORM_F16}) {
      for (size_t s = 0; s < std::size(shapes); ++s) {
        Case c;
        c.op = ops[o].op;
        c.partial = ops[o].partial;
        c.dtype = dtype;
        c.rows = shapes[s].rows;
        c.cols = shapes[s].cols;
        c.seed = seed++;
        switch ((o + s) % 3) {  // the parameters rotate over the shapes
          case 0: c.weight = true, c.bias = true; break;
          case 1: c.weight = true, c.bias = false, c.weight_offset = 1.0f; break;
          default: c.weight = false, c.bias = false; break;
        }
        cases.push_back(c);
      }
    }
  }
  return cases;
}

// One hash per case: the forward's outputs, then the backward's with the saved statistics and with
// recomputed ones.
std::vector<uint64_t> CaseHashes(const std::vector<Case>& cases) {
  std::vector<uint64_t> hashes;
  for (const Case& c : cases) {
    const Inputs in = MakeInputs(c);
    const Outputs forward = RunForward(c, in, RMSNORM_BACKEND_AUTO);
    Hash h;
    h.Add(forward.y);
    h.Add(forward.rstd);
    h.Add(forward.mean);
    if (c.op == Op::kAddRmsNorm) h.Add(forward.residual_out);
    for (const Outputs* saved : {&forward, static_cast<const Outputs*>(nullptr)}) {
      if (saved == nullptr && c.op == Op::kAddRmsNorm) continue;  // needs residual_out from the forward
      const Outputs backward = RunBackward(c, in, saved, RMSNORM_BACKEND_AUTO);
      h.Add(backward.dx);
      h.Add(backward.dweight);
      h.Add(backward.dbias);
    }
    hashes.push_back(h.value);
  }
  return hashes;
}

TEST(SameBits, EveryTargetAndTheRecordedHash) {
  const std::vector<Case> cases = AllCases();
  std::vector<uint64_t> first;
  std::string first_target;
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    ASSERT_EQ(TargetName(target), rmsnorm_cpu_target());
    const std::vector<uint64_t> hashes = CaseHashes(cases);
    Hash all;
    all.Add(hashes.data(), hashes.size() * sizeof(uint64_t));
    std::printf("%-8s %zu cases, hash 0x%016" PRIx64 " (%d threads)\n", rmsnorm_cpu_target(), cases.size(),
                all.value, rmsnorm_get_num_threads());
    if (first.empty()) {
      first = hashes;
      first_target = TargetName(target);
      EXPECT_EQ(kRecordedHash, all.value) << "the outputs on " << first_target << " are not the recorded bits";
      continue;
    }
    for (size_t i = 0; i < cases.size(); ++i)
      EXPECT_EQ(first[i], hashes[i]) << cases[i].Name() << ": " << TargetName(target) << " differs from "
                                     << first_target;
  }
}

// Bytes at a chosen distance from a 64-byte boundary, between guard bytes that no call may write (a
// masked store of a row's edge that reaches past it would).
class OffsetBuffer {
 public:
  static constexpr uint8_t kGuard = 0xA5;
  OffsetBuffer(size_t bytes, size_t offset) : storage_(bytes + 128, kGuard), offset_(offset), bytes_(bytes) {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data());
    start_ = (64 - base % 64) % 64 + offset;
  }
  void* data() { return storage_.data() + start_; }
  void Fill(const void* contents, size_t bytes) { std::memcpy(data(), contents, bytes); }
  bool Equals(const void* other, size_t bytes) { return std::memcmp(data(), other, bytes) == 0; }
  bool GuardsIntact() const {
    for (size_t i = 0; i < storage_.size(); ++i)
      if ((i < start_ || i >= start_ + bytes_) && storage_[i] != kGuard) return false;
    return true;
  }

 private:
  std::vector<uint8_t> storage_;
  size_t offset_, bytes_, start_ = 0;
};

// The bug class behind non-reproducible dweight on AVX-512: a result must not depend on where the
// buffers lie. Every backward (and forward) with its output at each offset 0-63 bytes from a 64-byte
// boundary, its inputs at another, on every target, must give the bytes of the call on aligned buffers
// and of the in-place call. Under RMSNORM_STREAM_BYTES=0 every output streams, so the aligned middle
// and the ordinary-store head and tail move with the offset.
TEST(SameBits, AnyBufferAlignmentAndInPlace) {
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    for (rmsnorm_dtype dtype : AllDtypes()) {
      for (Op op : {Op::kRmsNorm, Op::kLayerNorm}) {
        // Rows of 2100 without a bias hold 4 KiB in every type: a forward's rows in cache that long,
        // which read a gain only, align their output's vectors on AVX-512 (ForEachStep), behind a
        // head whose size moves with the offset. bf16 rows written in even/odd pairs (a call of
        // several rows with a finite gain: bf16_pairs-inl.h) do not.
        struct Shape {
          float partial;
          int64_t cols;
          bool bias;
        };
        for (const Shape s : {Shape{1.0f, 300, true}, {0.5f, 300, true}, {1.0f, 2100, false}, {0.5f, 2100, false}}) {
          if (op == Op::kLayerNorm && s.partial != 1.0f) continue;
          Case c;
          c.op = op, c.dtype = dtype, c.rows = 5, c.cols = s.cols, c.partial = s.partial, c.bias = s.bias;
          SCOPED_TRACE(c.Name() + " on " + TargetName(target));
          const Inputs in = MakeInputs(c);
          const Outputs want = RunForward(c, in, RMSNORM_BACKEND_AUTO);
          const Outputs want_grad = RunBackward(c, in, &want, RMSNORM_BACKEND_AUTO);
          const rmsnorm_config config = c.Config();
          const size_t bytes = in.x.bytes(), element = bytes / size_t(c.rows * c.cols);
          for (size_t offset = 0; offset < 64; offset += element) {
            OffsetBuffer x(bytes, (offset * 7) % 64 / element * element), dy(bytes, (offset * 3) % 64 / element * element);
            OffsetBuffer out(bytes, offset);
            x.Fill(in.x.data(), bytes);
            dy.Fill(in.dy.data(), bytes);
            std::vector<float> rstd(size_t(c.rows)), mean(size_t(c.rows)), dw(size_t(c.cols)), db(size_t(c.cols));
            const float* w = in.weight.data();
            const float* b = in.bias.data();
            const bool layer = op == Op::kLayerNorm;
            // Forward into `out`, then in place over a copy of x at the output's offset.
            for (bool in_place : {false, true}) {
              if (in_place) out.Fill(in.x.data(), bytes);
              const void* src = in_place ? out.data() : x.data();
              ASSERT_EQ(RMSNORM_OK, layer ? rmsnorm_layernorm_forward(&config, src, w, b, out.data(), mean.data(), rstd.data())
                                          : rmsnorm_forward(&config, src, w, b, out.data(), rstd.data()));
              ASSERT_TRUE(out.Equals(want.y.data(), bytes)) << "y at offset " << offset << (in_place ? ", in place" : "");
              ASSERT_TRUE(out.GuardsIntact()) << "bytes around y written, at offset " << offset;
            }
            // Backward into `out`, then in place over a copy of dy at the output's offset.
            for (bool in_place : {false, true}) {
              if (in_place) out.Fill(in.dy.data(), bytes);
              const void* grad = in_place ? out.data() : dy.data();
              ASSERT_EQ(RMSNORM_OK,
                        layer ? rmsnorm_layernorm_backward(&config, grad, x.data(), w, want.mean.data(), want.rstd.data(),
                                                           out.data(), dw.data(), db.data())
                              : rmsnorm_backward(&config, grad, x.data(), w, want.rstd.data(), out.data(), dw.data(),
                                                 db.data()));
              const char* how = in_place ? ", in place" : "";
              ASSERT_TRUE(out.Equals(want_grad.dx.data(), bytes)) << "dx at offset " << offset << how;
              ASSERT_TRUE(out.GuardsIntact()) << "bytes around dx written, at offset " << offset << how;
              ASSERT_EQ(0, std::memcmp(dw.data(), want_grad.dweight.data(), dw.size() * sizeof(float)))
                  << "dweight with dx at offset " << offset << how;
              ASSERT_EQ(0, std::memcmp(db.data(), want_grad.dbias.data(), db.size() * sizeof(float)))
                  << "dbias with dx at offset " << offset << how;
            }
          }
        }
      }
    }
  }
}

// A gain or bias that does not start on a cache line is read from an aligned copy in calls of several
// rows (ColumnParam in src/cpu/row_driver.h). The copy must keep every bit, the sign of a zero gain
// included (0 + w would turn -0 into +0): at every offset, y, dx and dweight must equal the call's with
// the parameters on a cache line, which reads them where they are.
TEST(SameBits, AnyGainAndBiasAlignment) {
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {
      for (Op op : {Op::kRmsNorm, Op::kLayerNorm}) {
        Case c;
        c.op = op, c.dtype = dtype, c.rows = 6, c.cols = 300, c.bias = true;
        SCOPED_TRACE(c.Name() + " on " + TargetName(target));
        Inputs in = MakeInputs(c);
        in.weight[7] = -0.0f;  // y = x-hat * -0 + b
        in.bias[7] = -0.0f;    // where x-hat * g is +0, the sum's sign comes from the bias
        in.weight[8] = -0.0f;
        const rmsnorm_config config = c.Config();
        const bool layer = op == Op::kLayerNorm;
        const size_t bytes = in.x.bytes(), param_bytes = size_t(c.cols) * sizeof(float);
        struct Results {
          std::vector<uint8_t> y, dx;
          std::vector<float> dw, db;
        };
        const auto run = [&](size_t offset) {
          OffsetBuffer w(param_bytes, offset), b(param_bytes, (offset * 3) % 64 / 4 * 4);
          w.Fill(in.weight.data(), param_bytes);
          b.Fill(in.bias.data(), param_bytes);
          const auto* gain = static_cast<const float*>(w.data());
          const auto* bias = static_cast<const float*>(b.data());
          Results r;
          r.y.resize(bytes), r.dx.resize(bytes), r.dw.resize(size_t(c.cols)), r.db.resize(size_t(c.cols));
          std::vector<float> rstd(size_t(c.rows)), mean(size_t(c.rows));
          EXPECT_EQ(RMSNORM_OK, layer ? rmsnorm_layernorm_forward(&config, in.x.data(), gain, bias, r.y.data(),
                                                                  mean.data(), rstd.data())
                                      : rmsnorm_forward(&config, in.x.data(), gain, bias, r.y.data(), rstd.data()));
          EXPECT_EQ(RMSNORM_OK,
                    layer ? rmsnorm_layernorm_backward(&config, in.dy.data(), in.x.data(), gain, mean.data(),
                                                       rstd.data(), r.dx.data(), r.dw.data(), r.db.data())
                          : rmsnorm_backward(&config, in.dy.data(), in.x.data(), gain, rstd.data(), r.dx.data(),
                                             r.dw.data(), r.db.data()));
          return r;
        };
        const Results want = run(0);
        for (size_t offset = 4; offset < 64; offset += 4) {
          const Results got = run(offset);
          EXPECT_EQ(want.y, got.y) << "y with the gain " << offset << " bytes off a line";
          EXPECT_EQ(want.dx, got.dx) << "dx with the gain " << offset << " bytes off a line";
          EXPECT_EQ(0, std::memcmp(want.dw.data(), got.dw.data(), want.dw.size() * sizeof(float)))
              << "dweight with the gain " << offset << " bytes off a line";
          EXPECT_EQ(0, std::memcmp(want.db.data(), got.db.data(), want.db.size() * sizeof(float)))
              << "dbias with the gain " << offset << " bytes off a line";
        }
      }
    }
  }
}

// Rows streaming from memory run two at a time in the backwards (RunRowPairs in
// src/cpu/row_groups-inl.h). On every target, each row's dx must be the bytes of that row's own one-row
// call, and dweight and dbias within the reference's tolerance: rows whose outputs share a cache-line
// offset (4096 columns, written in one pass) or not (4001, written one after the other), pRMSNorm's
// correction below k, saved and recomputed statistics, a pair with one row on the double path (a saved
// rstd of 0; a row whose squares pass f32's range), and blocks of 8 rows that leave the last row of the
// call alone. The rows are just enough for the three tensors to pass 1 MiB, where the plan prefetches
// (row_plan.h). Under RMSNORM_STREAM_BYTES=0 the outputs stream.
TEST(SameBits, BackwardRowPairsAsOneRowPerCall) {
  struct OpCase {
    Op op;
    float partial;
  };
  const std::vector<int64_t> targets = AvailableTargets();
  for (rmsnorm_dtype dtype : AllDtypes()) {
    for (OpCase op : {OpCase{Op::kRmsNorm, 1.0f}, OpCase{Op::kRmsNorm, 0.3f}, OpCase{Op::kLayerNorm, 1.0f}}) {
      for (int64_t cols : {4096, 4001}) {
        for (bool saved : {true, false}) {
          Case c;
          c.op = op.op, c.dtype = dtype, c.cols = cols, c.partial = op.partial;
          c.rows = dtype == RMSNORM_F32 ? 23 : 45;
          SCOPED_TRACE(c.Name() + (saved ? ", saved statistics" : ", statistics recomputed"));
          Inputs in = MakeInputs(c);
          constexpr int64_t kRareRow = 6;  // paired with row 7
          if (!saved && dtype != RMSNORM_F16) {
            for (int64_t j = 0; j < cols; ++j) in.x.set(kRareRow * cols + j, 1e25 * in.x.get(kRareRow * cols + j));
          }
          // What does not depend on the target, once: the saved statistics (the forward's bits are the
          // same on every target, as EveryTargetAndTheRecordedHash checks), the reference and its
          // tolerances. Under emulation they took most of the test's time when taken per target.
          Outputs stats = RunForward(c, in, RMSNORM_BACKEND_AUTO);
          stats.rstd[kRareRow] = 0.0f;  // recomputed in double
          const Outputs* saved_stats = saved ? &stats : nullptr;
          const Outputs ref = RunBackward(c, in, saved_stats, RMSNORM_BACKEND_REFERENCE);
          const Tolerances tolerances = BackwardTolerances(c, in, RunForward(c, in, RMSNORM_BACKEND_REFERENCE));
          Case one = c;
          one.rows = 1;
          Inputs row_in;
          row_in.x = RowTensor(dtype, 1, cols);
          row_in.dy = RowTensor(dtype, 1, cols);
          row_in.weight = in.weight;
          for (int64_t target : targets) {
            ScopedTarget scoped(target);
            SCOPED_TRACE("on " + TargetName(target));
            const Outputs got = RunBackward(c, in, saved_stats, RMSNORM_BACKEND_AUTO);
            EXPECT_EQ("", Compare("dweight", Values(got.dweight), Values(ref.dweight), tolerances.dweight));
            if (c.op == Op::kLayerNorm) {
              EXPECT_EQ("", Compare("dbias", Values(got.dbias), Values(ref.dbias), tolerances.dbias));
            }
            const size_t row_bytes = got.dx.bytes() / size_t(c.rows);
            for (int64_t r = 0; r < c.rows; ++r) {
              std::memcpy(row_in.x.data(), static_cast<const uint8_t*>(in.x.data()) + size_t(r) * row_bytes, row_bytes);
              std::memcpy(row_in.dy.data(), static_cast<const uint8_t*>(in.dy.data()) + size_t(r) * row_bytes, row_bytes);
              Outputs row_stats;
              row_stats.rstd = {stats.rstd[size_t(r)]};
              if (!stats.mean.empty()) row_stats.mean = {stats.mean[size_t(r)]};
              const Outputs want = RunBackward(one, row_in, saved ? &row_stats : nullptr, RMSNORM_BACKEND_AUTO);
              ASSERT_EQ(0, std::memcmp(static_cast<const uint8_t*>(got.dx.data()) + size_t(r) * row_bytes,
                                       want.dx.data(), row_bytes))
                  << "dx of row " << r;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rmsnorm::test
