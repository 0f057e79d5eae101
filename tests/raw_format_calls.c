/* The quantized entry points with the format given as an int, called from C as a C caller would. In C
 * an enum object holds any value of its compatible integer type; in C++, loading an enum whose value is
 * outside its enumerators' range is undefined (UBSan's -fsanitize=enum reports it wherever the load is
 * not optimized away). The refusal tests pass formats out of range through these two functions. */
#include "raw_format_calls.h"

rmsnorm_status rmsnorm_test_forward_quantized(const rmsnorm_config_ex* config, int format, const void* x,
                                              const float* weight, const float* bias, void* q, float* scales,
                                              float* rstd) {
  return rmsnorm_forward_quantized(config, (rmsnorm_quant_format)format, x, weight, bias, q, scales, rstd);
}

rmsnorm_status rmsnorm_test_add_forward_quantized(const rmsnorm_config_ex* config, int format, const void* x,
                                                  const void* residual, const float* weight, const float* bias,
                                                  void* q, float* scales, void* residual_out, float* rstd) {
  return rmsnorm_add_forward_quantized(config, (rmsnorm_quant_format)format, x, residual, weight, bias, q, scales,
                                       residual_out, rstd);
}
