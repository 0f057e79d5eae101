#include "train/report.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

namespace repro {
namespace {

// A gnuplot double-quoted string literal.
std::string gp_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void mean_std(const std::vector<double>& v, double* mean, double* stddev) {
  double sum = 0.0;
  int n = 0;
  for (double x : v)
    if (std::isfinite(x)) sum += x, ++n;
  *mean = n > 0 ? sum / n : kNaN;
  double squares = 0.0;
  for (double x : v)
    if (std::isfinite(x)) squares += (x - *mean) * (x - *mean);
  *stddev = n > 1 ? std::sqrt(squares / (n - 1)) : 0.0;  // sample deviation; 0 for one seed
}

std::string norm_label(const NormSummary& s) {
  if (s.norm != NormKind::kPRmsNorm) return norm_name(s.norm);
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "prmsnorm (p=%.2f%%)", 100.0 * s.partial);
  return buffer;
}

std::string number(double v, const char* format) {
  if (!std::isfinite(v)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
    else out += c;
  }
  return out + "\"";
}

constexpr double kSignificanceLevel = 0.05;

// The significance column: the p-value for one seed ("0.012 *" when below 0.05), the number of seeds
// below 0.05 for several; "-" for LayerNorm itself and tasks without a test.
std::string significance(const NormSummary& s) {
  int tested = 0;
  for (double p : s.p_values) tested += std::isfinite(p);
  if (tested == 0) return "-";
  if (s.p_values.size() == 1) return number(s.p_values[0], "%.3f") + (s.significant_seeds ? " *" : "  ");
  return std::to_string(s.significant_seeds) + "/" + std::to_string(tested) + " p<.05";
}

// A JSON list of numbers.
std::string json_list(const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + json_number(values[i]);
  return out + "]";
}

struct CurvePoint {
  int64_t step;
  double loss, seconds;
};

// Training loss per chunk (mean over the chunk's steps and over seeds), at the chunk's last step and at
// the variant's cumulative training seconds (mean over seeds): one curve per norm.
std::vector<std::vector<CurvePoint>> make_curves(const std::vector<TaskResult>& seeds) {
  std::vector<std::vector<CurvePoint>> curves(seeds[0].variants.size());
  for (size_t v = 0; v < curves.size(); ++v)
    for (size_t c = 0;; ++c) {
      double loss = 0.0, seconds = 0.0;
      int64_t step = 0;
      int n = 0;
      for (const TaskResult& r : seeds) {
        const VariantResult& vr = r.variants[v];
        if (c >= vr.chunk_steps.size() || vr.diverged) continue;
        int64_t first = 0;
        double elapsed = 0.0;
        for (size_t i = 0; i < c; ++i) first += vr.chunk_steps[i], elapsed += vr.chunk_seconds[i];
        double sum = 0.0;
        for (int64_t s = first; s < first + vr.chunk_steps[c]; ++s) sum += vr.losses[s];
        loss += sum / static_cast<double>(vr.chunk_steps[c]);
        seconds += elapsed + vr.chunk_seconds[c];
        step = first + vr.chunk_steps[c];
        ++n;
      }
      if (n == 0) break;
      curves[v].push_back({step, loss / n, seconds / n});
    }
  return curves;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const std::string& line : lines) out << line << "\n";
}

// One gnuplot data block per norm: step, loss, seconds.
void write_curves(const std::string& path, const std::vector<TaskResult>& seeds,
                  const std::vector<std::vector<CurvePoint>>& curves) {
  std::ofstream out(path);
  out << "# step  loss  seconds   (one block per norm; loss in " << seeds[0].info.loss_unit << ")\n";
  for (size_t v = 0; v < curves.size(); ++v) {
    out << "# " << norm_name(seeds[0].variants[v].norm) << "\n";
    for (const CurvePoint& p : curves[v]) out << p.step << " " << p.loss << " " << p.seconds << "\n";
    out << "\n\n";
  }
}

// A y range that shows the end of training: from just below the lowest loss to the highest loss any
// norm has after a tenth of the run (the first steps' losses would squash the rest).
std::pair<double, double> y_range(const std::vector<std::vector<CurvePoint>>& curves) {
  double low = 1e300, high = -1e300;
  for (const auto& curve : curves) {
    if (curve.empty()) continue;
    const size_t from = curve.size() / 10;
    for (size_t i = 0; i < curve.size(); ++i) {
      low = std::min(low, curve[i].loss);
      if (i >= from) high = std::max(high, curve[i].loss);
    }
  }
  if (!(low < high)) return {0.0, 0.0};
  const double margin = 0.05 * (high - low);
  return {low - margin, high + margin};
}

bool have_program(const std::string& name) {
  return std::system(("command -v " + name + " > /dev/null 2>&1").c_str()) == 0;
}

// Two PNGs per task: loss against steps and against seconds.
bool plot_curves(const std::string& dir, const TaskInfo& info, const std::vector<NormSummary>& rows,
                 const std::vector<std::vector<CurvePoint>>& curves) {
  const std::string script = dir + "/" + info.name + "_plot.gp";
  std::ofstream gp(script);
  gp << "# Draws the training curves of " << info.name << ": gnuplot " << info.name << "_plot.gp (in this folder)\n"
     << "set terminal pngcairo size 960,600 font 'sans,11'\n"
     << "set grid\nset key top right\n"
     << "set ylabel " << gp_string("training loss (" + info.loss_unit + ", mean per chunk)") << "\n";
  const auto [low, high] = y_range(curves);
  if (low < high) gp << "set yrange [" << low << ":" << high << "]\n";
  for (const char* axis : {"steps", "seconds"}) {
    const bool steps = std::string(axis) == "steps";
    gp << "set output " << gp_string(info.name + "_loss_vs_" + axis + ".png") << "\n"
       << "set title " << gp_string(info.title + ": training loss against " + (steps ? "steps" : "seconds")) << "\n"
       << "set xlabel " << gp_string(steps ? "step" : "seconds of training (this process, interleaved)") << "\n"
       << "plot ";
    for (size_t v = 0; v < rows.size(); ++v)
      gp << (v ? ", \\\n     " : "") << gp_string(info.name + "_curves.dat") << " index " << v << " using "
         << (steps ? "1:2" : "3:2") << " with lines lw 2 title " << gp_string(norm_label(rows[v]));
    gp << "\n";
  }
  gp.close();
  const std::string command = "cd '" + dir + "' && gnuplot '" + info.name + "_plot.gp'";
  return std::system(command.c_str()) == 0;
}

}  // namespace

std::vector<NormSummary> summarize(const std::vector<TaskResult>& seeds) {
  std::vector<NormSummary> rows;
  for (size_t v = 0; v < seeds[0].variants.size(); ++v) {
    NormSummary s;
    s.norm = seeds[0].variants[v].norm;
    s.partial = seeds[0].variants[v].partial;
    std::vector<double> speed, norm_speed, share;
    for (const TaskResult& r : seeds) {
      const VariantResult& vr = r.variants[v];
      ++s.seeds;
      s.diverged += vr.diverged;
      s.metrics.push_back(vr.metric);
      s.secondary_values.push_back(vr.secondary_metric);
      s.p_values.push_back(vr.p_value_vs_layernorm);
      s.significant_seeds += vr.p_value_vs_layernorm < kSignificanceLevel;
      speed.push_back(vr.seconds_per_1k_steps());
      norm_speed.push_back(vr.norm_seconds_per_1k_steps());
      share.push_back(vr.norm_share());
    }
    mean_std(s.metrics, &s.metric_mean, &s.metric_std);
    mean_std(s.secondary_values, &s.secondary_mean, &s.secondary_std);
    mean_std(speed, &s.seconds_per_1k_mean, &s.seconds_per_1k_std);
    double unused;
    mean_std(norm_speed, &s.norm_seconds_per_1k_mean, &unused);
    mean_std(share, &s.norm_share_mean, &unused);
    rows.push_back(s);
  }
  // Time saved: 1 - the paired (same-round) time ratio to LayerNorm, averaged over seeds.
  size_t layernorm = rows.size();
  for (size_t v = 0; v < rows.size(); ++v)
    if (rows[v].norm == NormKind::kLayerNorm) layernorm = v;
  for (size_t v = 0; v < rows.size(); ++v) {
    NormSummary& s = rows[v];
    if (layernorm == rows.size()) {
      s.time_saved_vs_layernorm = s.cpu_time_saved_vs_layernorm = s.metric_vs_layernorm = kNaN;
      continue;
    }
    std::vector<double> ratios, cpu_ratios;
    for (const TaskResult& r : seeds) {
      ratios.push_back(paired_time_ratio(r.variants[v], r.variants[layernorm]));
      cpu_ratios.push_back(paired_time_ratio(r.variants[v], r.variants[layernorm], /*cpu=*/true));
    }
    double ratio, cpu_ratio, unused;
    mean_std(ratios, &ratio, &unused);
    mean_std(cpu_ratios, &cpu_ratio, &unused);
    s.time_saved_vs_layernorm = 1.0 - ratio;
    s.cpu_time_saved_vs_layernorm = 1.0 - cpu_ratio;
    s.metric_vs_layernorm = s.metric_mean / rows[layernorm].metric_mean - 1.0;
  }
  return rows;
}

std::string format_table(const TaskInfo& info, const std::vector<NormSummary>& rows, bool header) {
  const bool several = !rows.empty() && rows[0].seeds > 1;
  std::ostringstream out;
  char line[512];
  const bool secondary = !info.secondary_metric.empty();
  std::snprintf(line, sizeof line, "%-20s %-20s %18s %9s %16s %12s %11s %10s", "task", "norm", info.metric.c_str(),
                "vs LN", "s / 1k steps", "saved vs LN", "norm s/1k", "norm share");
  if (header) out << line << "\n";
  if (secondary) {  // a task with a second metric and a significance test: two more columns, headed here
    std::snprintf(line, sizeof line, "%-20s %-20s %18s %9s %16s %12s %11s %10s %16s %11s\n", "", "", "", "", "", "", "",
                  "", info.secondary_metric.c_str(), "p vs LN");
    out << line;
  }
  for (const NormSummary& s : rows) {
    std::string metric = s.diverged == s.seeds ? "diverged" : number(s.metric_mean, "%.3f");
    if (several && s.diverged < s.seeds) metric += " ± " + number(s.metric_std, "%.3f");
    if (s.diverged > 0 && s.diverged < s.seeds) metric += " (" + std::to_string(s.diverged) + " div.)";
    std::string speed = number(s.seconds_per_1k_mean, "%.1f");
    if (several) speed += " ± " + number(s.seconds_per_1k_std, "%.1f");
    std::snprintf(line, sizeof line, "%-20s %-20s %18s %9s %16s %12s %11s %10s", info.name.c_str(),
                  norm_label(s).c_str(), metric.c_str(), number(100.0 * s.metric_vs_layernorm, "%+.1f%%").c_str(),
                  speed.c_str(), number(100.0 * s.time_saved_vs_layernorm, "%+.1f%%").c_str(),
                  number(s.norm_seconds_per_1k_mean, "%.2f").c_str(),
                  number(100.0 * s.norm_share_mean, "%.1f%%").c_str());
    out << line;
    if (secondary) {
      std::string second = number(s.secondary_mean, "%.2f");
      if (several && std::isfinite(s.secondary_mean)) second += " ± " + number(s.secondary_std, "%.2f");
      std::snprintf(line, sizeof line, " %16s %11s", second.c_str(), significance(s).c_str());
      out << line;
    }
    out << "\n";
  }
  return out.str();
}

bool write_report(const std::string& dir, const RunInfo& run, const std::vector<std::vector<TaskResult>>& results) {
  mkdir(dir.c_str(), 0755);
  const bool gnuplot = have_program("gnuplot");
  bool plotted = gnuplot;

  std::ofstream json(dir + "/results.json");
  std::ofstream md(dir + "/report.md");
  // With several tasks at once, a task's CPU time is its thread's; alone, the process's.
  const std::string cpu_clock = run.jobs > 1 ? "the task's thread's CPU time" : "process CPU time";
  md << "# RMSNorm reproduction: " << run.mode << " run\n\n"
     << "Command: `" << run.command_line << "`  \n"
     << "Threads: " << run.threads << " (OpenBLAS and rmsnorm, the same for every variant); "
     << "tasks at a time: " << run.jobs << "; rmsnorm " << run.library_version << " on " << run.cpu_target << "; " << run.blas << "  \n"
     << "Wall time of the whole run: " << number(run.wall_seconds, "%.0f") << " s\n\n"
     << "Every variant of a task trains in this one process, interleaved in chunks of steps (the order rotates "
        "every round), with the same threads, steps, batches and initial weights. *s / 1k steps* is the median "
        "over chunks of the chunk's seconds per step (forward, backward and Adam update; evaluation excluded), "
        "times 1000; *saved vs LN* is 1 - the median over rounds of the variant's chunk time over LayerNorm's "
        "chunk time in the same round (paired, so slow changes in machine load cancel); *vs LN* is the metric "
        "relative to LayerNorm's; *norm s/1k* is the same median for the time inside the normalization calls (forward and "
        "backward) and *norm share* their share of all training time. pRMSNorm's p is the task's (6.25% for the "
        "language models, 12.5% for the image task, as in the paper).";
  if (run.jobs > 1)
    md << " " << run.jobs << " tasks trained at a time, each in its own thread of the process; "
       << "a task's variants still take turns in its thread, so they share its load, and the paired ratios "
          "compare them fairly. The absolute *s / 1k steps* include what the other task costs the shared "
          "memory and caches, and the tasks' speeds change when one ends and the other runs alone (the "
          "paired ratios cancel this).";
  md << "\n\n";
  json << "[\n";
  bool first_json = true;
  for (const std::vector<TaskResult>& seeds : results) {
    const TaskInfo& info = seeds[0].info;
    const std::vector<NormSummary> rows = summarize(seeds);
    md << "## " << info.title << "\n\n"
       << "- Model: " << info.model << "\n- Data: " << info.data << "\n- Training: " << info.steps
       << " steps per norm in chunks of " << info.chunk << ", Adam (peak lr " << info.adam.lr << ", "
       << info.adam.warmup_steps << " warmup steps, cosine decay to " << info.adam.final_fraction
       << " of the peak, gradient-norm clip " << info.adam.clip_norm << "), seeds:";
    for (const TaskResult& r : seeds) md << " " << r.seed;
    md << "\n- Parameters:";
    for (const VariantResult& v : seeds[0].variants) md << " " << norm_name(v.norm) << " " << v.parameters << ";";
    md << "\n\n```\n" << format_table(info, rows) << "```\n\n"
       << "Saved vs LayerNorm in " << cpu_clock
       << " (paired the same way; with one thread this is the time the task computed, whatever other processes "
          "did to its wall time):";
    for (const NormSummary& s : rows) md << " " << norm_label(s) << " " << number(100.0 * s.cpu_time_saved_vs_layernorm, "%+.1f%%") << ";";
    md << "\n\n";
    if (!seeds[0].references.empty()) {  // the test translations, to rescore with any tool (sacrebleu)
      write_lines(dir + "/" + info.name + "_references.txt", seeds[0].references);
      md << "Test references: `" << info.name << "_references.txt`; each norm's translations: `" << info.name
         << "_seedS_NORM.txt` (one segment a line).\n\n";
      for (const TaskResult& r : seeds)
        for (const VariantResult& v : r.variants)
          write_lines(dir + "/" + info.name + "_seed" + std::to_string(r.seed) + "_" + norm_name(v.norm) + ".txt",
                      v.outputs);
    }
    const std::vector<std::vector<CurvePoint>> curves = make_curves(seeds);
    write_curves(dir + "/" + info.name + "_curves.dat", seeds, curves);
    if (gnuplot) {
      if (plot_curves(dir, info, rows, curves)) {
        md << "![" << info.name << " loss against steps](" << info.name << "_loss_vs_steps.png)\n"
           << "![" << info.name << " loss against seconds](" << info.name << "_loss_vs_seconds.png)\n\n";
      } else {
        plotted = false;
      }
    }
    const std::string& secondary_name = info.secondary_metric;
    for (const NormSummary& s : rows) {
      json << (first_json ? "" : ",\n") << "  {\"task\": " << json_string(info.name)
           << ", \"norm\": " << json_string(norm_name(s.norm)) << ", \"metric\": " << json_string(info.metric)
           << ", \"value\": " << json_number(s.metric_mean)
           << ", \"lower_is_better\": " << (info.lower_is_better ? "true" : "false")
           << ", \"seconds_per_1k_steps\": " << json_number(s.seconds_per_1k_mean)
           << ", \"value_std\": " << json_number(s.metric_std) << ", \"values\": " << json_list(s.metrics)
           << ", \"seconds_per_1k_steps_std\": " << json_number(s.seconds_per_1k_std)
           << ", \"norm_seconds_per_1k_steps\": " << json_number(s.norm_seconds_per_1k_mean)
           << ", \"norm_share\": " << json_number(s.norm_share_mean)
           << ", \"time_saved_vs_layernorm\": " << json_number(s.time_saved_vs_layernorm)
           << ", \"cpu_time_saved_vs_layernorm\": " << json_number(s.cpu_time_saved_vs_layernorm)
           << ", \"secondary_metric\": " << (secondary_name.empty() ? "null" : json_string(secondary_name))
           << ", \"secondary_value\": " << json_number(s.secondary_mean)
           << ", \"secondary_value_std\": " << json_number(std::isfinite(s.secondary_mean) ? s.secondary_std : kNaN)
           << ", \"secondary_values\": " << json_list(s.secondary_values)
           << ", \"p_values_vs_layernorm\": " << json_list(s.p_values)
           << ", \"significant_seeds_vs_layernorm\": " << s.significant_seeds
           << ", \"partial\": " << json_number(s.partial) << ", \"steps\": " << info.steps
           << ", \"seeds\": " << s.seeds << ", \"diverged\": " << s.diverged << ", \"threads\": " << run.threads
           << "}";
      first_json = false;
    }
  }
  json << "\n]\n";
  if (!gnuplot)
    std::fprintf(stderr,
                 "warning: gnuplot not found, so no PNG plots: install the Debian package gnuplot-nox "
                 "(sudo apt-get install gnuplot-nox); the curve data is in %s\n",
                 dir.c_str());
  else if (!plotted)
    std::fprintf(stderr, "warning: gnuplot failed on some plots; the scripts and data are in %s\n", dir.c_str());
  return plotted;
}

}  // namespace repro
