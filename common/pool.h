/* Running independent jobs on a few threads. */
#ifndef FT_COMMON_POOL_H
#define FT_COMMON_POOL_H

/* Calls fn(ctx, i) for every i in [0, n) on up to nthreads threads (the calling thread is
 * one of them) and returns when all calls have returned. Jobs are taken in index order.
 * fn must be safe to call concurrently for different i. If *stop (may be NULL) becomes
 * non-zero, no new jobs start. Returns the number of jobs that ran. */
int ft__parallel_for(int n, int nthreads, void (*fn)(void *ctx, int i), void *ctx,
                     volatile int *stop);

#endif
