/* rmsnorm: Root Mean Square Layer Normalization (Zhang & Sennrich, NeurIPS 2019) and its baselines.
 *
 * The stable C ABI. Every exported symbol starts with `rmsnorm_`. Functions that already exist here are
 * never renamed or changed; new ones are added at the end of their section.
 *
 * Tensors are row-major: `rows` vectors of `cols` elements, contiguous (strided with the _ex calls). x, residual, y,
 * residual_out, dy and dx are stored in `config->dtype`; weight, bias, their gradients and the saved
 * statistics (mean, rstd) are f32. Arithmetic accumulates in f32 or wider, never in bf16/f16.
 *
 *   RMSNorm    y = x * rstd * g (+ b),   rstd = 1 / sqrt(mean_{i<k}(x_i^2) + eps)
 *   pRMSNorm   the same with k = max(1, ceil(partial * cols)); k = cols is RMSNorm
 *   L2-Norm    y = x * rstd * g (+ b),   rstd = 1 / sqrt(sum_i(x_i^2) + eps)
 *   LayerNorm  y = (x - mean) * rstd * g + b,   rstd = 1 / sqrt(var(x) + eps)
 *
 * with g = weight_offset + weight[i] when weight is given, else 1.
 *
 * Every call checks all of its arguments first and, on failure, returns a status, records a message
 * for rmsnorm_last_error() and writes nothing. rows = 0 succeeds and touches no pointer (so an empty
 * batch leaves dweight and dbias as they were: zero them yourself if that is the sum you want).
 *
 * Aliasing: an output may coincide exactly with an input (rows, cols) tensor, for in-place use; any
 * other overlap between an output and another buffer is refused.
 *
 * Alignment: every pointer must be aligned to its elements (else the call is refused); results never
 * depend on any further alignment. Speed does: rows and parameters that start on a 64-byte boundary
 * are read a line at a time. Calls of many rows read a weight or bias that does not start on one from
 * an aligned copy they make; shorter calls, a decode row among them, read it where it is.
 *
 * Extremes (the SIMD kernels and the reference backend agree on all of these, NaN for NaN):
 *   - The gain weight_offset + weight[i] is summed in f32: beyond f32's range it is +-inf, and the
 *     outputs follow IEEE arithmetic from there (a column where x - mean = 0 meets it gives NaN).
 *   - Outputs beyond f32's range (or the dtype's) are +-inf; any finite x, weight and bias are accepted.
 *   - An infinite x makes its row's statistic infinite: for the RMSNorm family rstd = 0, so the row is
 *     y = b except NaN at the infinite elements; for LayerNorm the mean is infinite and the row NaN.
 *     An infinite weight or bias makes its column infinite (NaN where it meets a zero). A NaN stays in
 *     its row, and the parameter gradients it reaches.
 *   - A statistic (mean square or variance, plus eps) is computed in double where f32 cannot hold it;
 *     rstd is reported rounded to f32, +inf where it exceeds f32 (a statistic below about 2^-256, as
 *     in rows of subnormals with eps = 0), while y and dx use the unrounded rstd.
 *   - A row whose statistic plus eps is 0 (eps = 0 with a zero row, or a constant row for LayerNorm)
 *     gives y = b (or 0), rstd = 0 and dx = 0.
 *   - LayerNorm's backward recomputes a row's statistics from x in double, ignoring the saved ones,
 *     where the saved rstd is not a positive normal f32, the saved mean is not finite, or
 *     |mean| * rstd > 128 (a mean that dwarfs the spread: its f32 rounding would shift every x-hat).
 *   - The kernels round intermediates such as x * rstd, then the gain's product, and the backward's
 *     x-hat, dy * g and their products to f32. Where the forward's x-hat = x * rstd (or
 *     (x - mean) * rstd), or x-hat * g when a bias follows, comes within a factor of 2 of f32's
 *     overflow while the exact y may be finite (a gain below 1 or a bias of the other sign brings it
 *     back), that chunk of the row is computed in double, as the reference: y is +-inf only where it is
 *     itself beyond the dtype's range. That happens in pRMSNorm's columns past k, outside the
 *     statistic (a tiny statistic and a huge element), and with gains near f32's maximum. So are
 *     LayerNorm rows whose mean is below 2^-100 (rows of subnormal values), which f32 cannot center on
 *     without shifting every x - mean.
 *   - Below f32's normal range (2^-126) that rounding is absolute, and the factors applied after it
 *     scale it: on top of the relative bounds, y may be off by 2^-149 * |g|, dx by 2^-149 * rstd times
 *     the sizes of the terms it passes through, dweight by 2^-149 * (|dy| + 1) per row (the bounds of
 *     tests/test_util.cc). So y may be 0 where x * rstd underflows and a huge g would bring it back.
 *   - The backward's saved statistics (rstd, and LayerNorm's mean) are the forward's outputs for the
 *     same x, eps and partial, as PyTorch's saved mean and rstd and oneDNN's workspace are: then
 *     |x-hat| <= sqrt(k) below k, and every statement here holds. It holds as well for a saved rstd
 *     within a factor of 2 of the forward's. Other values are accepted and memory-safe (nothing is
 *     written outside the outputs), but the kernels' results may then differ from the reference's
 *     beyond rounding: x-hat * c may pass f32's range before rstd would scale it back, giving +-inf.
 *     Within the contract a row whose backward coefficient c (LayerNorm's mean(u * x-hat)) times
 *     2 sqrt(k) nears f32's maximum is computed in double, so x-hat * c cannot leave f32's range.
 *     So is a row where some |u| = |dy * g| reaches 2^126: u - x-hat * c (LayerNorm's
 *     u - mean(u) - x-hat * mean(u * x-hat)) could pass f32's range there before rstd < 1 scales it
 *     back. dx is then +-inf only where it is itself beyond the dtype's range.
 *   - dweight and dbias sum each row's term (dy * x-hat, dy) in f32 within a block of rows, then the
 *     blocks in double. A column whose f32 sum leaves f32's range on the way (terms near f32's
 *     maximum: dy = 1e38 in one row and -1e38 in the next, or x-hat beyond f32 in pRMSNorm's columns
 *     past k) comes out non-finite; such a column is then summed again over all rows in double with
 *     the reference's terms, in row order, so dweight and dbias are the reference's there: +-inf only
 *     where that sum itself is beyond f32, NaN only where an input NaN (or inf - inf of infinite
 *     inputs) reaches it. Except in place (dx aliasing dy or x: the inputs are gone by then): there
 *     such a column keeps its f32 sum, +-inf or NaN, which can happen only where the sum over rows
 *     of the terms' magnitudes exceeds f32's maximum.
 */
#ifndef RMSNORM_RMSNORM_H_
#define RMSNORM_RMSNORM_H_

#include <stdint.h>

#if defined(_WIN32)
#if defined(RMSNORM_BUILDING_LIBRARY)
#define RMSNORM_API __declspec(dllexport)
#else
#define RMSNORM_API
#endif
#else
#define RMSNORM_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define RMSNORM_VERSION_MAJOR 0
#define RMSNORM_VERSION_MINOR 1
#define RMSNORM_VERSION_PATCH 0

typedef enum rmsnorm_status {
  RMSNORM_OK = 0,
  RMSNORM_ERROR_INVALID_ARGUMENT = 1,
  RMSNORM_ERROR_UNSUPPORTED = 2,
  RMSNORM_ERROR_OUT_OF_MEMORY = 3,
  RMSNORM_ERROR_INTERNAL = 4
} rmsnorm_status;

typedef enum rmsnorm_dtype { RMSNORM_F32 = 0, RMSNORM_BF16 = 1, RMSNORM_F16 = 2 } rmsnorm_dtype;

typedef struct rmsnorm_config {
  int64_t rows, cols;    /* rows >= 0 vectors of cols >= 1 elements, row-major, contiguous */
  rmsnorm_dtype dtype;   /* storage of x, residual, y, residual_out, dy, dx */
  float eps;             /* >= 0 and finite, added to the mean square inside the square root */
  float partial;         /* p in (0, 1]; 1 = RMSNorm */
  float weight_offset;   /* the gain used is weight_offset + weight[i] */
} rmsnorm_config;        /* fields may be added after these */

/* f32, eps 1e-6, partial 1, offset 0. */
RMSNORM_API rmsnorm_config rmsnorm_config_init(int64_t rows, int64_t cols);

/* ---- RMSNorm and pRMSNorm ------------------------------------------------------------------------
 * Shapes: x, y: (rows, cols) in dtype; weight, bias: (cols) f32 or NULL; rstd: (rows) f32 or NULL.
 * y may alias x. rstd[r] is 1/sqrt(ms + eps) rounded to f32; a row whose ms + eps is 0 (all zeros with
 * eps = 0) gets y = bias (or 0) and rstd = 0, never NaN. */
RMSNORM_API rmsnorm_status rmsnorm_forward(const rmsnorm_config* config, const void* x, const float* weight,
                                           const float* bias, void* y, float* rstd);

/* Fused residual add: h = x + residual is rounded to dtype and stored to residual_out, then
 * y = RMSNorm(h), bit for bit what rmsnorm_forward gives on residual_out. residual_out may alias
 * residual or x; y may alias x or residual. */
RMSNORM_API rmsnorm_status rmsnorm_add_forward(const rmsnorm_config* config, const void* x,
                                               const void* residual, const float* weight, const float* bias,
                                               void* y, void* residual_out, float* rstd);

/* Shapes: dy, x, dx: (rows, cols) in dtype; weight: (cols) f32 or NULL; rstd: (rows) f32, or NULL to
 * recompute it from x; dweight, dbias: (cols) f32, overwritten with the sum over rows, or NULL to skip.
 * dx may alias dy or x. dweight is the gradient with respect to weight (weight_offset does not change
 * it). A saved rstd that is 0, negative, NaN, infinite or subnormal (a zero row, or a row beyond f32's
 * squared range) is recomputed from x in double for that row. A saved rstd is the forward's output for
 * the same x, eps and partial (see Extremes above for what holds otherwise). */
RMSNORM_API rmsnorm_status rmsnorm_backward(const rmsnorm_config* config, const void* dy, const void* x,
                                            const float* weight, const float* rstd, void* dx, float* dweight,
                                            float* dbias);

/* ---- LayerNorm (the baseline) -------------------------------------------------------------------
 * As above with mean: (rows) f32 or NULL. config->partial must be 1. A row whose var + eps is 0 (all
 * elements equal, eps = 0) gets y = bias (or 0) and rstd = 0. */
RMSNORM_API rmsnorm_status rmsnorm_layernorm_forward(const rmsnorm_config* config, const void* x,
                                                     const float* weight, const float* bias, void* y,
                                                     float* mean, float* rstd);

/* mean and rstd are both given or both NULL (recompute); given, they are the forward's outputs for the
 * same x and eps (see Extremes above). */
RMSNORM_API rmsnorm_status rmsnorm_layernorm_backward(const rmsnorm_config* config, const void* dy,
                                                      const void* x, const float* weight, const float* mean,
                                                      const float* rstd, void* dx, float* dweight,
                                                      float* dbias);

/* ---- Threads and diagnostics -------------------------------------------------------------------- */

/* 0 = all hardware threads (the default, or RMSNORM_NUM_THREADS from the environment). Results are bitwise
 * identical for any thread count. */
RMSNORM_API void rmsnorm_set_num_threads(int n);
RMSNORM_API int rmsnorm_get_num_threads(void);

/* This thread's message for its last failed call; "" if none failed yet. Valid until this thread's
 * next failed call. */
RMSNORM_API const char* rmsnorm_last_error(void);

/* Scratch memory. A backward over more than 8 rows keeps per-row-block partial sums of dweight and
 * dbias (at most 2 x 2^22 floats, 32 MiB), and a call with weight_offset != 0, or a bf16 forward, a
 * copy of the gain (up to 12 bytes a column), in buffers of the calling thread. A thread keeps them for
 * its next call, which then pays no allocation, while all threads' kept buffers together stay within
 * the scratch limit; a call whose buffers would go beyond it frees them when it returns. While a call
 * runs, its own scratch is at most 2 bytes per element of x plus 12 bytes a column.
 * The limit, in bytes, is process-wide: 64 MiB by default, or RMSNORM_SCRATCH_BYTES from the
 * environment (read once, when the library loads); 0 keeps nothing between calls. Lowering it does not
 * free other threads' buffers at once: each thread frees what is over the limit at the end of its next
 * call. Returns RMSNORM_ERROR_INVALID_ARGUMENT for a negative limit. */
RMSNORM_API rmsnorm_status rmsnorm_set_scratch_limit(int64_t bytes);
RMSNORM_API int64_t rmsnorm_get_scratch_limit(void);

/* Frees the scratch the calling thread keeps, at once (for a thread that is done with the library but
 * lives on). Its next call allocates again. */
RMSNORM_API void rmsnorm_release_thread_scratch(void);

/* ---- Extensions --------------------------------------------------------------------------------- */

/* L2-Norm: the RMSNorm family without the 1/n, so y = x / sqrt(sum(x^2) + eps) * g (+ b). Arguments and
 * aliasing as for rmsnorm_forward / rmsnorm_backward; config->partial must be 1. */
RMSNORM_API rmsnorm_status rmsnorm_l2norm_forward(const rmsnorm_config* config, const void* x,
                                                  const float* weight, const float* bias, void* y, float* rstd);
RMSNORM_API rmsnorm_status rmsnorm_l2norm_backward(const rmsnorm_config* config, const void* dy, const void* x,
                                                   const float* weight, const float* rstd, void* dx,
                                                   float* dweight, float* dbias);

/* k, the number of leading elements pRMSNorm takes its statistic from: max(1, ceil(partial * cols)),
 * where a product within f32 rounding of an integer counts as that integer (so partial = 0.1f and
 * cols = 10 give k = 1, as 0.1 * 10 would). Returns -1 (and records a message) for invalid arguments. */
RMSNORM_API int64_t rmsnorm_partial_size(int64_t cols, float partial);

/* Which implementation the calls use. AUTO: the SIMD kernels, threaded. REFERENCE: plain loops with
 * double accumulation, single-threaded: the oracle the kernels are tested against. The default is
 * AUTO, or REFERENCE when the environment has RMSNORM_BACKEND=reference. Process-wide. */
typedef enum rmsnorm_backend { RMSNORM_BACKEND_AUTO = 0, RMSNORM_BACKEND_REFERENCE = 1 } rmsnorm_backend;
RMSNORM_API rmsnorm_status rmsnorm_set_backend(rmsnorm_backend backend);
RMSNORM_API rmsnorm_backend rmsnorm_get_backend(void);

/* The SIMD target the kernels run on in this process ("AVX2", "SSE4", "NEON", "EMU128", ...). */
RMSNORM_API const char* rmsnorm_cpu_target(void);

/* "MAJOR.MINOR.PATCH" of the library that is loaded (the header's is RMSNORM_VERSION_*). */
RMSNORM_API const char* rmsnorm_version(void);

/* Limits the kernels to the best SIMD target the CPU has at or below `name` in Highway's order (x86:
 * "AVX3_BF16", "AVX3", "AVX2", "SSE4", "SCALAR"; ARM64: "SVE2", "SVE", "NEON", "EMU128"; case-insensitive), or
 * lifts the limit for NULL, "" or "auto". AVX3_BF16 is AVX3 with bf16 outputs rounded by the CPU's
 * AVX512_BF16 instruction, where the CPU has it. Every target gives the same bits, so this changes speed only:
 * use it to reproduce a run on a lesser CPU or to compare targets. The first limit comes from the
 * environment variable RMSNORM_CPU_TARGET, read once when the library loads (an unknown name there
 * is reported on stderr and ignored). rmsnorm_cpu_target() tells the result. Process-wide. Returns
 * RMSNORM_ERROR_INVALID_ARGUMENT for a name that is not a target of this build. */
RMSNORM_API rmsnorm_status rmsnorm_set_cpu_target(const char* name);

/* ---- Extended calls: a versioned config and strided rows ------------------------------------------
 * rmsnorm_config_ex carries what rmsnorm_config has, plus options that later versions add at its end.
 * Its first field is the struct's size as the caller was compiled: the library reads that many bytes
 * and gives every field the caller's header did not have its default, so a program built against an
 * older header keeps working; a struct larger than the library knows is accepted only if the unknown
 * bytes are zero (else RMSNORM_ERROR_UNSUPPORTED: the caller asks for an option this library lacks).
 * Every field's default is its zero value. rmsnorm_config_ex_init is inline so that struct_size is
 * the caller's own sizeof.
 *
 * Strided rows. The `rows` of a call are indexed by (outer, inner): row r is (r / inner_rows,
 * r % inner_rows), and row (o, i) of a row tensor (x, residual, y, residual_out, dy, dx) starts
 * o * strides.outer + i * strides.inner elements after the tensor's pointer, each tensor with its own
 * strides. A zero stride means packed: inner = cols, outer = inner_rows * inner. Within a tensor, rows
 * must not overlap and must lie in row order (inner >= cols and outer >= (inner_rows - 1) * inner +
 * cols); the gaps between them are neither read nor written. mean and rstd stay (rows) f32, contiguous,
 * in row order; dweight and dbias sum over all rows. Examples, for a fused buffer
 * qkv[tokens][(Hq + 2 * Hkv) * D] with QK-norm over each head of q (weight of length D):
 *   rows = tokens * Hq, cols = D, inner_rows = Hq,
 *   x.outer = y.outer = (Hq + 2 * Hkv) * D, x.inner = y.inner = D   (y = x: in place)
 * and for k the same with inner_rows = Hkv and the pointer at qkv + Hq * D. With one level (inner_rows
 * 0 or 1), .outer is the row stride and .inner is not used.
 *
 * Aliasing, as for the plain calls and exact for strided rows: an output may coincide with an input row
 * tensor of the same pointer and strides; any other overlap of the bytes that two tensors' rows cover is
 * refused (rows of two tensors may interleave inside one buffer). */
typedef struct rmsnorm_row_strides {
  int64_t outer; /* elements from row (o, i) to row (o + 1, i); 0: packed */
  int64_t inner; /* elements from row (o, i) to row (o, i + 1); 0: packed (cols) */
} rmsnorm_row_strides;

typedef struct rmsnorm_config_ex {
  uint64_t struct_size; /* sizeof(rmsnorm_config_ex) where the caller was compiled */
  rmsnorm_config base;  /* rows, cols, dtype, eps, partial, weight_offset, as for the plain calls */
  int64_t inner_rows;   /* 0 or 1: one level; else >= 1 and divides base.rows */
  rmsnorm_row_strides x, residual, y, residual_out, dy, dx;
} rmsnorm_config_ex; /* fields may be added after these; their zero value is their default */

/* The plain config's defaults (rmsnorm_config_init), packed rows, struct_size set. */
static inline rmsnorm_config_ex rmsnorm_config_ex_init(int64_t rows, int64_t cols) {
  rmsnorm_config_ex c;
  const rmsnorm_row_strides packed = {0, 0};
  c.struct_size = sizeof c;
  c.base = rmsnorm_config_init(rows, cols);
  c.inner_rows = 0;
  c.x = c.residual = c.y = c.residual_out = c.dy = c.dx = packed;
  return c;
}

/* The calls above with an extended config: the same arguments, results and bits for the same rows. */
RMSNORM_API rmsnorm_status rmsnorm_forward_ex(const rmsnorm_config_ex* config, const void* x, const float* weight,
                                              const float* bias, void* y, float* rstd);
RMSNORM_API rmsnorm_status rmsnorm_add_forward_ex(const rmsnorm_config_ex* config, const void* x,
                                                  const void* residual, const float* weight, const float* bias,
                                                  void* y, void* residual_out, float* rstd);
RMSNORM_API rmsnorm_status rmsnorm_backward_ex(const rmsnorm_config_ex* config, const void* dy, const void* x,
                                               const float* weight, const float* rstd, void* dx, float* dweight,
                                               float* dbias);
RMSNORM_API rmsnorm_status rmsnorm_layernorm_forward_ex(const rmsnorm_config_ex* config, const void* x,
                                                        const float* weight, const float* bias, void* y,
                                                        float* mean, float* rstd);
RMSNORM_API rmsnorm_status rmsnorm_layernorm_backward_ex(const rmsnorm_config_ex* config, const void* dy,
                                                         const void* x, const float* weight, const float* mean,
                                                         const float* rstd, void* dx, float* dweight,
                                                         float* dbias);
RMSNORM_API rmsnorm_status rmsnorm_l2norm_forward_ex(const rmsnorm_config_ex* config, const void* x,
                                                     const float* weight, const float* bias, void* y, float* rstd);
RMSNORM_API rmsnorm_status rmsnorm_l2norm_backward_ex(const rmsnorm_config_ex* config, const void* dy,
                                                      const void* x, const float* weight, const float* rstd,
                                                      void* dx, float* dweight, float* dbias);

/* ---- Quantized outputs ----------------------------------------------------------------------------
 * The RMSNorm family's forward (partial < 1 allowed) and its fused-add forward, writing the normalized
 * rows quantized instead of y. y here is the f32 value the forward computes before rounding to
 * config->base.dtype; it is then rounded to nearest even into the format, saturating:
 *   INT8_ROW       q: (rows, cols) int8; scales: (rows) f32 written, scale = max|y| / 127 (an all-zero
 *                  row gets 0), q = clamp(rne(y / scale), -127, 127)
 *   FP8_E4M3_ROW   q: (rows, cols) OCP E4M3FN bytes (finite only, saturating at +-448); scales: (rows)
 *                  f32 written, max|y| / 448
 *   FP8_E4M3_STATIC  as FP8_E4M3_ROW with the caller's per-tensor scale, *scales (read only; finite
 *                  and > 0), q = e4m3(y / scale)
 *   Q8_0           q: (rows, cols / 32) ggml block_q8_0 {f16 d; int8 qs[32]}, d = f16(max|y| / 127) per
 *                  block of 32 along the row; scales must be NULL; cols must be a multiple of 32
 * All divisions are correctly rounded f32 divisions, so every CPU writes the same bytes. A row (block)
 * with a NaN gets scale (d) NaN, one with an infinity +inf; their values are 0 (int8, q8_0) or NaN
 * (fp8 with a per-row scale). q's rows follow config->y's strides, counted in q's own elements (bytes,
 * or blocks for Q8_0); x, residual and residual_out take theirs as in the _ex calls. q and scales may
 * not overlap any other tensor; residual_out may alias residual or x as for rmsnorm_add_forward.
 * Scratch: besides the forward's, one f32 row per row block of the call (at most 256 rows, so at most
 * 1 KiB a column), kept between calls as the scratch paragraph above says. */
typedef enum rmsnorm_quant_format {
  RMSNORM_QUANT_INT8_ROW = 1,
  RMSNORM_QUANT_FP8_E4M3_ROW = 2,
  RMSNORM_QUANT_FP8_E4M3_STATIC = 3,
  RMSNORM_QUANT_Q8_0 = 4
} rmsnorm_quant_format;

RMSNORM_API rmsnorm_status rmsnorm_forward_quantized(const rmsnorm_config_ex* config, rmsnorm_quant_format format,
                                                     const void* x, const float* weight, const float* bias, void* q,
                                                     float* scales, float* rstd);
RMSNORM_API rmsnorm_status rmsnorm_add_forward_quantized(const rmsnorm_config_ex* config, rmsnorm_quant_format format,
                                                         const void* x, const void* residual, const float* weight,
                                                         const float* bias, void* q, float* scales, void* residual_out,
                                                         float* rstd);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RMSNORM_RMSNORM_H_ */
