/* ft__plan_sample (flashtune plan --sample): the sample's size, that pruning is untouched, that
 * it has every parameter value of the kept variants, that it is spread over the whole space and
 * a function of the plan, n and seed alone. No compilation: the plans are only built. */
#include <string.h>

#include "ft_test.h"
#include "generator/variant.h"
#include "tuner/plan.h"

typedef struct space {
    const char *spec;
    const char *arch;
} space;

static const space spaces[] = {
    {NULL, "sm_80"}, {NULL, "sm_86"}, {NULL, "sm_89"}, {NULL, "sm_90"}, {"flash_fwd_sm90", "sm_90"},
};

/* Builds the plan of one space (the spec is kept in *spec). */
static ft_status build(const space *sp, ft_spec **spec, ft_plan **plan, ft_err *err)
{
    ft_arch arch;
    ft_status rc;

    *plan = NULL;
    rc = ft__spec_load_default(sp->spec, spec, err);
    if (rc != FT_OK)
        return rc;
    rc = ft__arch_builtin(sp->arch, &arch, err);
    if (rc != FT_OK)
        return rc;
    return ft__plan_build(*spec, &arch, NULL, 0, plan, err);
}

static void test_sample_size_pruning_coverage(void)
{
    size_t s;

    for (s = 0; s < sizeof spaces / sizeof spaces[0]; s++) {
        ft_spec *spec = NULL;
        ft_plan *plan = NULL;
        ft_plan_status *before = NULL;
        unsigned char present[FT_MAX_PARAMS][FT_MAX_VALUES], sampled[FT_MAX_PARAMS][FT_MAX_VALUES];
        ft_plan_sample_info info;
        ft_err err;
        int kept, pruned, n, i, p, v, values = 0;

        ASSERT_OK(build(&spaces[s], &spec, &plan, &err), &err);
        kept = plan->count[FT_PLAN_PENDING];
        pruned = plan->count[FT_PLAN_PRUNED];
        ASSERT_TRUE(kept > 600);
        before = malloc((size_t)plan->nitems * sizeof *before);
        ASSERT_TRUE(before != NULL);
        memset(present, 0, sizeof present);
        for (i = 0; i < plan->nitems; i++) {
            before[i] = plan->items[i].status;
            if (before[i] == FT_PLAN_PENDING)
                for (p = 0; p < spec->nparams; p++)
                    present[p][plan->items[i].variant.idx[p]] = 1;
        }
        n = kept / 6;
        ASSERT_OK(ft__plan_sample(plan, n, 0, &info, &err), &err);
        ASSERT_EQ(plan->count[FT_PLAN_PENDING], n);
        ASSERT_EQ(plan->count[FT_PLAN_NOT_SAMPLED], kept - n);
        ASSERT_EQ(plan->count[FT_PLAN_PRUNED], pruned);
        ASSERT_EQ(info.kept, kept);
        ASSERT_EQ(info.sampled, n);
        memset(sampled, 0, sizeof sampled);
        for (i = 0; i < plan->nitems; i++) {
            const ft_plan_item *it = &plan->items[i];
            if (before[i] == FT_PLAN_PRUNED) {
                ASSERT_EQ(it->status, FT_PLAN_PRUNED); /* pruning is the plan's, not the sample's */
                continue;
            }
            ASSERT_TRUE(it->status == FT_PLAN_PENDING || it->status == FT_PLAN_NOT_SAMPLED);
            if (it->status == FT_PLAN_NOT_SAMPLED)
                ASSERT_STREQ(it->reason, "not in the sample");
            else
                for (p = 0; p < spec->nparams; p++)
                    sampled[p][it->variant.idx[p]] = 1;
        }
        for (p = 0; p < spec->nparams; p++)
            for (v = 0; v < spec->params[p].nvalues; v++) {
                values += present[p][v];
                if (present[p][v] && !sampled[p][v])
                    FT_FAIL_("%s on %s: value %d of %s is kept but not sampled", spec->path,
                             spaces[s].arch, v, spec->params[p].name);
            }
        ASSERT_EQ(info.values, values);
        ASSERT_EQ(info.uncovered, 0);
        ASSERT_STREQ(info.missing, "");
        printf("  %s on %s: %d of %d kept, %d values\n", spec->path, plan->arch.name, n, kept, values);
        free(before);
        ft__plan_free(plan);
        ft__spec_free(spec);
    }
}

/* Every window of 3 * kept / n kept variants, in the order of the space, has a sampled one. */
static void test_sample_spread(void)
{
    size_t s;

    for (s = 0; s < sizeof spaces / sizeof spaces[0]; s++) {
        ft_spec *spec = NULL;
        ft_plan *plan = NULL;
        ft_err err;
        int kept, n, i, pos = 0, last = -1, gap = 0, window;

        ASSERT_OK(build(&spaces[s], &spec, &plan, &err), &err);
        kept = plan->count[FT_PLAN_PENDING];
        n = kept / 6;
        window = 3 * kept / n;
        ASSERT_OK(ft__plan_sample(plan, n, 7, NULL, &err), &err);
        for (i = 0; i < plan->nitems; i++) {
            ft_plan_status st = plan->items[i].status;
            if (st != FT_PLAN_PENDING && st != FT_PLAN_NOT_SAMPLED)
                continue;
            if (st == FT_PLAN_PENDING) {
                if (pos - last > gap)
                    gap = pos - last;
                last = pos;
            }
            pos++;
        }
        if (kept - last > gap)
            gap = kept - last;
        if (gap > window)
            FT_FAIL_("%s on %s: %d kept variants in a row without a sampled one (at most %d)",
                     spec->path, spaces[s].arch, gap - 1, window);
        ft__plan_free(plan);
        ft__spec_free(spec);
    }
}

/* Returns the number of items whose status differs between two plans of one space. */
static int differences(const ft_plan *a, const ft_plan *b)
{
    int i, d = 0;

    for (i = 0; i < a->nitems && i < b->nitems; i++)
        d += a->items[i].status != b->items[i].status;
    return d + (a->nitems != b->nitems);
}

static void test_sample_deterministic(void)
{
    ft_spec *spec = NULL, *spec2 = NULL, *spec3 = NULL;
    ft_plan *a = NULL, *b = NULL, *c = NULL;
    ft_err err;

    ASSERT_OK(build(&spaces[3], &spec, &a, &err), &err);
    ASSERT_OK(build(&spaces[3], &spec2, &b, &err), &err);
    ASSERT_OK(build(&spaces[3], &spec3, &c, &err), &err);
    ASSERT_OK(ft__plan_sample(a, 100, 42, NULL, &err), &err);
    ASSERT_OK(ft__plan_sample(b, 100, 42, NULL, &err), &err);
    ASSERT_OK(ft__plan_sample(c, 100, 43, NULL, &err), &err);
    ASSERT_EQ(differences(a, b), 0);
    ASSERT_TRUE(differences(a, c) > 20); /* another seed, another sample */
    ASSERT_EQ(c->count[FT_PLAN_PENDING], 100);
    ft__plan_free(a);
    ft__plan_free(b);
    ft__plan_free(c);
    ft__spec_free(spec);
    ft__spec_free(spec2);
    ft__spec_free(spec3);
}

static void test_sample_bounds(void)
{
    ft_spec *spec = NULL;
    ft_plan *plan = NULL;
    ft_plan_sample_info info;
    ft_err err;
    int kept, i;

    /* n >= kept keeps every kept variant */
    ASSERT_OK(build(&spaces[3], &spec, &plan, &err), &err);
    kept = plan->count[FT_PLAN_PENDING];
    ASSERT_OK(ft__plan_sample(plan, kept + 100, 0, &info, &err), &err);
    ASSERT_EQ(plan->count[FT_PLAN_PENDING], kept);
    ASSERT_EQ(plan->count[FT_PLAN_NOT_SAMPLED], 0);
    ASSERT_EQ(info.sampled, kept);
    ASSERT_EQ(info.uncovered, 0);
    ft__plan_free(plan);
    ft__spec_free(spec);
    spec = NULL;

    /* one variant cannot have every value: the sample says which it lacks */
    ASSERT_OK(build(&spaces[3], &spec, &plan, &err), &err);
    ASSERT_OK(ft__plan_sample(plan, 1, 0, &info, &err), &err);
    ASSERT_EQ(plan->count[FT_PLAN_PENDING], 1);
    ASSERT_EQ(info.sampled, 1);
    ASSERT_EQ(info.uncovered, info.values - spec->nparams);
    ASSERT_CONTAINS(info.missing, "d=");
    ASSERT_CONTAINS(info.missing, "dtype=");

    /* n < 1, and a plan with compiled items, are refused and change nothing */
    ASSERT_EQ(ft__plan_sample(plan, 0, 0, &info, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "at least 1 variant");
    ASSERT_EQ(plan->count[FT_PLAN_PENDING], 1);
    for (i = 0; i < plan->nitems && plan->items[i].status != FT_PLAN_PENDING; i++)
        ;
    ASSERT_TRUE(i < plan->nitems);
    plan->items[i].status = FT_PLAN_COMPILED;
    plan->count[FT_PLAN_PENDING]--;
    plan->count[FT_PLAN_COMPILED]++;
    ASSERT_EQ(ft__plan_sample(plan, 5, 0, &info, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "before it is compiled");
    ASSERT_EQ(plan->count[FT_PLAN_COMPILED], 1);
    ft__plan_free(plan);
    ft__spec_free(spec);
}

FT_TEST_MAIN(FT_CASE(test_sample_size_pruning_coverage), FT_CASE(test_sample_spread),
             FT_CASE(test_sample_deterministic), FT_CASE(test_sample_bounds))
