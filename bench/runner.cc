#include "runner.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <map>
#include <memory>
#include <tuple>

#include "cross_core.h"
#include "ops.h"
#include "stream.h"
#include "workspace.h"

namespace rmsnorm_bench {
namespace {

// Below this many bytes the stream reference is also run on the calling thread. The library keeps
// work under 128 KiB inline (src/runtime/parallel.h); the margin keeps that true if the threshold
// moves, and costs little since such runs are short.
constexpr int64_t kInlineCandidateBytes = int64_t{4} << 20;

struct Group {
  rmsnorm_dtype dtype;
  Shape shape;
  StreamLoop loop;
  int threads;
  std::vector<size_t> members;  // indices into the case list
};

// Consecutive groups share a (dtype, shape) so the workspace is filled once per shape; within one,
// forward before backward, and more threads first.
std::vector<Group> MakeGroups(const std::vector<Case>& cases) {
  using Key = std::tuple<int, int64_t, int64_t, int, int>;
  std::map<Key, size_t> index;
  std::vector<Group> groups;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const StreamLoop loop = StreamLoopFor(c.op, c.direction);
    const Key key{int(c.dtype), c.shape.rows, c.shape.cols, int(loop), c.threads};
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, groups.size()).first;
      groups.push_back(Group{c.dtype, c.shape, loop, c.threads, {}});
    }
    groups[it->second].members.push_back(i);
  }
  // Shapes and dtypes in the order the case table first names them.
  auto shape_rank = [&](const Group& g) {
    for (size_t i = 0; i < cases.size(); ++i)
      if (cases[i].shape == g.shape && cases[i].dtype == g.dtype) return i;
    return cases.size();
  };
  std::stable_sort(groups.begin(), groups.end(), [&](const Group& a, const Group& b) {
    const size_t ra = shape_rank(a), rb = shape_rank(b);
    if (ra != rb) return ra < rb;
    if (a.loop != b.loop) return int(a.loop) < int(b.loop);
    return a.threads > b.threads;
  });
  return groups;
}

StreamOperands OperandsFor(StreamLoop loop, Workspace& w) {
  StreamOperands o;
  switch (loop) {
    case StreamLoop::kScale:  // y = s·x
      o.a = w.Get(Role::kX);
      o.p = w.Get(Role::kY);
      break;
    case StreamLoop::kTriad:  // dx = dy + s·x
      o.a = w.Get(Role::kDy);
      o.b = w.Get(Role::kX);
      o.p = w.Get(Role::kDx);
      break;
    case StreamLoop::kAddScale:  // residual_out = x + residual, y = s·residual_out
      o.a = w.Get(Role::kX);
      o.b = w.Get(Role::kResidual);
      o.p = w.Get(Role::kY);
      o.q = w.Get(Role::kResidualOut);
      break;
    case StreamLoop::kScaleThenTriad:  // y = s·x, then dx = dy + s·x
      o.a = w.Get(Role::kX);
      o.b = w.Get(Role::kDy);
      o.q = w.Get(Role::kY);
      o.p = w.Get(Role::kDx);
      break;
  }
  return o;
}

void MeasureGroup(const Group& group, const std::vector<Case>& cases, const SamplingPolicy& policy, Workspace& workspace, std::vector<CaseResult>& results) {
  workspace.Prepare(group.dtype, group.shape);
  rmsnorm_set_num_threads(group.threads);

  std::vector<std::unique_ptr<OpCall>> calls;
  std::vector<size_t> measured;  // case indices with a working call, parallel to `calls`
  for (size_t i : group.members) {
    CaseResult& r = results[i];
    try {
      auto call = std::make_unique<OpCall>(cases[i], workspace);
      call->Run();  // fails here, not in the middle of a measurement
      calls.push_back(std::move(call));
      measured.push_back(i);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  }

  std::vector<std::function<void()>> contenders;
  for (auto& call : calls) contenders.push_back([c = call.get()] { c->Run(); });
  const size_t n = size_t(group.shape.rows * group.shape.cols);
  const StreamOperands operands = OperandsFor(group.loop, workspace);
  const size_t first_stream = contenders.size();
  std::vector<CaseResult::StreamCandidate> candidates;
  std::vector<int> stream_threads = {group.threads};
  const int64_t bytes = int64_t(StreamTensors(group.loop)) * int64_t(n) * int64_t(DtypeSize(group.dtype));
  if (group.threads > 1 && bytes <= kInlineCandidateBytes) stream_threads.push_back(1);
  for (int t : stream_threads) {
    for (StreamStores stores : {StreamStores::kOrdinary, StreamStores::kNonTemporal}) {
      candidates.push_back({t, stores, 0.0});
      contenders.push_back([=] { RunStream(group.loop, stores, group.dtype, n, t, operands); });
    }
  }
  // The row-phased copy, where the case's rows stream from memory and the loop is one it has.
  const bool phased_loop = group.loop == StreamLoop::kScale || group.loop == StreamLoop::kTriad;
  const bool from_memory = !group.members.empty() && results[group.members.front()].residency == "DRAM";
  size_t phased = candidates.size();  // its index among the candidates, or their count for none
  if (phased_loop && from_memory && group.shape.rows > 1) {
    const size_t rows = size_t(group.shape.rows), cols = size_t(group.shape.cols);
    candidates.push_back({group.threads, StreamStores::kRowPhased, 0.0});
    contenders.push_back([=] { RunRowPhasedStream(group.loop, group.dtype, rows, cols, group.threads, operands); });
  }

  const bool pooled = group.threads > 1;
  const double cross_core_before = pooled ? CrossCoreRoundTripNs() : std::nan("");
  const std::vector<TimeStats> stats = MeasureInTurn(contenders, policy);
  const double cross_core_after = pooled ? CrossCoreRoundTripNs() : std::nan("");
  size_t best = 0, best_ordinary = 0;
  for (size_t s = 0; s < candidates.size(); ++s) {
    candidates[s].median_seconds = stats[first_stream + s].median;
    if (candidates[s].median_seconds < candidates[best].median_seconds) best = s;
    if (candidates[s].stores == StreamStores::kOrdinary &&
        candidates[s].median_seconds < candidates[best_ordinary].median_seconds)
      best_ordinary = s;
  }

  const TimeStats& stream = stats[first_stream + best];
  for (size_t k = 0; k < measured.size(); ++k) {
    CaseResult& r = results[measured[k]];
    r.time = stats[k];
    r.gbps = double(r.bytes) / r.time.median * 1e-9;
    r.stream_time = stream;
    r.stream_candidates = candidates;
    r.stream_threads = candidates[best].threads;
    r.stream_stores = candidates[best].stores;
    r.stream_gbps = double(r.bytes) / stream.median * 1e-9;
    r.ordinary_stream_gbps = double(r.bytes) / candidates[best_ordinary].median_seconds * 1e-9;
    r.fraction_of_stream = stream.median / r.time.median;
    if (phased < candidates.size()) r.row_phased_fraction = stream.median / candidates[phased].median_seconds;
    r.cross_core_ns_before = cross_core_before;
    r.cross_core_ns_after = cross_core_after;
  }
}

void CompareWithLayerNorm(std::vector<CaseResult>& results) {
  for (CaseResult& r : results) {
    const bool comparable = r.c.op == Op::kRmsNorm || r.c.op == Op::kPRmsNorm || r.c.op == Op::kL2Norm;
    if (!comparable || !r.ok()) continue;
    for (const CaseResult& ln : results) {
      if (ln.c.op == Op::kLayerNorm && ln.ok() && ln.c.dtype == r.c.dtype && ln.c.shape == r.c.shape &&
          ln.c.direction == r.c.direction && ln.c.threads == r.c.threads)
        r.vs_layernorm = ln.time.median / r.time.median;
    }
  }
}

}  // namespace

std::vector<CaseResult> RunCases(const std::vector<Case>& cases, const MachineInfo& machine,
                                 const SamplingPolicy& policy, const ProgressFn& progress) {
  std::vector<CaseResult> results(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    CaseResult& r = results[i];
    r.c = cases[i];
    r.tensors = TensorsMoved(r.c.op, r.c.direction);
    r.bytes = BytesMoved(r.c);
    r.residency = Residency(machine, r.bytes, r.c.threads);
    r.stream_loop = StreamLoopName(StreamLoopFor(r.c.op, r.c.direction));
  }
  const int threads_before = rmsnorm_get_num_threads();
  Workspace workspace;
  size_t done = 0;
  for (const Group& group : MakeGroups(cases)) {
    MeasureGroup(group, cases, policy, workspace, results);
    for (size_t i : group.members)
      if (progress) progress(results[i], ++done, cases.size());
  }
  rmsnorm_set_num_threads(threads_before);
  CompareWithLayerNorm(results);
  return results;
}

}  // namespace rmsnorm_bench
