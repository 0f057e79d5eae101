// rmsnorm-repro: the paper's experiments with our kernels. `rmsnorm-repro demo` is the README's first
// command (all four tasks, all five norms, a few minutes, two tasks at a time); `rmsnorm-repro repro` is
// the longer run with several seeds. Both end with the line "report: DIR".
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/blas.h"
#include "data/missing_data.h"
#include "metrics/bleu.h"
#include "metrics/bootstrap.h"
#include "metrics/chrf.h"
#include "rmsnorm/rmsnorm.hpp"
#include "train/interleaved.h"
#include "train/report.h"
#include "train/tasks.h"

namespace repro {
namespace {

const char kUsage[] =
    "usage: rmsnorm-repro demo|repro|tiny [options]\n"
    "       rmsnorm-repro score HYPOTHESES REFERENCES [BASELINE]\n"
    "  demo    all tasks and norms, short runs, one seed, two tasks at a time (a few minutes on 2 cores)\n"
    "  repro   longer runs with several seeds (mean and spread)\n"
    "  tiny    a few steps of each, to check the pipeline\n"
    "  score   corpus BLEU and chrF (sacreBLEU's defaults) of two UTF-8 files, one segment a line; with a\n"
    "          baseline's translations, the paired bootstrap p-value of each metric's difference\n"
    "options:\n"
    "  --out DIR          report folder (default report-MODE)\n"
    "  --threads N        OpenBLAS and rmsnorm threads, the same for every variant (default 1, at most the cores)\n"
    "  --jobs N           tasks trained at once, each in its own thread with its variants interleaved (default 2\n"
    "                     for demo, 1 otherwise; at most the cores and the tasks; 1 when --threads is above 1)\n"
    "  --tasks a,b        among gru-kjv, transformer-kjv, mlp-fashion, rnnsearch-en-de (default all)\n"
    "  --norms a,b        among none, layernorm, l2norm, rmsnorm, prmsnorm (default all)\n"
    "  --seeds 1,2,3      (default 1 for demo and tiny, 1,2,3 for repro)\n"
    "  --steps N          override the steps per variant of every task\n"
    "  --lr F             override the peak learning rate of every task\n"
    "  --kjv-cache FILE   plain-text cache of the KJV corpus (default kjv-corpus.txt beside this program)\n"
    "  --fashion-mnist-dir DIR  (default /usr/share/datasets/fashion-mnist)\n"
    "  --freedict FILE    (default /usr/share/dictd/freedict-eng-deu.dict.dz)\n";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string program_dir() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ".";
  std::string p(path, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

struct Options {
  std::string mode;
  std::string out;
  int threads = 1;
  int jobs = 0;  // 0: the mode's default
  std::vector<std::string> tasks = task_names();
  std::vector<NormKind> norms = all_norms();
  std::vector<uint64_t> seeds;
  int64_t steps = 0;
  float lr = 0.0f;
  std::string kjv_cache;
  std::string fashion_mnist_dir = kFashionMnistDir;
  std::string freedict = kFreedictPath;
  std::string command_line;
};

Options parse(int argc, char** argv) {
  if (argc < 2) throw std::invalid_argument(kUsage);
  Options o;
  o.mode = argv[1];
  if (o.mode != "demo" && o.mode != "repro" && o.mode != "tiny") throw std::invalid_argument(kUsage);
  o.command_line = "rmsnorm-repro";
  for (int i = 1; i < argc; ++i) o.command_line += std::string(" ") + argv[i];
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") throw std::invalid_argument(kUsage);
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + flag + "\n" + kUsage);
    const std::string value = argv[++i];
    if (flag == "--out") o.out = value;
    else if (flag == "--threads") o.threads = std::stoi(value);
    else if (flag == "--jobs") o.jobs = std::stoi(value);
    else if (flag == "--tasks") o.tasks = split(value);
    else if (flag == "--norms") {
      o.norms.clear();
      for (const std::string& n : split(value)) o.norms.push_back(parse_norm(n));
    } else if (flag == "--seeds") {
      for (const std::string& s : split(value)) o.seeds.push_back(std::stoull(s));
    } else if (flag == "--steps") o.steps = std::stoll(value);
    else if (flag == "--lr") o.lr = std::stof(value);
    else if (flag == "--kjv-cache") o.kjv_cache = value;
    else if (flag == "--fashion-mnist-dir") o.fashion_mnist_dir = value;
    else if (flag == "--freedict") o.freedict = value;
    else throw std::invalid_argument("unknown option " + flag + "\n" + kUsage);
  }
  if (o.out.empty()) o.out = "report-" + o.mode;
  if (o.seeds.empty()) o.seeds = o.mode == "repro" ? std::vector<uint64_t>{1, 2, 3} : std::vector<uint64_t>{1};
  if (o.kjv_cache.empty()) o.kjv_cache = program_dir() + "/kjv-corpus.txt";
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (o.threads < 1) o.threads = 1;
  if (cores > 0 && o.threads > cores) o.threads = static_cast<int>(cores);
  // Concurrent tasks only with one BLAS and rmsnorm thread each: then a task's work stays in its own
  // thread, whose CPU clock is the task's alone.
  if (o.jobs < 1) o.jobs = o.mode == "demo" ? 2 : 1;
  if (o.threads > 1) o.jobs = 1;
  if (cores > 0 && o.jobs > cores) o.jobs = static_cast<int>(cores);
  o.jobs = std::max(1, std::min(o.jobs, static_cast<int>(o.tasks.size())));
  return o;
}

// Concurrent tasks print whole lines under this lock, so their lines do not mix.
std::mutex output_mutex;

void print_locked(const std::string& text) {
  std::lock_guard<std::mutex> lock(output_mutex);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

void print_progress(const TaskInfo& info, int64_t done, const std::vector<VariantResult>& variants,
                    std::chrono::steady_clock::time_point start) {
  // About ten lines per task: every round whose step count crosses a tenth of the run.
  const int64_t tenth = std::max<int64_t>(1, info.steps / 10);
  if (done % tenth >= info.chunk && done != info.steps) return;
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, "  [%s] step %5lld/%lld  loss (%s):", info.name.c_str(),
                static_cast<long long>(done), static_cast<long long>(info.steps), info.loss_unit.c_str());
  std::string line = buffer;
  for (const VariantResult& v : variants) {
    if (v.diverged) {
      line += std::string("  ") + norm_name(v.norm) + " diverged";
      continue;
    }
    double sum = 0.0;
    const int64_t n = std::min<int64_t>(info.chunk, static_cast<int64_t>(v.losses.size()));
    for (int64_t i = static_cast<int64_t>(v.losses.size()) - n; i < static_cast<int64_t>(v.losses.size()); ++i)
      sum += v.losses[i];
    std::snprintf(buffer, sizeof buffer, "  %s %.3f", norm_name(v.norm), n > 0 ? sum / n : NAN);
    line += buffer;
  }
  std::snprintf(buffer, sizeof buffer, "  [%.0f s]\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  print_locked(line + buffer);
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// `rmsnorm-repro score HYP REF [BASELINE]`: the translation task's metrics and significance test on any
// text, so they can be checked against sacreBLEU (python/tests/test_translation_metrics.py).
int score(int argc, char** argv) {
  if (argc != 4 && argc != 5) throw std::invalid_argument(kUsage);
  const std::vector<std::string> hypotheses = read_lines(argv[2]), references = read_lines(argv[3]);
  const std::vector<std::string> baseline = argc == 5 ? read_lines(argv[4]) : hypotheses;
  if (hypotheses.size() != references.size() || baseline.size() != references.size())
    throw std::invalid_argument("score: the files have different numbers of lines");
  std::vector<BleuStats> bleu, bleu_baseline;
  std::vector<ChrfStats> chrf, chrf_baseline;
  for (size_t i = 0; i < references.size(); ++i) {
    bleu.push_back(bleu_segment_stats(hypotheses[i], references[i]));
    bleu_baseline.push_back(bleu_segment_stats(baseline[i], references[i]));
    chrf.push_back(chrf_segment_stats(hypotheses[i], references[i]));
    chrf_baseline.push_back(chrf_segment_stats(baseline[i], references[i]));
  }
  std::printf("BLEU = %.4f\nchrF = %.4f\n", corpus_bleu(hypotheses, references), corpus_chrf(hypotheses, references));
  if (argc == 5)
    std::printf("BLEU p = %.4f\nchrF p = %.4f\n", paired_bootstrap(bleu, bleu_baseline, bleu_score).p_value,
                paired_bootstrap(chrf, chrf_baseline, chrf_score).p_value);
  return 0;
}

int run(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "score") return score(argc, argv);
  const auto start = std::chrono::steady_clock::now();
  const Options o = parse(argc, argv);
  set_blas_threads(o.threads);
  rmsnorm::set_num_threads(o.threads);
  const Scale scale = o.mode == "demo" ? Scale::kDemo : o.mode == "repro" ? Scale::kRepro : Scale::kTiny;

  RunInfo info;
  info.mode = o.mode;
  info.command_line = o.command_line;
  info.threads = o.threads;
  info.jobs = o.jobs;
  info.blas = blas_description();
  info.cpu_target = rmsnorm::cpu_target();
  info.library_version = rmsnorm_version();
  std::printf("rmsnorm-repro %s: %zu task(s) x %zu norm(s) x %zu seed(s), %d thread(s) (OpenBLAS and rmsnorm), "
              "%d task(s) at a time, kernels: %s\n",
              o.mode.c_str(), o.tasks.size(), o.norms.size(), o.seeds.size(), o.threads, o.jobs,
              info.cpu_target.c_str());
  std::fflush(stdout);

  // Every task and its data first, so missing data stops the run before any training.
  Datasets data(KjvSource{"/usr/bin/bible", "/usr/lib/bible.data", o.kjv_cache}, o.fashion_mnist_dir, o.freedict);
  std::vector<std::unique_ptr<Task>> tasks;
  for (const std::string& name : o.tasks) {
    tasks.push_back(make_task(name, scale, data));
    if (o.steps > 0) tasks.back()->override_steps(o.steps);
    if (o.lr > 0.0f) tasks.back()->override_learning_rate(o.lr);
  }

  // Each worker takes whole tasks, the costliest first, so the workers finish close together; a task's
  // variants stay interleaved in its worker's thread, so its paired time ratios see one load.
  std::vector<size_t> order(tasks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto cost = [&](size_t i) { return tasks[i]->info().step_cost * static_cast<double>(tasks[i]->info().steps); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cost(a) > cost(b); });
  const CpuClock cpu_clock = o.jobs > 1 ? CpuClock::kThread : CpuClock::kProcess;
  std::vector<std::vector<TaskResult>> results(tasks.size());
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < order.size();) {
      Task& task = *tasks[order[k]];
      try {
        std::vector<TaskResult> seeds;
        for (uint64_t seed : o.seeds) {
          print_locked(task.info().title + " (seed " + std::to_string(seed) + "): " + task.info().model + "\n");
          seeds.push_back(train_interleaved(
              task, o.norms, seed,
              [&](const TaskInfo& t, int64_t done, const std::vector<VariantResult>& v) {
                print_progress(t, done, v, start);
              },
              cpu_clock));
        }
        print_locked(format_table(task.info(), summarize(seeds)));
        results[order[k]] = std::move(seeds);
      } catch (...) {
        std::lock_guard<std::mutex> lock(output_mutex);
        if (!failure) failure = std::current_exception();
        next = order.size();  // the others finish their task and stop
      }
    }
  };
  std::vector<std::thread> workers;
  for (int j = 1; j < o.jobs; ++j) workers.emplace_back(worker);
  worker();
  for (std::thread& w : workers) w.join();
  if (failure) std::rethrow_exception(failure);
  std::string tables;
  for (size_t i = 0; i < tasks.size(); ++i)
    tables += format_table(tasks[i]->info(), summarize(results[i]), /*header=*/i == 0);
  info.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  write_report(o.out, info, results);

  std::printf("\nSummary (%s, %d thread(s); s / 1k steps: median over interleaved chunks):\n%s", o.mode.c_str(),
              o.threads, tables.c_str());
  std::printf("total %.0f s\nreport: %s\n", info.wall_seconds, o.out.c_str());
  return 0;
}

}  // namespace
}  // namespace repro

int main(int argc, char** argv) {
  // OpenBLAS's Prescott fallback on a CPU it does not know makes the matrix products, most of every step,
  // several times slower than its kernels for the CPU: run again with those, unless the user chose.
  const std::string coretype = repro::blas_coretype_override();
  if (!coretype.empty() && setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1) == 0) {
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");  // no exec: go on with the fallback kernels, which the report names
  }
  try {
    return repro::run(argc, argv);
  } catch (const repro::MissingData& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
