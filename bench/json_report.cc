#include "json_report.h"

#include <cmath>
#include <cstdio>

#include "tensor.h"

namespace rmsnorm_bench {
namespace {

std::string Quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': q += "\\\""; break;
      case '\\': q += "\\\\"; break;
      case '\n': q += "\\n"; break;
      case '\t': q += "\\t"; break;
      default:
        if (ch < 0x20) {
          char buffer[8];
          std::snprintf(buffer, sizeof buffer, "\\u%04x", ch);
          q += buffer;
        } else {
          q += char(ch);
        }
    }
  }
  return q + "\"";
}

// JSON has no NaN or infinity: those become null.
std::string Number(double v) {
  if (!std::isfinite(v)) return "null";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

std::string Bool(bool b) { return b ? "true" : "false"; }

// Builds one JSON object, `"key": value` pairs at the given indent; nested values are passed in as
// already-built text.
class Object {
 public:
  explicit Object(int indent) : indent_(size_t(indent), ' ') {}
  Object& Raw(const std::string& key, const std::string& value) {
    text_ += (text_.empty() ? "{\n" : ",\n") + indent_ + "  " + Quote(key) + ": " + value;
    return *this;
  }
  Object& String(const std::string& key, const std::string& value) { return Raw(key, Quote(value)); }
  Object& Num(const std::string& key, double value) { return Raw(key, Number(value)); }
  std::string Text() const { return text_.empty() ? "{}" : text_ + "\n" + indent_ + "}"; }

 private:
  std::string indent_;
  std::string text_;
};

// [a, b, c] with one element per line at the given indent.
std::string Array(const std::vector<std::string>& elements, int indent) {
  if (elements.empty()) return "[]";
  const std::string pad(size_t(indent), ' ');
  std::string text = "[";
  for (size_t i = 0; i < elements.size(); ++i) text += (i ? ",\n" : "\n") + pad + "  " + elements[i];
  return text + "\n" + pad + "]";
}

std::string StatsJson(const TimeStats& s) {
  return "{\"median\": " + Number(s.median) + ", \"min\": " + Number(s.min) + ", \"max\": " + Number(s.max) +
         ", \"p25\": " + Number(s.p25) + ", \"p75\": " + Number(s.p75) + ", \"samples\": " +
         std::to_string(s.samples) + ", \"calls_per_sample\": " + std::to_string(s.calls_per_sample) + "}";
}

// [{"threads": 2, "stores": "non-temporal", "median_seconds": ...}, ...]
std::string CandidatesJson(const std::vector<CaseResult::StreamCandidate>& candidates) {
  std::string text = "[";
  for (size_t i = 0; i < candidates.size(); ++i)
    text += std::string(i ? ", " : "") + "{\"threads\": " + std::to_string(candidates[i].threads) +
            ", \"stores\": \"" + StreamStoresName(candidates[i].stores) + "\", \"median_seconds\": " +
            Number(candidates[i].median_seconds) + "}";
  return text + "]";
}

}  // namespace

void WriteJson(std::ostream& out, const MachineInfo& m, const RunInfo& run, const std::vector<CaseResult>& results,
               const std::vector<TargetOutcome>& targets) {
  Object machine(2);
  machine.String("cpu_model", m.cpu_model)
      .Num("hardware_threads", m.hardware_threads)
      .Num("l1d_bytes", double(m.l1d_bytes))
      .Num("l2_bytes", double(m.l2_bytes))
      .Num("l3_bytes", double(m.l3_bytes))
      .String("cpu_target", m.cpu_target)
      .String("stream_target", m.stream_target)
      .String("library_version", m.library_version)
      .String("header_version", m.header_version)
      .Num("load_average_1min", m.load_average_1min >= 0 ? m.load_average_1min : NAN)
      .Num("cross_core_round_trip_ns", m.cross_core_ns);

  std::string threads = "[";
  for (size_t i = 0; i < run.threads.size(); ++i) threads += (i ? ", " : "") + std::to_string(run.threads[i]);
  threads += "]";
  Object settings(2);
  settings.Raw("quick", Bool(run.quick))
      .String("filter", run.filter)
      .Raw("threads", threads)
      .Num("sample_seconds", run.policy.sample_seconds)
      .Num("warmup_seconds", run.policy.warmup_seconds)
      .Num("min_samples", run.policy.min_samples)
      .Num("max_samples", run.policy.max_samples)
      .Num("group_budget_seconds", run.policy.budget_seconds)
      .Num("wall_seconds", run.wall_seconds)
      .Num("load_average_1min_end", run.load_average_end >= 0 ? run.load_average_end : NAN)
      .String("byte_model",
              "bytes = tensors * rows * cols * sizeof(dtype); tensors: fwd 2 (x, y), add_rmsnorm fwd 4 "
              "(x, residual, y, residual_out), bwd 3 (dy, x, dx), fwd+bwd 5; weights, statistics and "
              "parameter gradients not counted")
      .String("gbps_unit", "1e9 bytes per second");

  std::vector<std::string> cases;
  for (const CaseResult& r : results) {
    Object c(4);
    c.String("id", CaseId(r.c))
        .String("op", OpName(r.c.op))
        .Num("partial", rmsnorm::registry::Info(r.c.op).partial ? double(kPartial) : 1.0)
        .String("direction", DirectionName(r.c.direction))
        .String("dtype", DtypeName(r.c.dtype))
        .Num("rows", double(r.c.shape.rows))
        .Num("cols", double(r.c.shape.cols))
        .Num("threads", r.c.threads)
        .Num("tensors", r.tensors)
        .Num("bytes", double(r.bytes))
        .String("residency", r.residency)
        .Raw("ok", Bool(r.ok()))
        .Raw("error", r.ok() ? "null" : Quote(r.error));
    if (r.ok()) {
      c.Raw("time_seconds", StatsJson(r.time))
          .Num("gbps", r.gbps)
          .String("stream_loop", r.stream_loop)
          .Num("stream_threads", r.stream_threads)
          .String("stream_stores", StreamStoresName(r.stream_stores))
          .Num("ordinary_stream_gbps", r.ordinary_stream_gbps)
          .Raw("stream_time_seconds", StatsJson(r.stream_time))
          .Raw("stream_candidates", CandidatesJson(r.stream_candidates))
          .Num("stream_gbps", r.stream_gbps)
          .Num("fraction_of_stream", r.fraction_of_stream)
          .Num("row_phased_fraction_of_stream", r.row_phased_fraction)
          .Num("speedup_vs_layernorm", r.vs_layernorm)
          .Num("cross_core_round_trip_ns_before", r.cross_core_ns_before)
          .Num("cross_core_round_trip_ns_after", r.cross_core_ns_after);
    }
    cases.push_back(c.Text());
  }

  std::vector<std::string> outcomes;
  for (const TargetOutcome& t : targets) {
    Object o(4);
    o.String("name", t.name)
        .String("cases", t.cases)
        .String("comparison", t.comparison)
        .Num("threshold", t.threshold)
        .Num("measured", t.evaluated ? t.measured : NAN)
        .String("status", t.status())
        .String("detail", t.detail);
    outcomes.push_back(o.Text());
  }

  Object top(0);
  top.String("tool", "rmsnorm-bench")
      .Num("schema_version", 1)
      .String("command", run.command)
      .Raw("machine", machine.Text())
      .Raw("settings", settings.Text())
      .Raw("cases", Array(cases, 2))
      .Raw("targets", Array(outcomes, 2));
  out << top.Text() << "\n";
}

}  // namespace rmsnorm_bench
