// Matrix products through OpenBLAS. Every GEMM in the trainers goes through gemm() here: row-major,
// explicit leading dimensions so a product can read a column block of a wider matrix (attention heads).
#ifndef RMSNORM_REPRO_COMMON_BLAS_H_
#define RMSNORM_REPRO_COMMON_BLAS_H_

#include <string>

namespace repro {

// c: (m, n) = alpha * op(a) @ op(b) + beta * c, where op(a) is (m, k) and op(b) is (k, n).
// a is stored (m, k) with leading dimension lda, or (k, m) when trans_a; b likewise (k, n) or (n, k).
void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
          int ldb, float beta, float* c, int ldc);

// y: (m, n) = x: (m, k) @ w: (k, n), the common dense-layer case (beta 0, or 1 to accumulate).
inline void matmul(const float* x, const float* w, float* y, int m, int k, int n, float beta = 0.0f) {
  gemm(false, false, m, n, k, 1.0f, x, k, w, n, beta, y, n);
}

void set_blas_threads(int n);
int blas_threads();
std::string blas_description();  // OpenBLAS's build configuration string, for the report
// The OPENBLAS_CORETYPE that gives this CPU OpenBLAS's kernels for it when OpenBLAS's run-time dispatch
// does not know the CPU's model and fell back to its generic Prescott (SSE3) kernels, as 0.3.21 does on
// CPUs newer than itself; "" when the dispatch found a core, or OPENBLAS_CORETYPE is set already. It takes
// effect only when set before OpenBLAS loads, so a program sets it and executes itself again.
std::string blas_coretype_override();

}  // namespace repro

#endif  // RMSNORM_REPRO_COMMON_BLAS_H_
