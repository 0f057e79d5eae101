// Bad input: every invalid argument of every function is refused with RMSNORM_ERROR_INVALID_ARGUMENT,
// a message naming the function and the argument, and outputs left exactly as they were.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "rmsnorm/rmsnorm.h"
#include "rmsnorm/rmsnorm.hpp"

namespace rmsnorm::test {
namespace {

constexpr int64_t kRows = 3, kCols = 8, kElements = kRows * kCols;
constexpr uint8_t kCanary = 0xA5;

// Every buffer any function takes, carved from one arena so tests can point one into another.
struct Arena {
  std::vector<float> storage = std::vector<float>(16 * 64, 0.5f);
  float* at(int slot) { return storage.data() + 64 * slot; }  // 64 floats per slot, 256-byte aligned apart
};

struct Args {
  rmsnorm_config config = rmsnorm_config_init(kRows, kCols);
  const rmsnorm_config* config_ptr = nullptr;
  const void* x = nullptr;
  const void* residual = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  void* y = nullptr;
  void* residual_out = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  const void* dy = nullptr;
  void* dx = nullptr;
  float* dweight = nullptr;
  float* dbias = nullptr;
};

enum Slot { kX, kResidual, kWeight, kBias, kY, kResidualOut, kMean, kRstd, kDy, kDx, kDweight, kDbias, kSlots };

Args ValidArgs(Arena& a, bool layer_backward_stats = true) {
  Args args;
  args.config_ptr = &args.config;
  args.x = a.at(kX);
  args.residual = a.at(kResidual);
  args.weight = a.at(kWeight);
  args.bias = a.at(kBias);
  args.y = a.at(kY);
  args.residual_out = a.at(kResidualOut);
  args.mean = layer_backward_stats ? a.at(kMean) : nullptr;
  args.rstd = a.at(kRstd);
  args.dy = a.at(kDy);
  args.dx = a.at(kDx);
  args.dweight = a.at(kDweight);
  args.dbias = a.at(kDbias);
  return args;
}

struct Function {
  const char* name;
  bool layer, l2, add, backward;
  std::function<rmsnorm_status(Args&)> call;
};

// Backward calls read mean/rstd; forward calls write them.
const std::vector<Function>& Functions() {
  static const std::vector<Function> functions = {
      {"rmsnorm_forward", false, false, false, false,
       [](Args& a) { return rmsnorm_forward(a.config_ptr, a.x, a.weight, a.bias, a.y, a.rstd); }},
      {"rmsnorm_add_forward", false, false, true, false,
       [](Args& a) {
         return rmsnorm_add_forward(a.config_ptr, a.x, a.residual, a.weight, a.bias, a.y, a.residual_out, a.rstd);
       }},
      {"rmsnorm_backward", false, false, false, true,
       [](Args& a) { return rmsnorm_backward(a.config_ptr, a.dy, a.x, a.weight, a.rstd, a.dx, a.dweight, a.dbias); }},
      {"rmsnorm_layernorm_forward", true, false, false, false,
       [](Args& a) { return rmsnorm_layernorm_forward(a.config_ptr, a.x, a.weight, a.bias, a.y, a.mean, a.rstd); }},
      {"rmsnorm_layernorm_backward", true, false, false, true,
       [](Args& a) {
         return rmsnorm_layernorm_backward(a.config_ptr, a.dy, a.x, a.weight, a.mean, a.rstd, a.dx, a.dweight, a.dbias);
       }},
      {"rmsnorm_l2norm_forward", false, true, false, false,
       [](Args& a) { return rmsnorm_l2norm_forward(a.config_ptr, a.x, a.weight, a.bias, a.y, a.rstd); }},
      {"rmsnorm_l2norm_backward", false, true, false, true,
       [](Args& a) {
         return rmsnorm_l2norm_backward(a.config_ptr, a.dy, a.x, a.weight, a.rstd, a.dx, a.dweight, a.dbias);
       }},
  };
  return functions;
}

struct Mutation {
  std::string what;      // for the failure message
  std::string expected;  // substring the error message must contain
  std::function<bool(const Function&)> applies;
  std::function<void(Args&, Arena&)> apply;
};

const char* Misaligned(const void* p) { return static_cast<const char*>(p) + 1; }

std::vector<Mutation> Mutations() {
  auto all = [](const Function&) { return true; };
  auto forward = [](const Function& f) { return !f.backward; };
  auto backward = [](const Function& f) { return f.backward; };
  auto rms_only = [](const Function& f) { return !f.layer && !f.l2; };
  auto not_rms = [](const Function& f) { return f.layer || f.l2; };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  return {
      {"config NULL", "config is NULL", all, [](Args& a, Arena&) { a.config_ptr = nullptr; }},
      {"rows < 0", "rows must be >= 0", all, [](Args& a, Arena&) { a.config.rows = -1; }},
      {"cols = 0", "cols must be >= 1", all, [](Args& a, Arena&) { a.config.cols = 0; }},
      {"cols < 0", "cols must be >= 1", all, [](Args& a, Arena&) { a.config.cols = -5; }},
      {"rows * cols overflows", "too large", all,
       [](Args& a, Arena&) { a.config.rows = a.config.cols = int64_t{1} << 40; }},
      {"dtype out of range", "dtype", all,
       [](Args& a, Arena&) {
         const int seven = 7;  // as a C caller may pass; C++ may not form it as an rmsnorm_dtype
         std::memcpy(&a.config.dtype, &seven, sizeof seven);
       }},
      {"eps < 0", "eps", all, [](Args& a, Arena&) { a.config.eps = -1e-6f; }},
      {"eps NaN", "eps", all, [=](Args& a, Arena&) { a.config.eps = nan; }},
      {"eps infinite", "eps", all, [=](Args& a, Arena&) { a.config.eps = inf; }},
      {"partial 0", "partial", all, [](Args& a, Arena&) { a.config.partial = 0.0f; }},
      {"partial > 1", "partial", all, [](Args& a, Arena&) { a.config.partial = 1.5f; }},
      {"partial NaN", "partial", all, [=](Args& a, Arena&) { a.config.partial = nan; }},
      {"partial != 1 for LayerNorm / L2-Norm", "partial must be 1", not_rms,
       [](Args& a, Arena&) { a.config.partial = 0.5f; }},
      {"weight_offset NaN", "weight_offset", all, [=](Args& a, Arena&) { a.config.weight_offset = nan; }},
      {"weight_offset infinite", "weight_offset", all, [=](Args& a, Arena&) { a.config.weight_offset = -inf; }},
      {"x NULL", "x is NULL", all, [](Args& a, Arena&) { a.x = nullptr; }},
      {"x misaligned", "x is not aligned", all, [](Args& a, Arena&) { a.x = Misaligned(a.x); }},
      {"bf16 x misaligned", "x is not aligned", all,
       [](Args& a, Arena&) {
         a.config.dtype = RMSNORM_BF16;
         a.x = Misaligned(a.x);
       }},
      {"weight misaligned", "weight is not aligned", all,
       [](Args& a, Arena&) { a.weight = reinterpret_cast<const float*>(Misaligned(a.weight)); }},
      {"bias misaligned", "bias is not aligned", forward,
       [](Args& a, Arena&) { a.bias = reinterpret_cast<const float*>(Misaligned(a.bias)); }},
      {"y NULL", "y is NULL", forward, [](Args& a, Arena&) { a.y = nullptr; }},
      {"y overlaps x partly", "overlap", forward,
       [](Args& a, Arena&) { a.y = static_cast<float*>(const_cast<void*>(a.x)) + 1; }},
      {"rstd inside y", "overlap", forward, [](Args& a, Arena&) { a.rstd = static_cast<float*>(a.y) + 2; }},
      {"rstd misaligned", "rstd is not aligned", all,
       [](Args& a, Arena&) { a.rstd = reinterpret_cast<float*>(const_cast<char*>(Misaligned(a.rstd))); }},
      {"residual NULL", "residual is NULL", [](const Function& f) { return f.add; },
       [](Args& a, Arena&) { a.residual = nullptr; }},
      {"residual_out NULL", "residual_out is NULL", [](const Function& f) { return f.add; },
       [](Args& a, Arena&) { a.residual_out = nullptr; }},
      {"y and residual_out the same (two outputs)", "overlap", [](const Function& f) { return f.add; },
       [](Args& a, Arena&) { a.residual_out = a.y; }},
      {"dy NULL", "dy is NULL", backward, [](Args& a, Arena&) { a.dy = nullptr; }},
      {"dx NULL", "dx is NULL", backward, [](Args& a, Arena&) { a.dx = nullptr; }},
      {"dx overlaps dy partly", "overlap", backward,
       [](Args& a, Arena&) { a.dx = static_cast<float*>(const_cast<void*>(a.dy)) + 3; }},
      {"dweight is weight", "overlap", backward,
       [](Args& a, Arena&) { a.dweight = const_cast<float*>(a.weight); }},
      {"dbias is dweight", "overlap", backward, [](Args& a, Arena&) { a.dbias = a.dweight; }},
      {"dweight inside dx", "overlap", backward, [](Args& a, Arena&) { a.dweight = static_cast<float*>(a.dx) + 1; }},
      {"mean without rstd", "mean and rstd", [](const Function& f) { return f.layer && f.backward; },
       [](Args& a, Arena&) { a.rstd = nullptr; }},
      {"rstd without mean", "mean and rstd", [](const Function& f) { return f.layer && f.backward; },
       [](Args& a, Arena&) { a.mean = nullptr; }},
      {"mean misaligned", "mean is not aligned", [](const Function& f) { return f.layer; },
       [](Args& a, Arena&) { a.mean = reinterpret_cast<float*>(const_cast<char*>(Misaligned(a.mean))); }},
      {"partial -inf", "partial", rms_only,
       [=](Args& a, Arena&) { a.config.partial = -inf; }},
  };
}

// The slots a call writes when it succeeds.
std::vector<Slot> OutputSlots(const Function& f) {
  if (f.backward) return {kDx, kDweight, kDbias};
  std::vector<Slot> slots = {kY, kRstd};
  if (f.add) slots.push_back(kResidualOut);
  if (f.layer) slots.push_back(kMean);
  return slots;
}

TEST(BadInput, EveryInvalidArgumentIsRefusedBeforeAnyWrite) {
  int checked = 0;
  for (const Function& f : Functions()) {
    for (const Mutation& m : Mutations()) {
      if (!m.applies(f)) continue;
      SCOPED_TRACE(std::string(f.name) + ": " + m.what);
      Arena arena;
      for (Slot s : OutputSlots(f)) std::memset(arena.at(s), kCanary, 64 * sizeof(float));
      if (f.backward) {
        for (int i = 0; i < kRows; ++i) arena.at(kRstd)[i] = 1.0f;  // saved statistics the backward reads
      }
      const std::vector<float> before = arena.storage;
      Args args = ValidArgs(arena);
      m.apply(args, arena);
      const rmsnorm_status status = f.call(args);
      EXPECT_EQ(RMSNORM_ERROR_INVALID_ARGUMENT, status);
      const std::string message = rmsnorm_last_error();
      EXPECT_NE(std::string::npos, message.find(f.name)) << message;
      EXPECT_NE(std::string::npos, message.find(m.expected)) << message;
      EXPECT_EQ(0, std::memcmp(before.data(), arena.storage.data(), before.size() * sizeof(float)))
          << "an output was written";
      ++checked;
    }
  }
  EXPECT_GT(checked, 150);
}

// The same arguments with nothing mutated succeed, so each refusal above is the mutation's doing.
TEST(BadInput, TheUnmutatedCallsSucceed) {
  for (const Function& f : Functions()) {
    Arena arena;
    for (int i = 0; i < kRows; ++i) arena.at(kRstd)[i] = 1.0f;
    Args args = ValidArgs(arena);
    EXPECT_EQ(RMSNORM_OK, f.call(args)) << f.name << ": " << rmsnorm_last_error();
  }
}

TEST(BadInput, LastErrorIsPerThreadAndKept) {
  rmsnorm_config config = rmsnorm_config_init(1, 4);
  config.eps = -1.0f;
  float x[4] = {1, 2, 3, 4}, y[4];
  ASSERT_EQ(RMSNORM_ERROR_INVALID_ARGUMENT, rmsnorm_forward(&config, x, nullptr, nullptr, y, nullptr));
  const std::string first = rmsnorm_last_error();
  config.eps = 0.0f;
  ASSERT_EQ(RMSNORM_OK, rmsnorm_forward(&config, x, nullptr, nullptr, y, nullptr));
  EXPECT_EQ(first, rmsnorm_last_error());  // a success keeps the last failure's message
  std::string other_thread;
  std::thread([&] { other_thread = rmsnorm_last_error(); }).join();
  EXPECT_EQ("", other_thread);
}

TEST(BadInput, CppApiThrowsWithStatusAndChecksSizes) {
  std::vector<float> x(kElements, 1.0f), y(kElements), w(kCols - 1);
  try {
    rms_norm<float>(matrix(x, kCols), matrix(y, kCols), NormArgs{}.with_weight(w));
    FAIL() << "a weight of the wrong size was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(RMSNORM_ERROR_INVALID_ARGUMENT, e.status());
    EXPECT_NE(std::string::npos, std::string(e.what()).find("weight"));
  }
  try {
    rms_norm<float>(matrix(x, kCols), matrix(y, kCols), NormArgs{}.with_eps(-1.0f));
    FAIL() << "a negative eps was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(RMSNORM_ERROR_INVALID_ARGUMENT, e.status());
    EXPECT_NE(std::string::npos, std::string(e.what()).find("eps"));
  }
  EXPECT_THROW(rms_norm<float>(matrix(x, kCols), matrix(y.data(), kRows - 1, kCols)), Error);
  EXPECT_THROW(matrix(x, 5), Error);  // 24 elements are no whole number of 5-column rows
}

}  // namespace
}  // namespace rmsnorm::test
