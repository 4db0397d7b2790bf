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
