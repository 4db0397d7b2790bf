/*
 * A small application of flashtune: random Q, K, V on the GPU, one call of
 * ft_attention_forward, and the result checked against attention computed on the host.
 *
 *   attention [b hq hkv sq sk d causal]      (default: 2 8 2 300 300 64 1)
 *
 * Build: cc attention.c $(pkg-config --cflags --libs flashtune) -lcuda -lm
 * With FLASHTUNE_DEBUG=1 flashtune says which kernel it picked and why.
 */
#include <cuda.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtune.h"

#define CHECK_CU(call)                                                        \
    do {                                                                      \
        CUresult r_ = (call);                                                 \
        if (r_ != CUDA_SUCCESS) {                                             \
            const char *name_ = "?";                                          \
            cuGetErrorName(r_, &name_);                                       \
            fprintf(stderr, "%s: %s\n", #call, name_);                        \
            return 1;                                                         \
        }                                                                     \
    } while (0)

/* fp16 <-> float for the host side (normal numbers; the data here never leaves that range). */
static uint16_t to_half(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int exp = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = (u >> 13) & 0x3ff;
    if (exp <= 0)
        return (uint16_t)sign;
    return (uint16_t)(sign | (uint32_t)exp << 10 | man);
}

static float from_half(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    float f;
    u = exp == 0 ? sign : sign | (exp + 112) << 23 | man << 13;
    memcpy(&f, &u, 4);
    return f;
}

int main(int argc, char **argv)
{
    int b = 2, hq = 8, hkv = 2, sq = 300, sk = 300, d = 64, causal = 1;
    size_t nq, nkv, i;
    uint16_t *q, *k, *v, *o;
    CUdevice dev;
    CUcontext cuctx;
    CUdeviceptr dq, dk, dv, dout;
    ft_context *ctx = NULL;
    ft_attention_args a;
    ft_status st;
    double worst = 0;
    unsigned seed = 12345;

    if (argc == 8) {
        b = atoi(argv[1]), hq = atoi(argv[2]), hkv = atoi(argv[3]), sq = atoi(argv[4]), sk = atoi(argv[5]);
        d = atoi(argv[6]), causal = atoi(argv[7]);
    }
    if (b <= 0 || hq <= 0 || hkv <= 0 || hq % hkv != 0 || sq <= 0 || sk <= 0 || sk > 4096 || d <= 0 || d > 256) {
        fprintf(stderr, "attention: sizes out of range (this example checks sk <= 4096, d <= 256)\n");
        return 2;
    }
    nq = (size_t)b * sq * hq * d;
    nkv = (size_t)b * sk * hkv * d;
    q = malloc(nq * 2), o = malloc(nq * 2), k = malloc(nkv * 2), v = malloc(nkv * 2);
    if (!q || !o || !k || !v)
        return 1;
    for (i = 0; i < nq; i++, seed = seed * 1103515245u + 12345u)
        q[i] = to_half(((seed >> 9) & 0xffff) / 32768.0f - 1.0f);
    for (i = 0; i < nkv; i++, seed = seed * 1103515245u + 12345u) {
        k[i] = to_half(((seed >> 9) & 0xffff) / 32768.0f - 1.0f);
        v[i] = to_half(((seed >> 5) & 0xffff) / 32768.0f - 1.0f);
    }

    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&cuctx, dev)); /* the context flashtune uses too */
    CHECK_CU(cuCtxSetCurrent(cuctx));
    CHECK_CU(cuMemAlloc(&dq, nq * 2));
    CHECK_CU(cuMemAlloc(&dout, nq * 2));
    CHECK_CU(cuMemAlloc(&dk, nkv * 2));
    CHECK_CU(cuMemAlloc(&dv, nkv * 2));
    CHECK_CU(cuMemcpyHtoD(dq, q, nq * 2));
    CHECK_CU(cuMemcpyHtoD(dk, k, nkv * 2));
    CHECK_CU(cuMemcpyHtoD(dv, v, nkv * 2));

    st = ft_context_create(NULL, &ctx);
    if (st != FT_OK) {
        fprintf(stderr, "ft_context_create: %s: %s\n", ft_status_name(st), ft_last_error(NULL));
        return 1;
    }
    ft_attention_args_init(&a);
    a.dtype = FT_F16;
    a.batch = b, a.heads_q = hq, a.heads_kv = hkv, a.seqlen_q = sq, a.seqlen_k = sk, a.head_dim = d;
    a.q = (const void *)(uintptr_t)dq, a.k = (const void *)(uintptr_t)dk, a.v = (const void *)(uintptr_t)dv;
    a.o = (void *)(uintptr_t)dout;
    /* [batch, seqlen, heads, head_dim], contiguous: strides of batch, position and head */
    a.q_stride[0] = a.o_stride[0] = (int64_t)sq * hq * d, a.q_stride[1] = a.o_stride[1] = (int64_t)hq * d;
    a.q_stride[2] = a.o_stride[2] = d;
    a.k_stride[0] = a.v_stride[0] = (int64_t)sk * hkv * d, a.k_stride[1] = a.v_stride[1] = (int64_t)hkv * d;
    a.k_stride[2] = a.v_stride[2] = d;
    a.causal = causal;
    st = ft_attention_forward(ctx, &a, NULL);
    if (st != FT_OK) {
        fprintf(stderr, "ft_attention_forward: %s: %s\n", ft_status_name(st), ft_last_error(ctx));
        return 1;
    }
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH(o, dout, nq * 2));

    /* The host reference, in double: bottom-right causal alignment, grouped-query heads. */
    for (int bi = 0; bi < b; bi++)
        for (int h = 0; h < hq; h++)
            for (int r = 0; r < sq; r++) {
                int limit = causal ? r + sk - sq + 1 : sk, hk = h / (hq / hkv);
                double mx = -INFINITY, sum = 0, acc[256] = {0}, s[4096];
                if (limit > sk)
                    limit = sk;
                for (int j = 0; j < limit; j++) {
                    double dot = 0;
                    for (int c = 0; c < d; c++)
                        dot += from_half(q[(((size_t)bi * sq + r) * hq + h) * d + c]) *
                               from_half(k[(((size_t)bi * sk + j) * hkv + hk) * d + c]);
                    s[j] = dot / sqrt((double)d);
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j < limit; j++) {
                    double e = exp(s[j] - mx);
                    sum += e;
                    for (int c = 0; c < d; c++)
                        acc[c] += e * from_half(v[(((size_t)bi * sk + j) * hkv + hk) * d + c]);
                }
                for (int c = 0; c < d; c++) {
                    double want = limit > 0 ? acc[c] / sum : 0.0;
                    double got = from_half(o[(((size_t)bi * sq + r) * hq + h) * d + c]);
                    if (!(fabs(got - want) <= worst))
                        worst = isnan(got) ? INFINITY : fmax(worst, fabs(got - want));
                }
            }
    printf("attention b=%d hq=%d hkv=%d sq=%d sk=%d d=%d causal=%d: max |error| %.2e: %s\n", b, hq, hkv, sq, sk, d,
           causal, worst, worst < 5e-3 ? "ok" : "WRONG");
    ft_context_destroy(ctx);
    cuMemFree(dq), cuMemFree(dk), cuMemFree(dv), cuMemFree(dout);
    cuDevicePrimaryCtxRelease(dev);
    free(q), free(k), free(v), free(o);
    return worst < 5e-3 ? 0 : 1;
}
