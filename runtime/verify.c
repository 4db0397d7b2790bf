#include "verify.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/half.h"
#include "generator/family.h"

void ft__check_outputs(const ft_problem *p, const uint16_t *o, ft_strides os, const float *lse,
                       const float *o_ref, const float *mag_ref, const float *lse_ref, ft_check *out)
{
    const ft_tolerance tol = ft__op_fwd.tolerance(p->bf16);
    const int d = p->head_dim;
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    double sum_ref2 = 0, sum_diff2 = 0, rms;
    int b, h, i, c;

    memset(out, 0, sizeof *out);
    for (size_t n = 0; n < rows * (size_t)d; n++)
        sum_ref2 += (double)o_ref[n] * o_ref[n];
    rms = sqrt(sum_ref2 / (double)(rows * (size_t)d));
    for (b = 0; b < p->batch; b++)
        for (i = 0; i < p->seqlen_q; i++)
            for (h = 0; h < p->heads_q; h++) {
                const uint16_t *oi = o + b * os.batch + i * os.row + h * os.head;
                const size_t ro = (((size_t)b * p->seqlen_q + i) * p->heads_q + h) * d;
                const float *ri = o_ref + ro, *mi = mag_ref + ro;
                for (c = 0; c < d; c++) {
                    double x = ft__half_to_float(oi[c], p->bf16);
                    double r = ri[c];
                    double diff = fabs(x - r);
                    double bound = tol.rtol * fabs(r) + tol.ptol * mi[c] + tol.atol * rms;
                    if (!isfinite(x)) {
                        if (out->nonfinite++ == 0 && out->detail[0] == '\0')
                            snprintf(out->detail, sizeof out->detail,
                                     "O[b=%d,s=%d,h=%d,%d] is %g (reference %g): unwritten or NaN", b, i, h, c, x, r);
                        continue;
                    }
                    sum_diff2 += diff * diff;
                    if (diff > out->o_max_abs)
                        out->o_max_abs = diff;
                    if (bound > 0 && diff / bound > out->o_worst)
                        out->o_worst = diff / bound;
                    if (diff > bound && out->bad++ == 0 && out->detail[0] == '\0')
                        snprintf(out->detail, sizeof out->detail,
                                 "O[b=%d,s=%d,h=%d,%d] = %.6g, reference %.6g (bound %.3g)", b, i, h, c, x, r, bound);
                }
            }
    out->o_rel_l2 = sum_ref2 > 0 ? sqrt(sum_diff2 / sum_ref2) : sqrt(sum_diff2);
    for (size_t n = 0; n < rows; n++) {
        double x = lse[n], r = lse_ref[n];
        if (isinf(r) && r > 0) {
            if (!(isinf(x) && x > 0) && out->bad++ == 0 && out->detail[0] == '\0')
                snprintf(out->detail, sizeof out->detail, "LSE row %zu is %g; the row sees no key (+inf)", n, x);
            continue;
        }
        if (!isfinite(x)) {
            if (out->nonfinite++ == 0 && out->detail[0] == '\0')
                snprintf(out->detail, sizeof out->detail, "LSE row %zu is %g (reference %g)", n, x, r);
            continue;
        }
        if (fabs(x - r) > out->lse_max_err)
            out->lse_max_err = fabs(x - r);
        if (fabs(x - r) > tol.lse_abs + tol.lse_rel * fabs(r) && out->bad++ == 0 && out->detail[0] == '\0')
            snprintf(out->detail, sizeof out->detail, "LSE row %zu = %.7g, reference %.7g", n, x, r);
    }
    if (out->o_rel_l2 > tol.l2 && out->detail[0] == '\0')
        snprintf(out->detail, sizeof out->detail, "relative L2 error %.3g > %.3g", out->o_rel_l2, tol.l2);
    out->pass = out->nonfinite == 0 && out->bad == 0 && out->o_rel_l2 <= tol.l2;
}

ft_status ft__verifier_init(const ft_cuda *cu, const ft_arch *dev, ft_cache *cache, ft_verifier *out,
                            ft_err *err)
{
    ft_status rc;
    const ft_embedded_file *f = ft__template_file("reference.cuh");
    ft_compiled c;

    memset(out, 0, sizeof *out);
    out->cu = cu;
    out->dev = *dev;
    if (f == NULL)
        return ft__fail(err, FT_ERR_INTERNAL, "the reference template is not embedded");
    rc = ft__compile(f->data, "reference.cu", dev->name, cache, &c, err);
    if (rc != FT_OK) {
        ft__err_prefix(err, "compiling the reference");
        return rc;
    }
    rc = ft__cuda_check(cu, cu->p_cuModuleLoadData(&out->module, c.cubin), err, "loading the reference");
    ft__compiled_free(&c);
    {
        struct {
            CUfunction *fn;
            const char *name;
        } fns[] = {{&out->attention, "ft_ref_attention"},     {&out->fill, "ft_ref_fill_normal"},
                   {&out->compare, "ft_ref_compare"},         {&out->sumsq, "ft_ref_sumsq"},
                   {&out->to_half, "ft_ref_to_half"},         {&out->bwd_dsum, "ft_ref_bwd_dsum"},
                   {&out->bwd_dq, "ft_ref_bwd_dq"},           {&out->bwd_dkv, "ft_ref_bwd_dkv"},
                   {&out->bwd_compare, "ft_ref_bwd_compare"}};
        size_t i;
        for (i = 0; i < sizeof fns / sizeof fns[0] && rc == FT_OK; i++)
            if (cu->p_cuModuleGetFunction(fns[i].fn, out->module, fns[i].name) != CUDA_SUCCESS)
                rc = ft__fail(err, FT_ERR_INTERNAL, "the reference module lacks %s", fns[i].name);
    }
    if (rc == FT_OK)
        rc = ft__cuda_check(cu,
                            cu->p_cuFuncSetAttribute(out->attention, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   (int)dev->smem_per_block),
                            err, "cuFuncSetAttribute(reference)");
    if (rc != FT_OK)
        ft__verifier_free(out);
    return rc;
}

void ft__verifier_free(ft_verifier *v)
{
    if (v->module != NULL)
        v->cu->p_cuModuleUnload(v->module);
    v->module = NULL;
    if (v->scores != 0)
        v->cu->p_cuMemFree(v->scores);
    v->scores = 0;
    v->scores_bytes = 0;
}

ft_status ft__tensors_create(const ft_cuda *cu, const ft_problem *p, ft_tensors *t, ft_err *err)
{
    ft_status rc;
    size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    int i;

    memset(t, 0, sizeof *t);
    t->problem = *p;
    rc = ft__problem_validate(p, err);
    if (rc != FT_OK)
        return rc;
    ft__problem_layout(p, &t->plan);
    for (i = 0; i < 4 && rc == FT_OK; i++)
        if (t->plan.elems[i] > 0)
            rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->buf[i], t->plan.elems[i] * 2), err, "cuMemAlloc");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->lse, rows * 4), err, "cuMemAlloc");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->o_ref, rows * (size_t)p->head_dim * 4), err, "cuMemAlloc");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->lse_ref, rows * 4), err, "cuMemAlloc");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->mag_ref, rows * (size_t)p->head_dim * 4), err, "cuMemAlloc");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->stats, 8 * sizeof(double)), err, "cuMemAlloc");
    if (rc != FT_OK)
        ft__tensors_destroy(cu, t);
    return rc;
}

static void kv_free(const ft_cuda *cu, ft_tensors *t)
{
    CUdeviceptr *all[] = {&t->kv_pool[0], &t->kv_pool[1], &t->kv_table, &t->kv_used};
    size_t i;

    for (i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i] != 0)
            cu->p_cuMemFree(*all[i]);
        *all[i] = 0;
    }
    t->kv_page = t->kv_table_stride = t->kv_total = 0;
}

void ft__tensors_destroy(const ft_cuda *cu, ft_tensors *t)
{
    CUdeviceptr *all[] = {&t->buf[0], &t->buf[1], &t->buf[2], &t->buf[3], &t->lse, &t->o_ref, &t->lse_ref, &t->stats,
                          &t->mag_ref, &t->ws};
    size_t i;

    for (i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i] != 0)
            cu->p_cuMemFree(*all[i]);
        *all[i] = 0;
    }
    t->ws_bytes = 0;
    kv_free(cu, t);
    for (i = 0; i < 2; i++) {
        ft_tensors **twin = i == 0 ? &t->kv_twin : &t->packed_twin;
        if (*twin != NULL) {
            ft__tensors_destroy(cu, *twin);
            free(*twin);
            *twin = NULL;
        }
    }
}

ft_status ft__tensors_workspace(const ft_cuda *cu, ft_tensors *t, const ft_kernel *k, ft_err *err)
{
    size_t need = 0;
    ft_status rc;

    rc = ft__kernel_fwd_workspace(k, &t->problem, &need, err);
    if (rc != FT_OK || need <= t->ws_bytes)
        return rc;
    if (t->ws != 0)
        cu->p_cuMemFree(t->ws);
    t->ws = 0;
    t->ws_bytes = 0;
    rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->ws, need), err, "allocating the workspace");
    if (rc == FT_OK)
        t->ws_bytes = need;
    return rc;
}

static const void *tensor_ptr(const ft_tensors *t, int which)
{
    return (const void *)(uintptr_t)(t->buf[t->plan.buffer[which]] + t->plan.offset[which] * 2);
}

void ft__tensors_params(const ft_tensors *t, ft_fwd_params *out)
{
    const ft_problem *p = &t->problem;
    const ft_strides *s = t->plan.strides;
    float scale = ft__problem_scale(p);

    memset(out, 0, sizeof *out);
    out->q = tensor_ptr(t, 0);
    out->k = tensor_ptr(t, 1);
    out->v = tensor_ptr(t, 2);
    out->o = (void *)(uintptr_t)tensor_ptr(t, 3);
    out->lse = (float *)(uintptr_t)t->lse;
    out->q_batch_stride = s[0].batch, out->q_row_stride = s[0].row, out->q_head_stride = s[0].head;
    out->k_batch_stride = s[1].batch, out->k_row_stride = s[1].row, out->k_head_stride = s[1].head;
    out->v_batch_stride = s[2].batch, out->v_row_stride = s[2].row, out->v_head_stride = s[2].head;
    out->o_batch_stride = s[3].batch, out->o_row_stride = s[3].row, out->o_head_stride = s[3].head;
    out->batch = p->batch;
    out->heads_q = p->heads_q;
    out->heads_kv = p->heads_kv;
    out->seqlen_q = p->seqlen_q;
    out->seqlen_k = p->seqlen_k;
    out->scale = scale;
    out->scale_log2 = scale * 1.4426950408889634f;
    out->ws = (float *)(uintptr_t)t->ws;
    out->ws_bytes = (int64_t)t->ws_bytes;
    if (t->kv_used != 0) {
        const int64_t row = (int64_t)p->heads_kv * p->head_dim;
        if (t->kv_page > 0) {
            out->seqused_k = (const int32_t *)(uintptr_t)t->kv_used;
            out->block_table = (const int32_t *)(uintptr_t)t->kv_table;
            out->page_size = t->kv_page, out->block_table_stride = t->kv_table_stride;
        } else {
            out->cu_seqlens_k = (const int32_t *)(uintptr_t)t->kv_table;
            out->total_k = t->kv_total;
        }
        out->k = (const void *)(uintptr_t)t->kv_pool[0];
        out->v = (const void *)(uintptr_t)t->kv_pool[1];
        out->k_batch_stride = out->v_batch_stride = row * t->kv_page;
        out->k_row_stride = out->v_row_stride = row;
        out->k_head_stride = out->v_head_stride = p->head_dim;
    }
}

/* The reference's inputs for these tensors: the kernels' arguments with the dense K and V (and
 * the KV cache's lengths, not its pages). */
static void reference_params(const ft_tensors *t, ft_fwd_params *out)
{
    const ft_strides *s = t->plan.strides;

    ft__tensors_params(t, out);
    out->k = tensor_ptr(t, 1);
    out->v = tensor_ptr(t, 2);
    out->k_batch_stride = s[1].batch, out->k_row_stride = s[1].row, out->k_head_stride = s[1].head;
    out->v_batch_stride = s[2].batch, out->v_row_stride = s[2].row, out->v_head_stride = s[2].head;
    out->block_table = NULL;
    out->page_size = out->block_table_stride = 0;
    out->cu_seqlens_k = NULL;
    out->total_k = 0;
    out->seqused_k = (const int32_t *)(uintptr_t)t->kv_used; /* the lengths, however the keys are laid out */
}

/* A small generator for the KV cache's shuffles and lengths (xorshift64*). */
static uint64_t kv_next(uint64_t *x)
{
    *x ^= *x >> 12, *x ^= *x << 25, *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

/* The sequences' key counts of a KV cache or packed keys: the whole cache, a page plus one
 * (through sequence 0's first page, which sequence 1 shares), 0, 1, a page, then random ones,
 * each at most seqlen_k; the first four also into t->kv_lengths. */
static void kv_lengths(ft_tensors *t, int page_size, uint64_t *x, int32_t used[64])
{
    const ft_problem *p = &t->problem;
    int b;

    for (b = 0; b < p->batch; b++) {
        const int pick[5] = {p->seqlen_k, page_size + 1, 0, 1, page_size};
        int n = b < 5 ? pick[b] : (int)(kv_next(x) % (uint64_t)(p->seqlen_k + 1));
        used[b] = n > p->seqlen_k ? p->seqlen_k : n;
        if (b < 4)
            t->kv_lengths[b] = used[b];
    }
}

ft_status ft__tensors_packed_keys(ft_verifier *v, ft_tensors *t, uint64_t seed, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    const ft_problem *p = &t->problem;
    const size_t row = (size_t)p->heads_kv * p->head_dim;
    int32_t used[64], cu_k[65];
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    ft_status rc = FT_OK;
    size_t rows;
    int b, w;

    if (p->layout != FT_LAYOUT_BSHD || p->batch > 64)
        return ft__fail(err, FT_ERR_INTERNAL, "packed keys are made of BSHD tensors of at most 64 sequences");
    kv_free(cu, t);
    kv_lengths(t, 64, &x, used);
    cu_k[0] = 0;
    for (b = 0; b < p->batch; b++)
        cu_k[b + 1] = cu_k[b] + used[b];
    rows = (size_t)cu_k[p->batch] + 16; /* and 16 rows of NaN past the last key */
    for (w = 0; w < 2 && rc == FT_OK; w++)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->kv_pool[w], rows * row * 2), err, "allocating packed keys");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->kv_table, sizeof cu_k[0] * (size_t)(p->batch + 1)), err,
                            "allocating cu_seqlens_k");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->kv_used, sizeof used[0] * (size_t)p->batch), err,
                            "allocating the lengths");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyHtoD(t->kv_table, cu_k, sizeof cu_k[0] * (size_t)(p->batch + 1)), err,
                            "writing cu_seqlens_k");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyHtoD(t->kv_used, used, sizeof used[0] * (size_t)p->batch), err,
                            "writing the lengths");
    for (w = 0; w < 2 && rc == FT_OK; w++) {
        rc = ft__cuda_check(cu, cu->p_cuMemsetD16(t->kv_pool[w], 0xffff, rows * row), err, "poisoning packed keys");
        for (b = 0; b < p->batch && rc == FT_OK; b++)
            if (used[b] > 0)
                rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoD(t->kv_pool[w] + (size_t)cu_k[b] * row * 2,
                                                           t->buf[1 + w] + (size_t)b * p->seqlen_k * row * 2,
                                                           (size_t)used[b] * row * 2),
                                    err, "packing the keys");
    }
    if (rc == FT_OK) {
        t->kv_page = 0, t->kv_table_stride = 0, t->kv_total = cu_k[p->batch];
        t->have_reference = 0;
    } else {
        kv_free(cu, t);
    }
    return rc;
}

ft_status ft__tensors_kv_cache(ft_verifier *v, ft_tensors *t, int page_size, uint64_t seed, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    const ft_problem *p = &t->problem;
    const size_t row = (size_t)p->heads_kv * p->head_dim; /* elements per key row */
    const int per_seq = (p->seqlen_k + page_size - 1) / page_size;
    const int pages = p->batch * per_seq + 1;             /* and a spare one nobody uses */
    int32_t *table = NULL, *slot = NULL, used[64];
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    ft_status rc = FT_OK;
    int b, i, w;

    if (p->layout != FT_LAYOUT_BSHD || page_size <= 0 || page_size % 16 != 0 || p->batch > 64)
        return ft__fail(err, FT_ERR_INTERNAL, "a KV cache is made of BSHD tensors of at most 64 sequences, in pages "
                        "of a multiple of 16 keys");
    kv_free(cu, t);
    table = malloc(sizeof *table * (size_t)p->batch * per_seq);
    slot = malloc(sizeof *slot * (size_t)pages);
    if (table == NULL || slot == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of host memory for a KV cache");
        goto out;
    }
    /* The pages in a shuffled order; sequence 1 shares sequence 0's first page. */
    for (i = 0; i < pages; i++)
        slot[i] = i;
    for (i = pages - 1; i > 0; i--) {
        const int j = (int)(kv_next(&x) % (uint64_t)(i + 1)), tmp = slot[i];
        slot[i] = slot[j], slot[j] = tmp;
    }
    for (b = 0; b < p->batch; b++)
        for (i = 0; i < per_seq; i++)
            table[b * per_seq + i] = slot[b * per_seq + i];
    if (p->batch > 1)
        table[per_seq] = table[0];
    kv_lengths(t, page_size, &x, used);
    for (w = 0; w < 2 && rc == FT_OK; w++)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->kv_pool[w], (size_t)pages * page_size * row * 2), err,
                            "allocating a KV cache");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->kv_table, sizeof *table * (size_t)p->batch * per_seq), err,
                            "allocating a block table");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->kv_used, sizeof *used * (size_t)p->batch), err,
                            "allocating the cache's lengths");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyHtoD(t->kv_table, table, sizeof *table * (size_t)p->batch * per_seq),
                            err, "writing the block table");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyHtoD(t->kv_used, used, sizeof *used * (size_t)p->batch), err,
                            "writing the cache's lengths");
    for (w = 0; w < 2 && rc == FT_OK; w++) {
        /* NaN everywhere first: the spare page and the rows past each sequence's keys stay so. */
        const CUdeviceptr dense = t->buf[1 + w];
        rc = ft__cuda_check(cu, cu->p_cuMemsetD16(t->kv_pool[w], 0xffff, (size_t)pages * page_size * row), err,
                            "poisoning a KV cache");
        /* Sequence 1's first page is sequence 0's: its dense rows become sequence 0's. */
        if (rc == FT_OK && p->batch > 1)
            rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoD(dense + (size_t)p->seqlen_k * row * 2, dense,
                                                       (size_t)(page_size < p->seqlen_k ? page_size : p->seqlen_k) *
                                                           row * 2),
                                err, "sharing a page");
        for (b = 0; b < p->batch && rc == FT_OK; b++)
            for (i = 0; i < per_seq && rc == FT_OK; i++) {
                const int first = i * page_size, keys = used[b] - first < page_size ? used[b] - first : page_size;
                if (keys <= 0 || (b == 1 && i == 0))
                    continue; /* nothing of the sequence there, or the shared page (sequence 0 writes it) */
                rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoD(t->kv_pool[w] + (size_t)table[b * per_seq + i] * page_size *
                                                               row * 2,
                                                           dense + ((size_t)b * p->seqlen_k + first) * row * 2,
                                                           (size_t)keys * row * 2),
                                    err, "filling a KV cache");
            }
    }
    if (rc == FT_OK) {
        t->kv_page = page_size, t->kv_table_stride = per_seq;
        t->have_reference = 0;
    }
out:
    if (rc != FT_OK)
        kv_free(cu, t);
    free(table);
    free(slot);
    return rc;
}

ft_status ft__verify_fill(ft_verifier *v, CUdeviceptr ptr, size_t n, uint64_t seed, float stddev, int bf16,
                          ft_err *err)
{
    long long count = (long long)n;
    float mean = 0.f;
    void *args[] = {&ptr, &count, &seed, &mean, &stddev, &bf16};
    unsigned blocks = (unsigned)((n + 255) / 256);

    if (blocks > 4096)
        blocks = 4096;
    if (n == 0)
        return FT_OK;
    return ft__cuda_check(v->cu, v->cu->p_cuLaunchKernel(v->fill, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL), err,
                          "launching the random fill");
}

ft_status ft__tensors_fill(ft_verifier *v, ft_tensors *t, uint64_t seed, float qk_std, ft_err *err)
{
    const ft_problem *p = &t->problem;
    ft_status rc = FT_OK;

    t->have_reference = 0;
    if (p->layout == FT_LAYOUT_QKV_PACKED) {
        /* Q, K, V interleave per row: fill with qk_std, then V's slices cannot differ; a
         * separate V scale is not needed for verification. */
        return ft__verify_fill(v, t->buf[0], t->plan.elems[0], seed, qk_std, p->bf16, err);
    }
    rc = ft__verify_fill(v, t->buf[0], t->plan.elems[0], seed * 3 + 1, qk_std, p->bf16, err);
    if (rc == FT_OK)
        rc = ft__verify_fill(v, t->buf[1], t->plan.elems[1], seed * 3 + 2, qk_std, p->bf16, err);
    if (rc == FT_OK)
        rc = ft__verify_fill(v, t->buf[2], t->plan.elems[2], seed * 3 + 3, 1.f, p->bf16, err);
    return rc;
}

typedef struct ref_params {
    const void *q, *k, *v;
    float *o, *lse, *mag;
    int64_t qb, qr, qh, kb, kr, kh, vb, vr, vh, ob, orow, oh;
    int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    float scale;
    int32_t causal, bf16, reserved;
    float *scores;
    const int32_t *seqused_k;
} ref_params;

/* The reference's parameter block for inputs fp (q, k, v and their strides) and outputs o
 * (contiguous [b, sq, hq, d]), lse and mag. */
static void ref_block_of(const ft_problem *p, const ft_fwd_params *in, CUdeviceptr o, CUdeviceptr lse, CUdeviceptr mag,
                         ref_params *rp)
{
    const ft_fwd_params fp = *in;

    memset(rp, 0, sizeof *rp);
    rp->q = fp.q, rp->k = fp.k, rp->v = fp.v;
    rp->o = (float *)(uintptr_t)o;
    rp->lse = (float *)(uintptr_t)lse;
    rp->mag = (float *)(uintptr_t)mag;
    rp->qb = fp.q_batch_stride, rp->qr = fp.q_row_stride, rp->qh = fp.q_head_stride;
    rp->kb = fp.k_batch_stride, rp->kr = fp.k_row_stride, rp->kh = fp.k_head_stride;
    rp->vb = fp.v_batch_stride, rp->vr = fp.v_row_stride, rp->vh = fp.v_head_stride;
    rp->ob = (int64_t)p->seqlen_q * p->heads_q * p->head_dim;
    rp->orow = (int64_t)p->heads_q * p->head_dim;
    rp->oh = p->head_dim;
    rp->batch = p->batch, rp->heads_q = p->heads_q, rp->heads_kv = p->heads_kv;
    rp->seqlen_q = p->seqlen_q, rp->seqlen_k = p->seqlen_k, rp->head_dim = p->head_dim;
    rp->scale = fp.scale;
    rp->causal = p->causal;
    rp->bf16 = p->bf16;
    rp->seqused_k = fp.seqused_k;
}

/* The reference's parameter block for these tensors. */
static void ref_block(const ft_tensors *t, ref_params *rp)
{
    ft_fwd_params fp;

    ft__tensors_params(t, &fp);
    ref_block_of(&t->problem, &fp, t->o_ref, t->lse_ref, t->mag_ref, rp);
}

ft_status ft__reference_forward(ft_verifier *v, const ft_problem *p, const ft_fwd_params *in, CUdeviceptr o,
                                CUdeviceptr lse, CUdeviceptr mag, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    ref_params rp;
    void *args[] = {&rp};
    size_t smem = (size_t)(p->head_dim + p->seqlen_k + 32) * 4;
    const size_t scores = (size_t)p->batch * p->heads_q * p->seqlen_q * (size_t)p->seqlen_k * 4;
    const int global_scores = smem > (size_t)v->dev.smem_per_block;
    ft_status rc;

    if (global_scores) {
        /* Rows too long for shared memory: their scores in a global buffer of the verifier's. */
        if (scores > FT_REF_SCORES_MAX)
            return ft__fail(err, FT_ERR_UNSUPPORTED, "the GPU reference holds the scores of rows of seqlen_k %d in "
                            "global memory, %.1f GB for this shape: more than %.0f GB", p->seqlen_k, scores / 1e9,
                            FT_REF_SCORES_MAX / 1e9);
        if (scores > v->scores_bytes) {
            if (v->scores != 0)
                cu->p_cuMemFree(v->scores);
            v->scores = 0, v->scores_bytes = 0;
            rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&v->scores, scores), err, "allocating the reference's scores");
            if (rc != FT_OK)
                return rc;
            v->scores_bytes = scores;
        }
        smem = (size_t)(p->head_dim + 32) * 4;
    }
    if (!(in->scale > 0))
        return ft__fail(err, FT_ERR_INTERNAL, "the reference forward's inputs carry no softmax scale");
    ref_block_of(p, in, o, lse, mag, &rp);
    if (global_scores)
        rp.scores = (float *)(uintptr_t)v->scores;
    return ft__cuda_check(cu, cu->p_cuLaunchKernel(v->attention, (unsigned)p->seqlen_q, (unsigned)p->heads_q,
                                                (unsigned)p->batch, 256, 1, 1, (unsigned)smem, NULL, args, NULL),
                          err, "launching the reference");
}

ft_status ft__verify_sumsq(ft_verifier *v, CUdeviceptr x, size_t n, CUdeviceptr scratch, double *out, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    long long count = (long long)n;
    void *args[] = {&x, &count, &scratch};
    ft_status rc = ft__cuda_check(cu, cu->p_cuMemsetD8(scratch, 0, sizeof(double)), err, "cuMemsetD8");

    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuLaunchKernel(v->sumsq, 1024, 1, 1, 256, 1, 1, 0, NULL, args, NULL), err,
                            "launching a sum of squares");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(out, scratch, sizeof(double)), err, "reading a sum of squares");
    return rc;
}

ft_status ft__tensors_reference(ft_verifier *v, ft_tensors *t, ft_err *err)
{
    const ft_problem *p = &t->problem;
    const ft_cuda *cu = v->cu;
    ft_fwd_params fp;
    ft_status rc;

    reference_params(t, &fp);
    rc = ft__reference_forward(v, p, &fp, t->o_ref, t->lse_ref, t->mag_ref, err);
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuCtxSynchronize(), err, "running the reference");
    if (rc == FT_OK)
        rc = ft__verify_sumsq(v, t->o_ref, (size_t)p->batch * p->heads_q * p->seqlen_q * p->head_dim, t->stats,
                              &t->ref_sumsq, err);
    t->have_reference = rc == FT_OK;
    return rc;
}

/* Makes the reference if the tensors have none, fills O and the LSE with NaN (0xffff is a NaN
 * in fp16 and bf16, 0xffffffff in fp32), runs the kernel and waits for it; fp gets its
 * arguments. */
static ft_status run_poisoned(ft_verifier *v, const ft_kernel *k, ft_tensors *t, ft_fwd_params *fp, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    const ft_problem *p = &t->problem;
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    ft_status rc = FT_OK;

    if (!t->have_reference)
        rc = ft__tensors_reference(v, t, err);
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemsetD16(t->buf[3], 0xffff, t->plan.elems[3]), err, "poisoning O");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemsetD32(t->lse, 0xffffffffu, rows), err, "poisoning the LSE");
    if (rc == FT_OK)
        rc = ft__tensors_workspace(cu, t, k, err);
    if (rc != FT_OK)
        return rc;
    ft__tensors_params(t, fp);
    rc = ft__kernel_launch_fwd(cu, k, fp, NULL, err);
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuCtxSynchronize(), err, "running the kernel");
    return rc;
}

/* The KV-cache twin of t (made at the first call, then kept): BSHD tensors of t's sizes (3 to 64
 * sequences), filled from a seed of their own, with, for an odd seqlen_k or packed_only, the keys
 * packed as a variable-length batch's (cu_seqlens_k), else a KV cache of pages of 16, 48, 64 or
 * 256 keys (by the sizes; 256 where smaller pages would number over a thousand per sequence),
 * and their reference. packed_only: t's packed-keys twin (another one). */
static ft_status kv_twin(ft_verifier *v, ft_tensors *t, int packed_only, ft_tensors **out, ft_err *err)
{
    static const int sizes[4] = {16, 48, 64, 256};
    ft_tensors **kept = packed_only ? &t->packed_twin : &t->kv_twin;
    ft_problem q = t->problem;
    ft_tensors *tw;
    ft_status rc;
    int page;

    *out = *kept;
    if (*kept != NULL)
        return FT_OK;
    q.layout = FT_LAYOUT_BSHD;
    if (q.batch > 64)
        q.batch = 64;
    if (q.batch < 3)
        q.batch = 3; /* lengths full, a page plus one through a shared page, 0 */
    page = sizes[(q.seqlen_k + q.batch) % 4];
    if (q.seqlen_k / page > 1024)
        page = 256;
    tw = calloc(1, sizeof *tw);
    if (tw == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of host memory for a KV cache");
    rc = ft__tensors_create(v->cu, &q, tw, err);
    if (rc == FT_OK)
        rc = ft__tensors_fill(v, tw, 4242u + (uint64_t)q.seqlen_k, 1.f, err);
    if (rc == FT_OK)
        rc = packed_only || q.seqlen_k % 2 ? ft__tensors_packed_keys(v, tw, 99u + (uint64_t)q.batch, err)
                            : ft__tensors_kv_cache(v, tw, page, 99u + (uint64_t)q.batch, err);
    if (rc == FT_OK)
        rc = ft__tensors_reference(v, tw, err);
    if (rc != FT_OK) {
        ft__tensors_destroy(v->cu, tw);
        free(tw);
        return rc;
    }
    *out = *kept = tw;
    return FT_OK;
}

/* A split-key kernel that passed on t: the same check on t's KV-cache twin, another kernel that
 * reads variable-length batches on t's packed-keys twin; the failure (or larger error) folded
 * into check. */
static ft_status kv_check(ft_verifier *v, const ft_kernel *k, ft_tensors *t, ft_check *check, int on_gpu,
                          ft_err *err)
{
    ft_tensors *tw;
    ft_check c;
    ft_status rc;

    if (!check->pass || !(k->facts.split_kv || k->facts.packed) || t->kv_used != 0)
        return FT_OK;
    rc = kv_twin(v, t, !k->facts.split_kv, &tw, err);
    if (rc == FT_OK)
        rc = on_gpu ? ft__verify_kernel_gpu(v, k, tw, &c, err) : ft__verify_kernel(v, k, tw, &c, err);
    if (rc != FT_OK)
        return rc;
    if (c.o_rel_l2 > check->o_rel_l2 || isnan(c.o_rel_l2))
        check->o_rel_l2 = c.o_rel_l2;
    if (c.lse_max_err > check->lse_max_err)
        check->lse_max_err = c.lse_max_err;
    if (!c.pass) {
        check->pass = 0;
        check->nonfinite += c.nonfinite, check->bad += c.bad;
        char how[48];
        if (tw->kv_page > 0)
            snprintf(how, sizeof how, "a KV cache in pages of %d keys", tw->kv_page);
        else
            snprintf(how, sizeof how, "packed keys (cu_seqlens_k)");
        snprintf(check->detail, sizeof check->detail, "with %s, lengths %d, %d, ...: %.170s", how, tw->kv_lengths[0],
                 tw->kv_lengths[1], c.detail);
    }
    return FT_OK;
}

ft_status ft__verify_kernel_gpu(ft_verifier *v, const ft_kernel *k, ft_tensors *t, ft_check *check, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    const ft_problem *p = &t->problem;
    const ft_tolerance tol = ft__op_fwd.tolerance(p->bf16);
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    const size_t n = rows * (size_t)p->head_dim;
    double stats[8];
    double rms, atol_abs;
    ref_params rp;
    ft_fwd_params fp;
    CUdeviceptr o, lse, out;
    long long ob, orow, oh, groups;
    void *args[13];
    ft_status rc;

    memset(check, 0, sizeof *check);
    rc = ft__cuda_check(cu, cu->p_cuMemsetD8(t->stats, 0, sizeof stats), err, "clearing the statistics");
    if (rc == FT_OK)
        rc = run_poisoned(v, k, t, &fp, err);
    if (rc != FT_OK)
        return rc;
    rms = sqrt(t->ref_sumsq / (double)(n ? n : 1));
    atol_abs = tol.atol * rms;
    ref_block(t, &rp);
    o = (CUdeviceptr)(uintptr_t)fp.o;
    lse = t->lse;
    out = t->stats;
    ob = fp.o_batch_stride, orow = fp.o_row_stride, oh = fp.o_head_stride;
    args[0] = &rp, args[1] = &o, args[2] = &ob, args[3] = &orow, args[4] = &oh, args[5] = &lse;
    {
        double rtol = tol.rtol, ptol = tol.ptol, la = tol.lse_abs, lr = tol.lse_rel;
        args[6] = &rtol, args[7] = &ptol, args[8] = &atol_abs, args[9] = &la, args[10] = &lr, args[11] = &out;
        groups = ((long long)p->seqlen_q * (p->head_dim / 8) + 255) / 256;
        rc = ft__cuda_check(cu, cu->p_cuLaunchKernel(v->compare, (unsigned)groups, (unsigned)p->heads_q,
                                                     (unsigned)p->batch, 256, 1, 1, 0, NULL, args, NULL),
                            err, "launching the comparison");
    }
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(stats, t->stats, sizeof stats), err, "reading the comparison");
    if (rc != FT_OK)
        return rc;
    check->o_rel_l2 = t->ref_sumsq > 0 ? sqrt(stats[0] / t->ref_sumsq) : sqrt(stats[0]);
    check->o_max_abs = stats[2];
    check->o_worst = stats[3];
    check->lse_max_err = stats[4];
    check->nonfinite = (long long)stats[5];
    check->bad = (long long)stats[6];
    check->pass = check->nonfinite == 0 && check->bad == 0 && check->o_rel_l2 <= tol.l2;
    if (!check->pass)
        snprintf(check->detail, sizeof check->detail,
                 "%lld non-finite, %lld over their bound; O relative L2 %.3g (bound %.3g), max |error| %.3g, "
                 "LSE max error %.3g", check->nonfinite, check->bad, check->o_rel_l2, tol.l2, check->o_max_abs,
                 check->lse_max_err);
    return kv_check(v, k, t, check, 1, err);
}

ft_status ft__verify_kernel(ft_verifier *v, const ft_kernel *k, ft_tensors *t, ft_check *check, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    const ft_problem *p = &t->problem;
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    const size_t o_elems = t->plan.elems[3];
    uint16_t *o = NULL;
    float *lse = NULL, *o_ref = NULL, *mag_ref = NULL, *lse_ref = NULL;
    ft_fwd_params fp;
    ft_status rc;

    memset(check, 0, sizeof *check);
    o = malloc(o_elems * 2);
    lse = malloc(rows * 4);
    o_ref = malloc(rows * (size_t)p->head_dim * 4);
    mag_ref = malloc(rows * (size_t)p->head_dim * 4);
    lse_ref = malloc(rows * 4);
    if (o == NULL || lse == NULL || o_ref == NULL || mag_ref == NULL || lse_ref == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of host memory for verification");
        goto out;
    }
    rc = run_poisoned(v, k, t, &fp, err);
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(o, t->buf[3], o_elems * 2), err, "reading O");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(lse, t->lse, rows * 4), err, "reading the LSE");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(o_ref, t->o_ref, rows * (size_t)p->head_dim * 4), err,
                            "reading the reference");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(mag_ref, t->mag_ref, rows * (size_t)p->head_dim * 4), err,
                            "reading the reference");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(lse_ref, t->lse_ref, rows * 4), err, "reading the reference");
    if (rc != FT_OK)
        goto out;
    ft__check_outputs(p, o, t->plan.strides[3], lse, o_ref, mag_ref, lse_ref, check);
    rc = kv_check(v, k, t, check, 0, err);
out:
    free(mag_ref);
    free(o);
    free(lse);
    free(o_ref);
    free(lse_ref);
    return rc;
}
