// Every kernel against the reference: each op, dtype, gain/bias/offset variant and partial p, over
// sizes below, at and above the vector width, unroll and reduction chunk, on every SIMD target this
// machine runs.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace rmsnorm::test {
namespace {

// Below, at and above 1, 4 and 16 vectors of every target (up to 16 lanes), odd sizes, and past the
// 16384-column reduction chunk.
const int64_t kCols[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 257, 1000, 4097};
const int64_t kLongCols[] = {8193, 16385, 40000};
const std::vector<rmsnorm_dtype>& kDtypes = AllDtypes();
const float kPartials[] = {1.0f, 0.5f, 0.125f, 0.0625f};

struct Affine {
  bool weight, bias;
  float offset;
};
const Affine kAffines[] = {{false, false, 0.0f}, {true, false, 0.0f}, {true, true, 0.0f}, {true, true, 1.0f}, {false, true, 0.0f}};

// The cases of one op: every dtype x affine variant x partial x column count.
std::vector<Case> CasesFor(Op op, bool long_rows) {
  std::vector<Case> cases;
  uint32_t seed = 1;
  const bool has_partial = op == Op::kRmsNorm || op == Op::kAddRmsNorm;
  for (rmsnorm_dtype dtype : kDtypes) {
    for (const Affine& affine : kAffines) {
      for (float partial : kPartials) {
        if (!has_partial && partial != 1.0f) continue;
        auto add = [&](int64_t rows, int64_t cols) {
          Case c;
          c.op = op;
          c.dtype = dtype;
          c.rows = rows;
          c.cols = cols;
          c.partial = partial;
          c.weight = affine.weight;
          c.bias = affine.bias;
          c.weight_offset = affine.offset;
          c.seed = seed++;
          cases.push_back(c);
        };
        if (long_rows) {
          // Long rows cost time: the full affine variant only, and p = 1, 1/2 (k in a later chunk than the
          // first) and 1/16.
          if (!(affine.weight && affine.bias) || partial == 0.125f) continue;
          for (int64_t cols : kLongCols) add(2, cols);
        } else {
          for (int64_t cols : kCols) add(3, cols);
        }
      }
    }
  }
  return cases;
}

void ExpectMatchesReference(const Case& c) {
  SCOPED_TRACE(c.Name());
  const Inputs in = MakeInputs(c);
  const Outputs ref = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
  const Outputs got = RunForward(c, in, RMSNORM_BACKEND_AUTO);
  const Tolerances ft = ForwardTolerances(c, in, ref);
  EXPECT_EQ("", Compare("y", Values(got.y), Values(ref.y), ft.y));
  EXPECT_EQ("", Compare("rstd", Values(got.rstd), Values(ref.rstd), ft.rstd));
  if (c.op == Op::kLayerNorm) EXPECT_EQ("", Compare("mean", Values(got.mean), Values(ref.mean), ft.mean));
  if (c.op == Op::kAddRmsNorm) {
    // x + residual is rounded once to the dtype by both: identical.
    EXPECT_TRUE(got.residual_out.BitwiseEqual(ref.residual_out));
  }

  // Backward with the saved statistics, and recomputing them.
  const Tolerances bt = BackwardTolerances(c, in, ref);
  for (const Outputs* saved : {&ref, static_cast<const Outputs*>(nullptr)}) {
    if (saved == nullptr && c.op == Op::kAddRmsNorm) continue;  // needs residual_out from the forward
    SCOPED_TRACE(saved ? "saved statistics" : "recomputed statistics");
    const Outputs ref_grad = RunBackward(c, in, saved, RMSNORM_BACKEND_REFERENCE);
    const Outputs got_grad = RunBackward(c, in, saved, RMSNORM_BACKEND_AUTO);
    EXPECT_EQ("", Compare("dx", Values(got_grad.dx), Values(ref_grad.dx), bt.dx));
    EXPECT_EQ("", Compare("dweight", Values(got_grad.dweight), Values(ref_grad.dweight), bt.dweight));
    EXPECT_EQ("", Compare("dbias", Values(got_grad.dbias), Values(ref_grad.dbias), bt.dbias));
  }
}

struct SweepParam {
  int64_t target;
  Op op;
  bool long_rows;
};

class KernelSweep : public ::testing::TestWithParam<SweepParam> {};

TEST_P(KernelSweep, MatchesReference) {
  const SweepParam& param = GetParam();
  ScopedTarget target(param.target);
  ASSERT_EQ(TargetName(param.target), rmsnorm_cpu_target()) << "dispatch did not follow the target restriction";
  for (const Case& c : CasesFor(param.op, param.long_rows)) {
    ExpectMatchesReference(c);
    if (HasFailure()) return;  // one case's report is enough to start from
  }
}

std::vector<SweepParam> SweepParams() {
  std::vector<SweepParam> params;
  for (int64_t target : AvailableTargets()) {
    for (Op op : {Op::kRmsNorm, Op::kL2Norm, Op::kLayerNorm, Op::kAddRmsNorm}) {
      params.push_back({target, op, false});
      params.push_back({target, op, true});
    }
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(EveryTarget, KernelSweep, ::testing::ValuesIn(SweepParams()),
                         [](const ::testing::TestParamInfo<SweepParam>& info) {
                           return TargetName(info.param.target) + "_" + OpName(info.param.op) +
                                  (info.param.long_rows ? "_long" : "_short");
                         });

// More rows than one block, so the parameter gradients sum several block partials.
TEST(Kernels, ManyRowsAcrossBlocks) {
  for (rmsnorm_dtype dtype : kDtypes) {
    for (Op op : {Op::kRmsNorm, Op::kLayerNorm}) {
      Case c;
      c.op = op;
      c.dtype = dtype;
      c.rows = 1100;
      c.cols = 48;
      c.bias = true;
      ExpectMatchesReference(c);
    }
  }
}

TEST(Kernels, RowCounts) {
  for (int64_t rows : {1, 2, 5, 33, 257}) {
    Case c;
    c.rows = rows;
    c.cols = 96;
    ExpectMatchesReference(c);
  }
}

// A case with a gain and a bias, and pRMSNorm's k at half the row for the RMSNorm op.
Case WithBiasAndHalfK(Op op, rmsnorm_dtype dtype, int64_t rows, int64_t cols) {
  Case c;
  c.op = op;
  c.dtype = dtype;
  c.rows = rows;
  c.cols = cols;
  c.bias = true;
  c.partial = op == Op::kRmsNorm ? 0.5f : 1.0f;
  return c;
}

Inputs RowAlone(const Case& c, const Inputs& in, int64_t row) {
  Inputs one = in;
  auto slice = [&](const RowTensor& t) {
    RowTensor r(c.dtype, 1, c.cols);
    if (t.size() == 0) return t;
    for (int64_t i = 0; i < c.cols; ++i) r.set(i, t.get(row * c.cols + i));
    return r;
  };
  one.x = slice(in.x);
  one.residual = slice(in.residual);
  one.dy = slice(in.dy);
  return one;
}

// Row `row` of a (rows, cols) tensor against a one-row tensor: the same bytes (NaN encodings too).
::testing::AssertionResult SameRowBytes(const RowTensor& all, int64_t rows, int64_t row, const RowTensor& alone) {
  const size_t row_bytes = all.bytes() / size_t(rows);
  const auto* got = static_cast<const uint8_t*>(all.data()) + size_t(row) * row_bytes;
  if (alone.bytes() == row_bytes && std::memcmp(got, alone.data(), row_bytes) == 0)
    return ::testing::AssertionSuccess();
  if (alone.bytes() != row_bytes) return ::testing::AssertionFailure() << "row " << row << ": sizes differ";
  const size_t element = row_bytes / size_t(all.size() / rows);
  size_t at = 0;
  while (std::memcmp(got + at, static_cast<const uint8_t*>(alone.data()) + at, element) == 0) at += element;
  uint32_t in_all = 0, in_alone = 0;
  std::memcpy(&in_all, got + at, element);
  std::memcpy(&in_alone, static_cast<const uint8_t*>(alone.data()) + at, element);
  char bits[64];
  std::snprintf(bits, sizeof bits, "bits 0x%x against 0x%x", unsigned(in_all), unsigned(in_alone));
  return ::testing::AssertionFailure() << "row " << row << " differs from the row alone at column " << at / element
                                       << ": " << bits;
}

// A row of a many-row call is bit for bit that row called alone, forward (y, rstd) and backward (dx):
// calls of one row and of many take different paths, which must agree, NaN and infinity included. bf16
// outputs of many rows are written two vectors at a time; narrow rows run in groups (every row's
// reductions, then every row's outputs), and 19 rows make full and partial groups (of 8, 8 and 3, or of
// 4 at 256 f32 columns, or of 16 and 3 in bf16; 1000 f32 or bf16 columns run singly). Gains with a
// NaN, an infinity or huge values exercise each side of the paired path's condition. (dweight and
// dbias sum over rows: checked against the reference elsewhere.)
TEST(Kernels, EachRowAsIfAlone) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  enum class Gain { kOrdinary, kHuge, kNaN, kInfinite };
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    for (Op op : {Op::kRmsNorm, Op::kL2Norm, Op::kLayerNorm, Op::kAddRmsNorm}) {
      for (rmsnorm_dtype dtype : kDtypes) {
        for (int64_t cols : {3, 7, 64, 100, 256, 1000}) {
          for (Gain gain : {Gain::kOrdinary, Gain::kHuge, Gain::kNaN, Gain::kInfinite}) {
            const Case c = WithBiasAndHalfK(op, dtype, 19, cols);
            Inputs in = MakeInputs(c);
            if (op == Op::kAddRmsNorm) in.residual = RowTensor(dtype, c.rows, c.cols);
            // Row 1: NaN and infinity past pRMSNorm's k; row 3: a NaN inside it.
            in.x.set(c.cols + c.cols - 1, nan);
            if (cols > 2) in.x.set(c.cols + c.cols - 2, -inf);
            in.x.set(3 * c.cols, nan);
            if (gain == Gain::kHuge) for (float& g : in.weight) g *= 1e37f;
            if (gain == Gain::kNaN) {  // with a payload in the low bits, which bf16 rounding could carry
              const uint32_t bits = 0x7FFF'FFFFu;
              std::memcpy(&in.weight[size_t(cols / 2)], &bits, sizeof bits);
            }
            if (gain == Gain::kInfinite) in.bias[0] = float(inf);
            SCOPED_TRACE(c.Name() + " on " + TargetName(target) + " gain case " + std::to_string(int(gain)));
            const Outputs all = RunForward(c, in, RMSNORM_BACKEND_AUTO);
            const Outputs all_backward = RunBackward(c, in, &all, RMSNORM_BACKEND_AUTO);
            Case one_row = c;
            one_row.rows = 1;
            for (int64_t row = 0; row < c.rows; ++row) {
              const Inputs row_in = RowAlone(c, in, row);
              const Outputs alone = RunForward(one_row, row_in, RMSNORM_BACKEND_AUTO);
              const Outputs alone_backward = RunBackward(one_row, row_in, &alone, RMSNORM_BACKEND_AUTO);
              ASSERT_TRUE(SameRowBytes(all.y, c.rows, row, alone.y));
              ASSERT_EQ(std::isnan(all.rstd[size_t(row)]), std::isnan(alone.rstd[0]));
              if (!std::isnan(alone.rstd[0])) ASSERT_EQ(alone.rstd[0], all.rstd[size_t(row)]) << "row " << row;
              ASSERT_TRUE(SameRowBytes(all_backward.dx, c.rows, row, alone_backward.dx));
            }
          }
        }
      }
    }
  }
}

// Groups of short rows of plain RMSNorm and L2-Norm (RmsForwardKernel::RunGroup) sum rows made of whole
// 64-column blocks without the padded last block (SumSquaresOfBlocks) and take the group's inverse roots
// in double vectors (RmsInverseRoots): bit for bit each row alone, which does neither. 19 rows make two
// full groups and a partial one (of 8, or of 16 in bf16). Row 10, all zeros with eps = 0, is rare: its
// group goes to the generic loop, and the others still run grouped. Rows of whole blocks (64 to 256
// columns, divisors a power of two or not) and of a partial one (96).
TEST(Kernels, GroupedRowsAsIfAlone) {
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    for (Op op : {Op::kRmsNorm, Op::kL2Norm}) {
      for (rmsnorm_dtype dtype : kDtypes) {
        for (int64_t cols : {64, 96, 128, 192, 256}) {
          for (bool weight : {true, false}) {
            for (bool rare_row : {false, true}) {
              Case c;
              c.op = op;
              c.dtype = dtype;
              c.rows = 19;
              c.cols = cols;
              c.weight = weight;
              c.eps = rare_row ? 0.0f : 1e-6f;
              Inputs in = MakeInputs(c);
              if (rare_row) for (int64_t i = 0; i < cols; ++i) in.x.set(10 * cols + i, 0.0);
              SCOPED_TRACE(c.Name() + " on " + TargetName(target) + (rare_row ? " with a zero row" : ""));
              const Outputs all = RunForward(c, in, RMSNORM_BACKEND_AUTO);
              Case one_row = c;
              one_row.rows = 1;
              for (int64_t row = 0; row < c.rows; ++row) {
                const Outputs alone = RunForward(one_row, RowAlone(c, in, row), RMSNORM_BACKEND_AUTO);
                ASSERT_TRUE(SameRowBytes(all.y, c.rows, row, alone.y));
                ASSERT_EQ(alone.rstd[0], all.rstd[size_t(row)]) << "row " << row;
              }
            }
          }
        }
      }
    }
  }
}

// Bytes in memory between two inaccessible pages, placed against one of them: any access past the end
// (or before the start) faults, whatever a sanitizer does or does not instrument (masked moves).
class GuardedBytes {
 public:
  GuardedBytes(const void* contents, size_t bytes, bool against_end) : bytes_(bytes) {
    page_ = size_t(sysconf(_SC_PAGESIZE));
    const size_t span = (bytes + page_ - 1) / page_ * page_;
    total_ = span + 2 * page_;
    base_ = static_cast<uint8_t*>(mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(MAP_FAILED, static_cast<void*>(base_));
    mprotect(base_, page_, PROT_NONE);
    mprotect(base_ + page_ + span, page_, PROT_NONE);
    data_ = against_end ? base_ + page_ + span - bytes : base_ + page_;
    if (contents) std::memcpy(data_, contents, bytes);
  }
  ~GuardedBytes() { munmap(base_, total_); }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  void* data() const { return data_; }
  float* floats() const { return reinterpret_cast<float*>(data_); }
  bool Equals(const void* other) const { return std::memcmp(data_, other, bytes_) == 0; }

 private:
  size_t bytes_, page_, total_;
  uint8_t* base_;
  uint8_t* data_;
};

// Every tensor of every call against a guard page, on both sides, on every target: the partial vectors
// at row ends (masked moves, the odd last 16-bit value) must touch nothing outside. The results must be
// those of the same call on ordinary buffers.
TEST(Kernels, NothingTouchedOutsideTheTensors) {
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    for (rmsnorm_dtype dtype : kDtypes) {
      for (int64_t cols : {1, 3, 7, 9, 13, 33, 100}) {
        for (bool against_end : {true, false}) {
          for (Op op : {Op::kRmsNorm, Op::kLayerNorm, Op::kAddRmsNorm}) {
            const Case c = WithBiasAndHalfK(op, dtype, 3, cols);
            SCOPED_TRACE(c.Name() + " on " + TargetName(target) + (against_end ? ", guard after" : ", guard before"));
            Inputs in = MakeInputs(c);
            if (op == Op::kAddRmsNorm) in.residual = in.dy;
            const Outputs want = RunForward(c, in, RMSNORM_BACKEND_AUTO);
            const Outputs want_grad = RunBackward(c, in, &want, RMSNORM_BACKEND_AUTO);
            const size_t row_bytes = in.x.bytes();
            const size_t col_bytes = size_t(cols) * sizeof(float), per_row = size_t(c.rows) * sizeof(float);
            GuardedBytes x(in.x.data(), row_bytes, against_end), dy(in.dy.data(), row_bytes, against_end);
            GuardedBytes y(nullptr, row_bytes, against_end), h(nullptr, row_bytes, against_end);
            GuardedBytes dx(nullptr, row_bytes, against_end);
            GuardedBytes w(in.weight.data(), col_bytes, against_end), b(in.bias.data(), col_bytes, against_end);
            GuardedBytes dw(nullptr, col_bytes, against_end), db(nullptr, col_bytes, against_end);
            GuardedBytes mean(nullptr, per_row, against_end), rstd(nullptr, per_row, against_end);
            const rmsnorm_config config = c.Config();
            if (op == Op::kRmsNorm) {
              ASSERT_EQ(RMSNORM_OK, rmsnorm_forward(&config, x.data(), w.floats(), b.floats(), y.data(), rstd.floats()));
              ASSERT_EQ(RMSNORM_OK, rmsnorm_backward(&config, dy.data(), x.data(), w.floats(), rstd.floats(), dx.data(),
                                                     dw.floats(), db.floats()));
            } else if (op == Op::kLayerNorm) {
              ASSERT_EQ(RMSNORM_OK, rmsnorm_layernorm_forward(&config, x.data(), w.floats(), b.floats(), y.data(),
                                                              mean.floats(), rstd.floats()));
              ASSERT_EQ(RMSNORM_OK, rmsnorm_layernorm_backward(&config, dy.data(), x.data(), w.floats(), mean.floats(),
                                                               rstd.floats(), dx.data(), dw.floats(), db.floats()));
            } else {
              ASSERT_EQ(RMSNORM_OK, rmsnorm_add_forward(&config, x.data(), dy.data(), w.floats(), b.floats(), y.data(),
                                                        h.data(), rstd.floats()));
              ASSERT_TRUE(h.Equals(want.residual_out.data()));
              ASSERT_EQ(RMSNORM_OK, rmsnorm_backward(&config, dy.data(), h.data(), w.floats(), rstd.floats(), dx.data(),
                                                     dw.floats(), db.floats()));
            }
            EXPECT_TRUE(y.Equals(want.y.data()));
            EXPECT_TRUE(rstd.Equals(want.rstd.data()));
            EXPECT_TRUE(dx.Equals(want_grad.dx.data()));
            EXPECT_TRUE(dw.Equals(want_grad.dweight.data()));
            EXPECT_TRUE(db.Equals(want_grad.dbias.data()));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace rmsnorm::test
