// The case table: which op, direction, dtype, shape and thread count is measured, how each is named
// (the names --filter matches), and the byte model that turns a time into GB/s.
#ifndef RMSNORM_BENCH_CASES_H_
#define RMSNORM_BENCH_CASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"
#include "stream.h"

namespace rmsnorm_bench {

// What a case measures: a norm of registry/norms.inc (add_rmsnorm: the fused residual add).
using Op = rmsnorm::registry::Norm;
enum class Direction { kForward, kBackward, kForwardBackward };

// pRMSNorm's p throughout: the paper's 6.25%.
constexpr float kPartial = 0.0625f;

struct Shape {
  int64_t rows = 0, cols = 0;
  bool operator==(const Shape& o) const { return rows == o.rows && cols == o.cols; }
};

struct Case {
  Op op = Op::kRmsNorm;
  Direction direction = Direction::kForward;
  rmsnorm_dtype dtype = RMSNORM_F32;
  Shape shape;
  int threads = 1;
};

const char* OpName(Op op);        // "prmsnorm": what ids and --filter use
std::string OpLabel(Op op);       // "prmsnorm(6.25%)": what tables show
const char* DirectionName(Direction direction);
std::string ShapeName(Shape shape);  // "8192x4096"
std::string CaseId(const Case& c);   // "rmsnorm/fwd/f32/8192x4096/t2"

// The byte model. Forward: x read, y written (2 tensors); with the fused residual add also residual
// read and residual_out written (4). Backward: dy and x read, dx written (3); weight, saved statistics
// and parameter gradients are O(rows + cols) and not counted. fwd+bwd: 2 + 3 = 5.
int TensorsMoved(Op op, Direction direction);
int64_t BytesMoved(const Case& c);

// The stream loop that moves the same tensors: a scale for a forward, a triad for a backward...
StreamLoop StreamLoopFor(Op op, Direction direction);

// Every case of the default run at `hardware_threads`, plus, with `single_thread_rows`, the key ones
// (f32 RMSNorm, pRMSNorm and LayerNorm; bf16 forward at the streaming shape) on 1 thread when that
// differs. With explicit thread counts, every case runs at each of them instead.
// `shapes` replaces the default shapes when not empty.
std::vector<Case> DefaultCases(int hardware_threads, const std::vector<int>& explicit_threads,
                               bool single_thread_rows, const std::vector<Shape>& shapes = {});

// Comma-separated alternatives; a case is kept when its id contains any of them. A leading '^'
// anchors an alternative at the start of the id (so "^rmsnorm/" leaves out prmsnorm and add_rmsnorm).
bool MatchesFilter(const Case& c, const std::string& filter);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_CASES_H_
