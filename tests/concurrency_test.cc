// Concurrency: eight threads run every operation at once, each with its own shape, dtype and options,
// while another thread keeps changing the thread count and the backend. Every result must be, bit for
// bit, what the same call gives alone on one thread: the kernels' result, or the reference's for a
// call that started while the reference was selected. `make test` runs this under ThreadSanitizer
// (test-tsan), which also reports any data race on the way.
#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "test_util.h"

namespace rmsnorm::test {
namespace {

// The calling threads' options: every dtype, one-row, grouped, blocked and split (two column chunks)
// cuts, parameter-gradient partials, the gain offset, eps = 0, with and without weight and bias.
std::vector<Case> ThreadOptions() {
  std::vector<Case> options(8);
  options[0] = {Op::kRmsNorm, RMSNORM_F32, 64, 1024, 0.25f, 1e-6f, 0.0f, true, true, 11};
  options[1] = {Op::kRmsNorm, RMSNORM_BF16, 37, 300, 0.5f, 1e-5f, 1.0f, true, true, 12};
  options[2] = {Op::kRmsNorm, RMSNORM_F16, 3, 20000, 0.1f, 1e-6f, 0.0f, true, false, 13};
  options[3] = {Op::kRmsNorm, RMSNORM_F32, 1, 4096, 0.0625f, 1e-6f, 0.0f, true, false, 14};
  options[4] = {Op::kRmsNorm, RMSNORM_BF16, 130, 513, 0.75f, 1e-6f, 0.0f, false, true, 15};
  options[5] = {Op::kRmsNorm, RMSNORM_F32, 9, 2048, 0.3f, 0.0f, -0.5f, true, true, 16};
  options[6] = {Op::kRmsNorm, RMSNORM_F16, 200, 64, 1.0f, 1e-3f, 0.0f, false, false, 17};
  options[7] = {Op::kRmsNorm, RMSNORM_BF16, 16, 16500, 0.2f, 1e-6f, 0.25f, true, true, 18};
  return options;
}

bool SameBytes(const std::vector<float>& a, const std::vector<float>& b) {
  // An absent output is an empty vector whose data() may be null, which memcmp must not get.
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool SameForward(const Outputs& a, const Outputs& b) {
  return a.y.BitwiseEqual(b.y) && a.residual_out.BitwiseEqual(b.residual_out) && SameBytes(a.mean, b.mean) &&
         SameBytes(a.rstd, b.rstd);
}

bool SameBackward(const Outputs& a, const Outputs& b) {
  return a.dx.BitwiseEqual(b.dx) && SameBytes(a.dweight, b.dweight) && SameBytes(a.dbias, b.dbias);
}

// One operation pair of one calling thread, with the results it must give.
struct Work {
  Case c;
  Inputs in;
  Outputs forward[2], backward[2];  // alone on one thread: [0] the kernels, [1] the reference
};

TEST(Concurrency, EveryOpAtOnceWhileThreadsAndBackendChange) {
  const rmsnorm_backend saved_backend = rmsnorm_get_backend();
  const int saved_threads = rmsnorm_get_num_threads();
  constexpr rmsnorm_backend kBackends[2] = {RMSNORM_BACKEND_AUTO, RMSNORM_BACKEND_REFERENCE};

  // Each calling thread runs every norm (and so every C operation) with its own options.
  std::vector<std::vector<Work>> works;
  rmsnorm_set_num_threads(1);
  for (const Case& options : ThreadOptions()) {
    std::vector<Work>& mine = works.emplace_back();
    for (const registry::NormInfo& norm : registry::kNorms) {
      Work w;
      w.c = options;
      w.c.op = norm.norm;
      if (!norm.partial) w.c.partial = 1.0f;
      w.in = MakeInputs(w.c);
      for (int b = 0; b < 2; ++b) {
        w.forward[b] = RunForward(w.c, w.in, kBackends[b]);
        // Both backwards from the kernels' saved statistics: the same inputs for both.
        w.backward[b] = RunBackward(w.c, w.in, &w.forward[0], kBackends[b]);
      }
      mine.push_back(std::move(w));
    }
  }
  rmsnorm_set_backend(RMSNORM_BACKEND_AUTO);

  std::atomic<bool> done{false};
  std::atomic<int> calls{0}, reference_calls{0};
  std::thread changer([&] {
    for (int step = 0; !done.load(); ++step) {
      rmsnorm_set_num_threads(1 + step % 4);
      rmsnorm_set_backend(kBackends[(step / 3) % 2]);
      std::this_thread::yield();
    }
  });

  constexpr int kRounds = 3;
  std::vector<std::string> failures(works.size());
  std::vector<std::thread> callers;
  for (size_t t = 0; t < works.size(); ++t) {
    callers.emplace_back([&, t] {
      try {
        for (int round = 0; round < kRounds; ++round) {
          for (const Work& w : works[t]) {
            const Outputs forward = RunForward(w.c, w.in);
            const Outputs backward = RunBackward(w.c, w.in, &w.forward[0]);
            if (!SameForward(forward, w.forward[0]) && !SameForward(forward, w.forward[1]))
              failures[t] += " forward of " + w.c.Name() + ";";
            if (!SameBackward(backward, w.backward[0]) && !SameBackward(backward, w.backward[1]))
              failures[t] += " backward of " + w.c.Name() + ";";
            reference_calls += SameForward(forward, w.forward[1]) && !SameForward(forward, w.forward[0]);
            calls += 2;
          }
        }
      } catch (const std::exception& e) {
        failures[t] += std::string(" ") + e.what();
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  done = true;
  changer.join();
  rmsnorm_set_backend(saved_backend);
  rmsnorm_set_num_threads(saved_threads);

  for (size_t t = 0; t < failures.size(); ++t)
    EXPECT_EQ(failures[t], "") << "thread " << t << ": results differ from the same call alone";
  EXPECT_EQ(calls.load(), int(works.size() * works[0].size()) * 2 * kRounds);
  std::printf("%d calls, %d forwards on the reference\n", calls.load(), reference_calls.load());
}

}  // namespace
}  // namespace rmsnorm::test
