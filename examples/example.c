#include <stdio.h>
#include <rmsnorm/rmsnorm.h>

int main(void) {
  /* Two rows of four features with a learned gain, as in a Transformer block. */
  const float x[2][4] = {{1, 2, 3, 4}, {-1, 0.5f, 0, 2}};
  const float gain[4] = {1, 1, 0.5f, 2};
  float y[2][4], rstd[2];

  rmsnorm_config config = rmsnorm_config_init(2, 4); /* f32, eps 1e-6, partial 1 */
  if (rmsnorm_forward(&config, x, gain, NULL, y, rstd) != RMSNORM_OK) {
    fprintf(stderr, "%s\n", rmsnorm_last_error());
    return 1;
  }
  for (int r = 0; r < 2; ++r)
    printf("rmsnorm  row %d: rstd %.4f  y = %7.4f %7.4f %7.4f %7.4f\n", r, rstd[r], y[r][0], y[r][1], y[r][2], y[r][3]);

  /* pRMSNorm: the statistic from the first 25% of each row only. */
  config.partial = 0.25f;
  rmsnorm_forward(&config, x, gain, NULL, y, rstd);
  printf("prmsnorm row 0: rstd %.4f (from x[0][0] alone)\n", rstd[0]);

  /* Bad input is refused with a status and a message, and nothing is written. */
  config.eps = -1.0f;
  if (rmsnorm_forward(&config, x, gain, NULL, y, rstd) != RMSNORM_OK) printf("refused: %s\n", rmsnorm_last_error());
  return 0;
}
