// The backward kernels of templates/flash_bwd_sm80.cuh, proved on the GPU at hand:
//   (a) the fp32 GPU reference (templates/reference.cuh) against the fp64 CPU reference
//       (runtime/reference_cpu.c) on small shapes;
//   (b) every variant built in (tests/bwd/run.sh compiles them) against the GPU reference:
//       sequence lengths 1 … 4097, seqlen_q ≠ seqlen_k both ways (with causal masking, rows that
//       see no key), batch and heads of 1, grouped-query heads (hq = 8·hkv, 4·hkv, 2·hkv), the
//       head-major [b, h, s, d] layout, large scores; outputs and workspace poisoned with NaN
//       before each launch, every element compared; det = 1 variants give the same bits twice;
//   (c) with --bench, timings on the grid of the FlashAttention papers.
// It prints a short summary last and, with --out DIR (default $OUT), writes bwd_log.txt and
// bwd_results.json there. Exit status 0 when every check passed.
//
//   harness [--bench] [--no-test] [--no-ref] [--small] [--only SUBSTRING] [--out DIR] [--log-append]
//
// --no-test skips (a) and (b), --no-ref only (a); --small runs (b) on a few small shapes only
// (for compute-sanitizer); --log-append appends to bwd_log.txt and writes no JSON (run.sh uses it
// to rerun variants one at a time after a fault).

#include <cuda_runtime.h>

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../../templates/reference.cuh"
#include "ft_params_bwd.cuh"
#include "cpu_ref.h"
extern "C" {
#include "ops/op.h"
}
#include "variant.h"

// ---- registry and logging ------------------------------------------------------------------
static const BwdVariant *g_variants[64];
static int g_nvariants;

int bwd_register(const BwdVariant *v)
{
    if (g_nvariants < 64)
        g_variants[g_nvariants++] = v;
    return g_nvariants;
}

static FILE *g_log;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
    if (g_log) {
        va_start(ap, fmt);
        vfprintf(g_log, fmt, ap);
        va_end(ap);
        fflush(g_log);
    }
}

#define CK(call)                                                                                     \
    do {                                                                                             \
        cudaError_t e_ = (call);                                                                     \
        if (e_ != cudaSuccess) {                                                                     \
            say("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #call);    \
            exit(2);                                                                                 \
        }                                                                                            \
    } while (0)

// The kernels' argument block (templates/include/ft_params_bwd.cuh), checked at start-up against
// each variant's own sizeof and offsetof.
typedef ft::BwdParams HParams;

static std::string variant_name(const BwdVariant &v)
{
    char buf[192];
    snprintf(buf, sizeof buf, "d=%d,bm=%d,bn=%d,warps=%d,split=%d,stages=%d,causal=%d,dtype=%s,gqa=%s,det=%d", v.d,
             v.bm, v.bn, v.warps, v.split, v.stages, v.causal, v.bf16 ? "bf16" : "f16",
             v.gqa_atomic ? "atomic" : "loop", v.det);
    return buf;
}

// ---- error bounds -----------------------------------------------------------------------------
// Each gradient passes when its relative L2 error is at most l2 and every element satisfies
// |x − ref| <= rtol·|ref| + ptol·mag + atol·rms(ref), mag being the sum of the absolute values
// of the element's terms (templates/reference.cuh); NaN or Inf never passes, and a row that sees
// no key must give exactly 0. Reasoning, with u the unit roundoff of the element type (2^-11 for
// fp16, 2^-8 for bf16):
//   * dV = Σ_i P·dO_i: the kernel rounds P to 16 bits (at most u·P each), and its P differs from
//     the reference's by the fp32 error of its score (about 2^-24·Σ|q||k|·scale: 10⁻⁶ for unit
//     data, about u_fp16 for scores in the hundreds) — together at most about 2u·mag_dv.
//   * dK = scale·Σ_i dS·q_i and dQ = scale·Σ_j dS·k_j: dS is rounded to 16 bits (u·|dS|) and
//     inherits P's relative error; dP − D may cancel, but both are fp32 sums of exact products, so
//     their difference is off by about 2^-24·(|dP| + |D|), far below u·|dS| unless dS itself
//     vanishes — about 2u·mag in all.
//   * the output is rounded to 16 bits once more (u·|ref|); fp32 accumulation and the atomic
//     additions' order are at the level of 2^-24·mag.
//   * where dP − D cancels (a row that sees one key: O = v, so dP = D exactly; a saturated
//     softmax), dS is the difference of two fp32 sums of d products each, off by up to about
//     d·2^-24·(|dP| + |D|) on either side: ctol·cmag, cmag = scale·Σ P·(|dP| + |D|)·|k| (or |q|).
// The bounds allow about twice the worst case: l2 = rtol = ptol = 4u; ctol = 2^-18 (16 ulps of
// fp32, both sides' sums). atol covers elements whose reference and mags are all near 0 (its
// only scale is the tensor's rms).
struct Tol {
    double l2, rtol, ptol, ctol, atol;
};
static const Tol TOL_F16 = {2e-3, 2e-3, 2e-3, 3.8e-6, 1e-3};
static const Tol TOL_BF16 = {1.6e-2, 1.6e-2, 1.6e-2, 3.8e-6, 4e-3};
// The fp32 GPU reference against the fp64 CPU one: fp32 sums of up to a few thousand terms and
// expf of an fp32 argument (P off by about 2^-24·|scale·s − LSE|): a few 10⁻⁶ of mag, and the
// same cancellation in dP − D as above (the GPU reference's cmag).
static const Tol TOL_REF = {1e-5, 1e-5, 2e-5, 3.8e-6, 1e-6};

// ---- problems ---------------------------------------------------------------------------------
enum Layout { BSHD = 0, BHSD = 1 };

struct Shape {
    int b, hq, hkv, sq, sk;
    Layout layout;
    float qk_std;
};

static std::string shape_name(const Shape &s)
{
    char buf[128];
    snprintf(buf, sizeof buf, "b=%d,hq=%d,hkv=%d,sq=%d,sk=%d%s%s", s.b, s.hq, s.hkv, s.sq, s.sk,
             s.layout == BHSD ? ",bhsd" : "", s.qk_std != 1.f ? ",qk_std=10" : "");
    return buf;
}

static void strides_of(Layout l, int seqlen, int heads, int d, long long out[3])
{
    if (l == BSHD) {
        out[0] = (long long)seqlen * heads * d;
        out[1] = (long long)heads * d;
        out[2] = d;
    } else {
        out[0] = (long long)heads * seqlen * d;
        out[1] = d;
        out[2] = (long long)seqlen * d;
    }
}

// Device buffers of one problem: the 16-bit inputs and the kernel's outputs in the shape's
// layout, the fp32 reference forward (O, LSE) and backward (gradients and their mags).
struct Problem {
    Shape s;
    int d, causal, bf16;
    float scale;
    long long sq_st[3], sk_st[3]; // strides of Q-like and K-like tensors
    size_t nq, nk;                // elements of Q-like and K-like tensors
    unsigned short *q, *k, *v, *o, *dout, *dq, *dk, *dv;
    float *o32, *mag_o, *lse, *dsum, *rdq, *rdk, *rdv, *mdq, *mdk, *mdv, *cdq, *cdk;
    double *stats;
    void *ws;
    size_t ws_cap;
};

static void *dalloc(size_t bytes)
{
    void *p = NULL;
    CK(cudaMalloc(&p, bytes < 16 ? 16 : bytes));
    return p;
}

static void problem_create(Problem &P, const Shape &s, int d, int causal, int bf16)
{
    memset(&P, 0, sizeof P);
    P.s = s;
    P.d = d;
    P.causal = causal;
    P.bf16 = bf16;
    P.scale = (float)(1.0 / sqrt((double)d));
    strides_of(s.layout, s.sq, s.hq, d, P.sq_st);
    strides_of(s.layout, s.sk, s.hkv, d, P.sk_st);
    P.nq = (size_t)s.b * s.sq * s.hq * d;
    P.nk = (size_t)s.b * s.sk * s.hkv * d;
    P.q = (unsigned short *)dalloc(P.nq * 2);
    P.o = (unsigned short *)dalloc(P.nq * 2);
    P.dout = (unsigned short *)dalloc(P.nq * 2);
    P.dq = (unsigned short *)dalloc(P.nq * 2);
    P.k = (unsigned short *)dalloc(P.nk * 2);
    P.v = (unsigned short *)dalloc(P.nk * 2);
    P.dk = (unsigned short *)dalloc(P.nk * 2);
    P.dv = (unsigned short *)dalloc(P.nk * 2);
    P.o32 = (float *)dalloc(P.nq * 4);
    P.mag_o = (float *)dalloc(P.nq * 4);
    P.rdq = (float *)dalloc(P.nq * 4);
    P.mdq = (float *)dalloc(P.nq * 4);
    P.cdq = (float *)dalloc(P.nq * 4);
    P.cdk = (float *)dalloc(P.nk * 4);
    P.rdk = (float *)dalloc(P.nk * 4);
    P.rdv = (float *)dalloc(P.nk * 4);
    P.mdk = (float *)dalloc(P.nk * 4);
    P.mdv = (float *)dalloc(P.nk * 4);
    P.lse = (float *)dalloc((size_t)s.b * s.hq * s.sq * 4);
    P.dsum = (float *)dalloc((size_t)s.b * s.hq * s.sq * 4);
    P.stats = (double *)dalloc(8 * sizeof(double));
}

static void problem_destroy(Problem &P)
{
    void *ptrs[] = {P.q, P.o, P.dout, P.dq, P.k, P.v, P.dk, P.dv, P.o32, P.mag_o, P.rdq, P.mdq, P.rdk,
                    P.rdv, P.mdk, P.mdv, P.cdq, P.cdk, P.lse, P.dsum, P.stats, P.ws};
    for (void *p : ptrs)
        if (p)
            CK(cudaFree(p));
    memset(&P, 0, sizeof P);
}

// fp32 [b, s, h, d] contiguous → 16-bit with strides.
__global__ void harness_to16(const float *src, unsigned short *dst, int seqlen, int heads, int d, long long sb,
                             long long sr, long long sh, int bf16)
{
    const long long n = (long long)gridDim.y * seqlen * heads * d; // gridDim.y = batch
    const int b = blockIdx.y;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n / gridDim.y;
         i += (long long)gridDim.x * blockDim.x) {
        const int c = (int)(i % d), h = (int)(i / d % heads), r = (int)(i / d / heads);
        dst[b * sb + r * sr + h * sh + c] = ftref::from_float(src[(long long)b * seqlen * heads * d + i], bf16);
    }
}

static ftref::RefBwdParams ref_bwd_params(const Problem &P)
{
    ftref::RefBwdParams r;
    memset(&r, 0, sizeof r);
    r.q = P.q;
    r.k = P.k;
    r.v = P.v;
    r.o = P.o;
    r.dout = P.dout;
    r.lse = P.lse;
    r.dsum = P.dsum;
    r.dq = P.rdq;
    r.dk = P.rdk;
    r.dv = P.rdv;
    r.mag_dq = P.mdq;
    r.mag_dk = P.mdk;
    r.mag_dv = P.mdv;
    r.cmag_dq = P.cdq;
    r.cmag_dk = P.cdk;
    r.q_batch_stride = r.o_batch_stride = r.dout_batch_stride = P.sq_st[0];
    r.q_row_stride = r.o_row_stride = r.dout_row_stride = P.sq_st[1];
    r.q_head_stride = r.o_head_stride = r.dout_head_stride = P.sq_st[2];
    r.k_batch_stride = r.v_batch_stride = P.sk_st[0];
    r.k_row_stride = r.v_row_stride = P.sk_st[1];
    r.k_head_stride = r.v_head_stride = P.sk_st[2];
    r.batch = P.s.b;
    r.heads_q = P.s.hq;
    r.heads_kv = P.s.hkv;
    r.seqlen_q = P.s.sq;
    r.seqlen_k = P.s.sk;
    r.head_dim = P.d;
    r.scale = P.scale;
    r.causal = P.causal;
    r.bf16 = P.bf16;
    return r;
}

// Random inputs, the forward (fp32 reference, O rounded to 16 bits as a kernel would give it),
// and, with `backward`, the reference gradients.
static void problem_prepare(Problem &P, unsigned long long seed, bool backward)
{
    ft_ref_fill_normal<<<512, 256>>>(P.q, (long long)P.nq, seed * 4 + 0, 0.f, P.s.qk_std, P.bf16);
    ft_ref_fill_normal<<<512, 256>>>(P.k, (long long)P.nk, seed * 4 + 1, 0.f, P.s.qk_std, P.bf16);
    ft_ref_fill_normal<<<512, 256>>>(P.v, (long long)P.nk, seed * 4 + 2, 0.f, 1.f, P.bf16);
    ft_ref_fill_normal<<<512, 256>>>(P.dout, (long long)P.nq, seed * 4 + 3, 0.f, 1.f, P.bf16);
    CK(cudaGetLastError());

    ftref::RefParams f;
    memset(&f, 0, sizeof f);
    f.q = P.q;
    f.k = P.k;
    f.v = P.v;
    f.o = P.o32;
    f.lse = P.lse;
    f.mag = P.mag_o;
    f.q_batch_stride = P.sq_st[0];
    f.q_row_stride = P.sq_st[1];
    f.q_head_stride = P.sq_st[2];
    f.k_batch_stride = f.v_batch_stride = P.sk_st[0];
    f.k_row_stride = f.v_row_stride = P.sk_st[1];
    f.k_head_stride = f.v_head_stride = P.sk_st[2];
    f.o_batch_stride = (long long)P.s.sq * P.s.hq * P.d;
    f.o_row_stride = (long long)P.s.hq * P.d;
    f.o_head_stride = P.d;
    f.batch = P.s.b;
    f.heads_q = P.s.hq;
    f.heads_kv = P.s.hkv;
    f.seqlen_q = P.s.sq;
    f.seqlen_k = P.s.sk;
    f.head_dim = P.d;
    f.scale = P.scale;
    f.causal = P.causal;
    f.bf16 = P.bf16;
    const size_t fsmem = (size_t)(P.d + P.s.sk + 32) * 4;
    ft_ref_attention<<<dim3(P.s.sq, P.s.hq, P.s.b), 256, fsmem>>>(f);
    CK(cudaGetLastError());
    harness_to16<<<dim3(256, P.s.b), 256>>>(P.o32, P.o, P.s.sq, P.s.hq, P.d, P.sq_st[0], P.sq_st[1], P.sq_st[2],
                                            P.bf16);
    CK(cudaGetLastError());
    if (backward) {
        const ftref::RefBwdParams r = ref_bwd_params(P);
        ft_ref_bwd_dsum<<<dim3(P.s.sq, P.s.hq, P.s.b), 32>>>(r);
        ft_ref_bwd_dq<<<dim3(P.s.sq, P.s.hq, P.s.b), 256>>>(r);
        ft_ref_bwd_dkv<<<dim3(P.s.sk, P.s.hkv, P.s.b), 256>>>(r);
        CK(cudaGetLastError());
    }
    CK(cudaDeviceSynchronize());
}

// ---- launching a variant ----------------------------------------------------------------------
static long long cdiv(long long a, long long b)
{
    return (a + b - 1) / b;
}

// The backward operation's launch plan (ops/bwd.c) for a variant and a shape: the three kernels'
// grids, the main one's shared memory, the workspace's size.
static ft_launch_plan plan_of(const BwdVariant &v, const Shape &s)
{
    ft_launch_facts f;
    ft_problem p;
    ft_launch_plan plan;
    ft_err err;

    memset(&f, 0, sizeof f);
    f.threads = v.threads;
    f.smem_dynamic = v.smem;
    f.rows_per_block = v.bm;
    f.keys_per_block = v.bn;
    f.head_dim = v.d;
    f.gqa_atomic = v.gqa_atomic;
    f.deterministic = v.det;
    memset(&p, 0, sizeof p);
    p.batch = s.b;
    p.heads_q = s.hq;
    p.heads_kv = s.hkv;
    p.seqlen_q = s.sq;
    p.seqlen_k = s.sk;
    p.head_dim = v.d;
    p.causal = v.causal;
    p.bf16 = v.bf16;
    if (ft__op_bwd.plan(&f, &p, &plan, &err) != FT_OK || plan.nsteps != 3) {
        say("the backward's launch plan: %s\n", plan.nsteps != 3 ? "not three steps" : err.msg);
        exit(2);
    }
    return plan;
}

static HParams kernel_params(const Problem &P, void *ws)
{
    HParams h;
    memset(&h, 0, sizeof h);
    h.q = P.q;
    h.k = P.k;
    h.v = P.v;
    h.o = P.o;
    h.dout = P.dout;
    h.dq = P.dq;
    h.dk = P.dk;
    h.dv = P.dv;
    h.lse = P.lse;
    h.ws = (float *)ws;
    h.q_batch_stride = h.o_batch_stride = h.dout_batch_stride = h.dq_batch_stride = P.sq_st[0];
    h.q_row_stride = h.o_row_stride = h.dout_row_stride = h.dq_row_stride = P.sq_st[1];
    h.q_head_stride = h.o_head_stride = h.dout_head_stride = h.dq_head_stride = P.sq_st[2];
    h.k_batch_stride = h.v_batch_stride = h.dk_batch_stride = h.dv_batch_stride = P.sk_st[0];
    h.k_row_stride = h.v_row_stride = h.dk_row_stride = h.dv_row_stride = P.sk_st[1];
    h.k_head_stride = h.v_head_stride = h.dk_head_stride = h.dv_head_stride = P.sk_st[2];
    h.batch = P.s.b;
    h.heads_q = P.s.hq;
    h.heads_kv = P.s.hkv;
    h.seqlen_q = P.s.sq;
    h.seqlen_k = P.s.sk;
    h.scale = P.scale;
    h.scale_log2 = (float)(P.scale * 1.4426950408889634);
    return h;
}

// The plan's steps: kernel 0 the main one, 1 pre, 2 post (the family's entries).
static void launch(const BwdVariant &v, const ft_launch_plan &plan, HParams &h, cudaStream_t st)
{
    const void *const fns[3] = {v.main, v.pre, v.post};
    void *args[] = {&h};
    for (int i = 0; i < plan.nsteps; ++i) {
        const ft_launch_step &x = plan.steps[i];
        CK(cudaLaunchKernel(fns[x.kernel], dim3(x.grid[0], x.grid[1], x.grid[2]), dim3(x.block), args, x.smem, st));
    }
}

// Poisons the gradients and the workspace (NaN in either element type, -1 in the semaphores:
// the pre kernel must initialise all of it), runs the three kernels and waits.
static void run_variant(const BwdVariant &v, Problem &P)
{
    const ft_launch_plan plan = plan_of(v, P.s);
    const size_t need = plan.workspace_bytes;
    if (need > P.ws_cap) {
        if (P.ws)
            CK(cudaFree(P.ws));
        P.ws = dalloc(need);
        P.ws_cap = need;
    }
    CK(cudaMemset(P.dq, 0xff, P.nq * 2));
    CK(cudaMemset(P.dk, 0xff, P.nk * 2));
    CK(cudaMemset(P.dv, 0xff, P.nk * 2));
    CK(cudaMemset(P.ws, 0xff, need));
    HParams h = kernel_params(P, P.ws);
    launch(v, plan, h, 0);
    CK(cudaDeviceSynchronize());
}

// ---- comparing ----------------------------------------------------------------------------------
struct GradCheck {
    double rel_l2, max_abs, worst; // worst: max |x - ref| / bound
    long long nonfinite, bad, nonzero_empty;
    bool pass;
};

static double sumsq(const float *x, size_t n, double *tmp)
{
    double h = 0;
    CK(cudaMemset(tmp, 0, sizeof(double)));
    ft_ref_sumsq<<<512, 256>>>(x, (long long)n, tmp);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&h, tmp, sizeof h, cudaMemcpyDeviceToHost));
    return h;
}

// which: 0 dQ, 1 dK, 2 dV.
static GradCheck compare_grad(Problem &P, int which, const Tol &tol)
{
    const bool isq = which == 0;
    const unsigned short *x = which == 0 ? P.dq : which == 1 ? P.dk : P.dv;
    const float *ref = which == 0 ? P.rdq : which == 1 ? P.rdk : P.rdv;
    const float *mag = which == 0 ? P.mdq : which == 1 ? P.mdk : P.mdv;
    const float *cmag = which == 0 ? P.cdq : which == 1 ? P.cdk : NULL;
    const size_t n = isq ? P.nq : P.nk;
    const int rows = isq ? P.s.sq : P.s.sk, heads = isq ? P.s.hq : P.s.hkv;
    const long long *st = isq ? P.sq_st : P.sk_st;
    const int empty = isq && P.causal && P.s.sq > P.s.sk ? P.s.sq - P.s.sk : 0;
    const double ss = sumsq(ref, n, P.stats);
    const double rms = sqrt(ss / (double)n);
    double h[8];
    CK(cudaMemset(P.stats, 0, 8 * sizeof(double)));
    const long long threads = (long long)rows * (P.d / 8);
    ft_ref_bwd_compare<<<dim3((unsigned)cdiv(threads, 256), heads, P.s.b), 256>>>(
        x, st[0], st[1], st[2], ref, mag, cmag, rows, heads, P.d, P.bf16, empty, tol.rtol, tol.ptol, tol.ctol,
        tol.atol * rms, P.stats);
    CK(cudaGetLastError());
    CK(cudaMemcpy(h, P.stats, sizeof h, cudaMemcpyDeviceToHost));
    GradCheck c;
    c.rel_l2 = ss > 0 ? sqrt(h[0] / ss) : sqrt(h[0]);
    c.max_abs = h[1];
    c.worst = h[2];
    c.nonfinite = (long long)h[3];
    c.bad = (long long)h[4];
    c.nonzero_empty = (long long)h[5];
    c.pass = c.rel_l2 <= tol.l2 && c.bad == 0 && c.nonfinite == 0 && c.nonzero_empty == 0;
    return c;
}

// ---- results ----------------------------------------------------------------------------------
struct CheckResult {
    std::string variant, shape;
    GradCheck g[3];
    int det_same; // -1: not a det variant
    bool pass;
};

struct BenchResult {
    std::string variant;
    int seqlen, batch, heads;
    double ms, main_ms, tflops;
};

static std::vector<CheckResult> g_checks;
static std::vector<CheckResult> g_ref_checks;
static std::vector<BenchResult> g_bench;

static const char *const GRAD[3] = {"dq", "dk", "dv"};

static void print_check(const CheckResult &r)
{
    say("  %-4s %-40s", r.pass ? "ok" : "FAIL", r.shape.c_str());
    for (int i = 0; i < 3; ++i)
        say("  %s l2 %.1e worst %.2f%s%s", GRAD[i], r.g[i].rel_l2, r.g[i].worst,
            r.g[i].nonfinite ? " NONFINITE" : "", r.g[i].nonzero_empty ? " NONZERO-EMPTY" : "");
    if (r.det_same >= 0)
        say("  det %s", r.det_same ? "same bits" : "BITS DIFFER");
    say("\n");
    for (int i = 0; i < 3; ++i)
        if (!r.g[i].pass)
            say("       %s: rel_l2 %.3e max_abs %.3e worst %.3f nonfinite %lld over-bound %lld "
                "nonzero-in-empty-rows %lld\n",
                GRAD[i], r.g[i].rel_l2, r.g[i].max_abs, r.g[i].worst, r.g[i].nonfinite, r.g[i].bad,
                r.g[i].nonzero_empty);
}

// ---- (a) the GPU reference against the CPU reference -------------------------------------------
static std::vector<unsigned short> to_host16(const unsigned short *d, size_t n)
{
    std::vector<unsigned short> h(n);
    CK(cudaMemcpy(h.data(), d, n * 2, cudaMemcpyDeviceToHost));
    return h;
}

static std::vector<float> to_host32(const float *d, size_t n)
{
    std::vector<float> h(n);
    CK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
    return h;
}

// cmag: the GPU reference's (empty for dV).
static GradCheck compare_host(const std::vector<float> &x, const std::vector<double> &ref,
                              const std::vector<double> &mag, const std::vector<float> &cmag, const Tol &tol)
{
    double ss = 0, sd = 0, worst = 0, max_abs = 0;
    long long bad = 0, nonfinite = 0;
    for (size_t i = 0; i < ref.size(); ++i)
        ss += ref[i] * ref[i];
    const double atol = tol.atol * sqrt(ss / (double)ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
        const double diff = fabs((double)x[i] - ref[i]);
        const double cm = cmag.empty() ? 0.0 : cmag[i];
        const double bound = tol.rtol * fabs(ref[i]) + tol.ptol * mag[i] + tol.ctol * cm + atol;
        if (!isfinite(x[i])) {
            nonfinite++;
            bad++;
            continue;
        }
        sd += diff * diff;
        max_abs = std::max(max_abs, diff);
        worst = std::max(worst, diff / bound);
        if (diff > bound)
            bad++;
    }
    GradCheck c;
    c.rel_l2 = ss > 0 ? sqrt(sd / ss) : sqrt(sd);
    c.max_abs = max_abs;
    c.worst = worst;
    c.nonfinite = nonfinite;
    c.bad = bad;
    c.nonzero_empty = 0;
    c.pass = c.rel_l2 <= tol.l2 && bad == 0;
    return c;
}

static bool reference_checks()
{
    struct Case {
        Shape s;
        int d, causal, bf16;
    };
    const Case cases[] = {
        {{2, 4, 2, 33, 47, BSHD, 1.f}, 64, 0, 0},   {{2, 4, 2, 33, 47, BSHD, 1.f}, 64, 1, 1},
        {{1, 8, 1, 70, 20, BHSD, 1.f}, 32, 1, 0},   {{1, 2, 2, 20, 90, BSHD, 1.f}, 128, 1, 1},
        {{1, 3, 3, 65, 65, BSHD, 10.f}, 96, 0, 1},  {{1, 2, 1, 40, 40, BHSD, 1.f}, 256, 1, 0},
        {{1, 2, 2, 17, 17, BSHD, 10.f}, 192, 1, 0},
        // head dims that are not multiples of 32: lanes that hold fewer elements than others
        {{2, 4, 2, 37, 29, BSHD, 1.f}, 80, 1, 0},   {{1, 2, 1, 33, 41, BHSD, 1.f}, 48, 0, 1},
        {{1, 2, 2, 23, 19, BSHD, 10.f}, 144, 1, 1}, {{1, 3, 1, 17, 17, BHSD, 1.f}, 240, 0, 0},
    };
    bool all = true;
    say("(a) GPU reference (fp32) against the CPU reference (fp64)\n");
    for (const Case &c : cases) {
        Problem P;
        problem_create(P, c.s, c.d, c.causal, c.bf16);
        problem_prepare(P, 7, true);
        const auto q = to_host16(P.q, P.nq), k = to_host16(P.k, P.nk), v = to_host16(P.v, P.nk);
        const auto o = to_host16(P.o, P.nq), dout = to_host16(P.dout, P.nq);
        const auto lse = to_host32(P.lse, (size_t)c.s.b * c.s.hq * c.s.sq);
        std::vector<double> out[3] = {std::vector<double>(P.nq), std::vector<double>(P.nk), std::vector<double>(P.nk)};
        std::vector<double> mag[3] = {std::vector<double>(P.nq), std::vector<double>(P.nk), std::vector<double>(P.nk)};
        const uint16_t *const in[5] = {q.data(), k.data(), v.data(), o.data(), dout.data()};
        const int64_t st[5][3] = {{P.sq_st[0], P.sq_st[1], P.sq_st[2]}, {P.sk_st[0], P.sk_st[1], P.sk_st[2]},
                                  {P.sk_st[0], P.sk_st[1], P.sk_st[2]}, {P.sq_st[0], P.sq_st[1], P.sq_st[2]},
                                  {P.sq_st[0], P.sq_st[1], P.sq_st[2]}};
        double *const outp[3] = {out[0].data(), out[1].data(), out[2].data()};
        double *const magp[3] = {mag[0].data(), mag[1].data(), mag[2].data()};
        bwd_cpu_reference(c.s.b, c.s.hq, c.s.hkv, c.s.sq, c.s.sk, c.d, c.causal, c.bf16, P.scale, in, st, lse.data(),
                          outp, magp);
        CheckResult r;
        char name[160];
        snprintf(name, sizeof name, "d=%d,causal=%d,%s,%s", c.d, c.causal, c.bf16 ? "bf16" : "f16",
                 shape_name(c.s).c_str());
        r.variant = "reference";
        r.shape = name;
        r.det_same = -1;
        const float *gpu[3] = {P.rdq, P.rdk, P.rdv};
        const float *gmag[3] = {P.mdq, P.mdk, P.mdv};
        const float *gcmag[3] = {P.cdq, P.cdk, NULL};
        r.pass = true;
        for (int i = 0; i < 3; ++i) {
            const std::vector<float> cm = gcmag[i] ? to_host32(gcmag[i], out[i].size()) : std::vector<float>();
            r.g[i] = compare_host(to_host32(gpu[i], out[i].size()), out[i], mag[i], cm, TOL_REF);
            // the mags are checked like values (sums of the terms' absolute values)
            const GradCheck m = compare_host(to_host32(gmag[i], mag[i].size()), mag[i], mag[i], cm, TOL_REF);
            if (!m.pass) {
                r.g[i].pass = false;
                say("       mag_%s: rel_l2 %.3e worst %.3f\n", GRAD[i], m.rel_l2, m.worst);
            }
            r.pass = r.pass && r.g[i].pass;
        }
        print_check(r);
        g_ref_checks.push_back(r);
        all = all && r.pass;
        problem_destroy(P);
    }
    return all;
}

// ---- (b) every variant against the GPU reference --------------------------------------------------
static bool g_small;

static std::vector<Shape> test_shapes()
{
    if (g_small)
        return {
            {2, 4, 4, 1, 1, BSHD, 1.f},      {2, 3, 3, 17, 17, BSHD, 1.f},    {1, 2, 2, 130, 130, BHSD, 1.f},
            {1, 8, 1, 200, 65, BSHD, 1.f},   {2, 4, 1, 65, 200, BHSD, 1.f},   {1, 4, 2, 150, 150, BSHD, 10.f},
        };
    return {
        {2, 4, 4, 1, 1, BSHD, 1.f},       {2, 3, 3, 17, 17, BSHD, 1.f},      {1, 2, 2, 127, 127, BHSD, 1.f},
        {2, 2, 1, 1000, 1000, BSHD, 1.f}, {1, 1, 1, 4097, 4097, BSHD, 1.f},  {1, 8, 1, 1000, 127, BSHD, 1.f},
        {2, 4, 1, 127, 1000, BHSD, 1.f},  {1, 2, 2, 17, 4097, BSHD, 1.f},    {1, 4, 4, 4097, 17, BHSD, 1.f},
        {2, 4, 2, 1000, 1000, BSHD, 10.f}, {3, 16, 2, 513, 513, BHSD, 1.f},
    };
}

static bool variant_checks(const BwdVariant &v)
{
    const Tol &tol = v.bf16 ? TOL_BF16 : TOL_F16;
    bool all = true;
    cudaFuncAttributes fa;
    CK(cudaFuncGetAttributes(&fa, v.main));
    say("%s  (%s: %d regs, %zu B local, %lld B smem)\n", variant_name(v).c_str(), v.entry, fa.numRegs,
        (size_t)fa.localSizeBytes, v.smem);
    unsigned long long seed = 100;
    for (const Shape &s : test_shapes()) {
        Problem P;
        problem_create(P, s, v.d, v.causal, v.bf16);
        problem_prepare(P, ++seed, true);
        run_variant(v, P);
        CheckResult r;
        r.variant = variant_name(v);
        r.shape = shape_name(s);
        r.pass = true;
        for (int i = 0; i < 3; ++i) {
            r.g[i] = compare_grad(P, i, tol);
            r.pass = r.pass && r.g[i].pass;
        }
        r.det_same = -1;
        if (v.det) {
            const auto a0 = to_host16(P.dq, P.nq), a1 = to_host16(P.dk, P.nk), a2 = to_host16(P.dv, P.nk);
            run_variant(v, P);
            const auto b0 = to_host16(P.dq, P.nq), b1 = to_host16(P.dk, P.nk), b2 = to_host16(P.dv, P.nk);
            r.det_same = a0 == b0 && a1 == b1 && a2 == b2;
            r.pass = r.pass && r.det_same;
        }
        print_check(r);
        g_checks.push_back(r);
        all = all && r.pass;
        problem_destroy(P);
    }
    return all;
}

// ---- (c) timing -------------------------------------------------------------------------------
// The papers' grid: 16384 tokens per batch, hidden 2048 (heads = 2048 / d), seqlen 1k … 16k.
// CUDA events around the three kernels, 3 warm-up runs, the median of 25, a 256 MiB buffer
// cleared before each run so that the 60 MiB L2 holds nothing of the inputs.
static void bench_variant(const BwdVariant &v, void *flush, size_t flush_bytes)
{
    if (v.d != 64 && v.d != 128)
        return;
    for (int seqlen = 1024; seqlen <= 16384; seqlen *= 2) {
        const Shape s = {16384 / seqlen, 2048 / v.d, 2048 / v.d, seqlen, seqlen, BSHD, 1.f};
        Problem P;
        problem_create(P, s, v.d, v.causal, v.bf16);
        problem_prepare(P, 5, false);
        run_variant(v, P);
        HParams h = kernel_params(P, P.ws);
        const ft_launch_plan plan = plan_of(v, s);
        cudaEvent_t ev[3];
        for (cudaEvent_t &e : ev)
            CK(cudaEventCreate(&e));
        std::vector<float> total, main_only;
        for (int rep = 0; rep < 28; ++rep) {
            CK(cudaMemsetAsync(flush, rep & 0xff, flush_bytes, 0));
            ft_launch_plan pre = plan, rest = plan; // pre alone, then main and post
            pre.nsteps = 1;
            rest.nsteps = 2;
            memmove(rest.steps, plan.steps + 1, 2 * sizeof plan.steps[0]);
            CK(cudaEventRecord(ev[0], 0));
            launch(v, pre, h, 0);
            CK(cudaEventRecord(ev[1], 0));
            launch(v, rest, h, 0);
            CK(cudaEventRecord(ev[2], 0));
            CK(cudaEventSynchronize(ev[2]));
            float t_all = 0, t_pre = 0;
            CK(cudaEventElapsedTime(&t_all, ev[0], ev[2]));
            CK(cudaEventElapsedTime(&t_pre, ev[0], ev[1]));
            if (rep >= 3) {
                total.push_back(t_all);
                main_only.push_back(t_all - t_pre);
            }
        }
        for (cudaEvent_t &e : ev)
            CK(cudaEventDestroy(e));
        std::sort(total.begin(), total.end());
        std::sort(main_only.begin(), main_only.end());
        BenchResult b;
        b.variant = variant_name(v);
        b.seqlen = seqlen;
        b.batch = s.b;
        b.heads = s.hq;
        b.ms = total[total.size() / 2];
        b.main_ms = main_only[main_only.size() / 2];
        const double flops = 2.5 * 4.0 * s.b * s.hq * (double)seqlen * seqlen * v.d * (v.causal ? 0.5 : 1.0);
        b.tflops = flops / (b.ms * 1e-3) / 1e12;
        say("  seqlen %5d  b=%-2d h=%-2d  %8.3f ms (pre+main+post; main+post %8.3f)  %6.1f TFLOP/s\n", seqlen, s.b,
            s.hq, b.ms, b.main_ms, b.tflops);
        g_bench.push_back(b);
        problem_destroy(P);
    }
}

// ---- the JSON report ----------------------------------------------------------------------------
static void json_check(FILE *f, const CheckResult &r, bool last)
{
    fprintf(f, "    {\"variant\": \"%s\", \"shape\": \"%s\", \"pass\": %s, \"det_same\": %d", r.variant.c_str(),
            r.shape.c_str(), r.pass ? "true" : "false", r.det_same);
    for (int i = 0; i < 3; ++i)
        fprintf(f,
                ", \"%s\": {\"rel_l2\": %.4e, \"max_abs\": %.4e, \"worst\": %.4f, \"nonfinite\": %lld, \"bad\": %lld, "
                "\"nonzero_empty\": %lld}",
                GRAD[i], r.g[i].rel_l2, r.g[i].max_abs, r.g[i].worst, r.g[i].nonfinite, r.g[i].bad,
                r.g[i].nonzero_empty);
    fprintf(f, "}%s\n", last ? "" : ",");
}

static void write_json(const char *path, const char *device)
{
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        say("cannot write %s\n", path);
        return;
    }
    fprintf(f, "{\n  \"device\": \"%s\",\n  \"variants\": [\n", device);
    for (int i = 0; i < g_nvariants; ++i) {
        cudaFuncAttributes fa;
        CK(cudaFuncGetAttributes(&fa, g_variants[i]->main));
        fprintf(f,
                "    {\"name\": \"%s\", \"entry\": \"%s\", \"registers\": %d, \"local_bytes\": %zu, "
                "\"smem\": %lld}%s\n",
                variant_name(*g_variants[i]).c_str(), g_variants[i]->entry, fa.numRegs, (size_t)fa.localSizeBytes,
                g_variants[i]->smem, i + 1 < g_nvariants ? "," : "");
    }
    fprintf(f, "  ],\n  \"reference_checks\": [\n");
    for (size_t i = 0; i < g_ref_checks.size(); ++i)
        json_check(f, g_ref_checks[i], i + 1 == g_ref_checks.size());
    fprintf(f, "  ],\n  \"checks\": [\n");
    for (size_t i = 0; i < g_checks.size(); ++i)
        json_check(f, g_checks[i], i + 1 == g_checks.size());
    fprintf(f, "  ],\n  \"bench\": [\n");
    for (size_t i = 0; i < g_bench.size(); ++i) {
        const BenchResult &b = g_bench[i];
        fprintf(f,
                "    {\"variant\": \"%s\", \"seqlen\": %d, \"batch\": %d, \"heads\": %d, \"ms\": %.4f, "
                "\"main_ms\": %.4f, \"tflops\": %.2f}%s\n",
                b.variant.c_str(), b.seqlen, b.batch, b.heads, b.ms, b.main_ms, b.tflops,
                i + 1 < g_bench.size() ? "," : "");
    }
    fprintf(f, "  ]\n}\n");
    fclose(f);
}

// ---- main -----------------------------------------------------------------------------------------
int main(int argc, char **argv)
{
    bool bench = false, test = true, ref = true, append = false;
    const char *only = NULL, *out = getenv("OUT");
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--bench") == 0)
            bench = true;
        else if (strcmp(argv[i], "--no-test") == 0)
            test = false;
        else if (strcmp(argv[i], "--no-ref") == 0)
            ref = false;
        else if (strcmp(argv[i], "--log-append") == 0)
            append = true;
        else if (strcmp(argv[i], "--small") == 0)
            g_small = true;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--bench] [--no-test] [--no-ref] [--small] [--only SUBSTRING] [--out DIR] "
                    "[--log-append]\n",
                    argv[0]);
            return 2;
        }
    }
    if (out != NULL && *out != '\0') {
        std::string path = std::string(out) + "/bwd_log.txt";
        g_log = fopen(path.c_str(), append ? "a" : "w");
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    say("device: %s, compute capability %d.%d, %d SMs\n", prop.name, prop.major, prop.minor,
        prop.multiProcessorCount);
    CK(cudaFuncSetAttribute(ft_ref_attention, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)prop.sharedMemPerBlockOptin));
    std::sort(g_variants, g_variants + g_nvariants,
              [](const BwdVariant *a, const BwdVariant *b) { return strcmp(a->entry, b->entry) < 0; });

    int failures = 0, checks = 0;
    std::vector<const BwdVariant *> selected;
    for (int i = 0; i < g_nvariants; ++i) {
        const BwdVariant &v = *g_variants[i];
        if (v.params_size != sizeof(HParams) || v.params_reserved_offset != offsetof(HParams, reserved)) {
            say("%s: ft::BwdParams (%zu bytes) differs from the harness's mirror (%zu)\n", v.entry, v.params_size,
                sizeof(HParams));
            return 2;
        }
        if (only != NULL && strstr(variant_name(v).c_str(), only) == NULL && strstr(v.entry, only) == NULL)
            continue;
        CK(cudaFuncSetAttribute(v.main, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)v.smem));
        selected.push_back(&v);
    }
    say("%zu variants\n", selected.size());

    bool ref_ok = true;
    if (test) {
        if (ref)
            ref_ok = reference_checks();
        say("(b) variants against the GPU reference\n");
        for (const BwdVariant *v : selected)
            variant_checks(*v);
    }
    for (const CheckResult &r : g_checks) {
        checks++;
        failures += !r.pass;
    }
    if (bench) {
        say("(c) timing: b·s = 16384, hidden 2048, CUDA events, median of 25 after 3, L2 flushed\n");
        const size_t flush_bytes = 256u << 20;
        void *flush = dalloc(flush_bytes);
        for (const BwdVariant *v : selected) {
            if (v->d != 64 && v->d != 128)
                continue;
            say("%s\n", variant_name(*v).c_str());
            bench_variant(*v, flush, flush_bytes);
        }
        CK(cudaFree(flush));
    }

    // Summary last.
    say("\nsummary\n");
    if (test) {
        if (ref)
            say("  reference vs fp64 CPU: %s (%zu cases)\n", ref_ok ? "ok" : "FAILED", g_ref_checks.size());
        for (const BwdVariant *v : selected) {
            int n = 0, bad = 0;
            double worst[3] = {0, 0, 0};
            for (const CheckResult &r : g_checks)
                if (r.variant == variant_name(*v)) {
                    n++;
                    bad += !r.pass;
                    for (int i = 0; i < 3; ++i)
                        worst[i] = std::max(worst[i], r.g[i].worst);
                }
            say("  %-4s %s: %d/%d shapes; worst error/bound dq %.2f dk %.2f dv %.2f\n", bad ? "FAIL" : "ok",
                variant_name(*v).c_str(), n - bad, n, worst[0], worst[1], worst[2]);
        }
        say("  %d of %d variant checks failed\n", failures, checks);
    }
    if (bench) {
        for (const BwdVariant *v : selected) {
            double logsum = 0;
            int n = 0;
            for (const BenchResult &b : g_bench)
                if (b.variant == variant_name(*v)) {
                    logsum += log(b.tflops);
                    n++;
                }
            if (n > 0)
                say("  bench %s: geometric mean %.1f TFLOP/s over seqlen 1k..16k\n", variant_name(*v).c_str(),
                    exp(logsum / n));
        }
    }
    if (out != NULL && *out != '\0' && !append)
        write_json((std::string(out) + "/bwd_results.json").c_str(), prop.name);
    if (g_log)
        fclose(g_log);
    return failures == 0 && ref_ok ? 0 : 1;
}
