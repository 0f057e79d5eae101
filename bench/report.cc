#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cross_core.h"
#include "format.h"
#include "table.h"
#include "tensor.h"

namespace rmsnorm_bench {
namespace {

std::string StreamColumn(const CaseResult& r) {
  std::string s = FormatGbps(r.stream_gbps);
  if (r.stream_stores == StreamStores::kNonTemporal) s += " nt";
  if (r.stream_stores == StreamStores::kRowPhased) s += " ph";
  if (r.stream_threads != r.c.threads) s += " (" + std::to_string(r.stream_threads) + "t)";
  return s;
}

// Shapes in the order the run first met them; within a shape: dtype, direction, more threads first,
// then op, so the ops compared with each other sit on adjacent lines.
std::vector<const CaseResult*> DisplayOrder(const std::vector<CaseResult>& results, std::vector<Shape>& shapes) {
  for (const CaseResult& r : results)
    if (std::find(shapes.begin(), shapes.end(), r.c.shape) == shapes.end()) shapes.push_back(r.c.shape);
  std::vector<const CaseResult*> order;
  for (const CaseResult& r : results) order.push_back(&r);
  auto shape_rank = [&](const CaseResult* r) { return std::find(shapes.begin(), shapes.end(), r->c.shape) - shapes.begin(); };
  std::stable_sort(order.begin(), order.end(), [&](const CaseResult* a, const CaseResult* b) {
    if (shape_rank(a) != shape_rank(b)) return shape_rank(a) < shape_rank(b);
    if (a->c.dtype != b->c.dtype) return a->c.dtype < b->c.dtype;
    if (a->c.direction != b->c.direction) return a->c.direction < b->c.direction;
    if (a->c.threads != b->c.threads) return a->c.threads > b->c.threads;
    return a->c.op < b->c.op;
  });
  return order;
}

Table ResultsTable(const std::vector<const CaseResult*>& rows) {
  Table t;
  t.header = {"op", "dir", "dtype", "shape", "thr", "fits", "time", "±", "GB/s", "stream GB/s", "ordinary",
              "of stream", "phased", "vs LN"};
  t.right_aligned = {false, false, false, false, true, false, true, true, true, true, true, true, true, true};
  for (const CaseResult* r : rows) {
    std::vector<std::string> row = {OpLabel(r->c.op),          DirectionName(r->c.direction), DtypeName(r->c.dtype),
                                    ShapeName(r->c.shape),     std::to_string(r->c.threads), r->residency};
    if (!r->ok()) {
      row.insert(row.end(), {"failed", "", "", "", "", "", "", ""});
    } else {
      const double vs = r->vs_layernorm;
      row.insert(row.end(), {FormatSeconds(r->time.median), FormatPercent(r->time.relative_spread()),
                             FormatGbps(r->gbps), StreamColumn(*r), FormatGbps(r->ordinary_stream_gbps),
                             FormatFixed(r->fraction_of_stream, 2),
                             std::isnan(r->row_phased_fraction) ? "-" : FormatFixed(r->row_phased_fraction, 2),
                             std::isnan(vs) ? "-" : FormatFixed(vs, 2) + "x"});
    }
    t.rows.push_back(row);
  }
  return t;
}

// Every forward over one f32 row of 4096: time per call against the plain scaled copy of that row.
Table DecodeRowTable(const std::vector<CaseResult>& results) {
  Table t;
  t.header = {"op", "thr", "time per call", "scaled copy", "ratio"};
  t.right_aligned = {false, true, true, true, true};
  for (const CaseResult& r : results) {
    if (!r.ok() || r.c.direction != Direction::kForward || r.c.dtype != RMSNORM_F32 || !(r.c.shape == Shape{1, 4096}))
      continue;
    t.rows.push_back({OpLabel(r.c.op), std::to_string(r.c.threads), FormatSeconds(r.time.median),
                      FormatSeconds(r.stream_time.median), FormatFixed(r.time.median / r.stream_time.median, 2)});
  }
  return t;
}

Table TargetsTable(const std::vector<TargetOutcome>& targets) {
  Table t;
  t.header = {"target", "measured", "threshold", "status", "from"};
  t.right_aligned = {false, true, true, false, false};
  for (const TargetOutcome& o : targets) {
    const std::string measured = o.evaluated ? FormatFixed(o.measured, 2) : "-";
    std::string from = o.cases;
    if (!o.detail.empty()) from += ": " + o.detail;
    t.rows.push_back({o.name, measured, o.comparison + " " + FormatFixed(o.threshold, 2), o.status(), from});
  }
  return t;
}

void Print(std::ostream& out, ReportFormat format, const Table& table) {
  if (format == ReportFormat::kMarkdown) {
    PrintMarkdown(out, table);
  } else {
    PrintText(out, table);
  }
}

void Heading(std::ostream& out, ReportFormat format, const std::string& text) {
  if (format == ReportFormat::kMarkdown) {
    out << "\n#### " << text << "\n\n";
  } else {
    out << "\n== " << text << " ==\n";
  }
}

const char* ShapeRole(Shape s) {
  if (s == Shape{8192, 4096}) return "streaming from DRAM";
  if (s == Shape{64, 1024}) return "cache-resident";
  if (s == Shape{1, 4096}) return "one decode row";
  if (s == Shape{4096, 128}) return "short rows: per-head QK-norm";
  if (s.rows < 8 && s.cols >= 65536) return "few long rows";
  if (s == Shape{1024, 100}) return "odd width: each row ends in a partial vector";
  return nullptr;
}

}  // namespace

std::string MachineLine(const MachineInfo& m) {
  std::string line = m.cpu_model + ", " + std::to_string(m.hardware_threads) + " hardware threads, L1d " +
                     HumanBytes(m.l1d_bytes) + " + L2 " + HumanBytes(m.l2_bytes) + " per core, L3 " +
                     HumanBytes(m.l3_bytes) + "; kernels " + m.cpu_target + ", stream loops " + m.stream_target +
                     "; librmsnorm " + m.library_version;
  if (m.load_average_1min >= 0) line += "; load average " + FormatFixed(m.load_average_1min, 2) + " at start";
  const std::string cross_core = CrossCoreText(m.cross_core_ns, m.cross_core_ns);
  if (!cross_core.empty()) line += "; " + cross_core + " at start";
  return line;
}

std::string ProgressLine(const CaseResult& r, size_t done, size_t total, double elapsed_seconds) {
  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "[%3zu/%zu %5.1fs] ", done, total, elapsed_seconds);
  std::string line = prefix + CaseId(r.c);
  if (!r.ok()) return line + "  failed: " + r.error;
  return line + "  " + FormatSeconds(r.time.median) + "  " + FormatGbps(r.gbps) + " GB/s  " +
         FormatFixed(r.fraction_of_stream, 2) + " of stream";
}

void PrintCaseList(std::ostream& out, const std::vector<Case>& cases, const MachineInfo& machine) {
  for (const Case& c : cases) {
    const int64_t bytes = BytesMoved(c);
    out << CaseId(c) << "  " << HumanBytes(bytes) << "  " << Residency(machine, bytes, c.threads) << '\n';
  }
}

std::string BusyWarning(const MachineInfo& machine, double load_average_end) {
  const double start = machine.load_average_1min;
  if (!MachineLooksBusy(machine, start) && !MachineLooksBusy(machine, load_average_end)) return "";
  // At the end the run's own threads count in the load, so it is only reported alongside.
  return "the machine was busy (1-minute load average " + FormatFixed(start, 2) + " at start, " +
         FormatFixed(load_average_end, 2) + " at end, on " + std::to_string(machine.hardware_threads) +
         " hardware threads): other work shared the cores, so these timings are noisy, multi-thread ones "
         "most; re-run on a quiet machine before trusting them.";
}

void PrintReport(std::ostream& out, ReportFormat format, const MachineInfo& machine, const std::string& command,
                 double load_average_end, const std::vector<CaseResult>& results,
                 const std::vector<TargetOutcome>& targets) {
  const bool md = format == ReportFormat::kMarkdown;
  out << (md ? "Machine: " : "machine: ") << MachineLine(machine) << (md ? "  \n" : "\n");
  out << (md ? "Command: `" : "command: ") << command << (md ? "`\n" : "\n");
  const std::string warning = BusyWarning(machine, load_average_end);
  if (!warning.empty()) out << (md ? "\n**Warning:** " : "WARNING: ") << warning << "\n";

  std::vector<Shape> shapes;
  const std::vector<const CaseResult*> order = DisplayOrder(results, shapes);
  for (const Shape& shape : shapes) {
    std::vector<const CaseResult*> rows;
    for (const CaseResult* r : order)
      if (r->c.shape == shape) rows.push_back(r);
    const char* role = ShapeRole(shape);
    Heading(out, format, ShapeName(shape) + (role ? std::string(" (") + role + ")" : ""));
    Print(out, format, ResultsTable(rows));
  }
  const char* notes[] = {
      "time: median seconds per call; ±: half the interquartile range of the samples, relative to the median.",
      "GB/s: bytes moved / time (1e9 B/s), bytes = tensors x rows x cols x sizeof(dtype); tensors = 2 for fwd "
      "(x, y), 4 for add_rmsnorm fwd (+ residual, residual_out), 3 for bwd (dy, x, dx), 5 for fwd+bwd.",
      "stream GB/s: the fastest of vectorized loops moving the same bytes over the same buffers (scale "
      "y=s*x, triad dx=dy+s*x, add+scale, or scale then triad) with ordinary and with non-temporal stores, "
      "sampled in turn with the op; nt: the non-temporal loop was the faster, as it is for data streaming "
      "from memory; ph: the row-phased copy (below) was the fastest; (1t): the calling thread alone was "
      "faster, as it is for work the library keeps inline. ordinary: the fastest loop with ordinary stores.",
      "phased: the same bytes copied a row at a time in the two passes of a norm (read the row, then write "
      "it with non-temporal stores, the next rows prefetched meanwhile), as a fraction of stream (1.00 where "
      "it is the stream reference); for rows streaming from memory. What a kernel that must read each row "
      "before writing it can reach: the distance from stream to it is the structure's, from it to the op "
      "the kernel's own.",
      "of stream: op GB/s / stream GB/s. vs LN: LayerNorm time / this op's time, same dtype, shape, "
      "direction and threads (> 1: faster than LayerNorm). fits: the smallest cache level holding the bytes.",
      "cross-core round trip (the machine line, and the targets of multi-thread cases, measured around "
      "their group): a cache line's trip between the pool's two threads and back. On a VM it tells where "
      "the host put the vCPUs: near (tens of ns) makes the pool's fork and join cheap, far (hundreds) "
      "can bring more memory bandwidth and costs cache-resident calls their second thread's gain.",
  };
  out << '\n';
  for (const char* note : notes) out << (md ? "- " : "") << note << '\n';

  const Table decode = DecodeRowTable(results);
  if (!decode.rows.empty()) {
    Heading(out, format, "One row of 4096 f32, forward: a call against a plain scaled copy of the row");
    Print(out, format, decode);
  }

  Heading(out, format, "Targets (issue 14)");
  Print(out, format, TargetsTable(targets));
  for (const CaseResult& r : results)
    if (!r.ok()) out << (md ? "\n" : "") << "failed: " << CaseId(r.c) << ": " << r.error << '\n';
}

}  // namespace rmsnorm_bench
