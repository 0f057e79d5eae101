#include "targets.h"

#include <cmath>

#include "cross_core.h"
#include "format.h"
#include "tensor.h"

namespace rmsnorm_bench {
namespace {

const CaseResult* Find(const std::vector<CaseResult>& results, Op op, Direction direction, rmsnorm_dtype dtype,
                       Shape shape) {
  const CaseResult* best = nullptr;
  for (const CaseResult& r : results) {
    if (r.ok() && r.c.op == op && r.c.direction == direction && r.c.dtype == dtype && r.c.shape == shape &&
        (best == nullptr || r.c.threads > best->c.threads))
      best = &r;
  }
  return best;
}

// Where the case ran on several threads: how far apart their cores were (cross_core.h).
std::string CrossCoreSuffix(const CaseResult& r) {
  const std::string text = CrossCoreText(r.cross_core_ns_before, r.cross_core_ns_after);
  return text.empty() ? text : "; " + text;
}

// The case's fraction of its stream reference: the fastest of the ordinary-store, the non-temporal
// and (rows from memory) the row-phased copy of the same bytes (for a cache-resident shape, the
// ordinary one: a copy that stays in cache).
TargetOutcome FractionTarget(const std::vector<CaseResult>& results, const std::string& name, Op op,
                             Direction direction, rmsnorm_dtype dtype, Shape shape, double threshold) {
  TargetOutcome t;
  t.name = name;
  t.comparison = ">=";
  t.threshold = threshold;
  const CaseResult* r = Find(results, op, direction, dtype, shape);
  t.cases = std::string(OpName(op)) + "/" + DirectionName(direction) + "/" + DtypeName(dtype) + "/" +
            ShapeName(shape);
  if (r == nullptr) return t;
  t.cases = CaseId(r->c);
  t.evaluated = true;
  t.measured = r->fraction_of_stream;
  t.detail = FormatGbps(r->gbps) + " of " + FormatGbps(r->stream_gbps) + " GB/s" +
             " (" + StreamStoresName(r->stream_stores) + (r->stream_stores == StreamStores::kOrdinary ? "-store" : "") +
             " copy)" +
             (std::isnan(r->row_phased_fraction) ? ""
                                                 : "; row-phased copy " + FormatFixed(r->row_phased_fraction, 2)) +
             CrossCoreSuffix(*r);
  return t;
}

// numerator time / denominator time.
TargetOutcome RatioTarget(const std::string& name, const CaseResult* numerator, const CaseResult* denominator,
                          const std::string& comparison, double threshold, const std::string& cases_if_missing) {
  TargetOutcome t;
  t.name = name;
  t.comparison = comparison;
  t.threshold = threshold;
  t.cases = cases_if_missing;
  if (numerator == nullptr || denominator == nullptr) return t;
  t.cases = CaseId(numerator->c) + " / " + CaseId(denominator->c);
  t.evaluated = true;
  t.measured = numerator->time.median / denominator->time.median;
  t.detail = FormatSeconds(numerator->time.median) + " / " + FormatSeconds(denominator->time.median) +
             CrossCoreSuffix(*numerator);
  return t;
}

}  // namespace

std::vector<TargetOutcome> EvaluateTargets(const std::vector<CaseResult>& results) {
  std::vector<TargetOutcome> targets;
  const Shape streaming{8192, 4096}, short_rows{4096, 128};
  const struct {
    const char* name;
    Op op;
    Direction direction;
    rmsnorm_dtype dtype;
    Shape shape;
    double threshold;
  } fractions[] = {
      {"f32 RMSNorm forward 8192x4096", Op::kRmsNorm, Direction::kForward, RMSNORM_F32, streaming, 0.92},
      {"f32 LayerNorm forward 8192x4096", Op::kLayerNorm, Direction::kForward, RMSNORM_F32, streaming, 0.90},
      {"f32 RMSNorm backward 8192x4096 (dy, x -> dx, dweight)", Op::kRmsNorm, Direction::kBackward, RMSNORM_F32,
       streaming, 0.85},
      {"bf16 RMSNorm forward 8192x4096", Op::kRmsNorm, Direction::kForward, RMSNORM_BF16, streaming, 0.90},
      {"bf16 RMSNorm backward 8192x4096", Op::kRmsNorm, Direction::kBackward, RMSNORM_BF16, streaming, 0.85},
      {"f32 RMSNorm forward 4096x128 (short rows)", Op::kRmsNorm, Direction::kForward, RMSNORM_F32, short_rows, 0.85},
      {"bf16 RMSNorm forward 4096x128 (short rows)", Op::kRmsNorm, Direction::kForward, RMSNORM_BF16, short_rows,
       0.85},
  };
  for (const auto& f : fractions)
    targets.push_back(FractionTarget(results, std::string(f.name) + ", fraction of stream", f.op, f.direction,
                                     f.dtype, f.shape, f.threshold));

  const Shape cache{64, 1024};
  targets.push_back(RatioTarget("64x1024 f32: LayerNorm fwd+bwd time / RMSNorm fwd+bwd time",
                                Find(results, Op::kLayerNorm, Direction::kForwardBackward, RMSNORM_F32, cache),
                                Find(results, Op::kRmsNorm, Direction::kForwardBackward, RMSNORM_F32, cache), ">=",
                                1.2, "layernorm/fwd+bwd/f32/64x1024 / rmsnorm/fwd+bwd/f32/64x1024"));
  targets.push_back(RatioTarget("64x1024 f32: RMSNorm fwd time / pRMSNorm(6.25%) fwd time",
                                Find(results, Op::kRmsNorm, Direction::kForward, RMSNORM_F32, cache),
                                Find(results, Op::kPRmsNorm, Direction::kForward, RMSNORM_F32, cache), ">=", 1.25,
                                "rmsnorm/fwd/f32/64x1024 / prmsnorm/fwd/f32/64x1024"));

  // The row's stream reference is the plain scaled copy of that row (on the calling thread: a
  // 32 KiB pass is below the size any pool is worth waking for).
  TargetOutcome decode;
  decode.name = "1x4096 f32: RMSNorm forward call / plain scaled copy of the row";
  decode.comparison = "<=";
  decode.threshold = 2.0;
  decode.cases = "rmsnorm/fwd/f32/1x4096";
  if (const CaseResult* r = Find(results, Op::kRmsNorm, Direction::kForward, RMSNORM_F32, {1, 4096})) {
    decode.cases = CaseId(r->c);
    decode.evaluated = true;
    decode.measured = r->time.median / r->stream_time.median;
    decode.detail = FormatSeconds(r->time.median) + " / " + FormatSeconds(r->stream_time.median) + " (copy on " +
                    std::to_string(r->stream_threads) + " thread" + (r->stream_threads == 1 ? "" : "s") + ")";
  }
  targets.push_back(decode);
  return targets;
}

}  // namespace rmsnorm_bench
