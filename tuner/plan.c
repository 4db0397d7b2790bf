#include "plan.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/pool.h"
#include "common/sha256.h"
#include "generator/variant.h"

const char *ft__plan_status_name(ft_plan_status s)
{
    switch (s) {
    case FT_PLAN_PENDING: return "pending";
    case FT_PLAN_PRUNED: return "pruned";
    case FT_PLAN_COMPILED: return "compiled";
    case FT_PLAN_COMPILE_ERROR: return "compile-error";
    case FT_PLAN_OVER_LIMITS: return "over-limits";
    case FT_PLAN_NOT_SAMPLED: return "not-sampled";
    }
    return "?";
}

static void set_status(ft_plan *plan, ft_plan_item *it, ft_plan_status s)
{
    plan->count[it->status]--;
    it->status = s;
    plan->count[s]++;
}

/* Prunes one variant; fills it->status/reason. */
static ft_status prune(ft_plan *plan, ft_plan_item *it, ft_err *err)
{
    ft_spec *spec = plan->spec;
    const ft_arch *arch = &plan->arch;
    ft_status rc;
    int keep = 0;

    rc = ft__spec_check(spec, &it->variant, arch, &keep, it->reason, sizeof it->reason, err);
    if (rc != FT_OK)
        return rc;
    if (!keep) {
        snprintf(it->reason_class, sizeof it->reason_class, "%s", it->reason);
        set_status(plan, it, FT_PLAN_PRUNED);
        return FT_OK;
    }
    it->threads = ft__family_threads(plan->family, spec, &it->variant);
    if (it->threads > arch->threads_per_block) {
        snprintf(it->reason, sizeof it->reason, "%d threads per block > %d", it->threads,
                 arch->threads_per_block);
        snprintf(it->reason_class, sizeof it->reason_class, "too many threads per block");
        set_status(plan, it, FT_PLAN_PRUNED);
        return FT_OK;
    }
    rc = ft__spec_smem(spec, &it->variant, arch, &it->smem_dynamic, err);
    if (rc != FT_OK)
        return rc;
    if (it->smem_dynamic > arch->smem_per_block) {
        snprintf(it->reason, sizeof it->reason, "shared memory %lld B > %lld B per block on %s",
                 it->smem_dynamic, arch->smem_per_block, arch->name);
        snprintf(it->reason_class, sizeof it->reason_class, "shared memory over the per-block limit");
        set_status(plan, it, FT_PLAN_PRUNED);
        return FT_OK;
    }
    if (spec->has_registers) {
        long long regs = 0;
        rc = ft__spec_registers(spec, &it->variant, arch, &regs, err);
        if (rc != FT_OK)
            return rc;
        if (regs > arch->regs_per_thread) {
            snprintf(it->reason, sizeof it->reason, "register estimate %lld > %d per thread",
                     regs, arch->regs_per_thread);
            snprintf(it->reason_class, sizeof it->reason_class, "register estimate over the per-thread limit");
            set_status(plan, it, FT_PLAN_PRUNED);
            return FT_OK;
        }
    }
    return FT_OK;
}

/* ft__plan_build, and with keep_pruned 0 ft__plan_build_streamed: a pruned variant is counted
 * (count[FT_PLAN_PRUNED]) and handed to on_pruned (when given) but not kept, its item's room
 * taken by the next one. */
static ft_status plan_build(ft_spec *spec, const ft_arch *arch, const ft_variant *filter, unsigned mask,
                            int keep_pruned, ft_plan_pruned_fn on_pruned, void *ud, ft_plan **out, ft_err *err)
{
    ft_status rc;
    ft_plan *plan = NULL;
    char why[256];
    long long n;
    int cap = 0;

    *out = NULL;
    plan = calloc(1, sizeof *plan);
    if (plan == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    plan->spec = spec;
    plan->arch = *arch;
    plan->family = ft__spec_family(spec, err);
    if (plan->family == NULL) {
        rc = FT_ERR_SPEC;
        goto out;
    }
    rc = ft__family_check_spec(plan->family, spec, err);
    if (rc != FT_OK)
        goto out;
    if (!ft__family_supports_arch(plan->family, arch, why, sizeof why)) {
        rc = ft__fail(err, FT_ERR_UNSUPPORTED, "%s: %s, not %s", spec->path, why, arch->name);
        goto out;
    }
    ft__family_target(plan->family, arch, plan->arch.name, sizeof plan->arch.name);
    for (n = 0; n < spec->nvariants; n++) {
        ft_plan_item *it;
        ft_variant v;

        ft__variant_nth(spec, n, &v);
        if (mask != 0 && !ft__variant_matches(&v, filter, mask))
            continue;
        if (plan->nitems == cap) {
            int ncap = cap ? 2 * cap : 256;
            ft_plan_item *p = realloc(plan->items, (size_t)ncap * sizeof *p);
            if (p == NULL) {
                rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
                goto out;
            }
            plan->items = p;
            cap = ncap;
        }
        it = &plan->items[plan->nitems];
        memset(it, 0, sizeof *it);
        it->variant = v;
        it->smem_dynamic = -1;
        it->report.registers = -1;
        plan->count[FT_PLAN_PENDING]++;
        rc = prune(plan, it, err);
        if (rc != FT_OK)
            goto out;
        if (!keep_pruned && it->status == FT_PLAN_PRUNED) {
            if (on_pruned != NULL) {
                ft__variant_format(spec, &v, it->variant_str, sizeof it->variant_str);
                on_pruned(ud, plan, it);
            }
            continue;
        }
        ft__variant_format(spec, &v, it->variant_str, sizeof it->variant_str);
        plan->nitems++;
    }
    *out = plan;
    plan = NULL;
    rc = FT_OK;
out:
    ft__plan_free(plan);
    return rc;
}

ft_status ft__plan_build(ft_spec *spec, const ft_arch *arch, const ft_variant *filter, unsigned mask, ft_plan **out,
                         ft_err *err)
{
    return plan_build(spec, arch, filter, mask, 1, NULL, NULL, out, err);
}

ft_status ft__plan_build_kept(ft_spec *spec, const ft_arch *arch, const ft_variant *filter, unsigned mask,
                              ft_plan **out, ft_err *err)
{
    return plan_build(spec, arch, filter, mask, 0, NULL, NULL, out, err);
}

ft_status ft__plan_build_streamed(ft_spec *spec, const ft_arch *arch, const ft_variant *filter, unsigned mask,
                                  ft_plan_pruned_fn on_pruned, void *ud, ft_plan **out, ft_err *err)
{
    return plan_build(spec, arch, filter, mask, 0, on_pruned, ud, out, err);
}

/* splitmix64's finaliser: the sample's positions from its seed. */
static unsigned long long mix64(unsigned long long x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* "name=value" of value v of parameter p. */
static void format_value(const ft_spec *spec, int p, int v, char *buf, size_t cap)
{
    const ft_param *par = &spec->params[p];

    if (par->kind == FT_PARAM_INT)
        snprintf(buf, cap, "%s=%lld", par->name, par->ints[v]);
    else
        snprintf(buf, cap, "%s=%s", par->name, par->strings[v]);
}

/* How many of item it's values no sampled item has yet. */
static int new_values(const ft_plan *plan, const ft_plan_item *it, unsigned char (*covered)[FT_MAX_VALUES])
{
    int p, gain = 0;

    for (p = 0; p < plan->spec->nparams; p++)
        gain += !covered[p][it->variant.idx[p]];
    return gain;
}

int ft__plan_leave_out(ft_plan *plan, int (*needed)(const ft_plan_item *it, void *ud), void *ud)
{
    int i, n = 0;

    for (i = 0; i < plan->nitems; i++) {
        ft_plan_item *it = &plan->items[i];
        if (it->status == FT_PLAN_PENDING && !needed(it, ud)) {
            set_status(plan, it, FT_PLAN_NOT_SAMPLED);
            n++;
        }
    }
    return n;
}

ft_status ft__plan_sample(ft_plan *plan, int n, unsigned long long seed, ft_plan_sample_info *info,
                          ft_err *err)
{
    const ft_spec *spec = plan->spec;
    unsigned char (*present)[FT_MAX_VALUES] = NULL; /* some kept item has the value */
    unsigned char (*covered)[FT_MAX_VALUES] = NULL; /* some sampled item has it */
    unsigned char *chosen = NULL;                   /* per kept item */
    int *kept = NULL;                               /* plan indices of the kept items */
    int *rest = NULL;
    ft_plan_sample_info si;
    ft_status rc;
    int nkept = 0, picked = 0, nrest = 0, start = 0;
    int i, p, v;

    memset(&si, 0, sizeof si);
    if (n < 1) {
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "a sample needs at least 1 variant, not %d", n);
        goto out;
    }
    for (i = 0; i < plan->nitems; i++)
        if (plan->items[i].status != FT_PLAN_PENDING && plan->items[i].status != FT_PLAN_PRUNED) {
            rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "a plan is sampled before it is compiled");
            goto out;
        }
    present = calloc(FT_MAX_PARAMS, sizeof *present);
    covered = calloc(FT_MAX_PARAMS, sizeof *covered);
    kept = malloc((size_t)(plan->nitems > 0 ? plan->nitems : 1) * sizeof *kept);
    rest = malloc((size_t)(plan->nitems > 0 ? plan->nitems : 1) * sizeof *rest);
    chosen = calloc((size_t)(plan->nitems > 0 ? plan->nitems : 1), 1);
    if (present == NULL || covered == NULL || kept == NULL || rest == NULL || chosen == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        if (it->status != FT_PLAN_PENDING)
            continue;
        kept[nkept++] = i;
        for (p = 0; p < spec->nparams; p++)
            present[p][it->variant.idx[p]] = 1;
    }
    for (p = 0; p < spec->nparams; p++)
        for (v = 0; v < spec->params[p].nvalues; v++)
            si.values += present[p][v];
    si.kept = nkept;
    if (n >= nkept) {
        for (i = 0; i < nkept; i++)
            chosen[i] = 1;
        picked = nkept;
    }
    /* Coverage: the kept item with the most values not yet sampled, ties to the first after
     * the last one taken (from a start drawn from the seed), until nothing is new. */
    if (nkept > 0)
        start = (int)(mix64(seed) % (unsigned long long)nkept);
    while (picked < n && picked < nkept) {
        int best = -1, best_gain = 0, k;
        for (k = 0; k < nkept; k++) {
            int j = (start + k) % nkept;
            int gain;
            if (chosen[j])
                continue;
            gain = new_values(plan, &plan->items[kept[j]], covered);
            if (gain > best_gain) {
                best = j;
                best_gain = gain;
            }
        }
        if (best < 0)
            break;
        chosen[best] = 1;
        picked++;
        for (p = 0; p < spec->nparams; p++)
            covered[p][plan->items[kept[best]].variant.idx[p]] = 1;
        start = (best + 1) % nkept;
    }
    /* The rest: one item from each of equal stretches of the kept items not taken yet. */
    if (picked < n && picked < nkept) {
        int want = n - picked;
        for (i = 0; i < nkept; i++)
            if (!chosen[i])
                rest[nrest++] = i;
        for (i = 0; i < want; i++) {
            long long lo = (long long)i * nrest / want;
            long long hi = (long long)(i + 1) * nrest / want;
            long long at = lo + (long long)(mix64(seed ^ mix64((unsigned long long)i + 1)) %
                                            (unsigned long long)(hi - lo));
            chosen[rest[at]] = 1;
        }
        picked += want;
    }
    for (i = 0; i < nkept; i++) {
        ft_plan_item *it = &plan->items[kept[i]];
        if (chosen[i]) {
            for (p = 0; p < spec->nparams; p++)
                covered[p][it->variant.idx[p]] = 1;
            continue;
        }
        snprintf(it->reason, sizeof it->reason, "not in the sample");
        snprintf(it->reason_class, sizeof it->reason_class, "not in the sample");
        set_status(plan, it, FT_PLAN_NOT_SAMPLED);
    }
    si.sampled = picked;
    for (p = 0; p < spec->nparams; p++)
        for (v = 0; v < spec->params[p].nvalues; v++) {
            char one[160];
            size_t len = strlen(si.missing);
            if (!present[p][v] || covered[p][v])
                continue;
            si.uncovered++;
            format_value(spec, p, v, one, sizeof one);
            if (len + strlen(one) + 2 < sizeof si.missing)
                snprintf(si.missing + len, sizeof si.missing - len, "%s%s", len > 0 ? "," : "", one);
        }
    rc = FT_OK;
out:
    if (info != NULL)
        *info = si;
    free(present);
    free(covered);
    free(kept);
    free(rest);
    free(chosen);
    return rc;
}

typedef struct compile_run {
    ft_plan *plan;
    ft_cache *cache;
    int *pending;           /* indices of the items to compile */
    int total;
    int done;
    ft_plan_progress_fn progress;
    void *ud;
    pthread_mutex_t lock;
} compile_run;

/* Checks the compiled resources against the target (the device check after loading is the
 * runtime's; this is what can be known without a GPU). A kernel whose wgmmas ptxas serialised
 * is over the limits too: it would be timed without the asynchrony it was written for. */
static void check_limits(const ft_plan *plan, ft_plan_item *it)
{
    const ft_arch *a = &plan->arch;
    long long smem = it->report.smem_static + it->smem_dynamic;
    char why[300];

    if (it->report.registers > 0 && (long long)it->report.registers * it->threads > a->regs_per_block) {
        snprintf(it->reason, sizeof it->reason, "%d registers x %d threads > %d per block",
                 it->report.registers, it->threads, a->regs_per_block);
        snprintf(it->reason_class, sizeof it->reason_class, "registers over the per-block limit");
        it->status = FT_PLAN_OVER_LIMITS;
    } else if (smem > a->smem_per_block) {
        snprintf(it->reason, sizeof it->reason, "shared memory %lld B (static %lld) > %lld B", smem,
                 it->report.smem_static, a->smem_per_block);
        snprintf(it->reason_class, sizeof it->reason_class, "shared memory over the per-block limit");
        it->status = FT_PLAN_OVER_LIMITS;
    } else if (plan->spec->reject_spills && (it->report.spill_stores > 0 || it->report.spill_loads > 0)) {
        snprintf(it->reason, sizeof it->reason, "spills %lld B of stores and %lld B of loads per thread",
                 it->report.spill_stores, it->report.spill_loads);
        snprintf(it->reason_class, sizeof it->reason_class, "spills registers (the spec rejects spills)");
        it->status = FT_PLAN_OVER_LIMITS;
    } else if (ft__log_wgmma_serialized(it->compiled.log, why, sizeof why)) {
        snprintf(it->reason, sizeof it->reason, "ptxas serialises its wgmmas (%s)", why);
        snprintf(it->reason_class, sizeof it->reason_class, "wgmmas serialised by ptxas");
        it->status = FT_PLAN_OVER_LIMITS;
    } else {
        it->status = FT_PLAN_COMPILED;
    }
}

static void compile_one(void *ctx, int k)
{
    compile_run *run = ctx;
    ft_plan *plan = run->plan;
    ft_plan_item *it = &plan->items[run->pending[k]];
    char name[300];
    ft_err err;
    ft_status rc;

    if (it->source.text == NULL) { /* ft__plan_emit_items was not called for it */
        snprintf(it->reason, sizeof it->reason, "no source generated before compiling");
        snprintf(it->reason_class, sizeof it->reason_class, "compile error");
        pthread_mutex_lock(&run->lock);
        it->status = FT_PLAN_COMPILE_ERROR;
        plan->count[FT_PLAN_PENDING]--;
        plan->count[it->status]++;
        run->done++;
        pthread_mutex_unlock(&run->lock);
        return;
    }
    snprintf(name, sizeof name, "%s.cu", it->source.entry);
    ft__compile_key(it->source.text, plan->arch.name, it->key);
    {
        uint8_t digest[32];
        ft__sha256(it->source.text, strlen(it->source.text), digest);
        ft__sha256_hex(digest, it->source_hash);
    }
    rc = ft__compile(it->source.text, name, plan->arch.name, run->cache, &it->compiled, &err);
    it->compile_ms = it->compiled.compile_ms;
    it->cache_hit = it->compiled.cache_hit;
    it->report = it->compiled.report;
    if (rc == FT_OK) {
        check_limits(plan, it);
    } else {
        snprintf(it->reason, sizeof it->reason, "%s", err.msg);
        snprintf(it->reason_class, sizeof it->reason_class, "compile error");
        it->status = FT_PLAN_COMPILE_ERROR;
    }
    if (!plan->keep_cubins)
        ft__compiled_free(&it->compiled);
    if (!plan->keep_sources)
        ft__kernel_source_free(&it->source);

    pthread_mutex_lock(&run->lock);
    plan->count[FT_PLAN_PENDING]--;
    plan->count[it->status]++;
    run->done++;
    if (run->progress != NULL)
        run->progress(run->ud, plan, it, run->done, run->total);
    pthread_mutex_unlock(&run->lock);
}

ft_status ft__plan_emit_items(ft_plan *plan, const int *items, int n, ft_err *err)
{
    ft_status rc = FT_OK;
    int i;

    for (i = 0; i < n && rc == FT_OK; i++) {
        ft_plan_item *it = &plan->items[items[i]];
        if (it->status == FT_PLAN_PENDING && it->source.text == NULL)
            rc = ft__emit(plan->spec, plan->family, &it->variant, &plan->arch, &it->source, err);
    }
    return rc;
}

ft_status ft__plan_compile_items(ft_plan *plan, const int *items, int n, ft_cache *cache, int jobs,
                                 ft_plan_progress_fn progress, void *ud, volatile int *stop, ft_err *err)
{
    ft_status rc = FT_OK;
    compile_run run;
    int i;

    memset(&run, 0, sizeof run);
    run.plan = plan;
    run.cache = cache;
    run.progress = progress;
    run.ud = ud;
    run.pending = malloc((size_t)(n > 0 ? n : 1) * sizeof *run.pending);
    if (run.pending == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < n; i++)
        if (plan->items[items[i]].status == FT_PLAN_PENDING)
            run.pending[run.total++] = items[i];
    pthread_mutex_init(&run.lock, NULL);
    if (jobs <= 0)
        jobs = ft__cpu_count();
    ft__parallel_for(run.total, jobs, compile_one, &run, stop);
    pthread_mutex_destroy(&run.lock);
    if (stop != NULL && __atomic_load_n(stop, __ATOMIC_RELAXED))
        rc = ft__fail(err, FT_ERR_INTERRUPTED, "interrupted after %d of %d compilations", run.done,
                      run.total);
    free(run.pending);
    return rc;
}

ft_status ft__plan_compile(ft_plan *plan, ft_cache *cache, int jobs, ft_plan_progress_fn progress,
                           void *ud, volatile int *stop, ft_err *err)
{
    ft_status rc;
    int *items = malloc((size_t)(plan->nitems > 0 ? plan->nitems : 1) * sizeof *items);
    int i, n = 0;

    if (items == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < plan->nitems; i++)
        if (plan->items[i].status == FT_PLAN_PENDING)
            items[n++] = i;
    /* Generation runs the spec's smem formula in Lua, which is single-threaded: do it here. */
    rc = ft__plan_emit_items(plan, items, n, err);
    if (rc == FT_OK)
        rc = ft__plan_compile_items(plan, items, n, cache, jobs, progress, ud, stop, err);
    free(items);
    return rc;
}

void ft__plan_free(ft_plan *plan)
{
    int i;

    if (plan == NULL)
        return;
    for (i = 0; i < plan->nitems; i++) {
        ft__kernel_source_free(&plan->items[i].source);
        ft__compiled_free(&plan->items[i].compiled);
    }
    free(plan->items);
    free(plan);
}
