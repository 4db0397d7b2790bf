#include <math.h>
#include <stdlib.h>

#include "common/half.h"
#include "runtime/verify.h"

void ft__reference_cpu(const ft_problem *p, const uint16_t *q, ft_strides qs, const uint16_t *k,
                       ft_strides ks, const uint16_t *v, ft_strides vs, double *o, double *mag, double *lse)
{
    const int d = p->head_dim;
    const double scale = ft__problem_scale(p);
    const int group = p->heads_q / p->heads_kv;
    double *s = malloc(sizeof(double) * (size_t)p->seqlen_k);
    int b, h, i, j, c;

    if (s == NULL)
        return;
    for (b = 0; b < p->batch; b++)
        for (h = 0; h < p->heads_q; h++)
            for (i = 0; i < p->seqlen_q; i++) {
                const uint16_t *qi = q + b * qs.batch + h * qs.head + i * qs.row;
                const int hk = h / group;
                double *oi = o + (((size_t)b * p->seqlen_q + i) * p->heads_q + h) * d;
                double *mi = mag ? mag + (((size_t)b * p->seqlen_q + i) * p->heads_q + h) * d : NULL;
                int limit = p->seqlen_k;
                double mx = -INFINITY, sum = 0;
                if (p->causal && i + p->seqlen_k - p->seqlen_q + 1 < limit)
                    limit = i + p->seqlen_k - p->seqlen_q + 1;
                for (c = 0; c < d; c++) {
                    oi[c] = 0;
                    if (mi)
                        mi[c] = 0;
                }
                lse[((size_t)b * p->heads_q + h) * p->seqlen_q + i] = INFINITY;
                if (limit <= 0)
                    continue;
                for (j = 0; j < limit; j++) {
                    const uint16_t *kj = k + b * ks.batch + hk * ks.head + j * ks.row;
                    double acc = 0;
                    for (c = 0; c < d; c++)
                        acc += (double)ft__half_to_float(qi[c], p->bf16) * ft__half_to_float(kj[c], p->bf16);
                    s[j] = acc * scale;
                    if (s[j] > mx)
                        mx = s[j];
                }
                for (j = 0; j < limit; j++) {
                    const uint16_t *vj = v + b * vs.batch + hk * vs.head + j * vs.row;
                    double e = exp(s[j] - mx);
                    sum += e;
                    for (c = 0; c < d; c++) {
                        double x = ft__half_to_float(vj[c], p->bf16);
                        oi[c] += e * x;
                        if (mi)
                            mi[c] += e * fabs(x);
                    }
                }
                for (c = 0; c < d; c++) {
                    oi[c] /= sum;
                    if (mi)
                        mi[c] /= sum;
                }
                lse[((size_t)b * p->heads_q + h) * p->seqlen_q + i] = mx + log(sum);
            }
    free(s);
}

/* The backward in fp64, with the contract of templates/flash_bwd_sm80.cuh: in = {q, k, v, o,
 * dout} with their strides st (o is the forward's output as the kernels are given it, lse the
 * forward's fp32 [b, hq, sq] LSE, +inf for a row that sees no key). Writes dQ to out[0] as
 * [b, sq, hq, d] and dK, dV to out[1], out[2] as [b, sk, hkv, d], contiguous, and, where mag is
 * not NULL, the sums of the absolute values of each gradient's terms likewise (mag[i] may be
 * NULL each): P = exp(scale·q·k − LSE), dP = dO·v, D = rowsum(dO ∘ O), dS = P·(dP − D),
 * dQ = scale·Σ dS·k, dK = scale·Σ dS·q over the group's query heads, dV = Σ P·dO. */
void ft__reference_cpu_bwd(const ft_problem *p, const uint16_t *const in[5], const ft_strides st[5], const float *lse,
                           double *const out[3], double *const mag[3])
{
    const int d = p->head_dim;
    const double scale = ft__problem_scale(p);
    const int group = p->heads_q / p->heads_kv;
    const size_t nq = (size_t)p->batch * p->seqlen_q * p->heads_q * d;
    const size_t nk = (size_t)p->batch * p->seqlen_k * p->heads_kv * d;
    double *mq = mag ? mag[0] : NULL, *mk = mag ? mag[1] : NULL, *mv = mag ? mag[2] : NULL;
    size_t n;
    int b, h, i, j, c;

    for (n = 0; n < nq; n++) {
        out[0][n] = 0;
        if (mq)
            mq[n] = 0;
    }
    for (n = 0; n < nk; n++) {
        out[1][n] = out[2][n] = 0;
        if (mk)
            mk[n] = 0;
        if (mv)
            mv[n] = 0;
    }
    for (b = 0; b < p->batch; b++)
        for (h = 0; h < p->heads_q; h++)
            for (i = 0; i < p->seqlen_q; i++) {
                const int hk = h / group;
                const uint16_t *qi = in[0] + b * st[0].batch + h * st[0].head + i * st[0].row;
                const uint16_t *oi = in[3] + b * st[3].batch + h * st[3].head + i * st[3].row;
                const uint16_t *di = in[4] + b * st[4].batch + h * st[4].head + i * st[4].row;
                const double l = lse[((size_t)b * p->heads_q + h) * p->seqlen_q + i];
                const size_t qo = (((size_t)b * p->seqlen_q + i) * p->heads_q + h) * d;
                int limit = p->seqlen_k;
                double dsum = 0;
                if (p->causal && i + p->seqlen_k - p->seqlen_q + 1 < limit)
                    limit = i + p->seqlen_k - p->seqlen_q + 1;
                if (!(l < INFINITY))
                    continue;
                for (c = 0; c < d; c++)
                    dsum += (double)ft__half_to_float(di[c], p->bf16) * ft__half_to_float(oi[c], p->bf16);
                for (j = 0; j < limit; j++) {
                    const uint16_t *kj = in[1] + b * st[1].batch + hk * st[1].head + j * st[1].row;
                    const uint16_t *vj = in[2] + b * st[2].batch + hk * st[2].head + j * st[2].row;
                    const size_t ko = (((size_t)b * p->seqlen_k + j) * p->heads_kv + hk) * d;
                    double s = 0, dp = 0, pr, ds;
                    for (c = 0; c < d; c++) {
                        s += (double)ft__half_to_float(qi[c], p->bf16) * ft__half_to_float(kj[c], p->bf16);
                        dp += (double)ft__half_to_float(di[c], p->bf16) * ft__half_to_float(vj[c], p->bf16);
                    }
                    pr = exp(s * scale - l);
                    ds = pr * (dp - dsum);
                    for (c = 0; c < d; c++) {
                        const double kc = ft__half_to_float(kj[c], p->bf16);
                        const double qc = ft__half_to_float(qi[c], p->bf16);
                        const double dc = ft__half_to_float(di[c], p->bf16);
                        out[0][qo + c] += scale * ds * kc;
                        out[1][ko + c] += scale * ds * qc;
                        out[2][ko + c] += pr * dc;
                        if (mq)
                            mq[qo + c] += scale * fabs(ds) * fabs(kc);
                        if (mk)
                            mk[ko + c] += scale * fabs(ds) * fabs(qc);
                        if (mv)
                            mv[ko + c] += pr * fabs(dc);
                    }
                }
            }
}
