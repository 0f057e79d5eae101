#include <math.h>
#include <stdio.h>
#include <rmsnorm/rmsnorm.h>

/* RMSNorm straight to int8 with one f32 scale per row, the input of an int8 matrix product: no f32 y
 * is ever stored. Dequantizing (q * scale) gives y back within half a step, scale / 2. */
enum { ROWS = 4, COLS = 64 };

int main(void) {
  static float x[ROWS][COLS], weight[COLS], y[ROWS][COLS];
  static signed char q[ROWS][COLS];
  float scales[ROWS];
  for (int r = 0; r < ROWS; ++r)
    for (int i = 0; i < COLS; ++i) x[r][i] = (float)((r * 5 + i * 7) % 13) - 6.0f + 0.25f * (float)r;
  for (int i = 0; i < COLS; ++i) weight[i] = 1.0f + (float)(i % 5) / 8.0f;

  rmsnorm_config_ex config = rmsnorm_config_ex_init(ROWS, COLS);
  if (rmsnorm_forward_quantized(&config, RMSNORM_QUANT_INT8_ROW, x, weight, NULL, q, scales, NULL) != RMSNORM_OK ||
      rmsnorm_forward_ex(&config, x, weight, NULL, y, NULL) != RMSNORM_OK) { /* y only to check against */
    fprintf(stderr, "%s\n", rmsnorm_last_error());
    return 1;
  }
  int wrong = 0;
  for (int r = 0; r < ROWS; ++r) {
    double max_error = 0;
    for (int i = 0; i < COLS; ++i) {
      const double error = fabs(q[r][i] * (double)scales[r] - y[r][i]);
      if (error > max_error) max_error = error;
    }
    printf("row %d: scale %.6f, max |q * scale - y| %.6f\n", r, scales[r], max_error);
    wrong += max_error > scales[r] * (0.5 + 1e-4); /* half a step, and y / scale is rounded to f32 */
  }
  return wrong;
}
