/* The C ABI's documented behaviour, checked from plain C99 as an outside program sees it. Built
 * against the build tree by ctest, and against the installed library (pkg-config) by install_test.sh.
 * Each check computes its expectation independently, in double. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rmsnorm/rmsnorm.h>

static int g_passed = 0, g_failed = 0;

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (cond) {                                          \
      ++g_passed;                                        \
    } else {                                             \
      ++g_failed;                                        \
      fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                      \
      fprintf(stderr, "\n");                             \
    }                                                    \
  } while (0)

static int close_to(double got, double want, double relative) {
  return fabs(got - want) <= relative * fabs(want) + 1e-30;
}

/* RMSNorm of one row in double: the definition. */
static void rms_row(const float* x, int n, int k, double eps, const float* w, const float* b, double* y,
                    double* rstd) {
  double ms = 0.0;
  int i;
  for (i = 0; i < k; ++i) ms += (double)x[i] * x[i];
  ms /= k;
  *rstd = ms + eps > 0 ? 1.0 / sqrt(ms + eps) : 0.0;
  for (i = 0; i < n; ++i) y[i] = x[i] * *rstd * (w ? w[i] : 1.0) + (b ? b[i] : 0.0);
}

static void test_values(void) {
  enum { R = 2, C = 5 };
  const float x[R * C] = {1, -2, 3, 0.5f, 4, -1, -1, 2, 7, 0.25f};
  const float w[C] = {1, 0.5f, 2, -1, 1.5f}, b[C] = {0.1f, 0, -0.2f, 0, 1};
  float y[R * C], rstd[R];
  double want[C], want_rstd;
  int r, i;
  rmsnorm_config c = rmsnorm_config_init(R, C);
  CHECK(c.dtype == RMSNORM_F32 && c.eps == 1e-6f && c.partial == 1.0f && c.weight_offset == 0.0f, "config_init defaults");
  CHECK(rmsnorm_forward(&c, x, w, b, y, rstd) == RMSNORM_OK, "forward: %s", rmsnorm_last_error());
  for (r = 0; r < R; ++r) {
    rms_row(x + r * C, C, C, 1e-6, w, b, want, &want_rstd);
    CHECK(close_to(rstd[r], want_rstd, 1e-6), "rstd[%d] %g vs %g", r, rstd[r], want_rstd);
    for (i = 0; i < C; ++i) CHECK(close_to(y[r * C + i], want[i], 1e-6), "y[%d][%d] %g vs %g", r, i, y[r * C + i], want[i]);
  }
  /* pRMSNorm: the statistic from the first k = ceil(p n) elements, applied to all. */
  c.partial = 0.4f; /* k = 2 */
  CHECK(rmsnorm_partial_size(C, c.partial) == 2, "partial size");
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y, NULL) == RMSNORM_OK, "pRMSNorm forward");
  rms_row(x, C, 2, 1e-6, NULL, NULL, want, &want_rstd);
  for (i = 0; i < C; ++i) CHECK(close_to(y[i], want[i], 1e-6), "pRMSNorm y[%d]", i);
  /* Gemma's offset: the gain used is offset + w. */
  c.partial = 1.0f;
  c.weight_offset = 1.0f;
  {
    float shifted[C];
    for (i = 0; i < C; ++i) shifted[i] = 1.0f + w[i];
    CHECK(rmsnorm_forward(&c, x, w, NULL, y, NULL) == RMSNORM_OK, "offset forward");
    rms_row(x, C, C, 1e-6, shifted, NULL, want, &want_rstd);
    for (i = 0; i < C; ++i) CHECK(close_to(y[i], want[i], 1e-6), "offset y[%d]", i);
  }
}

static void test_other_norms(void) {
  enum { C = 4 };
  const float x[C] = {1, 2, 3, 6};
  float y[C], mean, rstd;
  int i;
  rmsnorm_config c = rmsnorm_config_init(1, C);
  c.eps = 0.0f;
  CHECK(rmsnorm_layernorm_forward(&c, x, NULL, NULL, y, &mean, &rstd) == RMSNORM_OK, "layernorm");
  CHECK(close_to(mean, 3.0, 1e-7), "layernorm mean %g", mean);
  CHECK(close_to(rstd, 1.0 / sqrt(3.5), 1e-6), "layernorm rstd %g", rstd); /* var = (4+1+0+9)/4 */
  for (i = 0; i < C; ++i) CHECK(close_to(y[i], (x[i] - 3.0) / sqrt(3.5), 1e-6), "layernorm y[%d]", i);
  CHECK(rmsnorm_l2norm_forward(&c, x, NULL, NULL, y, &rstd) == RMSNORM_OK, "l2norm");
  for (i = 0; i < C; ++i) CHECK(close_to(y[i], x[i] / sqrt(50.0), 1e-6), "l2norm y[%d]", i);
  c.partial = 0.5f;
  CHECK(rmsnorm_layernorm_forward(&c, x, NULL, NULL, y, NULL, NULL) == RMSNORM_ERROR_INVALID_ARGUMENT,
        "LayerNorm refuses partial != 1");
}

static void test_backward(void) {
  /* dx_i = rstd (u_i - xhat_i sum(u xhat) / n), u = dy g; dweight = dy xhat summed over rows. */
  enum { C = 3 };
  const float x[C] = {1, -2, 2}, dy[C] = {0.5f, 1, -1}, w[C] = {2, 1, 0.5f};
  float rstd, dx[C], dweight[C], dbias[C];
  double r = 1.0 / sqrt(3.0), dot = 0.0;
  int i;
  rmsnorm_config c = rmsnorm_config_init(1, C);
  c.eps = 0.0f;
  CHECK(rmsnorm_forward(&c, x, w, NULL, dx, &rstd) == RMSNORM_OK, "forward for backward");
  CHECK(rmsnorm_backward(&c, dy, x, w, &rstd, dx, dweight, dbias) == RMSNORM_OK, "backward");
  for (i = 0; i < C; ++i) dot += dy[i] * w[i] * x[i] * r;
  for (i = 0; i < C; ++i) {
    CHECK(close_to(dx[i], r * (dy[i] * w[i] - x[i] * r * dot / C), 1e-6), "dx[%d]", i);
    CHECK(close_to(dweight[i], dy[i] * x[i] * r, 1e-6), "dweight[%d]", i);
    CHECK(dbias[i] == dy[i], "dbias[%d]", i);
  }
  /* rstd NULL: recomputed, same result. */
  {
    float again[C];
    CHECK(rmsnorm_backward(&c, dy, x, w, NULL, again, NULL, NULL) == RMSNORM_OK, "backward recompute");
    for (i = 0; i < C; ++i) CHECK(close_to(again[i], dx[i], 1e-6), "recomputed dx[%d]", i);
  }
}

static void test_bad_input(void) {
  float x[4] = {1, 2, 3, 4}, y[4] = {9, 9, 9, 9};
  rmsnorm_config c = rmsnorm_config_init(1, 4);
  c.eps = -1.0f;
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y, NULL) == RMSNORM_ERROR_INVALID_ARGUMENT, "negative eps refused");
  CHECK(strstr(rmsnorm_last_error(), "eps") != NULL, "message names eps: %s", rmsnorm_last_error());
  CHECK(y[0] == 9 && y[3] == 9, "nothing written");
  c.eps = 0.0f;
  CHECK(rmsnorm_forward(&c, NULL, NULL, NULL, y, NULL) == RMSNORM_ERROR_INVALID_ARGUMENT, "NULL x refused");
  CHECK(strstr(rmsnorm_last_error(), "x is NULL") != NULL, "message names x");
  CHECK(rmsnorm_forward(NULL, x, NULL, NULL, y, NULL) == RMSNORM_ERROR_INVALID_ARGUMENT, "NULL config refused");
  c.dtype = (rmsnorm_dtype)9;
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y, NULL) == RMSNORM_ERROR_INVALID_ARGUMENT, "bad dtype refused");
  c.dtype = RMSNORM_F32;
  CHECK(rmsnorm_set_backend((rmsnorm_backend)9) == RMSNORM_ERROR_INVALID_ARGUMENT, "bad backend refused");
  CHECK(rmsnorm_get_backend() == RMSNORM_BACKEND_AUTO, "backend unchanged");
  c.partial = 0.0f;
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y, NULL) == RMSNORM_ERROR_INVALID_ARGUMENT, "partial 0 refused");
  c.partial = 1.0f;
  c.weight_offset = NAN;
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y, NULL) == RMSNORM_ERROR_INVALID_ARGUMENT, "NaN offset refused");
  CHECK(y[1] == 9, "still nothing written");
  c.rows = 0;
  c.weight_offset = 0.0f;
  CHECK(rmsnorm_forward(&c, NULL, NULL, NULL, NULL, NULL) == RMSNORM_OK, "rows = 0 is a no-op");
}

static void test_magnitudes(void) {
  /* eps = 0 at the ends of f32's range: squares overflow or underflow in f32, the answer must not. */
  const double scales[] = {3e38, 1e-30, 1e-40};
  const float base[5] = {1, -0.5f, 0.25f, 0.75f, -1};
  size_t s;
  int i;
  for (s = 0; s < sizeof scales / sizeof scales[0]; ++s) {
    float x[5], y[5];
    double want[5], want_rstd;
    rmsnorm_config c = rmsnorm_config_init(1, 5);
    c.eps = 0.0f;
    for (i = 0; i < 5; ++i) x[i] = (float)(base[i] * scales[s]);
    CHECK(rmsnorm_forward(&c, x, NULL, NULL, y, NULL) == RMSNORM_OK, "magnitude %g", scales[s]);
    rms_row(x, 5, 5, 0.0, NULL, NULL, want, &want_rstd);
    for (i = 0; i < 5; ++i) CHECK(close_to(y[i], want[i], 1e-6), "magnitude %g y[%d] %g vs %g", scales[s], i, y[i], want[i]);
  }
}

static void test_zero_and_nan_rows(void) {
  float x[6] = {0, 0, 0, 1, NAN, 2}, y[6], rstd[2];
  int i;
  rmsnorm_config c = rmsnorm_config_init(3, 2);
  float x3[6] = {0, 0, 1, NAN, 3, 4};
  c.eps = 0.0f;
  c.rows = 2;
  c.cols = 3;
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y, rstd) == RMSNORM_OK, "zero row");
  for (i = 0; i < 3; ++i) CHECK(y[i] == 0.0f, "zero row gives zeros, not NaN: %g", y[i]);
  CHECK(rstd[0] == 0.0f, "zero row reports rstd 0");
  CHECK(isnan(y[4]), "NaN row is NaN");
  /* A NaN stays in its own row. */
  c.rows = 3;
  c.cols = 2;
  CHECK(rmsnorm_forward(&c, x3, NULL, NULL, y, NULL) == RMSNORM_OK, "NaN rows");
  CHECK(y[0] == 0 && y[1] == 0, "row 0 untouched by row 1's NaN");
  CHECK(close_to(y[4], 3.0 / sqrt(12.5), 1e-6) && close_to(y[5], 4.0 / sqrt(12.5), 1e-6), "row 2 untouched");
}

static void test_in_place_and_threads(void) {
  enum { R = 300, C = 2000 };
  float* x = malloc(sizeof(float) * R * C);
  float* y1 = malloc(sizeof(float) * R * C);
  float* y2 = malloc(sizeof(float) * R * C);
  float* dw1 = malloc(sizeof(float) * C);
  float* dw2 = malloc(sizeof(float) * C);
  int i, saved = rmsnorm_get_num_threads();
  rmsnorm_config c = rmsnorm_config_init(R, C);
  uint32_t state = 12345;
  for (i = 0; i < R * C; ++i) {
    state = state * 1664525u + 1013904223u;
    x[i] = (float)((state >> 8) * (1.0 / 16777216.0) - 0.3);
  }
  rmsnorm_set_num_threads(1);
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y1, NULL) == RMSNORM_OK, "1 thread");
  CHECK(rmsnorm_backward(&c, x, x, NULL, NULL, y2, dw1, NULL) == RMSNORM_OK, "1 thread backward");
  rmsnorm_set_num_threads(2);
  CHECK(rmsnorm_get_num_threads() == 2, "set threads");
  CHECK(rmsnorm_backward(&c, x, x, NULL, NULL, y2, dw2, NULL) == RMSNORM_OK, "2 threads backward");
  CHECK(memcmp(dw1, dw2, sizeof(float) * C) == 0, "dweight bitwise identical for 1 and 2 threads");
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y2, NULL) == RMSNORM_OK, "2 threads");
  CHECK(memcmp(y1, y2, sizeof(float) * R * C) == 0, "bitwise identical for 1 and 2 threads");
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, x, NULL) == RMSNORM_OK, "in place");
  CHECK(memcmp(x, y1, sizeof(float) * R * C) == 0, "in place equals out of place");
  rmsnorm_set_num_threads(saved);
  free(x), free(y1), free(y2), free(dw1), free(dw2);
}

static void test_bf16(void) {
  /* bf16 is the upper half of an f32; 1, 2, 3, 4 are exact. */
  const uint16_t x[4] = {0x3F80, 0x4000, 0x4040, 0x4080};
  uint16_t y[4];
  int i;
  rmsnorm_config c = rmsnorm_config_init(1, 4);
  c.dtype = RMSNORM_BF16;
  c.eps = 0.0f;
  CHECK(rmsnorm_forward(&c, x, NULL, NULL, y, NULL) == RMSNORM_OK, "bf16");
  for (i = 0; i < 4; ++i) {
    uint32_t bits = (uint32_t)y[i] << 16;
    float v;
    memcpy(&v, &bits, 4);
    CHECK(close_to(v, (i + 1) / sqrt(7.5), 1.0 / 128), "bf16 y[%d] %g", i, v);
  }
}

int main(void) {
  test_values();
  test_other_norms();
  test_backward();
  test_bad_input();
  test_magnitudes();
  test_zero_and_nan_rows();
  test_in_place_and_threads();
  test_bf16();
  printf("rmsnorm %s on %s\n", rmsnorm_version(), rmsnorm_cpu_target());
  printf("c_api_test: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
