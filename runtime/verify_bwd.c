/* Verification of the backward operation's kernels on the GPU (runtime/verify.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/verify.h"

/* templates/reference.cuh's ftref::RefBwdParams, field for field. */
typedef struct ref_bwd_params {
    const void *q, *k, *v, *o, *dout;
    const float *lse;
    float *dsum, *dsum_abs, *dq, *dk, *dv, *mag_dq, *mag_dk, *mag_dv, *cmag_dq, *cmag_dk;
    int64_t qb, qr, qh, kb, kr, kh, vb, vr, vh, ob, orow, oh, db, dr, dh;
    int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim;
    float scale;
    int32_t causal, bf16, reserved;
} ref_bwd_params;

_Static_assert(sizeof(ref_bwd_params) == 16 * 8 + 15 * 8 + 10 * 4, "ref_bwd_params layout");

static const char *const grad_names[3] = {"dQ", "dK", "dV"};

static void *dev(CUdeviceptr p)
{
    return (void *)(uintptr_t)p;
}

ft_status ft__bwd_tensors_create(const ft_cuda *cu, const ft_problem *p, ft_bwd_tensors *t, ft_err *err)
{
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    struct {
        CUdeviceptr *ptr;
        size_t bytes;
    } bufs[20];
    ft_layout_plan layout;
    ft_status rc;
    size_t i, n = 0;

    memset(t, 0, sizeof *t);
    t->problem = *p;
    rc = ft__problem_validate(p, err);
    if (rc != FT_OK)
        return rc;
    if (p->layout != FT_LAYOUT_BSHD && p->layout != FT_LAYOUT_BHSD)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "the backward's checks take the bshd and bhsd layouts, not %s",
                        ft__layout_name(p->layout));
    /* templates/reference.cuh's backward kernels hold at most 256 / 32 elements per lane, and its
     * comparison reads 8 per thread; the kernels take multiples of 8 from 32 (the sm_90a family;
     * the sm80 one multiples of 16). */
    if (p->head_dim % 8 != 0 || p->head_dim < 32 || p->head_dim > 256)
        return ft__fail(err, FT_ERR_UNSUPPORTED,
                        "the backward's GPU reference takes head dims that are multiples of 8 from 32 to 256, not %d",
                        p->head_dim);
    ft__problem_layout(p, &layout); /* Q's strides are those of O, dO and dQ; K's of V, dK, dV */
    t->sq = layout.strides[0];
    t->sk = layout.strides[1];
    t->nq = rows * (size_t)p->head_dim;
    t->nk = (size_t)p->batch * p->heads_kv * p->seqlen_k * (size_t)p->head_dim;
#define BUF(field, size) (bufs[n].ptr = &t->field, bufs[n].bytes = (size), n++)
    BUF(q, t->nq * 2), BUF(o, t->nq * 2), BUF(dout, t->nq * 2), BUF(dq, t->nq * 2);
    BUF(k, t->nk * 2), BUF(v, t->nk * 2), BUF(dk, t->nk * 2), BUF(dv, t->nk * 2);
    BUF(lse, rows * 4), BUF(dsum, rows * 8), BUF(o32, t->nq * 4), BUF(mag_o, t->nq * 4);
    BUF(ref[0], t->nq * 4), BUF(mag[0], t->nq * 4), BUF(cmag[0], t->nq * 4);
    BUF(ref[1], t->nk * 4), BUF(mag[1], t->nk * 4), BUF(cmag[1], t->nk * 4);
    BUF(ref[2], t->nk * 4), BUF(mag[2], t->nk * 4);
#undef BUF
    for (i = 0; i < n && rc == FT_OK; i++)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(bufs[i].ptr, bufs[i].bytes), err, "cuMemAlloc");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->stats, 8 * sizeof(double)), err, "cuMemAlloc");
    if (rc != FT_OK)
        ft__bwd_tensors_destroy(cu, t);
    return rc;
}

void ft__bwd_tensors_destroy(const ft_cuda *cu, ft_bwd_tensors *t)
{
    CUdeviceptr *all[] = {&t->q,      &t->k,      &t->v,      &t->o,      &t->dout,   &t->dq,     &t->dk,
                          &t->dv,     &t->lse,    &t->o32,    &t->mag_o,  &t->dsum,   &t->ref[0], &t->ref[1],
                          &t->ref[2], &t->mag[0], &t->mag[1], &t->mag[2], &t->cmag[0], &t->cmag[1], &t->stats,
                          &t->ws};
    size_t i;

    for (i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (*all[i] != 0)
            cu->p_cuMemFree(*all[i]);
        *all[i] = 0;
    }
    t->ws_cap = 0;
    t->have_reference = 0;
}

void ft__bwd_tensors_params(const ft_bwd_tensors *t, ft_bwd_params *out)
{
    const ft_problem *p = &t->problem;
    const float scale = ft__problem_scale(p);

    memset(out, 0, sizeof *out);
    out->q = dev(t->q), out->k = dev(t->k), out->v = dev(t->v), out->o = dev(t->o), out->dout = dev(t->dout);
    out->dq = dev(t->dq), out->dk = dev(t->dk), out->dv = dev(t->dv);
    out->lse = dev(t->lse);
    out->ws = dev(t->ws);
    out->q_batch_stride = out->o_batch_stride = out->dout_batch_stride = out->dq_batch_stride = t->sq.batch;
    out->q_row_stride = out->o_row_stride = out->dout_row_stride = out->dq_row_stride = t->sq.row;
    out->q_head_stride = out->o_head_stride = out->dout_head_stride = out->dq_head_stride = t->sq.head;
    out->k_batch_stride = out->v_batch_stride = out->dk_batch_stride = out->dv_batch_stride = t->sk.batch;
    out->k_row_stride = out->v_row_stride = out->dk_row_stride = out->dv_row_stride = t->sk.row;
    out->k_head_stride = out->v_head_stride = out->dk_head_stride = out->dv_head_stride = t->sk.head;
    out->batch = p->batch, out->heads_q = p->heads_q, out->heads_kv = p->heads_kv;
    out->seqlen_q = p->seqlen_q, out->seqlen_k = p->seqlen_k;
    out->scale = scale;
    out->scale_log2 = scale * 1.4426950408889634f;
}

static void ref_bwd_block(const ft_bwd_tensors *t, ref_bwd_params *r)
{
    const ft_problem *p = &t->problem;
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;

    memset(r, 0, sizeof *r);
    r->q = dev(t->q), r->k = dev(t->k), r->v = dev(t->v), r->o = dev(t->o), r->dout = dev(t->dout);
    r->lse = dev(t->lse), r->dsum = dev(t->dsum), r->dsum_abs = dev(t->dsum + rows * 4);
    r->dq = dev(t->ref[0]), r->dk = dev(t->ref[1]), r->dv = dev(t->ref[2]);
    r->mag_dq = dev(t->mag[0]), r->mag_dk = dev(t->mag[1]), r->mag_dv = dev(t->mag[2]);
    r->cmag_dq = dev(t->cmag[0]), r->cmag_dk = dev(t->cmag[1]);
    r->qb = r->ob = r->db = t->sq.batch, r->qr = r->orow = r->dr = t->sq.row, r->qh = r->oh = r->dh = t->sq.head;
    r->kb = r->vb = t->sk.batch, r->kr = r->vr = t->sk.row, r->kh = r->vh = t->sk.head;
    r->batch = p->batch, r->heads_q = p->heads_q, r->heads_kv = p->heads_kv;
    r->seqlen_q = p->seqlen_q, r->seqlen_k = p->seqlen_k, r->head_dim = p->head_dim;
    r->scale = ft__problem_scale(p);
    r->causal = p->causal != 0;
    r->bf16 = p->bf16 != 0;
}

static ft_status launch(ft_verifier *v, CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned threads,
                        void **args, const char *what, ft_err *err)
{
    return ft__cuda_check(v->cu, v->cu->p_cuLaunchKernel(fn, gx, gy, gz, threads, 1, 1, 0, NULL, args, NULL), err,
                          what);
}

/* Q and K with N(0, qk_std²), V and dO with N(0, 1), from a seed (asynchronously). */
static ft_status fill_inputs(ft_verifier *v, ft_bwd_tensors *t, uint64_t seed, float qk_std, ft_err *err)
{
    const int bf16 = t->problem.bf16;
    ft_status rc = ft__verify_fill(v, t->q, t->nq, seed * 4 + 1, qk_std, bf16, err);

    if (rc == FT_OK)
        rc = ft__verify_fill(v, t->k, t->nk, seed * 4 + 2, qk_std, bf16, err);
    if (rc == FT_OK)
        rc = ft__verify_fill(v, t->v, t->nk, seed * 4 + 3, 1.f, bf16, err);
    if (rc == FT_OK)
        rc = ft__verify_fill(v, t->dout, t->nq, seed * 4 + 4, 1.f, bf16, err);
    return rc;
}

ft_status ft__bwd_tensors_prepare(ft_verifier *v, ft_bwd_tensors *t, uint64_t seed, float qk_std, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    const ft_problem *p = &t->problem;
    ft_fwd_params in;
    ref_bwd_params r;
    void *rargs[] = {&r};
    ft_status rc;
    int i;

    t->have_reference = 0;
    rc = fill_inputs(v, t, seed, qk_std, err);
    /* The forward, O in fp32 and then in 16 bits with Q's strides. */
    memset(&in, 0, sizeof in);
    in.q = dev(t->q), in.k = dev(t->k), in.v = dev(t->v);
    in.q_batch_stride = t->sq.batch, in.q_row_stride = t->sq.row, in.q_head_stride = t->sq.head;
    in.k_batch_stride = in.v_batch_stride = t->sk.batch;
    in.k_row_stride = in.v_row_stride = t->sk.row;
    in.k_head_stride = in.v_head_stride = t->sk.head;
    in.scale = ft__problem_scale(p); /* the reference reads the scale from here */
    if (rc == FT_OK)
        rc = ft__reference_forward(v, p, &in, t->o32, t->lse, t->mag_o, err);
    if (rc == FT_OK) {
        CUdeviceptr src = t->o32, dst = t->o;
        int seqlen = p->seqlen_q, heads = p->heads_q, d = p->head_dim, bf16 = p->bf16 != 0;
        long long sb = t->sq.batch, sr = t->sq.row, sh = t->sq.head;
        void *args[] = {&src, &dst, &seqlen, &heads, &d, &sb, &sr, &sh, &bf16};
        rc = launch(v, v->to_half, 256, (unsigned)p->batch, 1, 256, args, "launching the conversion of O", err);
    }
    /* D, then the gradients, their magnitudes and the scale of their cancellation. */
    ref_bwd_block(t, &r);
    if (rc == FT_OK)
        rc = launch(v, v->bwd_dsum, (unsigned)p->seqlen_q, (unsigned)p->heads_q, (unsigned)p->batch, 32, rargs,
                    "launching the reference's D", err);
    if (rc == FT_OK)
        rc = launch(v, v->bwd_dq, (unsigned)p->seqlen_q, (unsigned)p->heads_q, (unsigned)p->batch, 256, rargs,
                    "launching the reference's dQ", err);
    if (rc == FT_OK)
        rc = launch(v, v->bwd_dkv, (unsigned)p->seqlen_k, (unsigned)p->heads_kv, (unsigned)p->batch, 256, rargs,
                    "launching the reference's dK and dV", err);
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuCtxSynchronize(), err, "running the reference");
    for (i = 0; i < 3 && rc == FT_OK; i++)
        rc = ft__verify_sumsq(v, t->ref[i], i == 0 ? t->nq : t->nk, t->stats, &t->ref_sumsq[i], err);
    t->have_reference = rc == FT_OK;
    return rc;
}

ft_status ft__bwd_tensors_fill_timing(ft_verifier *v, ft_bwd_tensors *t, uint64_t seed, float qk_std, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    const ft_problem *p = &t->problem;
    const size_t rows = (size_t)p->batch * p->heads_q * p->seqlen_q;
    /* q·k·scale of N(0, qk_std²) entries is N(0, qk_std⁴): E[exp] = exp(qk_std⁴ / 2) */
    const double spread = 0.5 * (double)qk_std * qk_std * qk_std * qk_std;
    float *lse;
    ft_status rc;
    size_t r;

    t->have_reference = 0;
    rc = fill_inputs(v, t, seed, qk_std, err);
    if (rc == FT_OK)
        rc = ft__verify_fill(v, t->o, t->nq, seed * 4 + 5, 1.f, p->bf16, err);
    if (rc != FT_OK)
        return rc;
    lse = malloc(rows * sizeof *lse); /* [b, hq, sq] */
    if (lse == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of host memory for the LSE");
    for (r = 0; r < rows; r++) {
        const long long i = (long long)(r % (size_t)p->seqlen_q);
        long long keys = p->seqlen_k;
        if (p->causal) { /* bottom-right: row i sees keys j <= i + sk - sq */
            keys = i + p->seqlen_k - p->seqlen_q + 1;
            keys = keys < 0 ? 0 : keys > p->seqlen_k ? p->seqlen_k : keys;
        }
        lse[r] = keys > 0 ? (float)(log((double)keys) + spread) : INFINITY;
    }
    rc = ft__cuda_check(cu, cu->p_cuMemcpyHtoD(t->lse, lse, rows * sizeof *lse), err, "writing the LSE");
    free(lse);
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuCtxSynchronize(), err, "filling the inputs");
    return rc;
}

ft_status ft__bwd_tensors_launch(const ft_cuda *cu, const ft_kernel *k, ft_bwd_tensors *t, ft_bwd_launch *out,
                                 ft_err *err)
{
    ft_status rc;

    memset(out, 0, sizeof *out);
    out->cu = cu;
    out->k = k;
    rc = ft__op_bwd.plan(&k->facts, &t->problem, &out->plan, err);
    if (rc != FT_OK)
        return rc;
    if (out->plan.workspace_bytes > t->ws_cap) {
        if (t->ws != 0)
            cu->p_cuMemFree(t->ws);
        t->ws = 0, t->ws_cap = 0;
        rc = ft__cuda_check(cu, cu->p_cuMemAlloc(&t->ws, out->plan.workspace_bytes), err, "cuMemAlloc(workspace)");
        if (rc != FT_OK)
            return rc;
        t->ws_cap = out->plan.workspace_bytes;
    }
    ft__bwd_tensors_params(t, &out->params);
    out->ws = t->ws;
    return FT_OK;
}

ft_status ft__bwd_launch_fn(void *launch, CUstream stream, ft_err *err)
{
    ft_bwd_launch *l = launch;
    return ft__kernel_run_plan(l->cu, l->k, &l->plan, &l->params, l->ws, stream, err);
}

/* Poisons the gradients (0xffff: NaN in fp16 and bf16) and the workspace (0xff bytes: NaN and
 * −1 in the counters; the pre kernel must initialise all of it), runs the plan, waits. */
static ft_status run_poisoned(ft_verifier *v, const ft_kernel *k, ft_bwd_tensors *t, ft_err *err)
{
    const ft_cuda *cu = v->cu;
    ft_bwd_launch l;
    ft_status rc = ft__bwd_tensors_launch(cu, k, t, &l, err);

    if (rc != FT_OK)
        return rc;
    rc = ft__cuda_check(cu, cu->p_cuMemsetD16(t->dq, 0xffff, t->nq), err, "poisoning dQ");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemsetD16(t->dk, 0xffff, t->nk), err, "poisoning dK");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemsetD16(t->dv, 0xffff, t->nk), err, "poisoning dV");
    if (rc == FT_OK && l.plan.workspace_bytes > 0)
        rc = ft__cuda_check(cu, cu->p_cuMemsetD8(t->ws, 0xff, l.plan.workspace_bytes), err, "poisoning the workspace");
    if (rc == FT_OK)
        rc = ft__bwd_launch_fn(&l, NULL, err);
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuCtxSynchronize(), err, "running the kernels");
    return rc;
}

/* One gradient against the reference on the GPU: stats as ft_ref_bwd_compare leaves them. */
static ft_status compare(ft_verifier *v, ft_bwd_tensors *t, int which, const ft_tolerance *tol, double stats[8],
                         ft_err *err)
{
    const ft_cuda *cu = v->cu;
    const ft_problem *p = &t->problem;
    const int isq = which == 0;
    const ft_strides st = isq ? t->sq : t->sk;
    const size_t n = isq ? t->nq : t->nk;
    CUdeviceptr x = which == 0 ? t->dq : which == 1 ? t->dk : t->dv;
    CUdeviceptr ref = t->ref[which], mag = t->mag[which], cmag = which < 2 ? t->cmag[which] : 0, out = t->stats;
    long long xb = st.batch, xr = st.row, xh = st.head;
    int rows = isq ? p->seqlen_q : p->seqlen_k, heads = isq ? p->heads_q : p->heads_kv, d = p->head_dim;
    int bf16 = p->bf16 != 0;
    int empty = isq && p->causal && p->seqlen_q > p->seqlen_k ? p->seqlen_q - p->seqlen_k : 0;
    double rtol = tol->rtol, ptol = tol->ptol, ctol = tol->ctol;
    double atol_abs = tol->atol * sqrt(t->ref_sumsq[which] / (double)(n ? n : 1));
    void *args[] = {&x, &xb, &xr, &xh, &ref, &mag, &cmag, &rows, &heads, &d, &bf16, &empty,
                    &rtol, &ptol, &ctol, &atol_abs, &out};
    const long long threads = (long long)rows * (d / 8);
    ft_status rc;

    rc = ft__cuda_check(cu, cu->p_cuMemsetD8(t->stats, 0, 8 * sizeof(double)), err, "clearing the statistics");
    if (rc == FT_OK)
        rc = launch(v, v->bwd_compare, (unsigned)((threads + 255) / 256), (unsigned)heads, (unsigned)p->batch, 256,
                    args, "launching the comparison", err);
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(stats, t->stats, 8 * sizeof(double)), err,
                            "reading the comparison");
    return rc;
}

/* The three gradients to the host, for the determinism check. */
static ft_status read_grads(const ft_cuda *cu, const ft_bwd_tensors *t, uint16_t *out, ft_err *err)
{
    ft_status rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(out, t->dq, t->nq * 2), err, "reading dQ");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(out + t->nq, t->dk, t->nk * 2), err, "reading dK");
    if (rc == FT_OK)
        rc = ft__cuda_check(cu, cu->p_cuMemcpyDtoH(out + t->nq + t->nk, t->dv, t->nk * 2), err, "reading dV");
    return rc;
}

ft_status ft__bwd_check_gradients(ft_verifier *v, ft_bwd_tensors *t, ft_bwd_check *check, ft_err *err)
{
    const ft_tolerance tol = ft__op_bwd.tolerance(t->problem.bf16);
    ft_status rc = FT_OK;
    int i;

    memset(check, 0, sizeof *check);
    check->det_same = -1;
    if (!t->have_reference)
        return ft__fail(err, FT_ERR_INTERNAL, "the backward's tensors have no reference (ft__bwd_tensors_prepare)");
    for (i = 0; i < 3 && rc == FT_OK; i++) {
        double s[8];
        const double ss = t->ref_sumsq[i];
        rc = compare(v, t, i, &tol, s, err);
        if (rc != FT_OK)
            break;
        check->rel_l2[i] = ss > 0 ? sqrt(s[0] / ss) : sqrt(s[0]);
        check->worst[i] = s[2];
        check->nonfinite += (long long)s[3];
        check->bad += (long long)s[4];
        check->nonzero_empty += (long long)s[5];
        if (check->detail[0] == '\0' && (s[3] > 0 || s[4] > 0 || s[5] > 0 || !(check->rel_l2[i] <= tol.l2)))
            snprintf(check->detail, sizeof check->detail,
                     "%s: %.0f non-finite, %.0f over their bound (worst %.3g of it), %.0f non-zero in rows that see "
                     "no key; relative L2 %.3g (bound %.3g), max |error| %.3g",
                     grad_names[i], s[3], s[4], s[2], s[5], check->rel_l2[i], tol.l2, s[1]);
    }
    if (rc != FT_OK)
        return rc;
    check->pass = check->nonfinite == 0 && check->bad == 0 && check->nonzero_empty == 0;
    for (i = 0; i < 3; i++)
        check->pass = check->pass && check->rel_l2[i] <= tol.l2;
    return FT_OK;
}

ft_status ft__verify_bwd_kernel(ft_verifier *v, const ft_kernel *k, ft_bwd_tensors *t, ft_bwd_check *check,
                                ft_err *err)
{
    const size_t total = t->nq + 2 * t->nk;
    uint16_t *first = NULL, *second = NULL;
    ft_status rc = FT_OK;

    memset(check, 0, sizeof *check);
    check->det_same = -1;
    if (!t->have_reference)
        return ft__fail(err, FT_ERR_INTERNAL, "the backward's tensors have no reference (ft__bwd_tensors_prepare)");
    rc = run_poisoned(v, k, t, err);
    if (rc == FT_OK)
        rc = ft__bwd_check_gradients(v, t, check, err);
    if (rc == FT_OK && k->facts.deterministic) {
        first = malloc(total * 2);
        second = malloc(total * 2);
        if (first == NULL || second == NULL)
            rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of host memory for the determinism check");
        if (rc == FT_OK)
            rc = read_grads(v->cu, t, first, err);
        if (rc == FT_OK)
            rc = run_poisoned(v, k, t, err);
        if (rc == FT_OK)
            rc = read_grads(v->cu, t, second, err);
        if (rc == FT_OK) {
            check->det_same = memcmp(first, second, total * 2) == 0;
            if (!check->det_same && check->detail[0] == '\0')
                snprintf(check->detail, sizeof check->detail, "a deterministic kernel gave other bits the second time");
            check->pass = check->pass && check->det_same;
        }
    }
    free(first);
    free(second);
    return rc;
}
