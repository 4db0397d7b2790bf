/*
 * What a tune measures: the plans, the targets (the specs' workloads, or the recorded misses),
 * the groups of targets that the same variants compute (compiled together, tuner/tune.c), and
 * one task per bucket and spec.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/sha256.h"
#include "common/text.h"
#include "generator/emit.h"
#include "generator/family.h"
#include "generator/variant.h"
#include "ops/problem.h"
#include "runtime/compile.h"
#include "runtime/defaults.h"
#include "runtime/verify.h"
#include "tuner/plan.h"
#include "tuner/internal.h"

/* ---- setup -------------------------------------------------------------------------------- */

ft_status ft__tuner_start_workers(tuner *tu, ft_err *err)
{
    ft_status rc;
    int i;

    tu->workers = calloc(64, sizeof *tu->workers);
    if (tu->workers == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    tu->workers[0].device = tu->o->device < 0 ? 0 : tu->o->device;
    tu->nworkers = 1;
    rc = ft__tuner_worker_boot(tu, &tu->workers[0], err);
    if (rc != FT_OK)
        return rc;
    tu->arch = tu->workers[0].arch;
    tu->dev = tu->workers[0].dev;
    if (tu->o->device >= 0)
        return FT_OK;
    for (i = 1; i < tu->workers[0].count && i < 64; i++) {
        const ft_db_device *d = &tu->workers[i].dev;
        tu->workers[i].device = i;
        tu->nworkers++;
        rc = ft__tuner_worker_boot(tu, &tu->workers[i], err);
        if (rc != FT_OK)
            return rc;
        if (!ft__db_device_same_model(d, &tu->dev) || !ft__db_device_same_driver(d, &tu->dev))
            return ft__fail(err, FT_ERR_UNSUPPORTED,
                            "--device all needs identical GPUs, but GPU 0 is %s and GPU %d is %s (driver %d vs %d); "
                            "tune each with --device N",
                            tu->dev.name, i, d->name, tu->dev.driver_version, d->driver_version);
    }
    return FT_OK;
}

static const char *param_value(const ft_spec *spec, const ft_variant *v, const char *name, char *buf, size_t cap)
{
    int i = ft__spec_param_index(spec, name);
    if (i < 0)
        return NULL;
    if (spec->params[i].kind == FT_PARAM_INT)
        snprintf(buf, cap, "%lld", spec->params[i].ints[v->idx[i]]);
    else
        snprintf(buf, cap, "%s", spec->params[i].strings[v->idx[i]]);
    return buf;
}

/* Whether variant v of spec computes target tg's bucket: its operation, and the head dim,
 * dtype, causality and determinism of the variant where it has them. A variant that packs a
 * group's query heads into a block's rows (pack=1) is left out of buckets of one query head per
 * K/V head, where it does its unpacked twin's work (the group's heads being one). */
static int computes(const ft_spec *spec, const ft_op *op, const ft_variant *v, const target *tg)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    const char *vd = param_value(spec, v, "d", b1, sizeof b1);
    const char *vdt = param_value(spec, v, "dtype", b2, sizeof b2);
    const char *vc = param_value(spec, v, "causal", b3, sizeof b3);
    const char *ve = param_value(spec, v, "det", b4, sizeof b4);
    const char *vp = param_value(spec, v, "pack", b5, sizeof b5);

    return op == tg->op && !(vd && atoi(vd) != tg->wl.d) && !(vdt && strcmp(vdt, tg->dtype) != 0) &&
           !(vc && atoi(vc) != tg->causal) && !(ve && atoi(ve) != tg->det) &&
           !(vp && atoi(vp) == 1 && tg->wl.hq == tg->wl.hkv);
}

typedef struct needed_ctx {
    const ft_spec *spec;
    const ft_op *op;
    const target_list *l;
} needed_ctx;

static int needed(const ft_plan_item *it, void *ud)
{
    const needed_ctx *c = ud;
    int i;

    for (i = 0; i < c->l->n; i++)
        if (computes(c->spec, c->op, &it->variant, &c->l->v[i]))
            return 1;
    return 0;
}

static ft_status add_task(tuner *tu, int s, int g, int kfrom, const target *tg, ft_err *err);
static double task_size(const task *t);

/* Plans every spec for the GPU: its space pruned, the variants that no bucket of the tune
 * measures left out (a head dim, dtype or causality that none of tu->targets has is not
 * compiled); nothing compiled yet (the groups are, ft__tuner_make_groups). */
ft_status ft__tuner_plan_all(tuner *tu, ft_variant *filter, unsigned *masks, ft_err *err)
{
    ft_status rc = FT_OK;
    long long total = 0;
    int s;

    tu->plans = calloc((size_t)tu->nspecs, sizeof *tu->plans);
    if (tu->plans == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (s = 0; s < tu->nspecs && rc == FT_OK; s++) {
        ft_plan *plan;
        char th[65];
        const ft_family *fam = ft__family_find(tu->specs[s]->template_name);
        needed_ctx nc;
        rc = ft__plan_build_kept(tu->specs[s], &tu->arch, &filter[s], masks[s], &tu->plans[s], err);
        if (rc != FT_OK)
            break;
        plan = tu->plans[s];
        nc.spec = tu->specs[s], nc.op = fam != NULL ? fam->op : NULL, nc.l = &tu->targets[s];
        ft__plan_leave_out(plan, needed, &nc);
        ft__family_hash(plan->family, th);
        rc = ft__db_set_current(tu->db, tu->dev.driver_version, tu->dev.nvrtc_version, plan->family->name, th, err);
        tu->sum->pruned += plan->count[FT_PLAN_PRUNED];
        tu->sum->variants += plan->count[FT_PLAN_PENDING]; /* neither pruned nor left out */
        tu->to_compile += plan->count[FT_PLAN_PENDING];
        total += plan->nitems;
    }
    if (rc != FT_OK)
        return rc;
    tu->kernels = calloc((size_t)total + 1, sizeof *tu->kernels);
    if (tu->kernels == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    return FT_OK;
}

/* Whether two targets are computed by the same variants: operation, head dim, dtype, causality
 * and determinism (what computes() looks at). */
static int same_group(const target *a, const target *b)
{
    return a->op == b->op && a->wl.d == b->wl.d && strcmp(a->dtype, b->dtype) == 0 && a->causal == b->causal &&
           a->det == b->det;
}

/* A group's place among its spec's groups: where its head dim first appears among the spec's
 * targets, its determinism, where its dtype first appears, its causality. In this order every
 * group of a head dim but the first has a twin (tuner/tune.h) before it, measured two or more
 * groups before it except for the first causal one, which waits for it (ft__tuner_await_twin). */
static void group_place(const tuner *tu, const group *g, int out[4])
{
    const target_list *l = &tu->targets[g->spec];
    const target *x = &l->v[g->targets[0]];
    int i;

    out[0] = out[2] = l->n;
    for (i = 0; i < l->n; i++) {
        if (l->v[i].wl.d == x->wl.d && i < out[0])
            out[0] = i;
        if (strcmp(l->v[i].dtype, x->dtype) == 0 && i < out[2])
            out[2] = i;
    }
    out[1] = x->det;
    out[3] = x->causal;
}

/* Sorts the groups from first on by their places (insertion sort, stable). */
static void order_groups(tuner *tu, int first)
{
    int i, j, k;

    for (i = first + 1; i < tu->ngroups; i++) {
        const group x = tu->groups[i];
        int px[4], pj[4];
        group_place(tu, &x, px);
        for (j = i; j > first; j--) {
            group_place(tu, &tu->groups[j - 1], pj);
            for (k = 0; k < 4 && pj[k] == px[k]; k++)
                ;
            if (k == 4 || pj[k] < px[k])
                break;
            tu->groups[j] = tu->groups[j - 1];
        }
        tu->groups[j] = x;
    }
}

/* Each spec's targets in groups of the same variants, in the order of the targets, and each
 * pending item of the plans in the first group that measures it. */
ft_status ft__tuner_make_groups(tuner *tu, ft_err *err)
{
    int s, ntargets = 0;

    for (s = 0; s < tu->nspecs; s++)
        ntargets += tu->targets[s].n;
    tu->groups = calloc((size_t)ntargets + 1, sizeof *tu->groups); /* a group has a target at least */
    if (tu->groups == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (s = 0; s < tu->nspecs; s++) {
        const target_list *l = &tu->targets[s];
        const ft_plan *plan = tu->plans[s];
        const ft_family *fam = ft__family_find(tu->specs[s]->template_name);
        const int first = tu->ngroups;
        int *owner = malloc(((size_t)plan->nitems + 1) * sizeof *owner); /* per item: its group, or -1 */
        int i, g;

        if (owner == NULL)
            return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        for (i = 0; i < l->n; i++) {
            for (g = first; g < tu->ngroups; g++)
                if (same_group(&l->v[tu->groups[g].targets[0]], &l->v[i]))
                    break;
            if (g == tu->ngroups) {
                tu->groups[g].spec = s;
                tu->groups[g].targets = malloc((size_t)l->n * sizeof *tu->groups[g].targets);
                if (tu->groups[g].targets == NULL) {
                    free(owner);
                    return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
                }
                tu->ngroups++;
            }
            tu->groups[g].targets[tu->groups[g].ntargets++] = i;
        }
        order_groups(tu, first);
        for (i = 0; i < plan->nitems; i++) {
            owner[i] = -1;
            if (fam == NULL || plan->items[i].status != FT_PLAN_PENDING)
                continue;
            for (g = first; g < tu->ngroups && owner[i] < 0; g++) {
                const group *gr = &tu->groups[g];
                int t;
                for (t = 0; t < gr->ntargets && owner[i] < 0; t++)
                    if (computes(tu->specs[s], fam->op, &plan->items[i].variant, &l->v[gr->targets[t]]))
                        owner[i] = g;
            }
            if (owner[i] >= 0)
                tu->groups[owner[i]].nitems++;
        }
        for (g = first; g < tu->ngroups; g++) {
            tu->groups[g].items = malloc(((size_t)tu->groups[g].nitems + 1) * sizeof *tu->groups[g].items);
            if (tu->groups[g].items == NULL) {
                free(owner);
                return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
            }
            tu->groups[g].nitems = 0;
        }
        for (i = 0; i < plan->nitems; i++)
            if (owner[i] >= 0)
                tu->groups[owner[i]].items[tu->groups[owner[i]].nitems++] = i;
        free(owner);
    }
    return FT_OK;
}

/* Group g's compiled variants from item `from` on into the kernel table and the database, then
 * one task per target of the group (appended to tu->tasks: each measures the group's kernels
 * that have no result for its bucket yet); for the ranked search the smallest bucket first,
 * then the largest, then the others from small to large (ft__tuner_seed_task), except in a
 * refinement, whose tasks measure all they have. */
ft_status ft__tuner_group_tasks(tuner *tu, int g, int from, ft_err *err)
{
    const group *gr = &tu->groups[g];
    ft_plan *plan = tu->plans[gr->spec];
    const int first = tu->ntasks, kfrom = tu->nkernels;
    ft_status rc = FT_OK;
    char th[65];
    int i, j;

    ft__family_hash(plan->family, th);
    for (i = from; i < gr->nitems && rc == FT_OK; i++) {
        ft_plan_item *it = &plan->items[gr->items[i]];
        kernel_ref *kr = &tu->kernels[tu->nkernels];
        ft_db_kernel dk;
        if (it->status == FT_PLAN_PENDING || it->status == FT_PLAN_PRUNED || it->status == FT_PLAN_NOT_SAMPLED)
            continue; /* pending: its compilation was interrupted */
        ft__tuner_kernel_row(plan, it, th, &dk);
        kr->spec = gr->spec;
        kr->item = gr->items[i];
        rc = ft__db_kernel_id(tu->db, &dk, &kr->kernel_id, err);
        tu->nkernels++;
    }
    for (i = 0; i < gr->ntargets && rc == FT_OK; i++)
        rc = add_task(tu, gr->spec, g, kfrom, &tu->targets[gr->spec].v[gr->targets[i]], err);
    if (rc != FT_OK || tu->o->search != FT_SEARCH_RANKED)
        return rc;
    if (from > 0) { /* a refinement: every bucket measures the new variants */
        for (i = first; i < tu->ntasks; i++)
            tu->tasks[i].seeded = 1;
        return FT_OK;
    }
    for (i = first; i < tu->ntasks && rc == FT_OK; i++) /* measured before: ranked by what was */
        if (tu->tasks[i].njobs == 0)
            rc = ft__tuner_rank_task(tu, &tu->tasks[i], gr->spec, err);
    if (rc != FT_OK)
        return rc;
    for (i = first + 1; i < tu->ntasks; i++) /* by size, then the largest to the second place */
        for (j = i; j > first && task_size(&tu->tasks[j - 1]) > task_size(&tu->tasks[j]); j--) {
            task x = tu->tasks[j];
            tu->tasks[j] = tu->tasks[j - 1], tu->tasks[j - 1] = x;
        }
    for (i = tu->ntasks - 1; i > first + 1; i--) {
        task x = tu->tasks[i];
        tu->tasks[i] = tu->tasks[i - 1], tu->tasks[i - 1] = x;
    }
    return FT_OK;
}

static ft_status target_add(target_list *l, const ft_op *op, const ft_workload *wl, const char *dtype, int causal,
                            int det, ft_err *err)
{
    if (l->n == l->cap) {
        target *nv = realloc(l->v, (size_t)(l->cap = l->cap ? 2 * l->cap : 64) * sizeof *nv);
        if (nv == NULL)
            return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        l->v = nv;
    }
    l->v[l->n].op = op;
    l->v[l->n].wl = *wl;
    l->v[l->n].det = det;
    snprintf(l->v[l->n].dtype, sizeof l->v[l->n].dtype, "%s", dtype);
    l->v[l->n].causal = causal;
    l->n++;
    return FT_OK;
}

/* The key of a target's calls. */
static void target_key(const target *t, ft_key *out)
{
    ft_problem p;

    memset(&p, 0, sizeof p);
    p.batch = t->wl.b, p.heads_q = t->wl.hq, p.heads_kv = t->wl.hkv;
    p.seqlen_q = t->wl.sq, p.seqlen_k = t->wl.sk, p.head_dim = t->wl.d;
    p.causal = t->causal;
    p.bf16 = strcmp(t->dtype, "bf16") == 0;
    p.deterministic = t->det;
    t->op->key(&p, out);
}

static void workload_problem(const ft_workload *wl, ft_problem *p)
{
    memset(p, 0, sizeof *p);
    p->batch = wl->b, p->heads_q = wl->hq, p->heads_kv = wl->hkv;
    p->seqlen_q = wl->sq, p->seqlen_k = wl->sk, p->head_dim = wl->d;
}

/* Workload wl crossed with spec's dtypes, causal and det values (where it has them), into l. */
static ft_status add_crossed(const ft_spec *spec, const ft_op *op, const ft_workload *wl, target_list *l, ft_err *err)
{
    const int di = ft__spec_param_index(spec, "dtype"), ci = ft__spec_param_index(spec, "causal");
    const int ei = ft__spec_param_index(spec, "det");
    const int ndt = di >= 0 ? spec->params[di].nvalues : 1, nc = ci >= 0 ? spec->params[ci].nvalues : 1;
    const int ne = ei >= 0 ? spec->params[ei].nvalues : 1;
    ft_status rc = FT_OK;
    int dt, c, e;

    for (dt = 0; dt < ndt && rc == FT_OK; dt++)
        for (c = 0; c < nc && rc == FT_OK; c++)
            for (e = 0; e < ne && rc == FT_OK; e++)
                rc = target_add(l, op, wl, di >= 0 ? spec->params[di].strings[dt] : "f16",
                                ci >= 0 ? (int)spec->params[ci].ints[c] : 0, ei >= 0 ? (int)spec->params[ei].ints[e] : 0,
                                err);
    return rc;
}

/* The spec's workloads crossed with its dtypes, causal values and (the backward's) det values,
 * buckets of the operation its family computes; a workload the tuner cannot set up is an error
 * naming the spec. only: the tune's filter (--only), or NULL. */
static ft_status spec_targets(const ft_spec *spec, const char *only, target_list *l, ft_err *err)
{
    const int hi = ft__spec_param_index(spec, "d");
    const ft_family *fam = ft__spec_family(spec, err);
    ft_variant f;
    unsigned mask = 0;
    ft_err ferr;
    ft_status rc = FT_OK;
    int w;

    if (fam == NULL)
        return FT_ERR_SPEC;

    for (w = 0; w < spec->nworkloads && rc == FT_OK; w++) {
        ft_problem p;
        char shape[128];
        workload_problem(&spec->workloads[w], &p);
        rc = ft__tune_check_shape(&p, err);
        if (rc != FT_OK) {
            ft__problem_format(&p, shape, sizeof shape);
            ft__err_prefix(err, "%s: workloads[%d] (%s)", spec->path, w + 1, shape);
            break;
        }
    }
    for (w = 0; w < spec->nworkloads && rc == FT_OK; w++)
        rc = add_crossed(spec, fam->op, &spec->workloads[w], l, err);
    /* A head dim that the filter asks for (--only d=80) and no workload has: the workloads of
     * the nearest head dim they have, above it where there is one. */
    if (rc == FT_OK && hi >= 0 && only != NULL && ft__variant_filter_parse(spec, only, &f, &mask, &ferr) == FT_OK &&
        (mask & (1u << hi))) {
        const int want = (int)spec->params[hi].ints[f.idx[hi]];
        int above = -1, below = -1, has = 0, base;
        for (w = 0; w < spec->nworkloads; w++) {
            const int d = spec->workloads[w].d;
            has |= d == want;
            if (d > want && (above < 0 || d < above))
                above = d;
            if (d < want && d > below)
                below = d;
        }
        base = has ? -1 : above >= 0 ? above : below;
        for (w = 0; w < spec->nworkloads && base >= 0 && rc == FT_OK; w++) {
            ft_workload wl = spec->workloads[w];
            if (wl.d != base)
                continue;
            wl.d = want;
            rc = add_crossed(spec, fam->op, &wl, l, err);
        }
    }
    return rc;
}

typedef struct miss_collect {
    tuner *tu;
    target_list *l;
    ft_status rc;
    ft_err *err;
} miss_collect;

/* Whether spec's open d keeps a variant of head dim d on the tune's GPU once d joins it (it
 * joins, kept or not: a pruned value is compiled by nobody). */
static int open_head_dim(const tuner *tu, ft_spec *spec, int di, int d)
{
    ft_variant v;
    ft_err err;
    long long n;
    char why[256];
    int keep = 0;

    if (ft__spec_add_value(spec, di, d, &err) != FT_OK)
        return 0;
    for (n = 0; n < spec->nvariants && !keep; n++) {
        ft__variant_nth(spec, n, &v);
        if (spec->params[di].ints[v.idx[di]] == d && ft__spec_check(spec, &v, &tu->arch, &keep, why, sizeof why, &err) != FT_OK)
            return 0;
    }
    return keep;
}

/* Whether some spec of the tune has a variant of head dim d (or no head dim parameter): one its
 * d lists, or an open d whose constraints keep one (the value joins the list, for the tune to
 * compile its variants). An open d of a spec of another operation than op is left alone. */
static int spec_has_head_dim(const tuner *tu, const ft_op *op, int d)
{
    int s, any = 0;

    for (s = 0; s < tu->nspecs; s++) {
        ft_spec *spec = tu->specs[s];
        const ft_family *fam = ft__family_find(spec->template_name);
        int di = ft__spec_param_index(spec, "d"), has;
        if (di < 0 || spec->params[di].kind != FT_PARAM_INT)
            return 1;
        has = ft__param_has_int(&spec->params[di], d);
        if (!has && spec->params[di].open && fam != NULL && fam->op == op)
            has = open_head_dim(tu, spec, di, d);
        any |= has;
    }
    return any;
}

/* A recorded miss is used only if its shape passes the checks a call's arguments pass (and
 * ft__tune_check_shape), lies in its recorded bucket, and some spec has its head dim. The
 * database is not trusted: anything could have written it. */
static ft_status check_miss(const tuner *tu, const ft_db_miss *m, ft_err *err)
{
    ft_problem p;
    ft_key k;
    ft_status rc;
    long long causal = ft__key_get(&m->key, "causal", -1), det = ft__key_get(&m->key, "det", 0);
    char recorded[96], own[96];

    if (m->key.op == NULL)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "no operation");
    memset(&p, 0, sizeof p);
    p.batch = m->batch, p.heads_q = m->heads_q, p.heads_kv = m->heads_kv;
    p.seqlen_q = m->seqlen_q, p.seqlen_k = m->seqlen_k, p.head_dim = (int)ft__key_get(&m->key, "d", 0);
    if (strcmp(m->key.dtype, "f16") != 0 && strcmp(m->key.dtype, "bf16") != 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the dtype is neither f16 nor bf16");
    if (causal != 0 && causal != 1)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "causal is %lld, not 0 or 1", causal);
    if (det != 0 && det != 1)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "det is %lld, not 0 or 1", det);
    p.causal = (int)causal;
    p.deterministic = (int)det;
    p.bf16 = strcmp(m->key.dtype, "bf16") == 0;
    rc = ft__tune_check_shape(&p, err);
    if (rc != FT_OK)
        return rc;
    m->key.op->key(&p, &k);
    if (!ft__key_equal(&k, &m->key)) {
        ft__key_describe(&m->key, recorded, sizeof recorded);
        ft__key_describe(&k, own, sizeof own);
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the shape is not in the recorded bucket (%s) but in %s",
                        recorded, own);
    }
    if (!spec_has_head_dim(tu, m->key.op, p.head_dim))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "no spec has kernels of head dim %d", p.head_dim);
    return FT_OK;
}

/* A miss of this GPU model (any driver or NVRTC version), once per bucket: the shape of the
 * first call that missed. An invalid one is reported and skipped. */
static int collect_miss(void *ud, const ft_db_miss *m)
{
    miss_collect *mc = ud;
    ft_workload wl;
    ft_err why;
    int i;

    if (!ft__db_device_same_model(&m->device, &mc->tu->dev))
        return 0;
    if (check_miss(mc->tu, m, &why) != FT_OK) {
        char dtype[40];
        ft__printable_str(dtype, sizeof dtype, m->key.dtype);
        fprintf(stderr,
                "flashtune tune: skipping the recorded miss %s d=%lld causal=%lld b=%d,hq=%d,hkv=%d,sq=%d,sk=%d "
                "(driver %d): %s\n",
                dtype, ft__key_get(&m->key, "d", 0), ft__key_get(&m->key, "causal", 0), m->batch, m->heads_q,
                m->heads_kv, m->seqlen_q,
                m->seqlen_k, m->device.driver_version, why.msg);
        mc->tu->sum->misses_invalid++;
        return 0;
    }
    for (i = 0; i < mc->l->n; i++) {
        ft_key k;
        target_key(&mc->l->v[i], &k);
        if (ft__key_equal(&k, &m->key))
            return 0;
    }
    wl.b = m->batch, wl.hq = m->heads_q, wl.hkv = m->heads_kv;
    wl.sq = m->seqlen_q, wl.sk = m->seqlen_k, wl.d = (int)ft__key_get(&m->key, "d", 0);
    mc->rc = target_add(mc->l, m->key.op, &wl, m->key.dtype, (int)ft__key_get(&m->key, "causal", 0),
                        (int)ft__key_get(&m->key, "det", 0), mc->err);
    return mc->rc != FT_OK;
}

/* One task for a target and a spec, with the spec's matching compiled variants from kernel
 * kfrom on (the group's); variants that did not compile or fit are recorded as such for the
 * bucket right away. */
static ft_status add_task(tuner *tu, int s, int g, int kfrom, const target *tg, ft_err *err)
{
    const ft_workload *wl = &tg->wl;
    const char *dtype = tg->dtype;
    const int causal = tg->causal;
    const ft_family *fam = ft__family_find(tu->specs[s]->template_name);
    const int screening = tu->o->search != FT_SEARCH_EXHAUSTIVE;
    ft_status rc = FT_OK;
    task *t;
    int k, matched = 0;

    if (fam == NULL || fam->op != tg->op)
        return FT_OK; /* the spec's kernels compute another operation */

    if (tu->ntasks == tu->tasks_cap) {
        task *nt = realloc(tu->tasks, (size_t)(tu->tasks_cap = tu->tasks_cap ? 2 * tu->tasks_cap : 64) * sizeof *nt);
        if (nt == NULL)
            return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        tu->tasks = nt;
    }
    t = &tu->tasks[tu->ntasks];
    memset(t, 0, sizeof *t);
    t->shape.batch = wl->b, t->shape.heads_q = wl->hq, t->shape.heads_kv = wl->hkv;
    t->shape.seqlen_q = wl->sq, t->shape.seqlen_k = wl->sk, t->shape.head_dim = wl->d;
    t->shape.causal = causal;
    t->shape.bf16 = strcmp(dtype, "bf16") == 0;
    t->shape.deterministic = tg->det;
    tg->op->key(&t->shape, &t->key);
    t->has_nb = !tu->o->one_shape && ft__tuner_neighbour_shape(&t->shape, &t->key, &t->nb);
    t->redo = -1;
    t->group = g;
    t->jobs = calloc((size_t)tu->nkernels + 1, sizeof *t->jobs);
    t->retried = calloc((size_t)tu->nkernels + 1, 1);
    t->screen = screening ? malloc(((size_t)tu->nkernels + 1) * sizeof *t->screen) : NULL;
    if (t->jobs == NULL || t->retried == NULL || (screening && t->screen == NULL)) {
        free(t->jobs);
        free(t->retried);
        free(t->screen);
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (k = 0; t->screen != NULL && k <= tu->nkernels; k++)
        t->screen[k] = NAN;
    for (k = kfrom; k < tu->nkernels && rc == FT_OK; k++) {
        const kernel_ref *kr = &tu->kernels[k];
        const ft_plan_item *it = &tu->plans[kr->spec]->items[kr->item];
        int has = 0;
        if (kr->spec != s || !computes(tu->specs[s], fam->op, &it->variant, tg))
            continue;
        matched = 1;
        if (!tu->o->remeasure)
            rc = ft__db_has_result(tu->db, tu->device_id, kr->kernel_id, &t->key, &has, err);
        if (rc != FT_OK)
            break;
        if (has) {
            tu->sum->resumed++;
            continue;
        }
        if (it->status == FT_PLAN_COMPILED) {
            t->jobs[t->njobs++] = k;
        } else {
            ft_db_result r;
            ft__tuner_fill_result(tu, t, kr,
                        it->status == FT_PLAN_COMPILE_ERROR ? FT_RESULT_COMPILE_ERROR : FT_RESULT_OVER_LIMITS,
                        it->reason, &r);
            rc = ft__tuner_record(tu, &r, err);
            tu->sum->measured++;
        }
    }
    if (rc != FT_OK || (t->njobs == 0 && !matched)) {
        free(t->jobs); /* on success: no variant computes this bucket */
        free(t->retried);
        free(t->screen);
        return rc;
    }
    tu->planned += t->njobs;
    tu->ntasks++;
    return FT_OK;
}

/* The buckets the runtime library recorded as misses on this GPU model. */
ft_status ft__tuner_miss_targets(tuner *tu, target_list *l, ft_err *err)
{
    miss_collect mc = {tu, l, FT_OK, err};
    ft_status rc = ft__db_misses(tu->db, NULL, -1, collect_miss, &mc, err);

    if (rc == FT_OK)
        rc = mc.rc;
    tu->sum->misses = l->n;
    return rc;
}

/* One task per bucket and spec: the spec's workloads crossed with its dtypes and causal
 * values, or the given targets (misses) when there are any. */
ft_status ft__tuner_targets(tuner *tu, const target_list *misses, ft_err *err)
{
    ft_status rc = FT_OK;
    int s, i;

    tu->targets = calloc((size_t)tu->nspecs, sizeof *tu->targets);
    if (tu->targets == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (s = 0; s < tu->nspecs && rc == FT_OK; s++) {
        if (misses->n == 0)
            rc = spec_targets(tu->specs[s], tu->o->only, &tu->targets[s], err);
        for (i = 0; i < misses->n && rc == FT_OK; i++)
            rc = target_add(&tu->targets[s], misses->v[i].op, &misses->v[i].wl, misses->v[i].dtype,
                            misses->v[i].causal, misses->v[i].det, err);
    }
    return rc;
}

/* The worker program (worker_cmd, else this executable) and the compile cache it shares. */

/* ---- the ranked search ---------------------------------------------------------------------- */

/* Parameters that a group fixes: not steps of the ranking's distance. */
static int group_param(const char *name)
{
    return strcmp(name, "d") == 0 || strcmp(name, "dtype") == 0 || strcmp(name, "causal") == 0 ||
           strcmp(name, "det") == 0;
}

/* The position of value x among integer parameter p's values in ascending order. */
static int int_rank(const ft_param *p, long long x)
{
    int i, r = 0;
    for (i = 0; i < p->nvalues; i++)
        r += p->ints[i] < x;
    return r;
}

/* Steps between two variants in the parameters a group does not fix: for an integer parameter
 * how many values apart they are in ascending order, for a string one 1 when they differ. */
int ft__tuner_steps(const ft_spec *spec, const ft_variant *a, const ft_variant *b)
{
    int i, n = 0;
    for (i = 0; i < spec->nparams; i++) {
        const ft_param *p = &spec->params[i];
        if (group_param(p->name) || a->idx[i] == b->idx[i])
            continue;
        n += p->kind == FT_PARAM_INT ? abs(int_rank(p, p->ints[a->idx[i]]) - int_rank(p, p->ints[b->idx[i]])) : 1;
    }
    return n;
}

/* The parameters whose value differs among group g's items (bit i: spec parameter i): what
 * its variants choose rather than what the group fixes (with causal = 0 a spec may keep only
 * one value of a knob that matters for causal calls). */
static unsigned varied(const tuner *tu, const group *g)
{
    const ft_spec *spec = tu->specs[g->spec];
    const ft_plan *plan = tu->plans[g->spec];
    const int n = g->nall > 0 ? g->nall : g->nitems;
    unsigned mask = 0;
    int i, j;

    for (i = 0; i < spec->nparams; i++)
        for (j = 1; j < n && !(mask & (1u << i)); j++)
            if (plan->items[g->items[j]].variant.idx[i] != plan->items[g->items[0]].variant.idx[i])
                mask |= 1u << i;
    return mask;
}

/* Whether variant a of a group and b of its twin group are the same kernel but for what the
 * groups fix (dtype, determinism, causality) and the parameters only one of them varies
 * (both: their varied masks). */
static int twins(const ft_spec *spec, const ft_variant *a, const ft_variant *b, unsigned both)
{
    int i;
    for (i = 0; i < spec->nparams; i++)
        if (a->idx[i] != b->idx[i] && (both & (1u << i)) && !group_param(spec->params[i].name))
            return 0;
    return 1;
}

/* The built-in defaults of target tg's family as the runtime would try them for its bucket
 * (ft__default_order), completed for tg and parsed as spec's variants, those of its
 * determinism. Returns how many (at most FT_DEFAULTS_MAX). */
static int group_defaults(const ft_spec *spec, const ft_family *fam, const target *tg, ft_variant *out)
{
    const ft_default_kernel *e[FT_DEFAULTS_MAX];
    const int ei = ft__spec_param_index(spec, "det");
    ft_key key;
    size_t n, i;
    int k = 0;

    target_key(tg, &key);
    n = ft__default_order(&key, FT_NEEDS_DENSE, e, FT_DEFAULTS_MAX);
    for (i = 0; i < n; i++) {
        char text[512];
        ft_err ignored;
        if (strcmp(e[i]->family, fam->name) != 0 ||
            ft__default_complete(spec, e[i]->variant, tg->wl.d, tg->causal, tg->det, tg->dtype, text, sizeof text) >=
                sizeof text ||
            ft__variant_parse(spec, text, &out[k], &ignored) != FT_OK ||
            (ei >= 0 && spec->params[ei].ints[out[k].idx[ei]] != tg->det))
            continue;
        k++;
    }
    return k;
}

int ft__tuner_task_defaults(const tuner *tu, const task *t, char (*out)[512], int cap)
{
    const group *gr = &tu->groups[t->group];
    const ft_spec *spec = tu->specs[gr->spec];
    ft_variant defs[FT_DEFAULTS_MAX];
    const int n = group_defaults(spec, tu->plans[gr->spec]->family, &tu->targets[gr->spec].v[gr->targets[0]], defs);
    int i, k = 0;

    for (i = 0; i < n && k < cap; i++)
        if (ft__variant_format(spec, &defs[i], out[k], sizeof out[k]) < sizeof out[k])
            k++;
    return k;
}

/* Group g's first target: what the group fixes (head dim, dtype, causality, determinism). */
static const target *group_target(const tuner *tu, int g)
{
    return &tu->targets[tu->groups[g].spec].v[tu->groups[g].targets[0]];
}

/* Whether groups a and b are twins: of one spec and head dim, differing in exactly one of the
 * dtype, the determinism and the causality. */
static int twin_groups(const tuner *tu, int a, int b)
{
    const target *x = group_target(tu, a), *y = group_target(tu, b);
    return a != b && tu->groups[a].spec == tu->groups[b].spec && x->wl.d == y->wl.d &&
           (strcmp(x->dtype, y->dtype) != 0) + (x->det != y->det) + (x->causal != y->causal) == 1;
}

int ft__tuner_await_twin(const tuner *tu, int n, int g)
{
    int t;

    if (tu->o->search != FT_SEARCH_RANKED || !twin_groups(tu, n, g))
        return 0;
    for (t = 0; t < tu->ntasks; t++) /* a twin measured before (a --only filter may leave none) */
        if (tu->tasks[t].ranked != NULL && tu->tasks[t].group != g && twin_groups(tu, n, tu->tasks[t].group))
            return 0;
    return 1;
}

int ft__tuner_independent_after(const tuner *tu, int g, int compiled)
{
    int a, b;

    if (tu->o->search != FT_SEARCH_RANKED)
        return -1;
    for (a = g + 1; a < tu->ngroups; a++) {
        if (tu->groups[a].nitems == 0 || tu->groups[a].compiled != compiled || tu->groups[a].measured)
            continue;
        for (b = 0; b < a && !twin_groups(tu, a, b); b++)
            ;
        if (b == a)
            return a;
    }
    return -1;
}

int ft__tuner_twin_unsettled(const tuner *tu, int n, int g)
{
    int t;

    if (tu->o->search != FT_SEARCH_RANKED)
        return 0;
    for (t = g + 1; t < n; t++)
        if (twin_groups(tu, n, t))
            return 1;
    return 0;
}

/* The prior's candidates: items[0, n) ordered by steps to the defaults become, in their first
 * `keep` places, the nearer half as they are, then each time the item farthest in steps from
 * those chosen so far (of equals the first, the nearer to the defaults); the others keep their
 * order after them. */
static ft_status spread(const ft_spec *spec, const ft_plan *plan, int *items, int n, int keep, ft_err *err)
{
    int *apart = malloc(((size_t)n + 1) * sizeof *apart); /* per item: steps to the nearest chosen */
    const int half = (keep + 1) / 2;
    int i, j, k;

    if (apart == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = half; i < n; i++) {
        apart[i] = INT_MAX;
        for (j = 0; j < half; j++) {
            const int st = ft__tuner_steps(spec, &plan->items[items[i]].variant, &plan->items[items[j]].variant);
            apart[i] = st < apart[i] ? st : apart[i];
        }
    }
    for (k = half; k < keep; k++) {
        int far = k, item, a;
        for (i = k + 1; i < n; i++)
            if (apart[i] > apart[far])
                far = i;
        item = items[far], a = apart[far]; /* to place k, the ones between moved up one */
        memmove(items + k + 1, items + k, (size_t)(far - k) * sizeof *items);
        memmove(apart + k + 1, apart + k, (size_t)(far - k) * sizeof *apart);
        items[k] = item, apart[k] = a;
        for (i = k + 1; i < n; i++) {
            const int st = ft__tuner_steps(spec, &plan->items[items[i]].variant, &plan->items[item].variant);
            apart[i] = st < apart[i] ? st : apart[i];
        }
    }
    free(apart);
    return FT_OK;
}

ft_status ft__tuner_rank_group(tuner *tu, int g, ft_err *err)
{
    group *gr = &tu->groups[g];
    const ft_spec *spec = tu->specs[gr->spec];
    const ft_plan *plan = tu->plans[gr->spec];
    const target *tg = &tu->targets[gr->spec].v[gr->targets[0]];
    ft_variant defs[FT_DEFAULTS_MAX];
    const int ndefs = group_defaults(spec, plan->family, tg, defs);
    const int n = gr->nitems;
    int *dist = malloc(((size_t)n + 1) * sizeof *dist), *hit = calloc((size_t)n + 1, sizeof *hit);
    int i, j, k, t, informed = 0, keep = 0, alike = 0;
    unsigned own = 0; /* the parameters this group varies */
    ft_status rc = FT_OK;

    if (dist == NULL || hit == NULL) {
        free(dist);
        free(hit);
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (i = 0; i < n; i++) { /* the prior: steps to the nearest default (0 without defaults) */
        const ft_variant *v = &plan->items[gr->items[i]].variant;
        dist[i] = ndefs > 0 ? INT_MAX : 0;
        for (j = 0; j < ndefs; j++) {
            const int s = ft__tuner_steps(spec, v, &defs[j]);
            dist[i] = s < dist[i] ? s : dist[i];
        }
    }
    /* what a measured twin group says: its variants among the fastest of one of its buckets */
    for (t = 0; t < tu->ntasks; t++) {
        const task *tw = &tu->tasks[t];
        unsigned both;
        if (tw->ranked == NULL || !twin_groups(tu, g, tw->group))
            continue;
        if (!informed)
            own = varied(tu, gr);
        informed = 1;
        alike |= group_target(tu, tw->group)->causal == tg->causal;
        both = own & varied(tu, &tu->groups[tw->group]);
        for (k = 0; k < tw->nranked && k < FT_TUNE_RANK_TWIN; k++) {
            const kernel_ref *kr = &tu->kernels[tw->ranked[k]];
            for (i = 0; i < n; i++)
                if (twins(spec, &plan->items[gr->items[i]].variant, &plan->items[kr->item].variant, both) &&
                    (hit[i] == 0 || k + 1 < hit[i]))
                    hit[i] = k + 1; /* its best place among a twin bucket's fastest, from 1 */
        }
    }
    for (i = 0; informed && i < n; i++) /* then the defaults, then the others */
        hit[i] = hit[i] > 0 ? hit[i] : dist[i] == 0 ? FT_TUNE_RANK_TWIN + 1 : INT_MAX;
    /* order: (when informed) by best place among the twin's fastest, the defaults after them, then
     * by steps, then as planned; insertion sort, stable */
    for (i = 1; i < n; i++) {
        const int item = gr->items[i], di = dist[i], hi = hit[i];
        for (j = i; j > 0; j--) {
            if (hit[j - 1] < hi || (hit[j - 1] == hi && dist[j - 1] <= di))
                break;
            gr->items[j] = gr->items[j - 1], dist[j] = dist[j - 1], hit[j] = hit[j - 1];
        }
        gr->items[j] = item, dist[j] = di, hit[j] = hi;
    }
    if (informed) { /* the twin's fast ones and the defaults: FT_TUNE_RANK_NEXT to FT_TUNE_RANK_FIRST;
                       with a twin of its causality only its fast ones, which its buckets take */
        while (keep < n && hit[keep] <= (alike ? FT_TUNE_RANK_TWIN : FT_TUNE_RANK_TWIN + 1))
            keep++;
        keep = keep > FT_TUNE_RANK_NEXT || (alike && keep > 0) ? keep : FT_TUNE_RANK_NEXT;
        keep = keep < FT_TUNE_RANK_FIRST ? keep : FT_TUNE_RANK_FIRST;
        keep = keep < n ? keep : n;
    } else {
        keep = FT_TUNE_RANK_FIRST < n ? FT_TUNE_RANK_FIRST : n;
        rc = spread(spec, plan, gr->items, n, keep, err);
    }
    tu->sum->ranked_out += n - keep;
    tu->to_compile -= n - keep;
    gr->nitems = keep;
    gr->nall = n;
    gr->informed = informed;
    free(dist);
    free(hit);
    return rc;
}

void ft__tuner_prefetch(tuner *tu, const task *t)
{
    const group *gr = &tu->groups[t->group];
    const ft_spec *spec = tu->specs[gr->spec];
    const ft_plan *plan = tu->plans[gr->spec];
    int i, k, n;

    if (tu->prefetch == NULL)
        return;
    /* its group's next refinement, for t's bucket (ft__tuner_refine_group's choice) */
    for (k = 0; !gr->informed && gr->rounds < tu->o->refinements && k < t->nranked && k < FT_TUNE_RANK_CLIMB; k++) {
        const ft_variant *win = &plan->items[tu->kernels[t->ranked[k]].item].variant;
        for (i = gr->nitems; i < gr->nall; i++)
            if (ft__tuner_steps(spec, &plan->items[gr->items[i]].variant, win) == 1)
                ft__tuner_prefetch_item(tu, gr->spec, gr->items[i]);
    }
    /* the twin groups still to rank: the twins of t's fastest (ft__tuner_rank_group's choice) */
    for (n = 0; n < tu->ngroups; n++) {
        const group *tw = &tu->groups[n];
        unsigned both;
        if (tw->compiled || tw->measured || tw->nall > 0 || tw->nitems == 0 || !twin_groups(tu, n, t->group))
            continue;
        both = varied(tu, tw) & varied(tu, gr);
        for (k = 0; k < t->nranked && k < FT_TUNE_RANK_TWIN; k++) {
            const ft_variant *fast = &plan->items[tu->kernels[t->ranked[k]].item].variant;
            for (i = 0; i < tw->nitems; i++)
                if (twins(spec, &plan->items[tw->items[i]].variant, fast, both))
                    ft__tuner_prefetch_item(tu, tw->spec, tw->items[i]);
        }
    }
}

ft_status ft__tuner_refine_group(tuner *tu, int g, int *more, ft_err *err)
{
    group *gr = &tu->groups[g];
    const ft_spec *spec = tu->specs[gr->spec];
    const ft_plan *plan = tu->plans[gr->spec];
    int *win = malloc(((size_t)tu->ntasks * FT_TUNE_RANK_CLIMB + 1) * sizeof *win);
    int nwin = 0, i, j, m = 0;

    *more = 0;
    if (win == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < tu->ntasks && !gr->informed; i++) { /* each bucket's fastest (its tasks' rankings) */
        const task *t = &tu->tasks[i];
        int k;
        if (t->group != g || t->ranked == NULL)
            continue;
        for (k = 0; k < t->nranked && k < FT_TUNE_RANK_CLIMB; k++) {
            const int item = tu->kernels[t->ranked[k]].item;
            for (j = 0; j < nwin && win[j] != item; j++)
                ;
            if (j == nwin)
                win[nwin++] = item;
        }
    }
    for (i = gr->nitems; i < gr->nall; i++) { /* one step from one of them: to the front */
        const ft_variant *v = &plan->items[gr->items[i]].variant;
        for (j = 0; j < nwin && ft__tuner_steps(spec, v, &plan->items[win[j]].variant) != 1; j++)
            ;
        if (j < nwin) {
            const int x = gr->items[gr->nitems + m];
            gr->items[gr->nitems + m] = gr->items[i], gr->items[i] = x;
            m++;
        }
    }
    free(win);
    gr->nitems += m;
    tu->sum->ranked_out -= m;
    tu->to_compile += m;
    *more = m;
    return FT_OK;
}

/* A bucket's size for the ranking's neighbours: log2 of its queries, keys and batch·heads. */
static double task_size(const task *t)
{
    return log2((double)t->shape.seqlen_q) + log2((double)t->shape.seqlen_k) +
           log2((double)t->shape.batch * t->shape.heads_q);
}

/* Whether tasks a and b measure the same shape. */
static int same_shape(const task *a, const task *b)
{
    return a->shape.batch == b->shape.batch && a->shape.heads_q == b->shape.heads_q &&
           a->shape.heads_kv == b->shape.heads_kv && a->shape.seqlen_q == b->shape.seqlen_q &&
           a->shape.seqlen_k == b->shape.seqlen_k;
}

/* An informed group's bucket whose shape a twin group of its causality (the other dtype or
 * determinism, whose kernels rank alike) has ranked: its jobs cut to the twins of the
 * FT_TUNE_RANK_TWIN fastest there (of each such group, its most complete ranking of the shape).
 * A causal twin informs the group's candidates only (the masked tiles change the ranking).
 * Returns 0, changing nothing, when no such twin ranked the shape or none of its fastest has a
 * twin among the jobs. */
static int confirm_twins(tuner *tu, task *t)
{
    const group *gr = &tu->groups[t->group];
    const ft_spec *spec = tu->specs[gr->spec];
    const ft_plan *plan = tu->plans[gr->spec];
    const unsigned own = varied(tu, gr);
    int g, i, j, k, n = 0, found = 0;
    char *keep = calloc((size_t)t->njobs + 1, 1);

    if (keep == NULL)
        return 0;
    for (g = 0; g < tu->ngroups; g++) {
        const task *best = NULL;
        unsigned both;
        if (!twin_groups(tu, t->group, g) || group_target(tu, g)->causal != group_target(tu, t->group)->causal)
            continue;
        for (i = 0; i < tu->ntasks; i++) {
            const task *o = &tu->tasks[i];
            if (o->group == g && o->ranked != NULL && same_shape(o, t) && (best == NULL || o->nranked >= best->nranked))
                best = o;
        }
        if (best == NULL)
            continue;
        found = 1;
        both = own & varied(tu, &tu->groups[g]);
        for (k = 0; k < best->nranked && k < FT_TUNE_RANK_TWIN; k++)
            for (j = 0; j < t->njobs; j++)
                keep[j] |= twins(spec, &plan->items[tu->kernels[t->jobs[j]].item].variant,
                                 &plan->items[tu->kernels[best->ranked[k]].item].variant, both);
    }
    for (j = 0; j < t->njobs; j++)
        n += keep[j];
    if (!found || n == 0) {
        free(keep);
        return 0;
    }
    for (j = 0, n = 0; j < t->njobs; j++)
        if (keep[j])
            t->jobs[n++] = t->jobs[j];
    free(keep);
    tu->planned -= t->njobs - n;
    t->njobs = n;
    return 1;
}

/* A bucket of FT_TUNE_KEEP candidates or fewer keeps them all after screening: it is measured
 * at the whole budget at once (verified then) and ranked when done. */
static void skip_screening(task *t)
{
    if (t->screen != NULL && t->njobs <= FT_TUNE_KEEP) {
        free(t->screen);
        t->screen = NULL;
    }
}

/* A bucket between its group's smallest and largest: its jobs cut to the FT_TUNE_RANK_NEXT
 * fastest of the nearest screened bucket on either side (none screened yet: left whole). */
static void follow_neighbours(tuner *tu, task *t)
{
    const double size = task_size(t);
    const task *below = NULL, *above = NULL;
    int smaller = 0, larger = 0, i, j, n = 0;

    for (i = 0; i < tu->ntasks; i++) {
        const task *o = &tu->tasks[i];
        double s;
        if (o == t || o->group != t->group)
            continue;
        s = task_size(o);
        smaller |= s < size;
        larger |= s > size;
        if (o->ranked == NULL)
            continue;
        if (s <= size && (below == NULL || s > task_size(below)))
            below = o;
        if (s >= size && (above == NULL || s < task_size(above)))
            above = o;
    }
    if (!smaller || !larger || (below == NULL && above == NULL))
        return; /* the group's smallest or largest bucket, or none screened yet: every candidate */
    for (j = 0; j < t->njobs; j++) {
        int keep = 0;
        for (i = 0; below != NULL && i < below->nranked && i < FT_TUNE_RANK_NEXT && !keep; i++)
            keep = below->ranked[i] == t->jobs[j];
        for (i = 0; above != NULL && i < above->nranked && i < FT_TUNE_RANK_NEXT && !keep; i++)
            keep = above->ranked[i] == t->jobs[j];
        if (keep)
            t->jobs[n++] = t->jobs[j];
    }
    tu->planned -= t->njobs - n;
    t->njobs = n;
}

void ft__tuner_seed_task(tuner *tu, task *t)
{
    t->seeded = 1;
    if (!tu->groups[t->group].informed || !confirm_twins(tu, t))
        follow_neighbours(tu, t);
    skip_screening(t);
}

/* The lowest compute capability spec's family runs on (its exact one for sm_90a code). */
static int family_cc(const ft_spec *spec)
{
    const ft_family *fam = ft__family_find(spec->template_name);
    return fam == NULL ? 0 : fam->exact_cc != 0 ? fam->exact_cc : fam->min_cc;
}

/* Whether a pending (kept, not yet compiled) variant of spec p's plan computes target tg. */
static int plan_computes(const tuner *tu, int p, const target *tg)
{
    const ft_plan *plan = tu->plans[p];
    const ft_family *fam = ft__family_find(tu->specs[p]->template_name);
    int i;

    for (i = 0; fam != NULL && i < plan->nitems; i++)
        if (plan->items[i].status == FT_PLAN_PENDING && computes(tu->specs[p], fam->op, &plan->items[i].variant, tg))
            return 1;
    return 0;
}

void ft__tuner_leave_to_newer(tuner *tu)
{
    int s, p, i, j;

    for (s = 0; s < tu->nspecs; s++) {
        target_list *l = &tu->targets[s];
        const ft_family *fam = ft__family_find(tu->specs[s]->template_name);
        needed_ctx nc;
        int n = 0, left;
        for (i = 0; i < l->n; i++) {
            ft_key k;
            int newer = 0;
            target_key(&l->v[i], &k);
            for (p = 0; p < tu->nspecs && !newer; p++) {
                if (p == s || family_cc(tu->specs[p]) <= family_cc(tu->specs[s]))
                    continue;
                for (j = 0; j < tu->targets[p].n && !newer; j++) {
                    ft_key kp;
                    if (tu->targets[p].v[j].op != l->v[i].op)
                        continue;
                    target_key(&tu->targets[p].v[j], &kp);
                    newer = ft__key_equal(&k, &kp) && plan_computes(tu, p, &l->v[i]);
                }
            }
            if (!newer)
                l->v[n++] = l->v[i];
            else if (plan_computes(tu, s, &l->v[i]))
                tu->sum->left_to_newer++;
        }
        l->n = n;
        /* the variants only those buckets needed: not compiled, not counted */
        nc.spec = tu->specs[s], nc.op = fam != NULL ? fam->op : NULL, nc.l = l;
        left = ft__plan_leave_out(tu->plans[s], needed, &nc);
        tu->sum->variants -= left;
        tu->to_compile -= left;
    }
}
