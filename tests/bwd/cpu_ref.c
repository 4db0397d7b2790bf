#include "tests/bwd/cpu_ref.h"

#include "runtime/verify.h"

void bwd_cpu_reference(int batch, int heads_q, int heads_kv, int seqlen_q, int seqlen_k, int head_dim, int causal,
                       int bf16, float scale, const uint16_t *const in[5], const int64_t strides[5][3],
                       const float *lse, double *const out[3], double *const mag[3])
{
    ft_problem p;
    ft_strides st[5];
    int i;

    p.batch = batch;
    p.heads_q = heads_q;
    p.heads_kv = heads_kv;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.head_dim = head_dim;
    p.causal = causal;
    p.bf16 = bf16;
    p.scale = scale;
    p.layout = FT_LAYOUT_BSHD;
    for (i = 0; i < 5; i++) {
        st[i].batch = strides[i][0];
        st[i].row = strides[i][1];
        st[i].head = strides[i][2];
    }
    ft__reference_cpu_bwd(&p, in, st, lse, out, mag);
}
