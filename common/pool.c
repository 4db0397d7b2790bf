#include "pool.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct pool_run {
    int n;
    int next; /* taken with an atomic add */
    int ran;
    void (*fn)(void *ctx, int i);
    void *ctx;
    volatile int *stop;
} pool_run;

static void *run_items(void *arg)
{
    pool_run *r = arg;

    for (;;) {
        int i;
        if (r->stop != NULL && __atomic_load_n(r->stop, __ATOMIC_RELAXED))
            break;
        i = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED);
        if (i >= r->n)
            break;
        r->fn(r->ctx, i);
        __atomic_fetch_add(&r->ran, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

int ft__parallel_for(int n, int nthreads, void (*fn)(void *ctx, int i), void *ctx,
                     volatile int *stop)
{
    pool_run r = {n, 0, 0, fn, ctx, stop};
    pthread_t *threads = NULL;
    int started = 0;
    int t;

    if (nthreads > n)
        nthreads = n;
    if (nthreads > 1)
        threads = calloc((size_t)nthreads - 1, sizeof *threads);
    for (t = 0; threads != NULL && t < nthreads - 1; t++) {
        if (pthread_create(&threads[t], NULL, run_items, &r) != 0)
            break;
        started++;
    }
    run_items(&r);
    for (t = 0; t < started; t++)
        pthread_join(threads[t], NULL);
    free(threads);
    return r.ran;
}
