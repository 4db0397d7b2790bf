/*
 * A plan: every variant of a spec for one target, pruned against the target's limits,
 * generated and compiled. `flashtune plan` prints it; the tuner measures what it compiled.
 */
#ifndef FT_TUNER_PLAN_H
#define FT_TUNER_PLAN_H

#include "common/error.h"
#include "generator/arch.h"
#include "generator/emit.h"
#include "generator/family.h"
#include "generator/spec.h"
#include "runtime/compile.h"

typedef enum ft_plan_status {
    FT_PLAN_PENDING = 0,   /* kept by pruning, not compiled yet */
    FT_PLAN_PRUNED,        /* removed before compiling: a constraint or a limit formula */
    FT_PLAN_COMPILED,
    FT_PLAN_COMPILE_ERROR,
    FT_PLAN_OVER_LIMITS,   /* compiled, but the resource report exceeds the target's limits */
    FT_PLAN_NOT_SAMPLED    /* kept by pruning, left out of a sample (ft__plan_sample) or of
                            * what a tune needs (ft__plan_leave_out): not compiled */
} ft_plan_status;

const char *ft__plan_status_name(ft_plan_status s); /* "compiled", "pruned", ... */

typedef struct ft_plan_item {
    ft_variant variant;
    char variant_str[512];
    ft_plan_status status;
    char reason[512];          /* why pruned / over limits / the compile error's first line */
    char reason_class[160];    /* the reason without its numbers, for the summary */
    long long smem_dynamic;    /* from the spec's formula; -1 before it was evaluated */
    int threads;
    ft_resource_report report; /* after compiling */
    double compile_ms;
    int cache_hit;
    uint8_t key[32];           /* the compile cache's key (set when compiled) */
    char source_hash[65];      /* sha256 of the generated source */
    ft_kernel_source source;   /* text kept only until compiled, unless keep_sources */
    ft_compiled compiled;      /* cubin and log kept only with keep_cubins */
    int prefetched;            /* the tuner compiled it ahead into the cache (tuner/prefetch.c) */
} ft_plan_item;

typedef struct ft_plan {
    ft_spec *spec;             /* borrowed */
    const ft_family *family;
    ft_arch arch;
    int nitems;
    ft_plan_item *items;
    int keep_sources;
    int keep_cubins;
    int count[FT_PLAN_NOT_SAMPLED + 1];
} ft_plan;

/* Expands the spec's space (only the variants matching filter/mask when mask != 0) and
 * prunes it for arch: the family must support the target, then, per variant, the spec's
 * constraints in order, the threads per block, the smem formula against the opt-in
 * shared memory per block, and the registers estimate against the per-thread limit. */
ft_status ft__plan_build(ft_spec *spec, const ft_arch *arch, const ft_variant *filter,
                         unsigned mask, ft_plan **out, ft_err *err);

/* The same, but the items are the variants pruning keeps: the pruned ones are only counted
 * (count[FT_PLAN_PRUNED]; nitems does not include them). What a tune needs, in the room of a
 * sixtieth of the whole space (the sm_90a forward's 1548288 variants, 24780 kept: 2392 bytes
 * an item). */
ft_status ft__plan_build_kept(ft_spec *spec, const ft_arch *arch, const ft_variant *filter, unsigned mask,
                              ft_plan **out, ft_err *err);

/* The same, handing each pruned variant to on_pruned as pruning turns it away (in the space's
 * order, with the plan as far as it is built: its spec, family and target are set; the item,
 * its variant text and reason filled in, lives only for the call): what
 * `flashtune plan` prints of the pruned ones without keeping them (1.5 million variants of the
 * sm_90a forward held 3.6 GB as items). */
typedef void (*ft_plan_pruned_fn)(void *ud, const ft_plan *plan, const ft_plan_item *it);
ft_status ft__plan_build_streamed(ft_spec *spec, const ft_arch *arch, const ft_variant *filter, unsigned mask,
                                  ft_plan_pruned_fn on_pruned, void *ud, ft_plan **out, ft_err *err);

/* Marks FT_PLAN_NOT_SAMPLED the items that pruning kept and needed(item, ud) turns down, so
 * that ft__plan_compile leaves them out (a tune compiles only the variants some bucket of it
 * measures); returns how many. On a plan not compiled yet. */
int ft__plan_leave_out(ft_plan *plan, int (*needed)(const ft_plan_item *it, void *ud), void *ud);

/* What a sample covers (ft__plan_sample). */
typedef struct ft_plan_sample_info {
    int kept;              /* the items pruning kept */
    int sampled;           /* of them, the ones left pending */
    int values;            /* parameter values that some kept item has */
    int uncovered;         /* of them, the ones no sampled item has */
    char missing[256];     /* those, as "name=value" comma-separated (cut to fit), or "" */
} ft_plan_sample_info;

/* Keeps n of the items that pruning kept and marks the others FT_PLAN_NOT_SAMPLED, for a check
 * quicker than compiling all (pruning was evaluated for every variant already). The sample is
 * a function of the plan, n and seed alone. It first takes, greedily, items that bring values
 * of parameters that no sampled item has yet, until every value that a kept item has is in
 * the sample (or n is reached), then one item from each of n - (those) equal stretches of the
 * remaining kept items in the order of the space, at a position within the stretch drawn from
 * seed. n >= the kept count keeps them all. info (may be NULL) says what the sample covers.
 * Fails (FT_ERR_INVALID_ARGUMENT) for n < 1 or on a plan already compiled. */
ft_status ft__plan_sample(ft_plan *plan, int n, unsigned long long seed, ft_plan_sample_info *info,
                          ft_err *err);

/* Called from worker threads after each compile (serialise inside if needed). */
typedef void (*ft_plan_progress_fn)(void *ud, const ft_plan *plan, const ft_plan_item *item,
                                    int done, int total);

/* Generates and compiles every pending item on `jobs` threads (0: one per core), through the
 * cache when it is not NULL. Compile errors are recorded on the item, not returned; the call
 * fails only on a generator error or when *stop is set (FT_ERR_INTERRUPTED). */
ft_status ft__plan_compile(ft_plan *plan, ft_cache *cache, int jobs, ft_plan_progress_fn progress,
                           void *ud, volatile int *stop, ft_err *err);

/* The two halves of ft__plan_compile for a subset of the items (indices into plan->items; the
 * ones not pending are skipped). ft__plan_emit_items generates their sources: it runs the
 * spec's Lua, so one thread at a time, the one that owns the spec. ft__plan_compile_items then
 * compiles them and touches no Lua, so it may run on another thread while the owner uses the
 * spec and the plan's other items (the tuner measures one group of variants while the next
 * compiles); an item without its source is a compile error. */
ft_status ft__plan_emit_items(ft_plan *plan, const int *items, int n, ft_err *err);
ft_status ft__plan_compile_items(ft_plan *plan, const int *items, int n, ft_cache *cache, int jobs,
                                 ft_plan_progress_fn progress, void *ud, volatile int *stop, ft_err *err);

void ft__plan_free(ft_plan *plan); /* NULL is a no-op */

#endif
