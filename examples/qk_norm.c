#include <stdio.h>
#include <rmsnorm/rmsnorm.h>

/* QK-norm (Qwen3, Gemma 3, OLMo 2): RMSNorm over each head of q and of k, in place inside the fused
 * projection output qkv[tokens][(HQ + 2 * HKV) * D], with one weight of length D per q and per k. */
enum { TOKENS = 3, HQ = 4, HKV = 2, D = 8, WIDTH = (HQ + 2 * HKV) * D };

static int norm_heads(float* first_head, int64_t heads, const float* weight) {
  rmsnorm_config_ex config = rmsnorm_config_ex_init(TOKENS * heads, D);
  config.inner_rows = heads;                  /* row r is (token r / heads, head r % heads) */
  config.x.outer = config.y.outer = WIDTH;    /* from one token to the next */
  config.x.inner = config.y.inner = D;        /* from one head to the next */
  return rmsnorm_forward_ex(&config, first_head, weight, NULL, first_head, NULL) == RMSNORM_OK;
}

int main(void) {
  static float qkv[TOKENS][WIDTH];
  float q_weight[D], k_weight[D];
  for (int t = 0; t < TOKENS; ++t)
    for (int i = 0; i < WIDTH; ++i) qkv[t][i] = (float)((t * 7 + i * 3) % 11) - 5.0f;
  for (int i = 0; i < D; ++i) q_weight[i] = 1.0f, k_weight[i] = 0.5f;

  if (!norm_heads(&qkv[0][0], HQ, q_weight) || !norm_heads(&qkv[0][HQ * D], HKV, k_weight)) {
    fprintf(stderr, "%s\n", rmsnorm_last_error());
    return 1;
  }
  /* Each q head now has a mean square of 1 (of 0.25 for k, whose gain is 0.5); v is untouched. */
  int wrong = 0;
  for (int head = 0; head < HQ + HKV; ++head) {
    double ms = 0;
    for (int i = 0; i < D; ++i) ms += qkv[1][head * D + i] * qkv[1][head * D + i] / D;
    printf("token 1, %s head %d: mean square %.4f\n", head < HQ ? "q" : "k", head < HQ ? head : head - HQ, ms);
    wrong += (ms - (head < HQ ? 1.0 : 0.25)) * (ms - (head < HQ ? 1.0 : 0.25)) > 1e-8;
  }
  return wrong;
}
