#include "cases.h"

#include <algorithm>

#include "tensor.h"

namespace rmsnorm_bench {
namespace {

struct OpDirection {
  Op op;
  Direction direction;
};

// Every norm of the registry in every direction it has (the fused residual add is forward-only in the
// C ABI), in the registry's order.
const std::vector<OpDirection>& OpDirections() {
  static const std::vector<OpDirection> all = [] {
    std::vector<OpDirection> v;
    for (const rmsnorm::registry::NormInfo& norm : rmsnorm::registry::kNorms) {
      v.push_back({norm.norm, Direction::kForward});
      if (norm.fused_add()) continue;
      v.push_back({norm.norm, Direction::kBackward});
      v.push_back({norm.norm, Direction::kForwardBackward});
    }
    return v;
  }();
  return all;
}

// Streaming (each tensor 4-8x the 32 MiB L3), cache-resident (a training micro-batch slice), a
// decode row, short rows (QK-norm: tokens x heads rows of head_dim 128), long rows (fewer rows than
// threads, cols past 64K), and an odd width (every row ends in a partial vector).
const std::vector<Shape>& DefaultShapes() {
  static const std::vector<Shape> shapes = {{8192, 4096}, {64, 1024}, {1, 4096}, {4096, 128}, {4, 262144},
                                            {1024, 100}};
  return shapes;
}

const std::vector<rmsnorm_dtype>& DefaultDtypes() {
  static const std::vector<rmsnorm_dtype> dtypes = [] {
    std::vector<rmsnorm_dtype> v;
    for (const rmsnorm::registry::DtypeInfo& d : rmsnorm::registry::kDtypes) v.push_back(d.code);
    return v;
  }();
  return dtypes;
}

bool IsKeyCase(const Case& c) {
  const bool compared = c.op == Op::kRmsNorm || c.op == Op::kPRmsNorm || c.op == Op::kLayerNorm;
  if (c.dtype == RMSNORM_F32) return compared;
  return c.dtype == RMSNORM_BF16 && compared && c.op != Op::kPRmsNorm && c.direction == Direction::kForward &&
         c.shape == Shape{8192, 4096};
}

}  // namespace

const char* OpName(Op op) { return rmsnorm::registry::Info(op).name; }

std::string OpLabel(Op op) {
  if (op == Op::kPRmsNorm) return "prmsnorm(6.25%)";
  return OpName(op);
}

const char* DirectionName(Direction direction) {
  switch (direction) {
    case Direction::kForward: return "fwd";
    case Direction::kBackward: return "bwd";
    case Direction::kForwardBackward: return "fwd+bwd";
  }
  return "?";
}

std::string ShapeName(Shape shape) { return std::to_string(shape.rows) + "x" + std::to_string(shape.cols); }

std::string CaseId(const Case& c) {
  return std::string(OpName(c.op)) + "/" + DirectionName(c.direction) + "/" + DtypeName(c.dtype) + "/" +
         ShapeName(c.shape) + "/t" + std::to_string(c.threads);
}

int TensorsMoved(Op op, Direction direction) { return StreamTensors(StreamLoopFor(op, direction)); }

int64_t BytesMoved(const Case& c) {
  return int64_t(TensorsMoved(c.op, c.direction)) * c.shape.rows * c.shape.cols * int64_t(DtypeSize(c.dtype));
}

StreamLoop StreamLoopFor(Op op, Direction direction) {
  switch (direction) {
    case Direction::kForward: return op == Op::kAddRmsNorm ? StreamLoop::kAddScale : StreamLoop::kScale;
    case Direction::kBackward: return StreamLoop::kTriad;
    case Direction::kForwardBackward: return StreamLoop::kScaleThenTriad;
  }
  return StreamLoop::kScale;
}

std::vector<Case> DefaultCases(int hardware_threads, const std::vector<int>& explicit_threads,
                               bool single_thread_rows, const std::vector<Shape>& shapes) {
  std::vector<Case> cases;
  for (const Shape& shape : shapes.empty() ? DefaultShapes() : shapes) {
    for (rmsnorm_dtype dtype : DefaultDtypes()) {
      for (const OpDirection& od : OpDirections()) {
        Case c;
        c.op = od.op;
        c.direction = od.direction;
        c.dtype = dtype;
        c.shape = shape;
        if (!explicit_threads.empty()) {
          for (int t : explicit_threads) {
            c.threads = t;
            cases.push_back(c);
          }
          continue;
        }
        c.threads = hardware_threads;
        cases.push_back(c);
        if (single_thread_rows && hardware_threads > 1 && IsKeyCase(c)) {
          c.threads = 1;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

bool MatchesFilter(const Case& c, const std::string& filter) {
  if (filter.empty()) return true;
  const std::string id = CaseId(c);
  size_t start = 0;
  while (start <= filter.size()) {
    const size_t comma = std::min(filter.find(',', start), filter.size());
    std::string alternative = filter.substr(start, comma - start);
    start = comma + 1;
    if (alternative.empty()) continue;
    if (alternative[0] == '^') {
      if (id.compare(0, alternative.size() - 1, alternative, 1, std::string::npos) == 0) return true;
    } else if (id.find(alternative) != std::string::npos) {
      return true;
    }
  }
  return false;
}

}  // namespace rmsnorm_bench
