/* The fp64 CPU backward (runtime/reference_cpu.c) behind plain C types, for the harness. */
#ifndef FT_TESTS_BWD_CPU_REF_H
#define FT_TESTS_BWD_CPU_REF_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* in = {q, k, v, o, dout}, strides[i] = {batch, row, head} in elements; out = {dq, dk, dv}
 * contiguous [b, s, h, d]; mag likewise (see ft__reference_cpu_bwd). scale 0: 1/sqrt(d). */
void bwd_cpu_reference(int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k, int head_dim, int causal,
                       int bf16, float scale, const uint16_t *const in[5], const int64_t strides[5][3],
                       const float *lse, double *const out[3], double *const mag[3]);

#ifdef __cplusplus
}
#endif

#endif
