// peers_onednn: our RMSNorm against oneDNN's (layer normalization with dnnl_rms_norm | dnnl_use_scale)
// on the same arrays, two threads each, f32 and bf16 (f32 gain and statistics in both). It times the
// inference forward, the training forward and the backward of each, alternating the two libraries
// within every repetition, and checks all four results against a double-precision reference computed
// here. It also tests the claim that oneDNN's RMS backward keeps LayerNorm's mean(dy*g) term, by
// comparing its dx with that formula too. Built and run by `make peers-onednn` (docs/benchmarks.md).
// With --sweep it times only the inference forward of both over a range of row lengths at a fixed size
// per call, on every CPU the process may use, and writes JSON that bench/peers.py --sweep merges into
// its chart (`make sweep`).
#include <oneapi/dnnl/dnnl.hpp>
#include <rmsnorm/rmsnorm.hpp>  // the C ABI and its bf16 storage type

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sched.h>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

constexpr float kEps = 1e-6f;
constexpr int kThreads = 2;
// What the issue asks of ours: oneDNN's time / ours >= 1.2 on every shape.
constexpr double kTarget = 1.2;

struct Shape {
  int64_t rows, cols;
};

struct Options {
  std::vector<Shape> shapes{{8192, 4096}, {512, 4096}, {64, 1024}, {1, 4096}, {4096, 128}};
  int reps = 7;
  // A timed batch repeats the call until it lasts this long, so that small shapes are not one clock tick.
  double batch_seconds = 2e-3;
  // --sweep: forward only, these row lengths at sweep_elements per call (rows = elements / cols).
  bool sweep = false;
  int64_t sweep_elements = int64_t{1} << 22;
  std::vector<int64_t> sweep_cols{64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  std::string json_path;
};

// A (rows, cols) tensor in f32 or bf16, read back as float.
struct Tensor {
  bool bf16 = false;
  std::vector<float> f;
  std::vector<uint16_t> h;

  Tensor(bool is_bf16, size_t n) : bf16(is_bf16) {
    if (bf16) h.assign(n, 0); else f.assign(n, 0.f);
  }
  void* data() { return bf16 ? static_cast<void*>(h.data()) : static_cast<void*>(f.data()); }
  float at(size_t i) const { return bf16 ? float(rmsnorm::bf16::from_bits(h[i])) : f[i]; }
  void set(size_t i, float v) {
    if (bf16) h[i] = rmsnorm::bf16::from_float(v); else f[i] = v;
  }
};

// splitmix64: the same inputs on every run and machine, and fast enough for 33M elements.
struct Rng {
  uint64_t s;
  double Uniform() {  // [-1, 1)
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  }
};

// ---- Timing -----------------------------------------------------------------------------------------

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per call of a and of b: the median over `reps` repetitions, each timing a batch of a and then
// a batch of b (the order swapped every other repetition), so both see the same phases of a busy machine.
std::pair<double, double> TimePair(const std::function<void()>& a, const std::function<void()>& b,
                                   const Options& opt) {
  auto calls_for = [&](const std::function<void()>& f) {
    f();  // warm-up: first-touch, JIT, caches
    double t0 = Now();
    f();
    double one = std::max(Now() - t0, 1e-8);
    return std::max<int64_t>(1, static_cast<int64_t>(opt.batch_seconds / one));
  };
  int64_t na = calls_for(a), nb = calls_for(b);
  auto batch = [](const std::function<void()>& f, int64_t n) {
    // Lets the other library's worker threads stop spinning (TBB's and OpenMP's both spin a while after
    // a parallel region), so that they do not take a core from this batch on a two-core machine.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    // One call untimed: it wakes this library's own workers, asleep after the pause, and brings its
    // arrays back from the other library's. A batch of one call (the large shapes) timed that wake-up
    // and those misses for both libraries alike, which hid the kernels' difference.
    f();
    double t0 = Now();
    for (int64_t i = 0; i < n; ++i) f();
    return (Now() - t0) / static_cast<double>(n);
  };
  std::vector<double> ta, tb;
  for (int r = 0; r < opt.reps; ++r) {
    if (r % 2 == 0) {
      ta.push_back(batch(a, na));
      tb.push_back(batch(b, nb));
    } else {
      tb.push_back(batch(b, nb));
      ta.push_back(batch(a, na));
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  return {median(ta), median(tb)};
}

void Check(rmsnorm_status s, const char* what) {
  if (s != RMSNORM_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, rmsnorm_last_error());
    std::exit(1);
  }
}

// ---- One shape and dtype ----------------------------------------------------------------------------

struct Errors {
  double y_ours = 0, y_dnnl = 0;
  double dx_ours = 0, dx_dnnl = 0;
  double dw_ours = 0, dw_dnnl = 0;
  double dx_dnnl_vs_ln = 0;  // oneDNN's dx against the formula with LayerNorm's mean(dy*g) term
  double dx_ln_vs_rms = 0;   // how far apart the two formulas are on these inputs
};

struct Timings {
  double ours[3], dnnl[3];
  std::string impls;  // the implementations oneDNN chose: inference, training, backward
};

const char* const kDirections[3] = {"fwd-inf", "fwd-train", "bwd"};

// Max over rows of max_i |a_i - r_i| / max_i |r_i|: an error relative to the row's magnitude, so that
// elements near zero do not blow it up.
struct RowError {
  double num = 0, den = 0;
  void Add(double a, double r) {
    num = std::max(num, std::fabs(a - r));
    den = std::max(den, std::fabs(r));
  }
  double Take() {
    double e = den > 0 ? num / den : num;
    num = den = 0;
    return e;
  }
};

// Our call's configuration, as both modes make it.
rmsnorm_config OursConfig(const Shape& shape, bool bf16) {
  rmsnorm_config cfg = rmsnorm_config_init(shape.rows, shape.cols);
  cfg.dtype = bf16 ? RMSNORM_BF16 : RMSNORM_F32;
  cfg.eps = kEps;
  return cfg;
}

// oneDNN's view of the same tensors: (rows, cols) data in the dtype, f32 statistics and an f32 gain.
struct DnnlDescs {
  dnnl::memory::desc data, stat, scale;
  DnnlDescs(const Shape& shape, bool bf16)
      : data({shape.rows, shape.cols}, bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32,
             dnnl::memory::format_tag::ab),
        stat({shape.rows}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a),
        scale({shape.cols}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a) {}
};

dnnl::normalization_flags RmsFlags() {
  return dnnl::normalization_flags::rms_norm | dnnl::normalization_flags::use_scale;
}

void Run(const Shape& shape, bool bf16, const Options& opt, dnnl::engine& eng, dnnl::stream& strm,
         Errors& err, Timings& tim) {
  const int64_t R = shape.rows, C = shape.cols;
  const size_t n = static_cast<size_t>(R * C);

  Tensor x(bf16, n), dy(bf16, n), y_ours(bf16, n), y_dnnl(bf16, n), dx_ours(bf16, n), dx_dnnl(bf16, n);
  std::vector<float> g(C), dw_ours(C), dw_dnnl(C), rstd(R), mean(R, 0.f), var(R);
  Rng rng{0x5eed0000u + static_cast<uint64_t>(R * 7919 + C)};
  for (int64_t j = 0; j < C; ++j) g[j] = static_cast<float>(1.0 + 0.5 * rng.Uniform());
  // x has a nonzero mean, so RMSNorm and LayerNorm differ; dy has one too (0.1), so the formula with
  // LayerNorm's mean(dy*g) term is told apart from RMSNorm's by far more than rounding.
  for (size_t i = 0; i < n; ++i) x.set(i, static_cast<float>(0.3 + 2.0 * rng.Uniform()));
  for (size_t i = 0; i < n; ++i) dy.set(i, static_cast<float>(0.1 + rng.Uniform()));

  // Ours.
  rmsnorm_config cfg = OursConfig(shape, bf16);
  auto ours_inf = [&] { Check(rmsnorm_forward(&cfg, x.data(), g.data(), nullptr, y_ours.data(), nullptr), "forward"); };
  auto ours_train = [&] { Check(rmsnorm_forward(&cfg, x.data(), g.data(), nullptr, y_ours.data(), rstd.data()), "forward"); };
  auto ours_bwd = [&] {
    Check(rmsnorm_backward(&cfg, dy.data(), x.data(), g.data(), rstd.data(), dx_ours.data(), dw_ours.data(), nullptr),
          "backward");
  };

  // oneDNN, on the same x, dy and g (its own outputs, so both results can be checked).
  const DnnlDescs md(shape, bf16);
  const auto &data_md = md.data, &stat_md = md.stat, &scale_md = md.scale;
  const auto flags = RmsFlags();
  using lnf = dnnl::layer_normalization_forward;
  using lnb = dnnl::layer_normalization_backward;
  lnf::primitive_desc inf_pd(eng, dnnl::prop_kind::forward_inference, data_md, data_md, stat_md, kEps, flags);
  lnf::primitive_desc train_pd(eng, dnnl::prop_kind::forward_training, data_md, data_md, stat_md, kEps, flags);
  lnb::primitive_desc bwd_pd(eng, dnnl::prop_kind::backward, data_md, data_md, data_md, stat_md, kEps, flags,
                             train_pd);
  tim.impls = std::string(inf_pd.impl_info_str()) + ", " + train_pd.impl_info_str() + ", " + bwd_pd.impl_info_str();
  lnf inf(inf_pd), train(train_pd);
  lnb bwd(bwd_pd);

  dnnl::memory m_x(data_md, eng, x.data()), m_dy(data_md, eng, dy.data());
  dnnl::memory m_y(data_md, eng, y_dnnl.data()), m_dx(data_md, eng, dx_dnnl.data());
  dnnl::memory m_g(scale_md, eng, g.data()), m_dw(scale_md, eng, dw_dnnl.data());
  dnnl::memory m_mean(stat_md, eng, mean.data()), m_var(stat_md, eng, var.data());
  // With dnnl_rms_norm the training forward writes only the mean square (as "variance"). The backward's
  // descriptor still lists a mean argument, so one is passed, zero; oneDNN 3.13.2 ignores it (a mean of 5
  // gave the same dx errors), so the mean(dy*g) term in its dx does not come from this buffer.
  auto dnnl_inf = [&] {
    inf.execute(strm, {{DNNL_ARG_SRC, m_x}, {DNNL_ARG_DST, m_y}, {DNNL_ARG_SCALE, m_g}});
    strm.wait();
  };
  auto dnnl_train = [&] {
    train.execute(strm, {{DNNL_ARG_SRC, m_x}, {DNNL_ARG_DST, m_y}, {DNNL_ARG_SCALE, m_g}, {DNNL_ARG_MEAN, m_mean},
                         {DNNL_ARG_VARIANCE, m_var}});
    strm.wait();
  };
  auto dnnl_bwd = [&] {
    bwd.execute(strm, {{DNNL_ARG_SRC, m_x}, {DNNL_ARG_DIFF_DST, m_dy}, {DNNL_ARG_SCALE, m_g},
                       {DNNL_ARG_MEAN, m_mean}, {DNNL_ARG_VARIANCE, m_var}, {DNNL_ARG_DIFF_SRC, m_dx},
                       {DNNL_ARG_DIFF_SCALE, m_dw}});
    strm.wait();
  };

  // Correctness first: each backward takes its own library's saved statistic, as a training step would.
  ours_train();
  ours_bwd();
  dnnl_train();
  dnnl_bwd();

  std::vector<double> dw_ref(C, 0.0), xhat(C), dyg(C);
  RowError e;
  for (int64_t r = 0; r < R; ++r) {
    const size_t o = static_cast<size_t>(r * C);
    double ms = 0;
    for (int64_t j = 0; j < C; ++j) ms += static_cast<double>(x.at(o + j)) * x.at(o + j);
    const double rs = 1.0 / std::sqrt(ms / C + kEps);
    double m_dyg = 0, m_dyg_xhat = 0;
    for (int64_t j = 0; j < C; ++j) {
      xhat[j] = x.at(o + j) * rs;
      dyg[j] = static_cast<double>(dy.at(o + j)) * g[j];
      m_dyg += dyg[j];
      m_dyg_xhat += dyg[j] * xhat[j];
      dw_ref[j] += dy.at(o + j) * xhat[j];
    }
    m_dyg /= C;
    m_dyg_xhat /= C;
    auto row = [&](const std::function<double(int64_t)>& ref, const Tensor& t) {
      for (int64_t j = 0; j < C; ++j) e.Add(t.at(o + j), ref(j));
      return e.Take();
    };
    auto y_ref = [&](int64_t j) { return xhat[j] * g[j]; };
    auto dx_rms = [&](int64_t j) { return rs * (dyg[j] - xhat[j] * m_dyg_xhat); };
    auto dx_ln = [&](int64_t j) { return rs * (dyg[j] - m_dyg - xhat[j] * m_dyg_xhat); };
    err.y_ours = std::max(err.y_ours, row(y_ref, y_ours));
    err.y_dnnl = std::max(err.y_dnnl, row(y_ref, y_dnnl));
    err.dx_ours = std::max(err.dx_ours, row(dx_rms, dx_ours));
    err.dx_dnnl = std::max(err.dx_dnnl, row(dx_rms, dx_dnnl));
    err.dx_dnnl_vs_ln = std::max(err.dx_dnnl_vs_ln, row(dx_ln, dx_dnnl));
    for (int64_t j = 0; j < C; ++j) e.Add(dx_ln(j), dx_rms(j));
    err.dx_ln_vs_rms = std::max(err.dx_ln_vs_rms, e.Take());
  }
  for (int64_t j = 0; j < C; ++j) e.Add(dw_ours[j], dw_ref[j]);
  err.dw_ours = e.Take();
  for (int64_t j = 0; j < C; ++j) e.Add(dw_dnnl[j], dw_ref[j]);
  err.dw_dnnl = e.Take();

  const std::function<void()> ours[3] = {ours_inf, ours_train, ours_bwd};
  const std::function<void()> theirs[3] = {dnnl_inf, dnnl_train, dnnl_bwd};
  for (int d = 0; d < 3; ++d) {
    auto t = TimePair(ours[d], theirs[d], opt);
    tim.ours[d] = t.first;
    tim.dnnl[d] = t.second;
  }
}

// ---- Sweep: forward GB/s against row length ---------------------------------------------------------

struct SweepPoint {
  Shape shape{};
  bool bf16 = false;
  double ours_s = 0, dnnl_s = 0;  // median seconds per call
  double y_diff = 0;              // max |ours - oneDNN| over y, relative to max |y|
  std::string impl, skipped;      // oneDNN's implementation, or why the point has no timing
};

// The inference forward of both libraries on one shape: the same x and gain, each its own y.
void RunSweepPoint(SweepPoint& p, const Options& opt, dnnl::engine& eng, dnnl::stream& strm) {
  const size_t n = static_cast<size_t>(p.shape.rows * p.shape.cols);
  Tensor x(p.bf16, n), y_ours(p.bf16, n), y_dnnl(p.bf16, n);
  std::vector<float> g(p.shape.cols);
  Rng rng{0x5eed0000u + static_cast<uint64_t>(p.shape.rows * 7919 + p.shape.cols)};
  for (float& v : g) v = static_cast<float>(1.0 + 0.5 * rng.Uniform());
  for (size_t i = 0; i < n; ++i) x.set(i, static_cast<float>(0.3 + 2.0 * rng.Uniform()));

  const rmsnorm_config cfg = OursConfig(p.shape, p.bf16);
  auto ours = [&] { Check(rmsnorm_forward(&cfg, x.data(), g.data(), nullptr, y_ours.data(), nullptr), "forward"); };

  const DnnlDescs md(p.shape, p.bf16);
  dnnl::layer_normalization_forward::primitive_desc pd(eng, dnnl::prop_kind::forward_inference, md.data, md.data,
                                                        md.stat, kEps, RmsFlags());
  p.impl = pd.impl_info_str();
  dnnl::layer_normalization_forward fwd(pd);
  dnnl::memory m_x(md.data, eng, x.data()), m_y(md.data, eng, y_dnnl.data()), m_g(md.scale, eng, g.data());
  auto dnnl_fwd = [&] {
    fwd.execute(strm, {{DNNL_ARG_SRC, m_x}, {DNNL_ARG_DST, m_y}, {DNNL_ARG_SCALE, m_g}});
    strm.wait();
  };

  // The full check against a double reference is the default mode's; here only how far apart the two
  // y are (printed and in the JSON), so that a line of the chart cannot come from a kernel that was wrong.
  ours();
  dnnl_fwd();
  RowError e;
  for (size_t i = 0; i < n; ++i) e.Add(y_dnnl.at(i), y_ours.at(i));
  p.y_diff = e.Take();

  std::tie(p.ours_s, p.dnnl_s) = TimePair(ours, dnnl_fwd, opt);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

// The CPUs this process may run on: what TBB gives oneDNN, so ours gets the same (taskset included).
int AffinityCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return static_cast<int>(std::thread::hardware_concurrency());
  return CPU_COUNT(&set);
}

int RunSweep(const Options& opt, dnnl::engine& eng, dnnl::stream& strm, const dnnl_version_t* v) {
  std::vector<SweepPoint> points;
  std::printf("forward (inference), %lld elements per call, eps %g; GB/s = (x read + y written) / median time\n"
              "of %d repetitions; oneDNN's times include stream.wait(); y diff: max |oneDNN - ours| / max |ours|\n\n",
              static_cast<long long>(opt.sweep_elements), static_cast<double>(kEps), opt.reps);
  std::printf("%-5s %6s %7s %10s %10s %10s %10s\n", "dtype", "cols", "rows", "ours GB/s", "oneDNN GB/s",
              "oneDNN/ours", "y diff");
  for (bool bf16 : {false, true}) {
    for (int64_t cols : opt.sweep_cols) {
      SweepPoint p;
      p.shape = {std::max<int64_t>(1, opt.sweep_elements / cols), cols};
      p.bf16 = bf16;
      const double bytes = 2.0 * static_cast<double>(p.shape.rows * cols) * (bf16 ? 2 : 4);
      try {
        RunSweepPoint(p, opt, eng, strm);
      } catch (const dnnl::error& ex) {
        p.skipped = std::string("oneDNN: ") + ex.what();  // bf16 below AVX-512, as in the default mode
        std::printf("%-5s %6lld skipped: %s\n", bf16 ? "bf16" : "f32", static_cast<long long>(cols), p.skipped.c_str());
        points.push_back(p);
        continue;
      }
      std::printf("%-5s %6lld %7lld %10.2f %10.2f %10.2f %10.2e\n", bf16 ? "bf16" : "f32", static_cast<long long>(cols),
                  static_cast<long long>(p.shape.rows), bytes / p.ours_s / 1e9, bytes / p.dnnl_s / 1e9,
                  p.dnnl_s / p.ours_s, p.y_diff);
      std::fflush(stdout);
      points.push_back(p);
    }
  }
  if (opt.json_path.empty()) return 0;
  FILE* f = std::fopen(opt.json_path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", opt.json_path.c_str());
    return 1;
  }
  std::fprintf(f, "{\"tool\": \"peers_onednn\", \"mode\": \"sweep\", \"onednn_version\": \"%d.%d.%d\",\n", v->major,
               v->minor, v->patch);
  std::fprintf(f, " \"direction\": \"fwd\", \"elements\": %lld, \"reps\": %d, \"ours_threads\": %d,\n",
               static_cast<long long>(opt.sweep_elements), opt.reps, rmsnorm_get_num_threads());
  std::fprintf(f, " \"onednn_threads\": \"TBB default: every CPU the process may use (%d)\",\n \"points\": [",
               AffinityCpus());
  for (size_t i = 0; i < points.size(); ++i) {
    const SweepPoint& p = points[i];
    std::fprintf(f, "%s\n  {\"dtype\": \"%s\", \"rows\": %lld, \"cols\": %lld", i ? "," : "", p.bf16 ? "bf16" : "f32",
                 static_cast<long long>(p.shape.rows), static_cast<long long>(p.shape.cols));
    if (p.skipped.empty())
      std::fprintf(f, ", \"onednn_median_s\": %.6e, \"ours_median_s\": %.6e, \"y_diff\": %.3e, \"impl\": %s}",
                   p.dnnl_s, p.ours_s, p.y_diff, JsonString(p.impl).c_str());
    else
      std::fprintf(f, ", \"skipped\": %s}", JsonString(p.skipped).c_str());
  }
  std::fprintf(f, "\n ]}\n");
  std::fclose(f);
  std::printf("wrote %s\n", opt.json_path.c_str());
  return 0;
}

// Calls parse_item on each comma-separated item of s; false if s is empty or an item is refused.
bool ParseList(const char* s, const std::function<bool(const char*)>& parse_item) {
  std::string str(s);
  size_t pos = 0;
  while (pos <= str.size()) {
    size_t end = str.find(',', pos);
    if (end == std::string::npos) end = str.size();
    if (!parse_item(str.substr(pos, end - pos).c_str())) return false;
    pos = end + 1;
  }
  return !str.empty();
}

bool ParseShapes(const char* s, std::vector<Shape>& out) {
  out.clear();
  return ParseList(s, [&](const char* item) {
    long long r = 0, c = 0;
    char tail = 0;
    if (std::sscanf(item, "%lldx%lld%c", &r, &c, &tail) != 2 || r < 1 || c < 1) return false;
    out.push_back({r, c});
    return true;
  });
}

bool ParseCols(const char* s, std::vector<int64_t>& out) {
  out.clear();
  return ParseList(s, [&](const char* item) {
    long long c = 0;
    char tail = 0;
    if (std::sscanf(item, "%lld%c", &c, &tail) != 1 || c < 1) return false;
    out.push_back(c);
    return true;
  });
}

void Usage() {
  std::fprintf(stderr,
               "usage: peers_onednn [--shapes RxC[,RxC...]] [--reps N] [--quick]\n"
               "       peers_onednn --sweep [--sweep-elements N] [--sweep-cols C[,C...]] [--json FILE] [--reps N] [--quick]\n"
               "  --shapes  default 8192x4096,512x4096,64x1024,1x4096,4096x128\n"
               "  --reps    timed repetitions per case, median reported (default 7)\n"
               "  --quick   a smoke test: small shapes (one of odd width), 3 short repetitions\n"
               "  --sweep   forward only, ours and oneDNN on every CPU the process may use, over row lengths\n"
               "            --sweep-cols (default 64,128,...,16384) at --sweep-elements per call (default 4194304:\n"
               "            rows = elements / cols); --json FILE writes the points for bench/peers.py --onednn-json\n");
}

std::string Us(double s) {
  char b[32];
  std::snprintf(b, sizeof b, s < 1e-3 ? "%.2f" : "%.0f", s * 1e6);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--shapes" && i + 1 < argc) {
      if (!ParseShapes(argv[++i], opt.shapes)) {
        std::fprintf(stderr, "bad --shapes: %s\n", argv[i]);
        return 2;
      }
    } else if (a == "--reps" && i + 1 < argc) {
      opt.reps = std::atoi(argv[++i]);
      if (opt.reps < 1) {
        std::fprintf(stderr, "bad --reps: %s\n", argv[i]);
        return 2;
      }
    } else if (a == "--sweep") {
      opt.sweep = true;
    } else if (a == "--sweep-elements" && i + 1 < argc) {
      opt.sweep_elements = std::atoll(argv[++i]);
      if (opt.sweep_elements < 1) {
        std::fprintf(stderr, "bad --sweep-elements: %s\n", argv[i]);
        return 2;
      }
    } else if (a == "--sweep-cols" && i + 1 < argc) {
      if (!ParseCols(argv[++i], opt.sweep_cols)) {
        std::fprintf(stderr, "bad --sweep-cols: %s\n", argv[i]);
        return 2;
      }
    } else if (a == "--json" && i + 1 < argc) {
      opt.json_path = argv[++i];
    } else if (a == "--quick") {
      opt.shapes = {{64, 1024}, {1, 4096}, {37, 100}};
      opt.reps = 3;
      opt.batch_seconds = 5e-4;
    } else if (a == "--help" || a == "-h") {
      Usage();
      return 0;
    } else {
      Usage();
      return 2;
    }
  }

  // The default mode is the two-thread comparison; the sweep gives ours what TBB gives oneDNN.
  const int threads = opt.sweep ? AffinityCpus() : kThreads;
  rmsnorm_set_num_threads(threads);
  const dnnl_version_t* v = dnnl_version();
  std::printf("ours: rmsnorm %s, %s, %d threads\n", rmsnorm_version(), rmsnorm_cpu_target(),
              rmsnorm_get_num_threads());
  // This wheel's CPU engine runs on TBB, which takes every CPU the process may use; there is no oneDNN
  // call to cap it. On a larger machine, run under `taskset -c 0,1` for a two-thread comparison.
  const unsigned hw = std::thread::hardware_concurrency();
  std::printf("oneDNN %d.%d.%d (%s), CPU runtime %s, threads: its default (%u CPUs here)%s\n", v->major, v->minor,
              v->patch, v->hash,
              v->cpu_runtime == DNNL_RUNTIME_SYCL ? "SYCL" : v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other",
              hw, opt.sweep || hw == kThreads ? "" : " -- NOT 2: run under taskset -c 0,1");
  if (!opt.sweep)
    std::printf("eps %g; times are the median of %d repetitions, microseconds per call; each backward takes its\n"
                "own library's saved statistic; oneDNN's times include stream.wait()\n\n",
                static_cast<double>(kEps), opt.reps);

  dnnl::engine eng;
  try {
    eng = dnnl::engine(dnnl::engine::kind::cpu, 0);
  } catch (const dnnl::error& ex) {
    std::fprintf(stderr,
                 "no oneDNN CPU engine (%s). The SYCL build needs the OpenCL CPU runtime: set OCL_ICD_FILENAMES to\n"
                 "intel-opencl-rt's libintelocl.so and put its lib/ on LD_LIBRARY_PATH (make peers-onednn does).\n",
                 ex.what());
    return 1;
  }
  dnnl::stream strm(eng);
  if (opt.sweep) return RunSweep(opt, eng, strm, v);

  struct Row {
    Shape shape;
    bool bf16;
    Errors err;
    Timings tim;
  };
  std::vector<Row> rows;
  std::printf("%-11s %-5s %-9s %12s %12s %10s\n", "shape", "dtype", "direction", "ours us", "oneDNN us",
              "oneDNN/ours");
  for (const Shape& s : opt.shapes) {
    for (bool bf16 : {false, true}) {
      Row row{s, bf16, {}, {}};
      char name[32];
      std::snprintf(name, sizeof name, "%lldx%lld", static_cast<long long>(s.rows), static_cast<long long>(s.cols));
      try {
        Run(s, bf16, opt, eng, strm, row.err, row.tim);
      } catch (const dnnl::error& ex) {
        // bf16 below AVX-512 (ONEDNN_MAX_CPU_ISA=AVX2, or an older CPU) has no implementation.
        std::printf("%-11s %-5s skipped: oneDNN: %s\n", name, bf16 ? "bf16" : "f32", ex.what());
        continue;
      }
      for (int d = 0; d < 3; ++d)
        std::printf("%-11s %-5s %-9s %12s %12s %10.2f\n", name, bf16 ? "bf16" : "f32", kDirections[d],
                    Us(row.tim.ours[d]).c_str(), Us(row.tim.dnnl[d]).c_str(), row.tim.dnnl[d] / row.tim.ours[d]);
      std::fflush(stdout);
      rows.push_back(row);
    }
  }

  if (rows.empty()) return 1;
  int met = 0, total = 0;
  for (const Row& r : rows)
    for (int d = 0; d < 3; ++d, ++total) met += r.tim.dnnl[d] / r.tim.ours[d] >= kTarget;
  std::printf("\ntarget oneDNN/ours >= %.1f: met in %d of %d cases (timings mean something only on a quiet machine)\n",
              kTarget, met, total);

  std::printf("\nmax relative error against the double reference (per row: max |a - ref| / max |ref|; dweight over\n"
              "the vector). dx under \"LN term\": oneDNN's dx against rstd*(dy*g - mean(dy*g) - xhat*mean(dy*g*xhat));\n"
              "\"formulas apart\": that formula against RMSNorm's on these inputs.\n");
  std::printf("%-11s %-5s %9s %9s %9s %9s %9s %9s %9s %9s  %s\n", "shape", "dtype", "y ours", "y oneDNN", "dx ours",
              "dx oneDNN", "dw ours", "dw oneDNN", "LN term", "apart", "oneDNN's dx follows");
  for (const Row& r : rows) {
    char name[32];
    std::snprintf(name, sizeof name, "%lldx%lld", static_cast<long long>(r.shape.rows),
                  static_cast<long long>(r.shape.cols));
    const Errors& e = r.err;
    // A factor of 4 tells the formulas apart above bf16's rounding of dx, which alone is about 3e-3 here.
    const char* follows = 4 * e.dx_dnnl < e.dx_dnnl_vs_ln   ? "RMSNorm"
                          : 4 * e.dx_dnnl_vs_ln < e.dx_dnnl ? "the LayerNorm mean(dy*g) term"
                                                            : "neither clearly";
    std::printf("%-11s %-5s %9.2e %9.2e %9.2e %9.2e %9.2e %9.2e %9.2e %9.2e  %s\n", name, r.bf16 ? "bf16" : "f32",
                e.y_ours, e.y_dnnl, e.dx_ours, e.dx_dnnl, e.dw_ours, e.dw_dnnl, e.dx_dnnl_vs_ln, e.dx_ln_vs_rms,
                follows);
  }
  std::printf("\noneDNN's implementations (inference, training, backward):\n");
  for (const Row& r : rows)
    std::printf("  %lldx%lld %s: %s\n", static_cast<long long>(r.shape.rows), static_cast<long long>(r.shape.cols),
                r.bf16 ? "bf16" : "f32", r.tim.impls.c_str());
  return 0;
}
