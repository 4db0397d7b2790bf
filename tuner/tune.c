/*
 * The tuner's parent process.
 *
 * It plans and compiles (NVRTC on a thread pool, through the compile cache), keeps the
 * database, and drives one worker process per GPU (tuner/worker.c) that verifies and times
 * kernels. The buckets go in groups that the same variants compute (a spec's head dim, dtype,
 * causality and determinism): while one group is measured, the next one's variants compile on
 * a thread of their own, so the GPU waits only for the first group's compilation and for any
 * that takes longer than the group before it took to measure. Each measurement is committed as
 * soon as it arrives, so an interrupted tune loses at most the measurement in flight, and the
 * next tune skips what is already recorded. A worker
 * that faults, dies or stops answering is replaced and the kernel that did it is recorded as a
 * fault or a timeout. The parent itself never touches the GPU, so nothing a kernel does can
 * take it down.
 *
 * Nothing a worker sends is trusted: every command carries an id that its answer must repeat,
 * lines are bounded, every field of an answer is checked (ft__tune_parse_result), and a worker
 * that breaks the protocol is killed, reaped and started again, the measurement tried once more
 * and then recorded as a fault, never as a time. Every wait has a deadline, and the stop flag (a
 * signal) ends the tune from any of them, the workers killed and reaped.
 *
 * Per bucket: the shape is set up once (inputs, reference), every variant is measured, and when
 * the fastest variants lie within each other's noise they are re-measured interleaved, a few
 * rounds, and the median of the rounds decides.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
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
#include "generator/family.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "ops/problem.h"
#include "runtime/compile.h"
#include "runtime/verify.h"
#include "tuner/plan.h"
#include "tuner/internal.h"



static ft_status tuner_open(tuner *tu, const char *worker_cmd, const char *cache_dir, ft_err *err)
{
    ft_status rc;

    if (worker_cmd != NULL) {
        if (strlen(worker_cmd) >= sizeof tu->worker_path)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the worker's path is longer than %zu bytes",
                            sizeof tu->worker_path - 1);
        snprintf(tu->worker_path, sizeof tu->worker_path, "%s", worker_cmd);
    } else {
        ssize_t n = readlink("/proc/self/exe", tu->worker_path, sizeof tu->worker_path - 1);
        if (n <= 0)
            return ft__fail(err, FT_ERR_IO, "cannot find this executable: %s", strerror(errno));
        tu->worker_path[n] = '\0';
    }
    rc = ft__cache_open(cache_dir, &tu->cache, err);
    if (rc == FT_OK)
        snprintf(tu->cache_dir, sizeof tu->cache_dir, "%s", ft__cache_dir(tu->cache));
    return rc;
}

/* A compilation of items [from, to) of group g on a thread of its own (ft__plan_compile_items
 * touches no Lua, and the plan's items that other groups own are not its). */
typedef struct compile_job {
    ft_plan *plan;
    const group *g;
    int gi, from, to;
    ft_cache *cache;
    int jobs;
    volatile int *stop;
    ft_status rc;
    ft_err err;
    double start, ms;
} compile_job;

static void *compile_thread(void *arg)
{
    compile_job *j = arg;
    j->start = ft__now_ms();
    j->rc = ft__plan_compile_items(j->plan, j->g->items + j->from, j->to - j->from, j->cache, j->jobs, NULL, NULL,
                                   j->stop, &j->err);
    j->ms = ft__now_ms() - j->start;
    return NULL;
}

/* Group g's name on the timeline: its spec and what its buckets share. */
static void group_label(const tuner *tu, int g, char *out, size_t cap)
{
    const group *gr = &tu->groups[g];
    const target *t = &tu->targets[gr->spec].v[gr->targets[0]];
    snprintf(out, cap, "%s d=%d %s causal=%d%s", tu->specs[gr->spec]->name, t->wl.d, t->dtype, t->causal,
             t->det ? " det=1" : "");
}

/* A span of group g's work on the timeline (none without one). */
static void group_span(const tuner *tu, const char *what, int g, double start_ms, int n)
{
    char label[300];
    if (tu->timeline == NULL)
        return;
    group_label(tu, g, label, sizeof label);
    ft__timeline_span(tu->timeline, what, label, start_ms, ft__now_ms(), n);
}

/* Group g's items [from, to) queued to compile ahead, before their own compilation. Where the
 * GPU waits for that compilation anyway (drain: a refinement's, a twin group's), the tuner waits
 * for the compilations ahead, so that it finds them in the cache rather than compiling them again
 * beside them, the wait to the summary: for these items' jobs alone, moved to the front (the
 * queue's other jobs, other groups', compile on), or (prefetch_all) for the whole queue. Without
 * prefetch_all a group compiled while another is measured (not drain) takes its waiting ones over. */
static void prefetch_settle(tuner *tu, int g, int from, int to, int drain)
{
    const ft_plan *plan = tu->plans[tu->groups[g].spec];
    const char **entries;
    const double t0 = ft__now_ms();
    int i, n = 0;

    if (tu->prefetch == NULL)
        return;
    if (tu->o->prefetch_all) {
        if (drain) {
            ft__prefetch_drain(tu->prefetch, NULL, -1);
            tu->sum->prefetch_wait_ms += ft__now_ms() - t0;
            group_span(tu, "ahead_wait", g, t0, -1);
        }
        return;
    }
    entries = malloc((size_t)(to > from ? to - from : 1) * sizeof *entries);
    for (i = from; entries != NULL && i < to; i++) {
        const ft_plan_item *it = &plan->items[tu->groups[g].items[i]];
        if (it->prefetched && it->source.text != NULL)
            entries[n++] = it->source.entry;
    }
    if (drain) {
        ft__prefetch_drain(tu->prefetch, entries, entries != NULL ? n : -1); /* no room: every job */
        tu->sum->prefetch_wait_ms += ft__now_ms() - t0;
        if (entries == NULL || n > 0)
            group_span(tu, "ahead_wait", g, t0, entries != NULL ? n : -1);
    } else if (entries != NULL) {
        ft__prefetch_take(tu->prefetch, entries, n);
    }
    free(entries);
}

/* Generates the sources of group g's items from `from` on here (the spec's Lua is this
 * thread's; for the ranked search, the group's candidates chosen first when from is 0), settles
 * what was queued to compile ahead of them (prefetch_settle; drain: the GPU waits for this
 * compilation) and starts compiling them on jobs threads (*started 0: no thread could be made,
 * and they compiled here). */
static ft_status compile_start(tuner *tu, int g, int from, int jobs, int drain, compile_job *j, pthread_t *th,
                               int *started, ft_err *err)
{
    ft_status rc;

    if (tu->o->search == FT_SEARCH_RANKED && from == 0) {
        rc = ft__tuner_rank_group(tu, g, err);
        if (rc != FT_OK)
            return rc;
    }
    prefetch_settle(tu, g, from, tu->groups[g].nitems, drain);
    memset(j, 0, sizeof *j);
    j->plan = tu->plans[tu->groups[g].spec];
    j->g = &tu->groups[g];
    j->gi = g;
    j->from = from;
    j->to = tu->groups[g].nitems;
    j->cache = tu->cache;
    j->jobs = jobs;
    j->stop = tu->o->stop;
    *started = 0;
    rc = ft__plan_emit_items(j->plan, j->g->items + from, j->to - from, err);
    if (rc != FT_OK)
        return rc;
    if (pthread_create(th, NULL, compile_thread, j) == 0)
        *started = 1;
    else
        compile_thread(j);
    return FT_OK;
}

/* Waits for a compilation; its time goes to the summary, and the part of it that the
 * measurements waited for to compile_wait_ms. */
static ft_status compile_finish(tuner *tu, compile_job *j, pthread_t th, int started, ft_err *err)
{
    double t0 = ft__now_ms();

    if (started)
        pthread_join(th, NULL);
    tu->sum->compile_ms += j->ms;
    tu->sum->compile_wait_ms += ft__now_ms() - t0;
    if (tu->timeline != NULL) {
        char label[300];
        group_label(tu, j->gi, label, sizeof label);
        ft__timeline_span(tu->timeline, j->from > 0 ? "compile_refinement" : "compile", label, j->start,
                          j->start + j->ms, j->to - j->from);
        ft__timeline_span(tu->timeline, "compile_wait", label, t0, ft__now_ms(), j->to - j->from);
    }
    tu->groups[j->gi].compiled = j->rc == FT_OK;
    if (j->rc != FT_OK)
        *err = j->err;
    return j->rc;
}

/* The next group after `after` with variants to compile, or -1. */
static int next_to_compile(const tuner *tu, int after)
{
    int g;
    for (g = after + 1; g < tu->ngroups; g++)
        if (tu->groups[g].nitems > 0 && !tu->groups[g].compiled)
            return g;
    return -1;
}

/* Group g's tasks for its kernels from item `from` on, shared among the workers and measured. */
static ft_status measure_group(tuner *tu, int g, int from, ft_err *err)
{
    const double t0 = ft__now_ms();
    const int first = tu->ntasks;
    ft_status rc = ft__tuner_group_tasks(tu, g, from, err);
    int i;

    for (i = first; i < tu->ntasks && rc == FT_OK; i++) {
        worker *w = &tu->workers[i % tu->nworkers];
        if (w->ntasks == w->tasks_cap)
            return ft__fail(err, FT_ERR_INTERNAL, "more tasks than the tuner has room for (%d)", w->tasks_cap);
        w->tasks[w->ntasks++] = i;
        tu->sum->buckets += ft__tuner_first_of_bucket(tu, i);
    }
    if (rc == FT_OK) {
        ft__tuner_progress(tu, "measuring");
        rc = ft__tuner_run_workers(tu, err);
        if (tu->ntasks > first)
            group_span(tu, from > 0 ? "measure_refinement" : "measure", g, t0, tu->ntasks - first);
    }
    return rc;
}

/* Ranked search: whether group g's races wait for its refinements: its candidates came from
 * the prior and the ranking left variants out, which a refinement may bring in. */
static int holds_race(const tuner *tu, int g)
{
    const group *gr = &tu->groups[g];
    return tu->o->search == FT_SEARCH_RANKED && !gr->informed && gr->nall > gr->nitems && tu->o->refinements > 0;
}

/* Ranked search, after group g's refinements: each of its buckets that has not raced (its
 * races were held, and the last refinement brought it nothing to measure or was held too)
 * races now, on its latest held task, the worker setting its shape up again; the leaders come
 * from every measurement the bucket has. */
static ft_status race_held(tuner *tu, int g, ft_err *err)
{
    const double t0 = ft__now_ms();
    int i, j, n = 0;
    ft_status rc;

    tu->groups[g].hold_race = 0;
    for (i = tu->ntasks - 1; i >= 0; i--) {
        task *t = &tu->tasks[i];
        worker *w;
        if (t->group != g || t->held != 1)
            continue;
        for (j = 0; j < tu->ntasks; j++) { /* the bucket raced, or its latest task is queued */
            const task *o = &tu->tasks[j];
            if (o->group == g && ft__key_equal(&o->key, &t->key) && (o->race_started || o->held == 2))
                break;
        }
        if (j < tu->ntasks) {
            t->held = 0;
            continue;
        }
        w = &tu->workers[n++ % tu->nworkers];
        if (w->ntasks == w->tasks_cap)
            return ft__fail(err, FT_ERR_INTERNAL, "more tasks than the tuner has room for (%d)", w->tasks_cap);
        t->held = 2; /* queued: it races now */
        t->shape_ready = 0;
        w->tasks[w->ntasks++] = i;
    }
    if (n == 0)
        return FT_OK;
    ft__tuner_progress(tu, "racing");
    rc = ft__tuner_run_workers(tu, err);
    group_span(tu, "race_held", g, t0, n);
    return rc;
}

/* Group n (none when n < 0), which no measurement still to come informs, starts compiling ahead
 * of its turn on `side` cores, while the GPU measures; it is the one in flight. */
static ft_status compile_ahead(tuner *tu, int n, int side, compile_job *j, pthread_t *th, int *started, int *inflight,
                               ft_err *err)
{
    ft_status rc;

    if (n < 0)
        return FT_OK;
    rc = compile_start(tu, n, 0, side, 0, j, th, started, err);
    if (rc == FT_OK)
        *inflight = n;
    return rc;
}

/* The groups in turn: the first one's variants compiled (all cores), then while a group is
 * measured the next one with variants of its own compiles (on all cores but one per GPU, for
 * the workers' host side), so that compiling hides behind timing. The ranked search's
 * refinements of a group compile on all cores once the next group's compilation is done. Where
 * the next group waits for this one's measurements (its twin), a later group that no
 * measurement informs (the next head dim's first) compiles instead, and is measured while the
 * first refinement compiles; while that refinement is measured, the one after it compiles, to
 * be measured while the second refinement compiles. Such a group is refined in its own turn. */
static ft_status measure_groups(tuner *tu, ft_err *err)
{
    const int jobs = tu->o->jobs > 0 ? tu->o->jobs : ft__cpu_count();
    const int side = jobs > tu->nworkers ? jobs - tu->nworkers : 1;
    compile_job job;
    pthread_t th;
    int started = 0, inflight = -1, g;
    ft_status rc = FT_OK;

    for (g = 0; g < tu->ngroups && rc == FT_OK; g++) {
        int n, round;
        if (inflight == g) {
            inflight = -1;
            rc = compile_finish(tu, &job, th, started, err);
        } else if (tu->groups[g].nitems > 0 && !tu->groups[g].compiled) { /* the first group, or a twin */
            if (inflight >= 0) { /* a group compiling ahead of its turn: one compilation at a time */
                inflight = -1;
                rc = compile_finish(tu, &job, th, started, err);
            }
            if (rc == FT_OK)
                rc = compile_start(tu, g, 0, jobs, 1, &job, &th, &started, err);
            if (rc == FT_OK)
                rc = compile_finish(tu, &job, th, started, err);
        }
        n = next_to_compile(tu, g);
        /* one compilation at a time; and a group whose candidates this one's measurements choose
         * compiles after them (a group no measurement informs, instead) */
        if (rc == FT_OK && n >= 0 && inflight < 0) {
            if (ft__tuner_await_twin(tu, n, g) || ft__tuner_twin_unsettled(tu, n, g))
                n = ft__tuner_independent_after(tu, g, 0);
            rc = compile_ahead(tu, n, side, &job, &th, &started, &inflight, err);
        }
        if (rc == FT_OK && !tu->groups[g].measured) {
            tu->groups[g].hold_race = holds_race(tu, g);
            rc = measure_group(tu, g, 0, err);
        }
        tu->groups[g].measured = 1;
        for (round = 0; rc == FT_OK && tu->o->search == FT_SEARCH_RANKED && round < tu->o->refinements; round++) {
            const int from = tu->groups[g].nitems;
            int more = 0, ahead = -1;
            rc = ft__tuner_refine_group(tu, g, &more, err);
            if (rc != FT_OK || more == 0)
                break;
            tu->groups[g].rounds++;
            if (inflight >= 0) { /* the plan's counts are not shared between two compilations */
                inflight = -1;
                rc = compile_finish(tu, &job, th, started, err);
            }
            if (rc == FT_OK)
                ahead = ft__tuner_independent_after(tu, g, 1);
            if (rc == FT_OK)
                rc = compile_start(tu, g, from, ahead >= 0 ? side : jobs, 1, &job, &th, &started, err);
            if (rc == FT_OK && ahead >= 0) { /* the GPU busy while the refinement compiles */
                tu->groups[ahead].hold_race = holds_race(tu, ahead);
                rc = measure_group(tu, ahead, 0, err);
                tu->groups[ahead].measured = 1;
            }
            if (rc == FT_OK)
                rc = compile_finish(tu, &job, th, started, err);
            else if (started) { /* joined all the same */
                ft_err e2;
                compile_finish(tu, &job, th, started, &e2);
            }
            tu->groups[g].hold_race = round + 1 < tu->o->refinements;
            /* (none in flight here: joined above) a later group no measurement informs compiles
             * while this refinement is measured, so that the GPU has it to measure while the next
             * refinement compiles */
            if (rc == FT_OK && round + 1 < tu->o->refinements)
                rc = compile_ahead(tu, ft__tuner_independent_after(tu, g, 0), side, &job, &th, &started, &inflight,
                                   err);
            if (rc == FT_OK)
                rc = measure_group(tu, g, from, err);
        }
        if (rc == FT_OK && tu->o->search == FT_SEARCH_RANKED)
            rc = race_held(tu, g, err);
    }
    if (inflight >= 0) { /* after a failure or a stop (which ends it soon): joined all the same */
        ft_err e2;
        ft_status rc2 = compile_finish(tu, &job, th, started, &e2);
        if (rc == FT_OK && rc2 != FT_OK) {
            rc = rc2;
            *err = e2;
        }
    }
    return rc;
}

ft_status ft__tune(ft_spec *const *specs, int nspecs, const ft_tune_opts *o, ft_tune_progress_fn prog, void *ud,
                   ft_tune_summary *summary, ft_err *err)
{
    ft_status rc;
    tuner tu;
    ft_variant filter[16];
    unsigned masks[16];
    ft_spec *kept[16];
    int usable[16], nusable = nspecs;
    target_list misses;
    double t0 = ft__now_ms();
    int i;

    memset(&tu, 0, sizeof tu);
    memset(&misses, 0, sizeof misses);
    memset(summary, 0, sizeof *summary);
    memset(masks, 0, sizeof masks);
    tu.o = o;
    tu.specs = specs;
    tu.nspecs = nspecs;
    tu.sum = summary;
    tu.progress = prog;
    tu.ud = ud;
    if (nspecs < 1 || nspecs > 16)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "tune takes 1 to 16 specs");
    if (o->refinements < 0 || o->refinements > FT_TUNE_RANK_ROUNDS_MAX)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "a group is refined 0 to %d times, not %d",
                        FT_TUNE_RANK_ROUNDS_MAX, o->refinements);
    for (i = 0; i < nspecs; i++) {
        if (ft__spec_family(specs[i], err) == NULL)
            return FT_ERR_SPEC;
        usable[i] = 1;
        if (o->only != NULL) {
            ft_err ferr;
            rc = ft__spec_add_values(specs[i], o->only, &ferr);
            if (rc == FT_OK)
                rc = ft__variant_filter_parse(specs[i], o->only, &filter[i], &masks[i], &ferr);
            if (rc != FT_OK && !o->skip_unsupported) {
                *err = ferr;
                return rc;
            }
            /* In the built-in set, a filter naming another family's parameter leaves this
             * spec out; if it leaves every spec out, the first reason is the error. */
            if (rc != FT_OK && nusable-- == nspecs)
                *err = ferr;
            usable[i] = rc == FT_OK;
        }
    }
    if (nusable == 0)
        return err->code;
    rc = tuner_open(&tu, o->worker_cmd, o->cache_dir, err);
    if (rc != FT_OK)
        goto out;
    /* the GPU first: a tune that cannot start leaves no database behind */
    rc = ft__tuner_start_workers(&tu, err);
    if (rc != FT_OK)
        goto out;
    snprintf(summary->device_name, sizeof summary->device_name, "%s", tu.dev.name);
    rc = ft__db_open(o->db_path, 0, &tu.db, err);
    if (rc != FT_OK)
        goto out;
    snprintf(summary->db_path, sizeof summary->db_path, "%s", ft__db_path(tu.db));
    if (o->skip_unsupported) {
        int n = 0;
        for (i = 0; i < tu.nspecs; i++) {
            const ft_family *fam = ft__family_find(specs[i]->template_name);
            char why[256];
            if (!usable[i] || (fam != NULL && !ft__family_supports_arch(fam, &tu.arch, why, sizeof why)))
                continue;
            kept[n] = specs[i];
            filter[n] = filter[i];
            masks[n] = masks[i];
            n++;
        }
        tu.specs = kept;
        tu.nspecs = n;
        if (n == 0) {
            rc = ft__fail(err, FT_ERR_UNSUPPORTED, "no spec has kernels for %s (%s)", tu.dev.name, tu.arch.name);
            goto out;
        }
    }
    rc = ft__db_device_id(tu.db, &tu.dev, &tu.device_id, err);
    if (rc == FT_OK && o->misses) {
        rc = ft__tuner_miss_targets(&tu, &misses, err);
        if (rc != FT_OK || misses.n == 0)
            goto out; /* no misses: nothing to compile or measure */
    }
    if (rc == FT_OK)
        rc = ft__tuner_targets(&tu, &misses, err);
    if (rc == FT_OK)
        rc = ft__tuner_plan_all(&tu, filter, masks, err);
    if (rc == FT_OK && o->search == FT_SEARCH_RANKED)
        ft__tuner_leave_to_newer(&tu);
    if (rc == FT_OK)
        rc = ft__tuner_make_groups(&tu, err);
    if (rc != FT_OK)
        goto out;
    {
        int ntargets = 0;
        for (i = 0; i < tu.nspecs; i++)
            ntargets += tu.targets[i].n;
        for (i = 0; i < tu.nworkers; i++) {
            /* a task per spec and target at most, the ranked search's refinements' and its
             * held races' */
            tu.workers[i].tasks_cap = ntargets * (2 + o->refinements) + 1;
            tu.workers[i].tasks = calloc((size_t)tu.workers[i].tasks_cap, sizeof(int));
            if (tu.workers[i].tasks == NULL) {
                rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
                goto out;
            }
        }
    }
    rc = ft__timeline_open(o->timeline_path, t0, &tu.timeline, err); /* once there is work to record */
    if (rc != FT_OK)
        goto out;
    if (tu.progress != NULL)
        tu.progress(tu.ud, 0, tu.to_compile, "compiling");
    if (o->search == FT_SEARCH_RANKED) { /* the refinements compiled ahead, on the cores not timing */
        const int jobs = o->jobs > 0 ? o->jobs : ft__cpu_count();
        rc = ft__prefetch_start(&tu.prefetch, tu.cache, jobs > tu.nworkers ? jobs - tu.nworkers : 1, o->stop,
                                tu.timeline, err);
        if (rc != FT_OK)
            goto out;
    }
    rc = measure_groups(&tu, err);
out:
    ft__prefetch_stop(tu.prefetch, summary); /* its threads' last spans written */
    {
        ft_err terr;
        if (ft__timeline_close(tu.timeline, &terr) != FT_OK && rc == FT_OK) {
            rc = terr.code;
            *err = terr;
        }
    }
    for (i = 0; i < tu.nworkers; i++) {
        ft__tuner_worker_stop(&tu, &tu.workers[i], rc != FT_OK);
        free(tu.workers[i].tasks);
    }
    free(tu.workers);
    free(misses.v);
    for (i = 0; tu.targets != NULL && i < tu.nspecs; i++)
        free(tu.targets[i].v);
    free(tu.targets);
    for (i = 0; i < tu.ntasks; i++) { /* the buckets that have a winner now */
        ft_db_row row;
        ft_err ignored;
        int found = 0;
        if (ft__tuner_first_of_bucket(&tu, i) &&
            ft__db_winner(tu.db, tu.device_id, &tu.tasks[i].key, &row, NULL, NULL, &found, &ignored) == FT_OK)
            summary->winners += found;
    }
    for (i = 0; i < tu.ngroups; i++) {
        free(tu.groups[i].targets);
        free(tu.groups[i].items);
    }
    free(tu.groups);
    for (i = 0; i < tu.ntasks; i++) {
        free(tu.tasks[i].jobs);
        free(tu.tasks[i].retried);
        free(tu.tasks[i].screen);
        free(tu.tasks[i].ranked);
    }
    free(tu.tasks);
    free(tu.kernels);
    if (tu.plans != NULL)
        for (i = 0; i < tu.nspecs; i++) /* the specs kept for this GPU */
            ft__plan_free(tu.plans[i]);
    free(tu.plans);
    ft__db_close(tu.db);
    ft__cache_close(tu.cache);
    summary->wall_ms = ft__now_ms() - t0;
    summary->interrupted = rc == FT_ERR_INTERRUPTED;
    return rc;
}

ft_status ft__tune_probe(const char *worker_cmd, const char *cache_dir, int device, ft_db_device *dev, ft_err *err)
{
    ft_status rc;
    tuner *tu = NULL;
    worker *w = NULL;

    tu = calloc(1, sizeof *tu);
    w = calloc(1, sizeof *w);
    if (tu == NULL || w == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    w->device = device;
    rc = tuner_open(tu, worker_cmd, cache_dir, err);
    if (rc != FT_OK)
        goto out;
    rc = ft__tuner_worker_boot(tu, w, err);
    if (rc != FT_OK)
        goto out;
    *dev = w->dev;
    ft__tuner_worker_stop(tu, w, 0);
out:
    if (tu != NULL)
        ft__cache_close(tu->cache);
    free(tu);
    free(w);
    return rc;
}

