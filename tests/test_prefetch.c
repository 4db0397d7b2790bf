/* Tests of the ranked search's compilations ahead (tuner/prefetch.c) with NVRTC and one thread,
 * on tiny kernels: what a drain waits for (the whole queue, or only the named jobs, moved to the
 * front) and what a take drops, read off the compile cache. With one thread the order is fixed:
 * a job waiting behind another cannot have compiled while that one has not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ft_test.h"
#include "runtime/compile.h"
#include "tuner/internal.h"

#define ARCH "sm_80"

static char dir[256];

/* A fresh cache directory for one case. */
static ft_cache *open_cache(void)
{
    ft_cache *cache = NULL;
    ft_err err;
    snprintf(dir, sizeof dir, "%s/test-prefetch-XXXXXX", FT_BINARY_DIR);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    if (ft__cache_open(dir, &cache, &err) != FT_OK) {
        fprintf(stderr, "test_prefetch: %s\n", err.msg);
        exit(1);
    }
    return cache;
}

/* Kernel `name`'s source (the same name, the same text). */
static void source_of(const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "extern \"C\" __global__ void %s(float *p) { p[threadIdx.x] = %d.0f; }\n", name,
             (int)strlen(name));
}

static void queue(ft_prefetch *pf, const char *name)
{
    char src[256];
    ft_err err;
    source_of(name, src, sizeof src);
    ASSERT_OK(ft__prefetch_add(pf, strdup(src), name, ARCH, &err), &err);
}

/* Whether kernel `name` is in the cache. */
static int cached(ft_cache *cache, const char *name)
{
    char src[256];
    uint8_t key[32];
    ft_compiled c;
    int hit;
    source_of(name, src, sizeof src);
    ft__compile_key(src, ARCH, key);
    memset(&c, 0, sizeof c);
    hit = ft__cache_get(cache, key, &c);
    ft__compiled_free(&c);
    return hit;
}

/* One compiling thread into cache, with ka, kbb, kccc and kd queued in that order (no thread:
 * the test program fails, as open_cache does). */
static ft_prefetch *start_four(ft_cache *cache)
{
    ft_prefetch *pf = NULL;
    ft_err err;

    if (ft__prefetch_start(&pf, cache, 1, NULL, NULL, &err) != FT_OK) {
        fprintf(stderr, "test_prefetch: %s\n", err.msg);
        exit(1);
    }
    if (pf == NULL) {
        fprintf(stderr, "test_prefetch: no compiling thread could be started\n");
        exit(1);
    }
    queue(pf, "ka");
    queue(pf, "kbb");
    queue(pf, "kccc");
    queue(pf, "kd");
    return pf;
}

/* Stops pf and returns how many jobs it compiled. */
static int stop_counting(ft_prefetch *pf)
{
    ft_tune_summary sum;

    memset(&sum, 0, sizeof sum);
    ft__prefetch_stop(pf, &sum);
    return sum.prefetched;
}

/* Waiting for one job: it moves ahead of the two queued before it, and the drain returns once it
 * has compiled, before the last of those could. Then the whole queue. */
static void test_drain_own(void)
{
    ft_cache *cache = open_cache();
    ft_prefetch *pf = start_four(cache);
    const char *own[] = {"kd"};

    ft__prefetch_drain(pf, own, 1);
    ASSERT_TRUE(cached(cache, "kd"));
    ASSERT_TRUE(!cached(cache, "kccc")); /* behind kbb, which could start only after kd */
    ft__prefetch_drain(pf, NULL, -1);
    ASSERT_TRUE(cached(cache, "ka") && cached(cache, "kbb") && cached(cache, "kccc"));
    ASSERT_EQ(stop_counting(pf), 4);
    ft__cache_close(cache);
}

/* Taking two waiting jobs over drops them: the whole queue's drain then compiles the others only
 * (the first, already compiling when they were taken, and the last). */
static void test_take(void)
{
    ft_cache *cache = open_cache();
    ft_prefetch *pf = start_four(cache);
    const char *taken[] = {"kbb", "kccc"};

    ft__prefetch_take(pf, taken, 2);
    ft__prefetch_drain(pf, NULL, -1);
    ASSERT_TRUE(cached(cache, "ka") && cached(cache, "kd"));
    ASSERT_TRUE(!cached(cache, "kbb") && !cached(cache, "kccc"));
    ASSERT_EQ(stop_counting(pf), 2);
    ft__cache_close(cache);
}

FT_TEST_MAIN(FT_CASE(test_drain_own), FT_CASE(test_take))
