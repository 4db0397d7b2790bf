/* The runtime's built-in default kernels (runtime/defaults.c): every entry, completed as the
 * runtime completes it for a call (ft__default_complete: the call's head dim, causality,
 * determinism where its spec has it, dtype, and the spec's parameter defaults), names every parameter of its family's spec, is kept by the spec's
 * constraints and limits on the H200's target, and compiles there (without spills where the
 * spec rejects them); on sm_80 some entry is kept for every call an entry serves. A default that
 * failed any of these would be skipped at run time for the next one, silently. The Hopper
 * families' defaults also have their SASS read ($CUOBJDUMP; said skipped without it): the main
 * kernel has HGMMA and TMA loads, no mma.sync and no local memory, ptxas serialised no wgmma,
 * and the wgmma descriptors are built in uniform registers: at most 8 more R2UR (a per-thread
 * register moved to a uniform one) than HGMMA in all. Built per thread, each wgmma took two or
 * three R2UR on its critical path (forward d = 128 causal: 245 for 72 HGMMA; backward d = 128:
 * 80 for 32); built uniform, the kernel has a few for its other work (at most 5 over the HGMMA
 * count among the defaults). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "ft_test.h"
#include "generator/arch.h"
#include "generator/family.h"
#include "generator/spec.h"
#include "generator/variant.h"
#include "ops/op.h"
#include "runtime/compile.h"
#include "runtime/defaults.h"
#include "tuner/plan.h"

/* The built-in spec of a family (its template's name), or NULL. */
static ft_spec *spec_of(const char *family)
{
    ft_spec *spec = NULL;
    ft_err err;
    int i;

    for (i = 0; ft__spec_load_builtin(i, &spec, &err) == FT_OK; i++) {
        if (strcmp(spec->template_name, family) == 0)
            return spec;
        ft__spec_free(spec);
        spec = NULL;
    }
    return NULL;
}

/* Whether a variant text names parameter `name`. */
static int names(const char *variant, const char *name)
{
    char v[64];
    return ft__variant_text_value(variant, name, v, sizeof v) == 1;
}

/* The entry's variant for a call of head dim d, as the runtime completes it. */
static void complete_at(const ft_spec *spec, const ft_default_kernel *e, int d, int causal, int det,
                        const char *dtype, char *out, size_t cap)
{
    ASSERT_TRUE(ft__default_complete(spec, e->variant, d, causal, det, dtype, out, cap) < cap);
}

/* The entry's variant for a call of its own head dim. */
static void complete(const ft_spec *spec, const ft_default_kernel *e, int causal, int det, const char *dtype,
                     char *out, size_t cap)
{
    complete_at(spec, e, e->head_dim, causal, det, dtype, out, cap);
}

/* The SASS of a compiled Hopper kernel (cuobjdump at cuobjdump_path), its main kernel (not the
 * _pre or _post entries): HGMMA and UTMALDG present, no HMMA, no LDL or STL, at most HGMMA + 8
 * R2UR. 1 when it passes, else 0 with the counts in why. */
static int sass_ok(const char *cuobjdump_path, const ft_compiled *c, char *why, size_t cap)
{
    char path[] = "/tmp/ft-defaults-XXXXXX", cmd[1200], line[1024];
    int fd = mkstemp(path), main_kernel = 0, hgmma = 0, tma = 0, hmma = 0, local = 0, r2ur = 0;
    FILE *f;

    snprintf(why, cap, "cannot write or read its SASS");
    if (fd < 0)
        return 0;
    if (write(fd, c->cubin, c->cubin_size) != (ssize_t)c->cubin_size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' -sass '%s' 2>&1", cuobjdump_path, path);
    f = popen(cmd, "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, "Function :") != NULL)
            main_kernel = strstr(line, "_pre") == NULL && strstr(line, "_post") == NULL;
        if (!main_kernel)
            continue;
        hgmma += strstr(line, "HGMMA") != NULL;
        tma += strstr(line, "UTMALDG") != NULL;
        hmma += strstr(line, " HMMA") != NULL;
        local += strstr(line, " LDL") != NULL || strstr(line, " STL") != NULL;
        r2ur += strstr(line, " R2UR ") != NULL;
    }
    if (f != NULL)
        pclose(f);
    unlink(path);
    snprintf(why, cap, "main kernel: %d HGMMA, %d UTMALDG, %d HMMA, %d local-memory accesses, %d R2UR", hgmma, tma,
             hmma, local, r2ur);
    return hgmma > 0 && tma > 0 && hmma == 0 && local == 0 && r2ur <= hgmma + 8;
}

/* Builds the one-variant plan of `text` for arch: FT_PLAN_PENDING when pruning keeps it. With
 * compile, compiles it and returns its status after; with sass (a cuobjdump, or NULL) also
 * checks the compiled kernel's SASS (FT_PLAN_OVER_LIMITS with the counts when it fails). */
static ft_plan_status plan_one(ft_spec *spec, const char *text, const char *arch_name, ft_cache *cache, int compile,
                               const char *sass, char *reason, size_t cap, long long *spills)
{
    ft_plan *plan = NULL;
    ft_variant v;
    ft_arch arch;
    ft_err err;
    ft_plan_status st;
    unsigned mask;

    reason[0] = '\0';
    /* a head dim the spec's open d does not list joins it, as the runtime adds it for a call */
    if (ft__spec_add_values(spec, text, &err) != FT_OK || ft__variant_parse(spec, text, &v, &err) != FT_OK) {
        snprintf(reason, cap, "does not parse: %s", err.msg);
        return FT_PLAN_COMPILE_ERROR;
    }
    mask = (1u << spec->nparams) - 1;
    if (ft__arch_builtin(arch_name, &arch, &err) != FT_OK || ft__plan_build(spec, &arch, &v, mask, &plan, &err) != FT_OK) {
        snprintf(reason, cap, "no plan: %s", err.msg);
        return FT_PLAN_COMPILE_ERROR;
    }
    if (plan->nitems != 1) {
        snprintf(reason, cap, "%d variants match it", plan->nitems);
        ft__plan_free(plan);
        return FT_PLAN_COMPILE_ERROR;
    }
    plan->keep_cubins = sass != NULL;
    if (compile && plan->items[0].status == FT_PLAN_PENDING &&
        ft__plan_compile(plan, cache, 1, NULL, NULL, NULL, &err) != FT_OK) {
        snprintf(reason, cap, "compile: %s", err.msg);
        ft__plan_free(plan);
        return FT_PLAN_COMPILE_ERROR;
    }
    st = plan->items[0].status;
    snprintf(reason, cap, "%s", plan->items[0].reason);
    if (spills != NULL)
        *spills = st == FT_PLAN_COMPILED
                      ? (plan->items[0].report.spill_stores > 0 ? plan->items[0].report.spill_stores : 0) +
                            (plan->items[0].report.spill_loads > 0 ? plan->items[0].report.spill_loads : 0)
                      : 0;
    if (sass != NULL && st == FT_PLAN_COMPILED) {
        char why[256];
        if (!sass_ok(sass, &plan->items[0].compiled, why, sizeof why)) {
            st = FT_PLAN_OVER_LIMITS;
            snprintf(reason, cap, "SASS: %s", why);
        } else if (ft__log_wgmma_serialized(plan->items[0].compiled.log, why, sizeof why)) {
            st = FT_PLAN_OVER_LIMITS;
            snprintf(reason, cap, "ptxas serialised its wgmma: %s", why);
        }
    }
    ft__plan_free(plan);
    return st;
}

/* Every entry on sm_90 (the target its family builds for on an H200: sm_90a for the Hopper
 * families), every call it serves: kept, and compiled in bf16 (f16 pruned only: the dtype
 * changes no structure); on sm_80 the calls of the families that run there each kept by some
 * entry. */
static void test_defaults_build(void)
{
    static const char *const dtypes[] = {"bf16", "f16"};
    const char *cache_dir = getenv("FLASHTUNE_CACHE_DIR"), *cuobjdump = getenv("CUOBJDUMP");
    ft_cache *cache = NULL;
    ft_err err;
    size_t n, i;
    int c, t, det, checked = 0, compiled = 0, sass_read = 0;
    const ft_default_kernel *defaults = ft__default_kernels(&n);

    ASSERT_TRUE(n > 0);
    if (cache_dir != NULL && cache_dir[0] != '\0')
        ASSERT_OK(ft__cache_open(cache_dir, &cache, &err), &err);
    for (i = 0; i < n; i++) {
        const ft_default_kernel *e = &defaults[i];
        const ft_family *fam = ft__family_find(e->family);
        ft_spec *spec = spec_of(e->family);
        const int has_det = spec != NULL && ft__spec_param_index(spec, "det") >= 0 && !names(e->variant, "det");

        if (fam == NULL || spec == NULL)
            FT_FAIL_("default %zu names family %s, which has no built-in spec", i, e->family);
        if (spec == NULL)
            continue;
        ASSERT_TRUE(e->causal >= -1 && e->causal <= 1);
        for (c = 0; c <= 1; c++) {
            if (e->causal >= 0 && c != e->causal)
                continue;
            for (det = 0; det <= has_det; det++)
                for (t = 0; t < 2; t++) {
                    char text[1024], reason[512];
                    ft_plan_status st;
                    const int hopper = strstr(e->family, "_sm90") != NULL;
                    const char *sass = t == 0 && hopper && cuobjdump != NULL && cuobjdump[0] ? cuobjdump : NULL;
                    complete(spec, e, c, det, dtypes[t], text, sizeof text);
                    st = plan_one(spec, text, "sm_90", cache, t == 0, sass, reason, sizeof reason, NULL);
                    sass_read += sass != NULL && st == FT_PLAN_COMPILED;
                    if (st != (t == 0 ? FT_PLAN_COMPILED : FT_PLAN_PENDING))
                        FT_FAIL_("default %s (%s) on sm_90: %s: %s", text, e->family, ft__plan_status_name(st),
                                 reason);
                    checked++;
                    compiled += t == 0 && st == FT_PLAN_COMPILED;
                }
        }
        ft__spec_free(spec);
    }

    /* sm_80: for each family that runs there and each call one of its entries serves, the first
     * entry of that family, head dim and causality that pruning keeps. */
    for (i = 0; i < n; i++) {
        const ft_default_kernel *e = &defaults[i];
        ft_spec *spec = spec_of(e->family);
        ft_arch a80;
        char why[256];
        size_t j;
        int has_det;

        ASSERT_OK(ft__arch_builtin("sm_80", &a80, &err), &err);
        if (spec == NULL || !ft__family_supports_arch(ft__family_find(e->family), &a80, why, sizeof why)) {
            ft__spec_free(spec);
            continue;
        }
        has_det = ft__spec_param_index(spec, "det") >= 0 && !names(e->variant, "det");
        for (c = 0; c <= 1; c++) {
            if (e->causal >= 0 && c != e->causal)
                continue;
            for (det = 0; det <= has_det; det++) {
                int kept = 0;
                for (j = 0; j < n && !kept; j++) {
                    const ft_default_kernel *o = &defaults[j];
                    char text[1024], reason[512];
                    if (strcmp(o->family, e->family) != 0 || o->head_dim != e->head_dim ||
                        (o->causal >= 0 && o->causal != c))
                        continue;
                    complete(spec, o, c, det, "bf16", text, sizeof text);
                    kept = plan_one(spec, text, "sm_80", NULL, 0, NULL, reason, sizeof reason, NULL) == FT_PLAN_PENDING;
                }
                if (!kept)
                    FT_FAIL_("no default of %s keeps d=%d causal=%d det=%d on sm_80", e->family, e->head_dim, c, det);
            }
        }
        ft__spec_free(spec);
    }
    printf("  %d calls checked, %d compiled", checked, compiled);
    if (cuobjdump != NULL && cuobjdump[0])
        printf(", the SASS of %d Hopper ones read\n", sass_read);
    else
        printf("; their SASS skipped (no CUOBJDUMP)\n");
    ASSERT_TRUE(compiled > 0 && compiled * 2 == checked);
    ft__cache_close(cache);
}

/* The runtime's choice among a call's built-in defaults (runtime/defaults.c, key of head dim d,
 * causal c, determinism det), as far as family goes: its first entry of that family (whose
 * completed text names `want`, where given: the call's determinism) that the spec keeps at d.
 * 0 when none is kept; else 1, with the entry compiled for arch through cache: its text, status,
 * spilled bytes and reason. */
static int first_kept_default(ft_spec *spec, const char *family, const ft_key *key, int needs, int d, int c,
                              int det, const char *want, const char *arch, ft_cache *cache, char *text, size_t cap,
                              ft_plan_status *st, long long *spills, char *reason, size_t reason_cap)
{
    const ft_default_kernel *order[FT_DEFAULTS_MAX];
    const size_t n = ft__default_order(key, needs, order, FT_DEFAULTS_MAX);
    size_t i;

    for (i = 0; i < n; i++) {
        if (strcmp(order[i]->family, family) != 0)
            continue;
        complete_at(spec, order[i], d, c, det, "bf16", text, cap);
        if (want != NULL && strstr(text, want) == NULL)
            continue; /* the runtime takes entries of the call's determinism only */
        if (plan_one(spec, text, arch, NULL, 0, NULL, reason, reason_cap, NULL) != FT_PLAN_PENDING)
            continue; /* pruned: the runtime tries the next entry */
        *spills = 0;
        *st = plan_one(spec, text, arch, cache, 1, NULL, reason, reason_cap, spills);
        return 1;
    }
    return 0;
}

/* Head dims the table does not list, odd multiples of 8 among them: a call takes each family's
 * entries of the nearest head dim above it with its own d (runtime/defaults.c), the first that
 * its spec keeps and that builds. For each forward family, causal or not, that first kept entry
 * compiles for sm_90 (sm_90a for the Hopper family) and, for the families that run there, for
 * sm_80, without spills where the spec rejects them (flash_fwd_sm80's spec allows them, and its
 * entries spill at their own head dims too: d = 64's 228 bytes on sm_80; their spills are
 * printed): prefill calls for the prefill families, calls with a KV cache (the short-query
 * family's entries only) for the short-query one. bf16 only (the dtype changes no structure).
 * Not the short-query family above 192: d = 256's entry, the one it takes there, spills at the
 * head dims whose 16-byte chunks per row do not divide a warp's 32 lanes, multiples of 16 (224,
 * 240: 76 and 132 bytes on sm_90) or not (248: 168; 200 on sm_80: 4), and on sm_80 no variant of
 * the spec at 248 compiles without spills (nor does d = 256's non-causal default at 256). */
static void test_defaults_new_dims(void)
{
    static const int dims[] = {40, 72, 88, 120, 136, 200, 248};
    static const char *const families[] = {"flash_fwd_sm90", "flash_fwd_sm80", "flash_decode_sm80"};
    const char *cache_dir = getenv("FLASHTUNE_CACHE_DIR");
    ft_cache *cache = NULL;
    ft_err err;
    size_t di, fi;
    int c, a, compiled = 0;

    if (cache_dir != NULL && cache_dir[0] != '\0')
        ASSERT_OK(ft__cache_open(cache_dir, &cache, &err), &err);
    for (di = 0; di < sizeof dims / sizeof dims[0]; di++)
        for (fi = 0; fi < sizeof families / sizeof families[0]; fi++) {
            const int hopper = strstr(families[fi], "_sm90") != NULL, decode = strstr(families[fi], "decode") != NULL;
            ft_spec *spec = spec_of(families[fi]);

            ASSERT_TRUE(spec != NULL);
            if (spec == NULL)
                continue;
            if (decode && dims[di] > 192) {
                ft__spec_free(spec);
                continue;
            }
            for (c = 0; c <= 1; c++)
                for (a = 0; a < (hopper ? 1 : 2); a++) {
                    const char *arch = a == 0 ? "sm_90" : "sm_80";
                    char text[1024], reason[512];
                    long long spills = 0;
                    ft_plan_status st = FT_PLAN_PENDING;
                    ft_key key;

                    ft__key_of(&ft__op_fwd, "bf16", dims[di], c, 0, 4, 32, 4, decode ? 1 : 4096, 4096, &key);
                    if (!first_kept_default(spec, families[fi], &key, decode ? FT_NEEDS_SPLIT : FT_NEEDS_DENSE,
                                            dims[di], c, 0, NULL, arch, cache, text, sizeof text, &st, &spills,
                                            reason, sizeof reason))
                        FT_FAIL_("no default of %s is kept for d = %d causal = %d on %s", families[fi], dims[di], c,
                                 arch);
                    if (st != FT_PLAN_COMPILED || (spec->reject_spills && spills > 0))
                        FT_FAIL_("default %s (%s) for d = %d on %s: %s, %lld spilled bytes: %s", text, families[fi],
                                 dims[di], arch, ft__plan_status_name(st), spills, reason);
                    if (spills > 0)
                        printf("  %s on %s: %lld bytes of spills\n", text, arch, spills);
                    compiled++;
                }
            ft__spec_free(spec);
        }
    printf("  %d defaults compiled at head dims the table does not list\n", compiled);
    ft__cache_close(cache);
}

/* The backward at head dims the table does not list, odd multiples of 8 among them: for each
 * call, causal or not, deterministic or not, and each backward family, the first of its entries
 * of the nearest head dim above that its spec keeps compiles without spills (the sm_90a family
 * for sm_90a, the sm80 one for sm_80), its tiles the head dim rounded up to 16 (the sm_90a
 * family's with kvsplit to 32: 168, 176 and 184 take d = 192's entries, two warpgroups of 96
 * columns each; 208 and 240 d = 224's and 256's). Except the sm_90a family's deterministic calls
 * above 192: its deterministic structure (dQ staged in shared memory) does not fit there, so none
 * of its entries is kept and the sm80 family serves them (on an H200 too). */
static void test_bwd_defaults_new_dims(void)
{
    /* per family: 216 on the sm_90a one (224-wide kvsplit tiles), 200 on the sm80 one (whose
     * d = 224 entry, at its register limit there, spills 44-60 bytes at 216 on sm_80) */
    static const struct {
        const char *family, *arch;
        int ndims, dims[12];
    } families[] = {{"flash_bwd_sm90", "sm_90a", 11, {40, 72, 88, 120, 168, 176, 184, 208, 216, 240, 248}},
                    {"flash_bwd_sm80", "sm_80", 8, {40, 72, 88, 120, 168, 184, 200, 248}}};
    const char *cache_dir = getenv("FLASHTUNE_CACHE_DIR");
    ft_cache *cache = NULL;
    ft_err err;
    size_t di, fi;
    int c, det, compiled = 0;

    if (cache_dir != NULL && cache_dir[0] != '\0')
        ASSERT_OK(ft__cache_open(cache_dir, &cache, &err), &err);
    for (fi = 0; fi < sizeof families / sizeof families[0]; fi++) {
        const int hopper = fi == 0;
        ft_spec *spec = spec_of(families[fi].family);

        ASSERT_TRUE(spec != NULL);
        if (spec == NULL)
            continue;
        for (di = 0; di < (size_t)families[fi].ndims; di++)
            for (c = 0; c <= 1; c++)
                for (det = 0; det <= 1; det++) {
                    const int d = families[fi].dims[di], none = hopper && det && d > 192;
                    char want_det[16], text[1024], reason[512];
                    long long spills = 0;
                    ft_plan_status st = FT_PLAN_PENDING;
                    ft_key key;
                    int kept;

                    snprintf(want_det, sizeof want_det, "det=%d", det);
                    ft__key_of(&ft__op_bwd, "bf16", d, c, det, 4, 32, 8, 4096, 4096, &key);
                    kept = first_kept_default(spec, families[fi].family, &key, FT_NEEDS_DENSE, d, c, det, want_det,
                                              families[fi].arch, cache, text, sizeof text, &st, &spills, reason,
                                              sizeof reason);
                    if (kept && none)
                        FT_FAIL_("a deterministic backward default of %s is kept at d = %d", families[fi].family, d);
                    if (!kept && !none)
                        FT_FAIL_("no backward default of %s is kept for d = %d causal = %d det = %d",
                                 families[fi].family, d, c, det);
                    if (kept && (st != FT_PLAN_COMPILED || spills > 0))
                        FT_FAIL_("backward default %s for d = %d on %s: %s, %lld spilled bytes: %s", text, d,
                                 families[fi].arch, ft__plan_status_name(st), spills, reason);
                    compiled += kept;
                }
        ft__spec_free(spec);
    }
    printf("  %d backward defaults compiled at head dims the table does not list\n", compiled);
    /* the head dims x causal x det of both families; not sm_90a's deterministic ones above 192 */
    ASSERT_EQ(compiled, 11 * 4 + 8 * 4 - 4 * 2);
    ft__cache_close(cache);
}

FT_TEST_MAIN(FT_CASE(test_defaults_build), FT_CASE(test_defaults_new_dims), FT_CASE(test_bwd_defaults_new_dims))
