/*
 * The ranked search's next compilations, ahead.
 *
 * A refined group's next variants are the uncompiled ones one step from each bucket's fastest
 * (ft__tuner_refine_group), and a twin group's candidates the twins of each of its measured
 * twin's buckets' fastest (ft__tuner_rank_group); a bucket's fastest are known once its
 * screening ends, long before the group's last bucket is measured. So each bucket's share of
 * them is generated then (on the tuner's thread: the spec's Lua is its; ft__tuner_prefetch
 * chooses) and compiled into the compile cache by a few threads of their own while the GPU
 * measures on. When the refinement or the twin group comes, its jobs still waiting move to the
 * front of the queue and the tuner waits for them alone (the rest go on compiling while the GPU
 * measures), or (`tune --prefetch-wait all`) for the whole queue; its compilation then finds
 * them in the cache. The plan's items are not touched: a
 * prefetch only fills the cache, so what it compiles in vain (a stop, a failure, a candidate a
 * later measurement displaced) costs CPU time and nothing else.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "generator/emit.h"
#include "runtime/compile.h"
#include "tuner/internal.h"

typedef struct pf_job {
    char *text;
    char name[300];
    char arch[32];
} pf_job;

struct ft_prefetch {
    pthread_mutex_t lock;
    pthread_cond_t more, idle; /* idle: a job ended */
    pf_job *q;
    int head, tail, cap; /* jobs [head, tail) wait */
    int busy;            /* jobs being compiled, named in compiling[] (an empty name: a free slot) */
    char compiling[FT_PREFETCH_THREADS][300];
    int quit;
    pthread_t th[FT_PREFETCH_THREADS];
    int nth;
    ft_cache *cache;
    volatile int *stop;
    ft_timeline *timeline;
    double ms; /* the compilations' time, summed over the threads */
    int done;
};

static void *prefetch_thread(void *arg)
{
    ft_prefetch *pf = arg;

    pthread_mutex_lock(&pf->lock);
    for (;;) {
        pf_job job;
        int go, slot;
        double t0;
        while (pf->head == pf->tail && !pf->quit)
            pthread_cond_wait(&pf->more, &pf->lock);
        if (pf->head == pf->tail)
            break; /* quit, nothing left */
        job = pf->q[pf->head++];
        for (slot = 0; pf->compiling[slot][0] != '\0'; slot++) /* a free one: busy < threads */
            ;
        memcpy(pf->compiling[slot], job.name, sizeof job.name);
        pf->busy++;
        pthread_mutex_unlock(&pf->lock);
        t0 = ft__now_ms();
        go = pf->stop == NULL || !__atomic_load_n(pf->stop, __ATOMIC_RELAXED); /* a stop: dropped */
        if (go) { /* into the cache; a compile error is recorded by the tune's own compilation */
            ft_compiled c;
            ft_err err;
            memset(&c, 0, sizeof c);
            ft__compile(job.text, job.name, job.arch, pf->cache, &c, &err);
            ft__compiled_free(&c);
        }
        free(job.text);
        if (go)
            ft__timeline_span(pf->timeline, "ahead", job.name, t0, ft__now_ms(), 1);
        pthread_mutex_lock(&pf->lock);
        pf->ms += ft__now_ms() - t0;
        pf->done += go;
        pf->busy--;
        pf->compiling[slot][0] = '\0';
        pthread_cond_broadcast(&pf->idle);
    }
    pthread_mutex_unlock(&pf->lock);
    return NULL;
}

ft_status ft__prefetch_start(ft_prefetch **out, ft_cache *cache, int threads, volatile int *stop, ft_timeline *timeline,
                             ft_err *err)
{
    ft_prefetch *pf = calloc(1, sizeof *pf);
    int i;

    *out = NULL;
    if (pf == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&pf->lock, NULL);
    pthread_cond_init(&pf->more, NULL);
    pthread_cond_init(&pf->idle, NULL);
    pf->cache = cache;
    pf->stop = stop;
    pf->timeline = timeline;
    threads = threads < 1 ? 1 : threads > FT_PREFETCH_THREADS ? FT_PREFETCH_THREADS : threads;
    for (i = 0; i < threads; i++)
        if (pthread_create(&pf->th[pf->nth], NULL, prefetch_thread, pf) == 0)
            pf->nth++;
    if (pf->nth == 0) { /* no thread: the tune goes on without compiling ahead */
        ft__prefetch_stop(pf, NULL);
        return FT_OK;
    }
    *out = pf;
    return FT_OK;
}

ft_status ft__prefetch_add(ft_prefetch *pf, char *text, const char *entry, const char *arch, ft_err *err)
{
    if (pf == NULL) {
        free(text);
        return FT_OK;
    }
    pthread_mutex_lock(&pf->lock);
    if (pf->tail == pf->cap && pf->head > 0) { /* the waiting jobs moved to the front */
        memmove(pf->q, pf->q + pf->head, (size_t)(pf->tail - pf->head) * sizeof *pf->q);
        pf->tail -= pf->head;
        pf->head = 0;
    }
    if (pf->tail == pf->cap) {
        const int cap = pf->cap ? 2 * pf->cap : 64;
        pf_job *q = realloc(pf->q, (size_t)cap * sizeof *q);
        if (q == NULL) {
            pthread_mutex_unlock(&pf->lock);
            free(text);
            return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        }
        pf->q = q;
        pf->cap = cap;
    }
    pf->q[pf->tail].text = text;
    snprintf(pf->q[pf->tail].name, sizeof pf->q[pf->tail].name, "%s.cu", entry);
    snprintf(pf->q[pf->tail].arch, sizeof pf->q[pf->tail].arch, "%s", arch);
    pf->tail++;
    pthread_cond_signal(&pf->more);
    pthread_mutex_unlock(&pf->lock);
    return FT_OK;
}

/* Whether `name` (a job's: the entry and ".cu") is one of entries'. */
static int named(const char *name, const char *const *entries, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        const size_t len = strlen(entries[i]);
        if (strncmp(name, entries[i], len) == 0 && strcmp(name + len, ".cu") == 0)
            return 1;
    }
    return 0;
}

/* With the lock held: the waiting jobs of entries moved to the front of the queue, in their
 * order, the others after them in theirs; returns how many of them wait or compile. */
static int left_of(ft_prefetch *pf, const char *const *entries, int n)
{
    int i, k = 0, front = pf->head, count = 0;
    pf_job *rest;

    for (i = 0; i < FT_PREFETCH_THREADS; i++)
        count += pf->compiling[i][0] != '\0' && named(pf->compiling[i], entries, n);
    rest = pf->tail > pf->head ? malloc((size_t)(pf->tail - pf->head) * sizeof *rest) : NULL;
    for (i = pf->head; i < pf->tail; i++) {
        if (!named(pf->q[i].name, entries, n)) {
            if (rest != NULL)
                rest[k++] = pf->q[i];
        } else {
            if (rest != NULL) /* else no room to reorder: waited for where they are */
                pf->q[front++] = pf->q[i];
            count++;
        }
    }
    if (rest != NULL)
        memcpy(pf->q + front, rest, (size_t)k * sizeof *rest);
    free(rest);
    return count;
}

void ft__prefetch_take(ft_prefetch *pf, const char *const *entries, int n)
{
    int i, k;

    if (pf == NULL)
        return;
    pthread_mutex_lock(&pf->lock);
    for (i = k = pf->head; i < pf->tail; i++) {
        if (named(pf->q[i].name, entries, n))
            free(pf->q[i].text);
        else
            pf->q[k++] = pf->q[i];
    }
    pf->tail = k;
    if (pf->head == pf->tail)
        pthread_cond_broadcast(&pf->idle);
    pthread_mutex_unlock(&pf->lock);
}

void ft__prefetch_drain(ft_prefetch *pf, const char *const *entries, int n)
{
    if (pf == NULL)
        return;
    pthread_mutex_lock(&pf->lock);
    if (n < 0) {
        while (pf->head != pf->tail || pf->busy > 0)
            pthread_cond_wait(&pf->idle, &pf->lock);
    } else {
        while (left_of(pf, entries, n) > 0)
            pthread_cond_wait(&pf->idle, &pf->lock);
    }
    pthread_mutex_unlock(&pf->lock);
}

void ft__prefetch_stop(ft_prefetch *pf, ft_tune_summary *sum)
{
    int i;

    if (pf == NULL)
        return;
    pthread_mutex_lock(&pf->lock);
    pf->quit = 1; /* what waits is dropped: the threads take no new job */
    for (i = pf->head; i < pf->tail; i++)
        free(pf->q[i].text);
    pf->head = pf->tail;
    pthread_cond_broadcast(&pf->more);
    pthread_mutex_unlock(&pf->lock);
    for (i = 0; i < pf->nth; i++)
        pthread_join(pf->th[i], NULL);
    if (sum != NULL) {
        sum->prefetched += pf->done;
        sum->prefetch_ms += pf->ms;
    }
    free(pf->q);
    pthread_cond_destroy(&pf->more);
    pthread_cond_destroy(&pf->idle);
    pthread_mutex_destroy(&pf->lock);
    free(pf);
}

void ft__tuner_prefetch_item(tuner *tu, int spec, int item)
{
    const ft_plan *plan = tu->plans[spec];
    ft_plan_item *it = &plan->items[item];
    ft_err err;
    char *text;

    if (tu->prefetch == NULL || it->prefetched || it->status != FT_PLAN_PENDING)
        return;
    it->prefetched = 1;
    /* the item keeps its source (ft__plan_emit_items then generates it no more), the job a copy;
     * an error here is the tune's own compilation's to report */
    if (it->source.text == NULL &&
        ft__emit(plan->spec, plan->family, &it->variant, &plan->arch, &it->source, &err) != FT_OK) {
        ft__kernel_source_free(&it->source);
        return;
    }
    text = strdup(it->source.text);
    if (text != NULL)
        ft__prefetch_add(tu->prefetch, text, it->source.entry, plan->arch.name, &err);
}
