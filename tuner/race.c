/*
 * Recording results, and the leaders' race: the fastest variants of a bucket (with the
 * runner-up, earlier races' winners and the built-in default) are timed against each other in
 * one worker command, a few rounds, and the median decides where the rounds tell them apart.
 * Those the rounds cannot (their medians closer than either one's spread) race again on a
 * neighbour, a second shape of the bucket, and the better over both shapes wins. The race's
 * winner is the bucket's decided winner in the database (ft__db_decide).
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
#include "generator/emit.h"
#include "generator/variant.h"
#include "ops/problem.h"
#include "runtime/compile.h"
#include "runtime/defaults.h"
#include "runtime/verify.h"
#include "tuner/plan.h"
#include "tuner/internal.h"

/* ---- recording ---------------------------------------------------------------------------- */

void ft__tuner_fill_result(tuner *tu, const task *t, const kernel_ref *kr, ft_result_status st, const char *reason,
                        ft_db_result *r)
{
    memset(r, 0, sizeof *r);
    r->device_id = tu->device_id;
    r->kernel_id = kr->kernel_id;
    r->key = t->key;
    r->batch = t->shape.batch;
    r->heads_q = t->shape.heads_q;
    r->heads_kv = t->shape.heads_kv;
    r->seqlen_q = t->shape.seqlen_q;
    r->seqlen_k = t->shape.seqlen_k;
    r->status = st;
    snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
    r->median_ms = r->iqr_ms = r->tflops = r->max_error = NAN;
}

ft_status ft__tuner_record(tuner *tu, const ft_db_result *r, ft_err *err)
{
    tu->sum->by_status[r->status]++;
    return ft__db_record(tu->db, r, err);
}

/* A checked measurement reply for job j of task t. */
ft_status ft__tuner_on_result(tuner *tu, task *t, int j, const ft_tune_reply *rep, ft_err *err)
{
    const kernel_ref *kr = &tu->kernels[t->jobs[j]];
    ft_db_result r;

    ft__tuner_fill_result(tu, t, kr, rep->status, rep->detail, &r);
    if (rep->status == FT_RESULT_OK) {
        r.median_ms = rep->median_ms;
        r.iqr_ms = rep->q3_ms - rep->q1_ms;
        r.tflops = rep->tflops;
        r.repetitions = rep->reps;
    }
    if (rep->status == FT_RESULT_OK || rep->status == FT_RESULT_WRONG_RESULT)
        r.max_error = rep->max_error;
    tu->sum->verify_ms += rep->verify_ms;
    tu->sum->time_ms += rep->time_ms;
    tu->sum->measured++;
    if (t->screen != NULL && t->stage == 0)
        t->screen[j] = rep->status == FT_RESULT_OK ? rep->median_ms : NAN;
    t->dirty = 1;
    return ft__tuner_record(tu, &r, err);
}

/* ---- the leaders' race -------------------------------------------------------------------- */

typedef struct collect {
    tuner *tu;
    task *t;
    ft_db_row rows[64];
    int n;
} collect;

static int collect_row(void *ud, const ft_db_row *row)
{
    collect *c = ud;
    const ft_db_result *r = &row->result;
    int i;

    if (r->device_id != c->tu->device_id || !ft__key_equal(&r->key, &c->t->key) || r->status != FT_RESULT_OK ||
        row->stale || !(r->median_ms > 0) || !isfinite(r->median_ms))
        return 0;
    /* keep the 64 fastest, in order */
    if (c->n == 64 && c->rows[63].result.median_ms <= r->median_ms)
        return 0;
    i = c->n < 64 ? c->n : 63;
    for (; i > 0 && c->rows[i - 1].result.median_ms > r->median_ms; i--)
        c->rows[i] = c->rows[i - 1];
    c->rows[i] = *row;
    if (c->n < 64)
        c->n++;
    return 0;
}

/* The 64 fastest ok results of task t's bucket on this GPU, fastest first, into a new *out (the
 * caller frees it; NULL on failure). */
static ft_status fastest(tuner *tu, task *t, collect **out, ft_err *err)
{
    collect *c = calloc(1, sizeof *c); /* 64 rows: too large for the stack */
    ft_db_filter f;
    ft_status rc;

    *out = NULL;
    if (c == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    c->tu = tu;
    c->t = t;
    ft__db_filter_init(&f);
    f.op = t->key.op;
    f.dtype = t->key.dtype;
    f.head_dim = (int)ft__key_get(&t->key, "d", -1);
    f.causal = (int)ft__key_get(&t->key, "causal", -1);
    f.device_name = tu->dev.name;
    rc = ft__db_query(tu->db, &f, collect_row, c, err);
    if (rc != FT_OK)
        free(c);
    else
        *out = c;
    return rc;
}

/* Leaders: the ok results within the noise of the fastest (2 %, or twice its spread), 4 at
 * most, and the runner-up however far behind: measured one after the other, a kernel timed
 * when the board was cooler reads fast (up to 11 % at 16k tokens on an H100), so no decision
 * is left to separate measurements. Then the winners of the bucket's earlier races in this
 * tune, and the bucket's built-in default, where one of them was measured: the winner is
 * never slower than what an untuned install runs but by the race's noise. */
ft_status ft__tuner_find_leaders(tuner *tu, task *t, ft_err *err)
{
    char defaults[8][512];
    collect *c;
    double best, margin;
    ft_status rc = fastest(tu, t, &c, err);
    int ndefs, i, j, k;

    t->nleaders = 0;
    t->default_leader = -1;
    if (rc != FT_OK)
        return rc;
    if (c->n >= 2) {
        best = c->rows[0].result.median_ms;
        margin = fmax(0.02 * best, 2 * (isfinite(c->rows[0].result.iqr_ms) ? c->rows[0].result.iqr_ms : 0));
        for (i = 0; i < c->n && i < MAX_NOISE_LEADERS && (i < 2 || c->rows[i].result.median_ms <= best + margin); i++)
            t->leaders[t->nleaders++] = c->rows[i];
        /* the winners of the bucket's races before (another spec's group that computes the
         * bucket too; a ranked search's refined groups race once, after their last refinement):
         * their figures are of the sustained clock, slower than the new variants' single
         * measurements read, so they race again rather than fall behind on paper */
        for (j = 0; j < (int)(t - tu->tasks); j++) {
            const task *o = &tu->tasks[j];
            if (o->race_winner == 0 || !ft__key_equal(&o->key, &t->key))
                continue;
            for (i = 0; i < c->n && c->rows[i].result.kernel_id != o->race_winner; i++)
                ;
            for (k = 0; k < t->nleaders && t->leaders[k].result.kernel_id != o->race_winner; k++)
                ;
            if (i < c->n && k == t->nleaders && t->nleaders < MAX_LEADERS - 1)
                t->leaders[t->nleaders++] = c->rows[i];
        }
        ndefs = ft__tuner_task_defaults(tu, t, defaults, 8);
        for (j = 0; j < ndefs; j++) { /* the first default the bucket measured ok */
            for (i = 0; i < c->n && strcmp(c->rows[i].variant, defaults[j]) != 0; i++)
                ;
            if (i == c->n || ft__tuner_kernel_of(tu, c->rows[i].result.kernel_id) < 0)
                continue;
            for (k = 0; k < t->nleaders && t->leaders[k].result.kernel_id != c->rows[i].result.kernel_id; k++)
                ;
            if (k == t->nleaders)
                t->leaders[t->nleaders++] = c->rows[i];
            t->default_leader = k;
            break;
        }
    }
    free(c);
    return FT_OK;
}

ft_status ft__tuner_rank_task(tuner *tu, task *t, int spec, ft_err *err)
{
    collect *c;
    ft_status rc = fastest(tu, t, &c, err);
    int i;

    if (rc != FT_OK)
        return rc;
    free(t->ranked);
    t->nranked = 0;
    t->ranked = malloc(((size_t)c->n + 1) * sizeof *t->ranked);
    if (t->ranked == NULL)
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; rc == FT_OK && i < c->n; i++) {
        const int k = ft__tuner_kernel_of(tu, c->rows[i].result.kernel_id);
        if (k >= 0 && tu->kernels[k].spec == spec)
            t->ranked[t->nranked++] = k;
    }
    free(c);
    return rc;
}

int ft__tuner_kernel_of(const tuner *tu, long long kernel_id)
{
    int i;
    for (i = 0; i < tu->nkernels; i++)
        if (tu->kernels[i].kernel_id == kernel_id)
            return i;
    return -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median and spread (max − min; spread may be NULL) of one leader's rounds; 0 when a round
 * failed. */
static int rounds_of(const double *ms_in, double *median, double *spread)
{
    double ms[RACE_ROUNDS];
    int k;

    for (k = 0; k < RACE_ROUNDS; k++) {
        if (!(ms_in[k] > 0) || !isfinite(ms_in[k]))
            return 0;
        ms[k] = ms_in[k];
    }
    qsort(ms, RACE_ROUNDS, sizeof ms[0], cmp_double);
    *median = ms[RACE_ROUNDS / 2];
    if (spread != NULL)
        *spread = ms[RACE_ROUNDS - 1] - ms[0];
    return 1;
}

int ft__tuner_race_decide(int n, const double (*w)[RACE_ROUNDS], const double (*nb)[RACE_ROUNDS], int *tied,
                          int *ntied)
{
    double med[MAX_LEADERS], spread[MAX_LEADERS], nmed[MAX_LEADERS];
    double wbest = INFINITY, nbest = INFINITY, best_score = INFINITY;
    int ok[MAX_LEADERS], nok[MAX_LEADERS], b = -1, pick = -1, i;

    *ntied = 0;
    for (i = 0; i < n && i < MAX_LEADERS; i++) {
        ok[i] = rounds_of(w[i], &med[i], &spread[i]);
        nok[i] = ok[i] && nb != NULL && rounds_of(nb[i], &nmed[i], NULL);
        if (ok[i] && (b < 0 || med[i] < med[b]))
            b = i;
    }
    if (b < 0)
        return -1;
    for (i = 0; i < n && i < MAX_LEADERS; i++)
        if (ok[i] && med[i] - med[b] <= fmax(spread[b], spread[i]))
            tied[(*ntied)++] = i;
    for (i = 0; i < *ntied; i++) {
        const int l = tied[i];
        if (nok[l]) {
            wbest = fmin(wbest, med[l]);
            nbest = fmin(nbest, nmed[l]);
        }
    }
    for (i = 0; i < *ntied; i++) { /* in rank order: a tie of scores goes to the faster-ranked */
        const int l = tied[i];
        double score;
        if (!nok[l])
            continue;
        score = sqrt(med[l] / wbest * (nmed[l] / nbest));
        if (score < best_score || (score == best_score && med[l] < med[pick]))
            best_score = score, pick = l;
    }
    return pick >= 0 && nok[b] ? pick : b;
}

int ft__tuner_judge_race(task *t)
{
    int winner;

    t->nb_started = 1;
    winner = ft__tuner_race_decide(t->nleaders, (const double(*)[RACE_ROUNDS])t->race_ms, NULL, t->tied, &t->ntied);
    if (winner < 0 || t->ntied < 2 || !t->has_nb) {
        t->ntied = 0;
        return 0;
    }
    memset(t->nb_bad, 0, sizeof t->nb_bad);
    t->nb_next = 0;
    t->nb_done = 0;
    return 1;
}

/* The race is over: each leader whose rounds all came back (checked times, NAN where a round
 * failed) gets the median of its rounds, unless the neighbour found it wrong (recorded then).
 * The race's winner (the fastest of its rounds, or the one the neighbour decided for) is the
 * key's decided winner: the leaders' figures are now of a sustained clock, which a variant
 * measured once, after a gap, beats by up to 10 % at long shapes (H200, 2026-12-05), so no
 * such single measurement may take the bucket from them. */
ft_status ft__tuner_finish_race(tuner *tu, task *t, ft_err *err)
{
    double w[MAX_LEADERS][RACE_ROUNDS], nb[MAX_LEADERS][RACE_ROUNDS], med[MAX_LEADERS];
    ft_status rc = FT_OK;
    int tied[MAX_LEADERS], ntied = 0, winner, pick, i, k;

    memcpy(w, t->race_ms, sizeof w);
    for (i = 0; i < MAX_LEADERS; i++) {
        med[i] = NAN;
        for (k = 0; k < RACE_ROUNDS; k++)
            nb[i][k] = NAN;
    }
    /* the leaders found wrong (or failing) on the neighbour take no part */
    for (i = 0; i < t->ntied; i++)
        for (k = 0; k < RACE_ROUNDS; k++) {
            nb[t->tied[i]][k] = t->nb_bad[i] ? NAN : t->nb_ms[i][k];
            if (t->nb_bad[i] == 1)
                w[t->tied[i]][k] = NAN;
        }
    for (i = 0; i < t->nleaders && rc == FT_OK; i++) {
        double median;
        ft_db_result r = t->leaders[i].result;
        if (!rounds_of(w[i], &median, NULL))
            continue; /* a round failed: the leader keeps its own measurement */
        med[i] = median;
        r.median_ms = median;
        r.tflops = t->key.op->flops(&t->shape) / (r.median_ms * 1e-3) / 1e12;
        rc = ft__db_record(tu->db, &r, err);
    }
    winner = ft__tuner_race_decide(t->nleaders, (const double(*)[RACE_ROUNDS])w, NULL, tied, &ntied);
    if (rc == FT_OK && t->ntied >= 2 && t->nb_raced) {
        pick = ft__tuner_race_decide(t->nleaders, (const double(*)[RACE_ROUNDS])w, (const double(*)[RACE_ROUNDS])nb,
                                     tied, &ntied);
        tu->sum->ties++;
        if (pick >= 0 && pick != winner) {
            winner = pick;
            tu->sum->decided++;
        }
    }
    if (rc == FT_OK && winner >= 0) {
        t->race_winner = t->leaders[winner].result.kernel_id;
        rc = ft__db_decide(tu->db, tu->device_id, &t->key, t->race_winner, err);
    }
    if (rc == FT_OK && winner >= 0 && t->default_leader >= 0 && t->default_leader < t->nleaders &&
        isfinite(med[winner]) && isfinite(med[t->default_leader])) {
        const double x = med[t->default_leader] / med[winner];
        ft_tune_summary *s = tu->sum;
        s->over_default_min = s->over_default == 0 || x < s->over_default_min ? x : s->over_default_min;
        s->over_default_max = s->over_default == 0 || x > s->over_default_max ? x : s->over_default_max;
        s->over_default_log += log(x);
        s->over_default++;
    }
    if (rc == FT_OK)
        tu->sum->races++;
    return rc;
}

int ft__tuner_neighbour_shape(const ft_problem *p, const ft_key *key, ft_problem *out)
{
    ft_key k;
    const int sk = p->seqlen_k * 11 / 16 / 8 * 8;

    *out = *p;
    if (sk < 8 || key->op == NULL)
        return 0;
    out->seqlen_k = sk;
    if (p->seqlen_q == p->seqlen_k)
        out->seqlen_q = sk;
    key->op->key(out, &k);
    return ft__key_equal(&k, key);
}

/* A plan item's kernel row; source and cubin are left NULL. */
void ft__tuner_kernel_row(const ft_plan *plan, const ft_plan_item *it, const char *template_hash,
                       ft_db_kernel *dk)
{
    memset(dk, 0, sizeof *dk);
    snprintf(dk->family, sizeof dk->family, "%s", plan->family->name);
    snprintf(dk->variant, sizeof dk->variant, "%s", it->variant_str);
    snprintf(dk->arch, sizeof dk->arch, "%s", plan->arch.name); /* the family's target: "sm_90a" */
    snprintf(dk->template_hash, sizeof dk->template_hash, "%s", template_hash);
    snprintf(dk->source_hash, sizeof dk->source_hash, "%s", it->source_hash);
    snprintf(dk->entry, sizeof dk->entry, "%s", it->source.entry);
    dk->registers = it->report.registers;
    dk->spill_stores = it->report.spill_stores;
    dk->spill_loads = it->report.spill_loads;
    dk->smem_static = it->report.smem_static;
    dk->smem_dynamic = it->smem_dynamic;
    dk->threads = it->threads;
    dk->compile_ms = it->compile_ms;
}

/* Whether task i is the first of its bucket (specs of two families can share a bucket). */
int ft__tuner_first_of_bucket(const tuner *tu, int i)
{
    int j;

    for (j = 0; j < i; j++)
        if (ft__key_equal(&tu->tasks[j].key, &tu->tasks[i].key))
            return 0;
    return 1;
}

/* Stores the winner's cubin and source with its kernel row, for dispatch and export. */
ft_status ft__tuner_store_winner(tuner *tu, task *t, ft_err *err)
{
    ft_db_row row;
    int found = 0, k;
    ft_status rc = ft__db_winner(tu->db, tu->device_id, &t->key, &row, NULL, NULL, &found, err);
    const kernel_ref *kr;
    ft_plan_item *it;
    ft_compiled c;
    ft_kernel_source src;
    ft_db_kernel dk;

    if (rc != FT_OK || !found)
        return rc;
    k = ft__tuner_kernel_of(tu, row.result.kernel_id);
    if (k < 0)
        return FT_OK; /* a winner from another spec or run: its row already has what it needs */
    kr = &tu->kernels[k];
    it = &tu->plans[kr->spec]->items[kr->item];
    if (!ft__cache_get(tu->cache, it->key, &c))
        return FT_OK;
    rc = ft__emit(tu->specs[kr->spec], tu->plans[kr->spec]->family, &it->variant, &tu->arch, &src, err);
    if (rc == FT_OK) {
        ft__tuner_kernel_row(tu->plans[kr->spec], it, src.template_hash, &dk);
        dk.source = src.text;
        dk.cubin = c.cubin;
        dk.cubin_size = c.cubin_size;
        {
            long long id;
            rc = ft__db_kernel_id(tu->db, &dk, &id, err);
        }
    }
    ft__kernel_source_free(&src);
    ft__compiled_free(&c);
    return rc;
}


