/* See raw_format_calls.c: the quantized entry points with an int format, for formats out of range. */
#ifndef RMSNORM_TESTS_RAW_FORMAT_CALLS_H_
#define RMSNORM_TESTS_RAW_FORMAT_CALLS_H_

#include <rmsnorm/rmsnorm.h>

#ifdef __cplusplus
extern "C" {
#endif

rmsnorm_status rmsnorm_test_forward_quantized(const rmsnorm_config_ex* config, int format, const void* x,
                                              const float* weight, const float* bias, void* q, float* scales,
                                              float* rstd);
rmsnorm_status rmsnorm_test_add_forward_quantized(const rmsnorm_config_ex* config, int format, const void* x,
                                                  const void* residual, const float* weight, const float* bias,
                                                  void* q, float* scales, void* residual_out, float* rstd);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RMSNORM_TESTS_RAW_FORMAT_CALLS_H_ */
