/*
 * The tuner's event loop: commands to the workers, their answers, their failures.
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
#include "runtime/verify.h"
#include "tuner/plan.h"
#include "tuner/internal.h"

/* ---- the event loop ----------------------------------------------------------------------- */

void ft__tuner_progress(tuner *tu, const char *what)
{
    if (tu->progress != NULL)
        tu->progress(tu->ud, tu->done, tu->planned, what);
}

/* A kernel's fields in a measure or race command: its compile-cache key, family, entry and
 * launch facts, as its family gives them (the head dim and causality come with the shape);
 * returns its plan item. */
static const ft_plan_item *kernel_fields(const tuner *tu, const kernel_ref *kr, int verify, int budget, char *out,
                                         size_t cap)
{
    const ft_plan_item *it = &tu->plans[kr->spec]->items[kr->item];
    ft_launch_facts f;
    char hex[65];

    ft__family_launch(tu->plans[kr->spec]->family, it->source.variant, it->threads, it->smem_dynamic, &f);
    ft__sha256_hex(it->key, hex);
    snprintf(out, cap,
             "key=%s family=%s entry=%s threads=%d rows=%d smem=%lld verify=%d budget=%d tma_kv=%d span=%d "
             "persistent=%d pair=%d split=%d pack=%d packed=%d keys=%d gqa_atomic=%d det=%d counter=%d tma_o=%d",
             hex, tu->plans[kr->spec]->family->name, it->source.entry, f.threads, f.rows_per_block, f.smem_dynamic,
             verify, budget, f.tma ? f.tma_rows_kv : 0, f.tma ? f.tma_span : 0, f.persistent, f.pair_blocks,
             f.split_kv, f.pack_gqa, f.packed, f.keys_per_block, f.gqa_atomic, f.deterministic, f.block_counter,
             f.tma && f.tma_o);
    return it;
}

/* The measure command for a kernel, with id; returns its plan item. */
static const ft_plan_item *measure_line(const tuner *tu, const kernel_ref *kr, unsigned long long id, int verify,
                                        int budget, char *out, size_t cap)
{
    char fields[1024];
    const ft_plan_item *it = kernel_fields(tu, kr, verify, budget, fields, sizeof fields);

    snprintf(out, cap, "measure id=%llu %s\n", id, fields);
    return it;
}

/* Sends worker w the race of kernels ks[0..n-1] (indices into the kernel table), each a third of
 * a measurement's budget a round, so that a leader's three rounds take about one measurement's
 * time; it is then waiting for `what`. Returns ft__tuner_worker_send's answer. */
static int send_race(tuner *tu, worker *w, const int *ks, int n, pending what)
{
    char line[LINE_MAX_BYTES], fields[1024];
    const int budget = tu->o->budget_ms / 3 + 1;
    size_t len;
    int i;

    w->id = ++w->ids;
    len = (size_t)snprintf(line, sizeof line, "race id=%llu n=%d rounds=%d budget=%d", w->id, n, RACE_ROUNDS, budget);
    for (i = 0; i < n && len < sizeof line; i++) {
        kernel_fields(tu, &tu->kernels[ks[i]], 0, budget, fields, sizeof fields);
        len += (size_t)snprintf(line + len, sizeof line - len, " ; %s", fields);
    }
    if (len < sizeof line)
        snprintf(line + len, sizeof line - len, "\n");
    w->waiting = what;
    return ft__tuner_worker_send(tu, w, line, tu->o->timeout_s * 1e3);
}

/* The shape command for shape p of operation op, with id and the inputs' random seed. */
static void shape_line(const ft_op *op, const ft_problem *p, unsigned long long id, int seed, char *out, size_t cap)
{
    snprintf(out, cap, "shape id=%llu op=%s b=%d hq=%d hkv=%d sq=%d sk=%d d=%d causal=%d bf16=%d det=%d seed=%d\n", id,
             op->name, p->batch, p->heads_q, p->heads_kv, p->seqlen_q, p->seqlen_k, p->head_dim, p->causal, p->bf16,
             p->deterministic, seed);
}

static void skip_bucket(tuner *tu, task *t, const char *why)
{
    char shown[600];

    ft__printable_str(shown, sizeof shown, why);
    fprintf(stderr, "flashtune tune: bucket %s d=%d causal=%d seqlen %d: %s; skipped\n", t->key.dtype,
            t->shape.head_dim, t->shape.causal, t->shape.seqlen_k, shown);
    t->failed = 1;
    tu->done += t->njobs - t->next + (t->redo >= 0);
    t->redo = -1;
}

/* Halving: the screening budget, a quarter of the whole (FT_TUNE_SCREEN_MS at least, the
 * whole at most). */
static int screen_budget(const tuner *tu)
{
    const int b = tu->o->budget_ms, q = b / 4 > FT_TUNE_SCREEN_MS ? b / 4 : FT_TUNE_SCREEN_MS;
    return q < b ? q : b;
}

/* Halving and ranked: the end of a bucket's screening. Its jobs become the fastest quarter of
 * those that screened ok (FT_TUNE_KEEP at least, all of them when fewer), fastest first, to be
 * measured again at the whole budget; the rest keep their screening results. Without memory
 * for the ranking every job is measured again. */
static void keep_fastest(tuner *tu, task *t)
{
    int *order = malloc(((size_t)t->njobs + 1) * sizeof *order);
    int n = 0, keep, j, k;

    tu->sum->screened += t->njobs;
    if (order == NULL) {
        keep = t->njobs;
    } else {
        for (j = 0; j < t->njobs; j++)
            if (isfinite(t->screen[j]))
                order[n++] = j;
        for (j = 1; j < n; j++) { /* insertion sort by screening median, ties by job */
            const int x = order[j];
            for (k = j; k > 0 && (t->screen[order[k - 1]] > t->screen[x] ||
                                  (t->screen[order[k - 1]] == t->screen[x] && order[k - 1] > x)); k--)
                order[k] = order[k - 1];
            order[k] = x;
        }
        keep = (n + 3) / 4 > FT_TUNE_KEEP ? (n + 3) / 4 : FT_TUNE_KEEP;
        if (keep > n)
            keep = n;
        for (j = 0; j < keep; j++)
            order[j] = t->jobs[order[j]];
        for (j = 0; j < keep; j++)
            t->jobs[j] = order[j];
        free(order);
    }
    memset(t->retried, 0, (size_t)keep);
    t->njobs = keep;
    t->next = 0;
    t->stage = 1;
    tu->sum->kept += keep;
    tu->planned += keep;
}

/* Tied leader `slot` of task t was wrong on the bucket's neighbour, or faulted or hung there:
 * that is its result for the bucket (recorded with the neighbour's shape), and it takes no
 * further part in the race. */
static ft_status record_nb_failure(tuner *tu, task *t, int slot, ft_result_status status, const char *detail,
                                   double max_error, ft_err *err)
{
    const int k = ft__tuner_kernel_of(tu, t->leaders[t->tied[slot]].result.kernel_id);
    char reason[600];
    ft_db_result r;

    t->nb_bad[slot] = 1;
    if (k < 0)
        return FT_OK;
    snprintf(reason, sizeof reason, "on the bucket's second shape: %s", detail);
    ft__tuner_fill_result(tu, t, &tu->kernels[k], status, reason, &r);
    r.batch = t->nb.batch, r.heads_q = t->nb.heads_q, r.heads_kv = t->nb.heads_kv;
    r.seqlen_q = t->nb.seqlen_q, r.seqlen_k = t->nb.seqlen_k;
    r.max_error = max_error;
    tu->sum->measured++;
    return ft__tuner_record(tu, &r, err);
}

/* Sends the worker its next command; returns 0 when it has nothing left to do, -1 when the
 * command could not be sent. */
static int dispatch(tuner *tu, worker *w, ft_err *err, ft_status *rc)
{
    char line[1024];

    while (w->cur < w->ntasks) {
        task *t = &tu->tasks[w->tasks[w->cur]];
        if (tu->o->search == FT_SEARCH_RANKED && !t->seeded)
            ft__tuner_seed_task(tu, t);
        if (t->failed || t->njobs == 0) { /* nothing left to measure: no need for its shape */
            w->cur++;
            continue;
        }
        if (!t->shape_ready && !t->nb_started) { /* once the race is judged only the neighbour's */
            w->id = ++w->ids;
            shape_line(t->key.op, &t->shape, w->id, 17 + w->tasks[w->cur], line, sizeof line);
            w->waiting = P_SHAPE;
            return ft__tuner_worker_send(tu, w, line, 600e3) ? 1 : -1;
        }
        if (t->redo >= 0 || t->next < t->njobs) {
            int job = t->redo >= 0 ? t->redo : t->next++;
            const ft_plan_item *it;
            t->redo = -1;
            w->id = ++w->ids;
            /* halving and ranked: screening at a quarter of the budget, verified; then the
             * fastest at the whole budget, verified already */
            if (t->screen != NULL && t->stage == 0)
                it = measure_line(tu, &tu->kernels[t->jobs[job]], w->id, 1, screen_budget(tu), line, sizeof line);
            else
                it = measure_line(tu, &tu->kernels[t->jobs[job]], w->id, t->screen == NULL, tu->o->budget_ms, line,
                                  sizeof line);
            w->waiting = P_MEASURE;
            w->job = job;
            ft__tuner_progress(tu, it->variant_str);
            return ft__tuner_worker_send(tu, w, line, tu->o->timeout_s * 1e3) ? 1 : -1;
        }
        if (t->screen != NULL && t->stage == 0) {
            keep_fastest(tu, t);
            if (tu->o->search == FT_SEARCH_RANKED) { /* what the group's next buckets and twin read */
                *rc = ft__tuner_rank_task(tu, t, tu->groups[t->group].spec, err);
                if (*rc != FT_OK)
                    return 0;
                ft__tuner_prefetch(tu, t);
            }
            continue;
        }
        if (tu->o->search == FT_SEARCH_RANKED && t->screen == NULL && t->ranked == NULL && t->dirty) {
            /* measured without screening (few candidates): ranked now for its neighbours */
            *rc = ft__tuner_rank_task(tu, t, tu->groups[t->group].spec, err);
            if (*rc != FT_OK)
                return 0;
            ft__tuner_prefetch(tu, t);
        }
        if (t->dirty && !t->race_started && tu->groups[t->group].hold_race) {
            t->held = 1; /* the winner so far stored (below); raced after the last refinement */
        } else if (t->dirty && !t->race_started) {
            t->race_started = 1;
            *rc = ft__tuner_find_leaders(tu, t, err);
            if (*rc != FT_OK)
                return 0;
        }
        if (t->race_started && !t->race_sent) {
            /* the leaders against each other, interleaved and at a sustained clock: one command */
            int ks[MAX_LEADERS], i, r;
            t->race_sent = 1;
            t->nracing = 0;
            for (i = 0; i < t->nleaders; i++) {
                const int k = ft__tuner_kernel_of(tu, t->leaders[i].result.kernel_id);
                for (r = 0; r < RACE_ROUNDS; r++)
                    t->race_ms[i][r] = NAN;
                if (k >= 0)
                    t->racing[t->nracing] = i, ks[t->nracing++] = k;
            }
            if (t->nracing > 0)
                return send_race(tu, w, ks, t->nracing, P_RACE) ? 1 : -1;
            continue;
        }
        if (t->race_started && t->nleaders > 0 && !t->nb_started)
            ft__tuner_judge_race(t);
        if (t->nb_started && t->ntied >= 2 && !t->nb_done) {
            /* the tied leaders on the neighbour: each verified there, then a race of those that pass */
            int ks[MAX_LEADERS], slot, r;
            if (!t->nb_ready) {
                w->id = ++w->ids;
                shape_line(t->key.op, &t->nb, w->id, 1000003 + w->tasks[w->cur], line, sizeof line);
                w->waiting = P_NB_SHAPE;
                return ft__tuner_worker_send(tu, w, line, 600e3) ? 1 : -1;
            }
            if (t->nb_next < t->ntied) {
                const int k = ft__tuner_kernel_of(tu, t->leaders[t->tied[t->nb_next]].result.kernel_id);
                if (k >= 0 && !t->nb_bad[t->nb_next]) {
                    w->id = ++w->ids;
                    measure_line(tu, &tu->kernels[k], w->id, 1, FT_TUNE_CHECK_MS, line, sizeof line);
                    w->waiting = P_NB_CHECK;
                    w->job = t->nb_next++;
                    return ft__tuner_worker_send(tu, w, line, tu->o->timeout_s * 1e3) ? 1 : -1;
                }
                t->nb_next++;
                continue;
            }
            t->nb_done = 1;
            t->nb_nracing = 0;
            for (slot = 0; slot < t->ntied; slot++) {
                const int k = ft__tuner_kernel_of(tu, t->leaders[t->tied[slot]].result.kernel_id);
                for (r = 0; r < RACE_ROUNDS; r++)
                    t->nb_ms[slot][r] = NAN;
                if (k >= 0 && !t->nb_bad[slot])
                    t->nb_racing[t->nb_nracing] = slot, ks[t->nb_nracing++] = k;
            }
            if (t->nb_nracing >= 2)
                return send_race(tu, w, ks, t->nb_nracing, P_NB_RACE) ? 1 : -1;
            continue;
        }
        if (t->race_started && t->nleaders > 0) {
            *rc = ft__tuner_finish_race(tu, t, err);
            if (*rc != FT_OK)
                return 0;
        }
        if (t->dirty) {
            *rc = ft__tuner_store_winner(tu, t, err);
            if (*rc != FT_OK)
                return 0;
        }
        w->cur++;
    }
    return 0;
}

/* How a worker failed: it exited (or its output ended), did not answer in time, broke the
 * protocol, or did not take a command (it was gone before the command reached it). */
typedef enum failure { F_EXITED, F_TIMEOUT, F_PROTOCOL, F_SEND } failure;

/* Worker w failed (kind, and why says how), perhaps with a command in flight. It is killed
 * and reaped first, so nothing it sends later counts. A measurement in flight is recorded as a
 * fault or a timeout; after a protocol error, or when the command never reached the worker, it
 * is first tried once more on a new worker (the fault may have been the line before). A shape
 * likewise, then its bucket is skipped; a race round gets no time. Then a new worker starts,
 * unless the stop flag is set (nothing is recorded then) or this was the PROTOCOL_STRIKES-th
 * protocol error without a good measurement between (the tune ends with an error). */
static ft_status worker_failed(tuner *tu, worker *w, failure kind, const char *why, ft_err *err)
{
    task *t = w->cur < w->ntasks ? &tu->tasks[w->tasks[w->cur]] : NULL;
    const pending was = w->waiting;
    const int protocol = kind == F_PROTOCOL, again = protocol || kind == F_SEND;
    ft_status rc = FT_OK;
    char reason[512];

    ft__tuner_worker_stop(tu, w, 1);
    w->waiting = P_NONE;
    if (ft__tuner_stopped(tu))
        return ft__tuner_interrupted(tu, err);
    if (protocol) {
        tu->sum->protocol_errors++;
        w->strikes++;
    }
    snprintf(reason, sizeof reason, "%s%s",
             protocol ? "the worker broke the protocol twice: " : kind == F_SEND ? "twice: " : "", why);
    if (t != NULL && was == P_MEASURE) {
        if (again && !t->retried[w->job]) {
            t->retried[w->job] = 1;
            t->redo = w->job;
        } else {
            ft_db_result r;
            ft__tuner_fill_result(tu, t, &tu->kernels[t->jobs[w->job]], kind == F_TIMEOUT ? FT_RESULT_TIMEOUT : FT_RESULT_FAULT,
                        reason, &r);
            tu->sum->measured++;
            tu->done++;
            t->dirty = 1;
            rc = ft__tuner_record(tu, &r, err);
        }
    } else if (t != NULL && was == P_SHAPE) {
        if (again && !t->shape_retried)
            t->shape_retried = 1;
        else
            skip_bucket(tu, t, reason);
    } else if (t != NULL && was == P_RACE) {
        /* sent once more; else no times from it (the leaders keep their own measurements) */
        if (again && !t->race_retried)
            t->race_retried = 1, t->race_sent = 0;
    } else if (t != NULL && was == P_NB_SHAPE) {
        t->nb_done = 1; /* no neighbour: the workload's rounds decide */
    } else if (t != NULL && was == P_NB_CHECK) {
        if (again && !t->nb_retried)
            t->nb_retried = 1, t->nb_next = w->job;
        else if (again) /* not checked there: it takes no part in the neighbour's race */
            t->nb_bad[w->job] = 2;
        else /* it crashed its worker or hung: as a measurement would be recorded */
            rc = record_nb_failure(tu, t, w->job, kind == F_TIMEOUT ? FT_RESULT_TIMEOUT : FT_RESULT_FAULT, reason,
                                   NAN, err);
    } else if (t != NULL && was == P_NB_RACE) {
        int slot, r;
        if (again && !t->nb_retried)
            t->nb_retried = 1, t->nb_done = 0;
        for (slot = 0; slot < t->ntied; slot++) /* no times from the neighbour (yet) */
            for (r = 0; r < RACE_ROUNDS; r++)
                t->nb_ms[slot][r] = NAN;
    }
    if (rc != FT_OK)
        return rc;
    if (w->strikes >= PROTOCOL_STRIKES)
        return ft__fail(err, FT_ERR_CUDA, "GPU %d: the worker broke the protocol %d times in a row (last: %s)",
                        w->device, w->strikes, why);
    tu->sum->worker_restarts++;
    if (t != NULL)
        t->shape_ready = t->nb_ready = 0;
    return ft__tuner_worker_boot(tu, w, err);
}

/* Worker w answered with a fault and exits (a faulted CUDA context is lost for good): another
 * takes its place, which holds neither of task t's shapes. */
static ft_status replace_after_fault(tuner *tu, worker *w, task *t, ft_err *err)
{
    ft__tuner_worker_stop(tu, w, 1);
    tu->sum->worker_restarts++;
    t->shape_ready = t->nb_ready = 0;
    return ft__tuner_worker_boot(tu, w, err);
}

/* Handles a line from worker w. One that breaks the protocol fills why (and changes nothing);
 * the caller replaces the worker. */
static ft_status on_line(tuner *tu, worker *w, const char *line, char *why, size_t cap, ft_err *err)
{
    task *t = &tu->tasks[w->tasks[w->cur]];
    const double elapsed = ft__now_ms() - w->sent;
    ft_tune_reply rep;
    ft_err perr;
    ft_status rc = FT_OK;
    char msg[512];
    int ok = 0;

    why[0] = '\0';
    switch (w->waiting) {
    case P_SHAPE:
        if (ft__tuner_parse_ack(line, w->id, &ok, msg, sizeof msg, &perr) != FT_OK)
            break;
        w->waiting = P_NONE;
        tu->sum->setup_ms += elapsed;
        if (ok)
            t->shape_ready = 1;
        else
            skip_bucket(tu, t, msg);
        return FT_OK;
    case P_MEASURE:
        if (ft__tune_parse_result(line, w->id, t->key.op, &t->shape, elapsed, &rep, &perr) != FT_OK)
            break;
        w->waiting = P_NONE;
        w->strikes = 0;
        tu->sum->measure_ms += elapsed;
        rc = ft__tuner_on_result(tu, t, w->job, &rep, err);
        tu->done++;
        if (rc == FT_OK && rep.status == FT_RESULT_FAULT)
            rc = replace_after_fault(tu, w, t, err);
        return rc;
    case P_RACE:
    case P_NB_RACE: {
        const int nb = w->waiting == P_NB_RACE, n = nb ? t->nb_nracing : t->nracing;
        ft_race_reply race;
        int i, r;
        if (ft__tune_parse_race(line, w->id, t->key.op, nb ? &t->nb : &t->shape, n, RACE_ROUNDS, elapsed, &race,
                                &perr) != FT_OK)
            break;
        w->waiting = P_NONE;
        w->strikes = 0;
        tu->sum->race_ms += elapsed;
        for (i = 0; race.status == FT_RESULT_OK && i < n; i++)
            for (r = 0; r < RACE_ROUNDS; r++) {
                if (nb)
                    t->nb_ms[t->nb_racing[i]][r] = race.ms[i * RACE_ROUNDS + r];
                else
                    t->race_ms[t->racing[i]][r] = race.ms[i * RACE_ROUNDS + r];
            }
        if (race.status != FT_RESULT_OK) {
            char shown[600];
            ft__printable_str(shown, sizeof shown, race.detail);
            fprintf(stderr, "flashtune tune: bucket %s d=%d causal=%d seqlen %d: the leaders' race%s failed (%s); %s\n",
                    t->key.dtype, t->shape.head_dim, t->shape.causal, t->shape.seqlen_k,
                    nb ? " on the neighbour" : "", shown,
                    nb ? "the workload's rounds decide" : "their own measurements decide");
        }
        if (race.status == FT_RESULT_FAULT)
            rc = replace_after_fault(tu, w, t, err);
        return rc;
    }
    case P_NB_SHAPE:
        if (ft__tuner_parse_ack(line, w->id, &ok, msg, sizeof msg, &perr) != FT_OK)
            break;
        w->waiting = P_NONE;
        tu->sum->setup_ms += elapsed;
        if (ok) {
            t->nb_ready = t->nb_raced = 1;
        } else { /* the workload's rounds decide */
            char shown[300];
            ft__printable_str(shown, sizeof shown, msg);
            fprintf(stderr, "flashtune tune: bucket %s d=%d causal=%d seqlen %d: its neighbour (seqlen %d) could not "
                    "be set up (%s); the leaders' race is decided without it\n",
                    t->key.dtype, t->shape.head_dim, t->shape.causal, t->shape.seqlen_k, t->nb.seqlen_k, shown);
            t->nb_done = 1;
        }
        return FT_OK;
    case P_NB_CHECK: {
        const int slot = w->job;
        if (ft__tune_parse_result(line, w->id, t->key.op, &t->nb, elapsed, &rep, &perr) != FT_OK)
            break;
        w->waiting = P_NONE;
        w->strikes = 0;
        tu->sum->race_ms += elapsed;
        if (rep.status != FT_RESULT_OK)
            rc = record_nb_failure(tu, t, slot, rep.status, rep.detail,
                                   rep.status == FT_RESULT_WRONG_RESULT ? rep.max_error : NAN, err);
        if (rc == FT_OK && rep.status == FT_RESULT_FAULT)
            rc = replace_after_fault(tu, w, t, err);
        return rc;
    }
    default:
        snprintf(perr.msg, sizeof perr.msg, "a line with no command in flight");
        break;
    }
    {
        char shown[200];
        ft__printable_str(shown, sizeof shown, line);
        snprintf(why, cap, "%s, in '%s%s'", perr.msg, shown, strlen(line) > 120 ? "..." : "");
    }
    return FT_OK;
}

/* Reads from worker w (revents: what poll saw) and handles its complete lines. A worker that
 * exited, sent a line too long, malformed or unasked for, or let its deadline pass (whether or
 * not it sent anything) is replaced (worker_failed). */
static ft_status service(tuner *tu, worker *w, short revents, ft_err *err)
{
    char line[LINE_MAX_BYTES], why[1024];
    ft_status rc;
    int got;

    if ((revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) && !ft__tuner_worker_read(w)) {
        int status = ft__tuner_worker_reap(tu, w, EXIT_GRACE_MS);
        int sig = status != -1 && WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        /* Ctrl-C reaches the worker too, perhaps before the tuner's own flag is set: a worker
         * stopped by a user's signal is an interrupt, not its kernel's fault */
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT) {
            w->waiting = P_NONE;
            return ft__fail(err, FT_ERR_INTERRUPTED, "interrupted: GPU %d's worker was stopped (signal %d); %lld "
                            "measurements were recorded",
                            w->device, sig, tu->sum->measured);
        }
        if (status != -1 && WIFSIGNALED(status))
            snprintf(why, sizeof why, "the worker died (signal %d)", WTERMSIG(status));
        else if (status != -1)
            snprintf(why, sizeof why, "the worker exited with status %d", WEXITSTATUS(status));
        else
            snprintf(why, sizeof why, "the worker's output ended");
        return worker_failed(tu, w, F_EXITED, why, err);
    }
    for (;;) {
        if (w->waiting == P_NONE) {
            if (w->len > 0)
                return worker_failed(tu, w, F_PROTOCOL, "it sent more than its answer", err);
            return FT_OK;
        }
        got = ft__tuner_worker_line(w, line, sizeof line, why, sizeof why);
        if (got < 0)
            return worker_failed(tu, w, F_PROTOCOL, why, err);
        if (got == 0)
            break;
        rc = on_line(tu, w, line, why, sizeof why, err);
        if (rc != FT_OK)
            return rc;
        if (why[0] != '\0')
            return worker_failed(tu, w, F_PROTOCOL, why, err);
    }
    if (ft__now_ms() > w->deadline) {
        snprintf(why, sizeof why, "no answer within the timeout of %.0f s (hung?)",
                 (w->deadline - w->sent) / 1e3);
        return worker_failed(tu, w, F_TIMEOUT, why, err);
    }
    return FT_OK;
}

ft_status ft__tuner_run_workers(tuner *tu, ft_err *err)
{
    ft_status rc = FT_OK;
    struct pollfd pfd[64];
    int map[64];
    int i;

    for (;;) {
        int n = 0;
        double wait_ms = 1000;

        if (ft__tuner_stopped(tu))
            return ft__tuner_interrupted(tu, err);
        for (i = 0; i < tu->nworkers; i++) {
            worker *w = &tu->workers[i];
            /* a command that does not reach the worker: a new worker, and the next command
             * (the same one once more, or what worker_failed left); each job, race round and
             * shape is sent at most twice, so this ends */
            while (w->waiting == P_NONE) {
                int d = dispatch(tu, w, err, &rc);
                if (rc != FT_OK)
                    return rc;
                if (d >= 0)
                    break;
                rc = worker_failed(tu, w, F_SEND, "the worker took no command (gone, or not reading)", err);
                if (rc != FT_OK)
                    return rc;
            }
            if (w->waiting != P_NONE) {
                pfd[n].fd = w->from_fd;
                pfd[n].events = POLLIN;
                pfd[n].revents = 0;
                map[n++] = i;
                wait_ms = fmin(wait_ms, w->deadline - ft__now_ms());
            }
        }
        if (n == 0)
            return FT_OK;
        if (poll(pfd, (nfds_t)n, (int)fmax(0, wait_ms)) < 0 && errno != EINTR)
            return ft__fail(err, FT_ERR_IO, "poll: %s", strerror(errno));
        for (i = 0; i < n; i++) {
            rc = service(tu, &tu->workers[map[i]], pfd[i].revents, err);
            if (rc != FT_OK)
                return rc;
        }
    }
}

