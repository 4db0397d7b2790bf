/* The Hopper family (flash_fwd_sm90, wgmma and TMA, sm_90a): the built-in specs and how names
 * resolve to them, the family's target and the capabilities it runs on, the wgmma wrappers its
 * prelude generates, its pruning, and a sample of its space compiled with NVRTC. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"
#include "ft_test.h"
#include "generator/arch.h"
#include "generator/emit.h"
#include "generator/family.h"
#include "generator/spec.h"
#include "generator/variant.h"
#include "runtime/compile.h"
#include "spec_case.h"
#include "tuner/plan.h"

static ft_spec *load_sm90(void)
{
    ft_spec *spec = NULL;
    ft_err err;
    if (ft__spec_load(FT_SOURCE_DIR "/specs/flash_fwd_sm90.lua", NULL, &spec, &err) != FT_OK)
        fprintf(stderr, "load: %s\n", err.msg);
    return spec;
}

/* A whole file, NUL-terminated, or NULL. */
static char *read_text(const char *path)
{
    char *data = NULL;
    size_t size;
    ft_err err;

    if (ft__read_file(path, &data, &size, &err) != FT_OK)
        fprintf(stderr, "%s\n", err.msg);
    return data;
}

static ft_status write_text(const char *path, const char *text, ft_err *err)
{
    return ft__write_file_atomic(path, text, strlen(text), 0, err);
}

/* ---- the built-in specs ------------------------------------------------------------------ */

/* The five specs are built in (the forward's, then the backward's, each in order of preference,
 * then the short-query forward's), each the text of the file in specs/. */
static void test_builtin_table(void)
{
    static const char *const names[] = {"specs/flash_fwd.lua", "specs/flash_fwd_sm90.lua", "specs/flash_bwd.lua",
                                        "specs/flash_bwd_sm90.lua", "specs/flash_decode.lua"};
    int i;

    for (i = 0; i < 5; i++) {
        char path[1024];
        char *disk;
        ASSERT_TRUE(ft__builtin_specs[i].name != NULL);
        ASSERT_STREQ(ft__builtin_specs[i].name, names[i]);
        snprintf(path, sizeof path, "%s/%s", FT_SOURCE_DIR, names[i]);
        disk = read_text(path);
        ASSERT_TRUE(disk != NULL);
        ASSERT_EQ(ft__builtin_specs[i].size, strlen(disk));
        ASSERT_TRUE(strcmp(ft__builtin_specs[i].data, disk) == 0);
        free(disk);
    }
    ASSERT_TRUE(ft__builtin_specs[5].name == NULL);
}

static void test_load_builtin_index(void)
{
    static const int past[] = {5, 6, 1000, -1};
    ft_spec *spec = NULL;
    ft_err err;
    size_t i;

    ASSERT_OK(ft__spec_load_builtin(0, &spec, &err), &err);
    ASSERT_STREQ(spec->name, "flash_fwd");
    ASSERT_STREQ(spec->template_name, "flash_fwd_sm80");
    ASSERT_STREQ(spec->path, "specs/flash_fwd.lua");
    ft__spec_free(spec);
    ASSERT_OK(ft__spec_load_builtin(1, &spec, &err), &err);
    ASSERT_STREQ(spec->name, "flash_fwd_sm90");
    ASSERT_STREQ(spec->template_name, "flash_fwd_sm90");
    ASSERT_STREQ(spec->path, "specs/flash_fwd_sm90.lua");
    ASSERT_EQ(spec->nparams, 16);
    ASSERT_TRUE(spec->nworkloads > 0);
    ft__spec_free(spec);
    ASSERT_OK(ft__spec_load_builtin(2, &spec, &err), &err);
    ASSERT_STREQ(spec->template_name, "flash_bwd_sm80");
    ASSERT_STREQ(spec->path, "specs/flash_bwd.lua");
    ft__spec_free(spec);
    ASSERT_OK(ft__spec_load_builtin(3, &spec, &err), &err);
    ASSERT_STREQ(spec->template_name, "flash_bwd_sm90");
    ft__spec_free(spec);
    ASSERT_OK(ft__spec_load_builtin(4, &spec, &err), &err);
    ASSERT_STREQ(spec->template_name, "flash_decode_sm80");
    ft__spec_free(spec);
    for (i = 0; i < sizeof past / sizeof past[0]; i++) {
        spec = (ft_spec *)&err; /* must be reset to NULL */
        ft__err_clear(&err);
        ASSERT_EQ(ft__spec_load_builtin(past[i], &spec, &err), FT_ERR_NOT_FOUND);
        ASSERT_EQ(err.code, FT_ERR_NOT_FOUND);
        ASSERT_TRUE(spec == NULL);
        ASSERT_CONTAINS(err.msg, "built-in spec");
    }
}

/* Loads name through ft__spec_load_default and checks which spec came back, and from where. */
static void expect_default(const char *name, const char *want_name, const char *want_path)
{
    ft_spec *spec = NULL;
    ft_err err;
    int ok;

    ft__err_clear(&err);
    if (ft__spec_load_default(name, &spec, &err) != FT_OK)
        FT_FAIL_("ft__spec_load_default(\"%s\"): %s", name ? name : "NULL", err.msg);
    ASSERT_TRUE(spec != NULL);
    ok = strcmp(spec->name, want_name) == 0 && strcmp(spec->path, want_path) == 0;
    if (!ok)
        fprintf(stderr, "ft__spec_load_default(\"%s\") gave %s from %s, not %s from %s\n",
                name ? name : "NULL", spec->name, spec->path, want_name, want_path);
    ft__spec_free(spec);
    ASSERT_TRUE(ok);
}

static void expect_no_file(const char *name)
{
    ft_spec *spec = NULL;
    ft_err err;

    ft__err_clear(&err);
    ASSERT_EQ(ft__spec_load_default(name, &spec, &err), FT_ERR_IO);
    ASSERT_TRUE(spec == NULL);
    ASSERT_CONTAINS(err.msg, "cannot open");
    ASSERT_CONTAINS(err.msg, name);
    ASSERT_CONTAINS(err.msg, "no built-in spec has that name either (flash_fwd, flash_fwd_sm90, flash_bwd, flash_bwd_sm90, flash_decode)");
    /* a near miss of a built-in name is suggested, a name far from all of them is not */
    if (strcmp(name, "flash_fwd_sm9") == 0 || strcmp(name, "flash_fwd_sm90.lu") == 0)
        ASSERT_CONTAINS(err.msg, "did you mean flash_fwd_sm90?");
    if (strcmp(name, "no_such_spec") == 0)
        ASSERT_TRUE(strstr(err.msg, "did you mean") == NULL);
}

/* How ft__spec_load_default resolves a name: to a spec (its name and path), or (want_name
 * NULL) to a missing file. */
struct name_case {
    const char *name, *want_name, *want_path;
};

static void expect_names(const struct name_case *cases, size_t n)
{
    size_t i;

    for (i = 0; i < n && !ft_test_failed_; i++) {
        if (cases[i].want_name != NULL)
            expect_default(cases[i].name, cases[i].want_name, cases[i].want_path);
        else
            expect_no_file(cases[i].name);
    }
}

/* Run inside an empty directory, so no file shadows a built-in name until one is written. */
static void default_names_in(const char *dir)
{
    static const struct name_case builtin[] = {
        /* no file: every spelling of a built-in name is the built-in spec */
        {NULL, "flash_fwd", "specs/flash_fwd.lua"},
        {"flash_fwd", "flash_fwd", "specs/flash_fwd.lua"},
        {"flash_fwd_sm90", "flash_fwd_sm90", "specs/flash_fwd_sm90.lua"},
        {"flash_fwd_sm90.lua", "flash_fwd_sm90", "specs/flash_fwd_sm90.lua"},
        {"specs/flash_fwd_sm90.lua", "flash_fwd_sm90", "specs/flash_fwd_sm90.lua"},
        /* names that only look like one are files, and missing */
        {"no_such_spec", NULL, NULL},
        {"flash_fwd_sm9", NULL, NULL},
        {"fwd_sm90.lua", NULL, NULL},
        {"flash_fwd_sm90.lu", NULL, NULL},
    };
    /* a file that exists wins over the built-in name, in each spelling */
    static const struct name_case files[] = {
        {"flash_fwd_sm90", "small", "flash_fwd_sm90"},
        {"flash_fwd_sm90.lua", "small", "flash_fwd_sm90.lua"},
        {"specs/flash_fwd_sm90.lua", "small", "specs/flash_fwd_sm90.lua"},
    };
    char *small = read_text(FT_SOURCE_DIR "/tests/specs/valid_small.lua");
    char *broken = read_text(FT_SOURCE_DIR "/tests/specs/syntax_error.lua");
    ft_spec *spec = NULL;
    ft_err err;
    size_t i;

    ASSERT_TRUE(small != NULL && broken != NULL);
    ASSERT_EQ(mkdir("specs", 0755), 0);
    expect_names(builtin, sizeof builtin / sizeof builtin[0]);
    for (i = 0; i < sizeof files / sizeof files[0] && !ft_test_failed_; i++)
        if (write_text(files[i].name, small, &err) != FT_OK)
            goto cannot_write;
    expect_names(files, sizeof files / sizeof files[0]);
    if (ft_test_failed_)
        goto out;
    /* ... even a broken one: its error, not a silent fallback to the built-in */
    if (write_text("flash_fwd_sm90.lua", broken, &err) != FT_OK)
        goto cannot_write;
    ft__err_clear(&err);
    if (ft__spec_load_default("flash_fwd_sm90.lua", &spec, &err) != FT_ERR_SPEC || spec != NULL ||
        strstr(err.msg, "flash_fwd_sm90.lua:3:") == NULL) {
        ft__spec_free(spec);
        fprintf(stderr, "a broken flash_fwd_sm90.lua should fail with its own error, got \"%s\"\n", err.msg);
        ft_test_failed_ = 1;
    }
    goto out;
cannot_write:
    fprintf(stderr, "cannot write spec files in %s: %s\n", dir, err.msg);
    ft_test_failed_ = 1;
out:
    free(small);
    free(broken);
}

static void test_load_default_names(void)
{
    char dir[] = "/tmp/ft-sm90-names-XXXXXX";
    char cwd[4096];

    ASSERT_TRUE(getcwd(cwd, sizeof cwd) != NULL);
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    ASSERT_EQ(chdir(dir), 0);
    default_names_in(dir);
    unlink("specs/flash_fwd_sm90.lua");
    rmdir("specs");
    unlink("flash_fwd_sm90.lua");
    unlink("flash_fwd_sm90");
    ASSERT_EQ(chdir(cwd), 0);
    ASSERT_EQ(rmdir(dir), 0);
}

/* ---- the family: target and capabilities ------------------------------------------------- */

static void test_family_target(void)
{
    static const char *const archs[] = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
    const ft_family *f80 = ft__family_find("flash_fwd_sm80");
    const ft_family *f90 = ft__family_find("flash_fwd_sm90");
    char target[32], why[256];
    ft_arch arch;
    ft_err err;
    size_t i;

    ASSERT_TRUE(f80 != NULL && f90 != NULL);
    ASSERT_TRUE(ft__family_find("flash_fwd_sm100") == NULL);
    ASSERT_STREQ(f90->file, "flash_fwd_sm90.cuh");
    ASSERT_STREQ(f90->target_suffix, "a");
    ASSERT_STREQ(f80->target_suffix, "");
    ASSERT_EQ(f90->uses_tma, 1);
    ASSERT_EQ(f80->uses_tma, 0);
    ASSERT_TRUE(f90->prelude != NULL);
    ASSERT_TRUE(f80->prelude == NULL);
    ASSERT_TRUE(ft__template_file(f90->file) != NULL);

    for (i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        int is90 = strncmp(archs[i], "sm_90", 5) == 0;
        ASSERT_OK(ft__arch_builtin(archs[i], &arch, &err), &err);
        /* sm80 code builds for the target as named */
        ft__family_target(f80, &arch, target, sizeof target);
        ASSERT_STREQ(target, archs[i]);
        why[0] = '\0';
        ASSERT_EQ(ft__family_supports_arch(f80, &arch, why, sizeof why), 1);
        /* sm90 code: sm_90a on compute capability 9.0, refused elsewhere */
        why[0] = '\0';
        ASSERT_EQ(ft__family_supports_arch(f90, &arch, why, sizeof why), is90);
        if (is90) {
            ft__family_target(f90, &arch, target, sizeof target);
            ASSERT_STREQ(target, "sm_90a");
        } else {
            ASSERT_STREQ(why, "flash_fwd_sm90 runs only on compute capability 9.0");
        }
    }
    /* a newer GPU is no 9.0: the exact capability decides, not "9.0 or newer" */
    ASSERT_OK(ft__arch_builtin("sm_90", &arch, &err), &err);
    snprintf(arch.name, sizeof arch.name, "sm_100");
    arch.cc = 100;
    ASSERT_EQ(ft__family_supports_arch(f90, &arch, why, sizeof why), 0);
    ASSERT_STREQ(why, "flash_fwd_sm90 runs only on compute capability 9.0");
    ASSERT_EQ(ft__family_supports_arch(f80, &arch, why, sizeof why), 1);
    /* and an old one is refused by the sm80 family for its minimum */
    snprintf(arch.name, sizeof arch.name, "sm_75");
    arch.cc = 75;
    ASSERT_EQ(ft__family_supports_arch(f80, &arch, why, sizeof why), 0);
    ASSERT_CONTAINS(why, "needs compute capability 8.0 or newer");
    /* a short buffer still gets a terminated target */
    ASSERT_OK(ft__arch_builtin("sm_90", &arch, &err), &err);
    ft__family_target(f90, &arch, target, 6);
    ASSERT_STREQ(target, "sm_90");
}

/* A plan takes the family's target and refuses a capability it cannot run on. */
static void test_plan_target(void)
{
    static const char *const refused[] = {"sm_80", "sm_86", "sm_89"};
    ft_spec *spec = load_sm90();
    ft_plan *plan = NULL;
    ft_arch arch;
    ft_err err;
    size_t i;

    ASSERT_TRUE(spec != NULL);
    for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char want[128];
        ASSERT_OK(ft__arch_builtin(refused[i], &arch, &err), &err);
        ft__err_clear(&err);
        ASSERT_EQ(ft__plan_build(spec, &arch, NULL, 0, &plan, &err), FT_ERR_UNSUPPORTED);
        ASSERT_TRUE(plan == NULL);
        snprintf(want, sizeof want, "flash_fwd_sm90 runs only on compute capability 9.0, not %s", refused[i]);
        ASSERT_CONTAINS(err.msg, want);
        ASSERT_CONTAINS(err.msg, "flash_fwd_sm90.lua");
    }
    ASSERT_OK(ft__arch_builtin("sm_90", &arch, &err), &err);
    ASSERT_OK(ft__plan_build(spec, &arch, NULL, 0, &plan, &err), &err);
    ASSERT_STREQ(plan->arch.name, "sm_90a");
    ASSERT_EQ(plan->arch.cc, 90);
    ASSERT_EQ(plan->arch.smem_per_block, arch.smem_per_block);
    ASSERT_STREQ(plan->family->name, "flash_fwd_sm90");
    ASSERT_STREQ(arch.name, "sm_90"); /* the caller's arch is left as it was */
    ft__plan_free(plan);
    ft__spec_free(spec);
}

/* ---- generation ------------------------------------------------------------------------- */

/* The text of the function `void name(` up to its closing brace at the start of a line. */
static char *function_text(const char *src, const char *name)
{
    char head[128];
    const char *a, *b;
    char *out;

    snprintf(head, sizeof head, "void %s(", name);
    a = strstr(src, head);
    if (a == NULL)
        return NULL;
    b = strstr(a, "\n}\n");
    if (b == NULL)
        return NULL;
    out = malloc((size_t)(b - a) + 3);
    if (out == NULL)
        return NULL;
    memcpy(out, a, (size_t)(b - a) + 2);
    out[b - a + 2] = '\0';
    return out;
}

/* Checks one wgmma wrapper: the shape m64n{n}k16 with dtype, n/2 fp32 accumulators bound
 * "+f" to d[0..n/2-1] in order, and asm operands %0..%k that are exactly the bound ones. */
static void check_wrapper(const char *src, const char *name, int n, const char *type, int reg_a)
{
    const int nd = n / 2;
    const int ninputs = reg_a ? 6 : 3; /* a0..a3, db, the constant scale-d; or da, db, scale_d */
    char *fn = function_text(src, name);
    char want[256];
    unsigned char used[512];
    const char *p;
    int i, max = -1, operands;

    if (fn == NULL)
        FT_FAIL_("no function %s in the source", name);
    snprintf(want, sizeof want, "%s(float (&d)[%d], ", name, nd);
    if (strstr(fn, want) == NULL)
        goto bad;
    snprintf(want, sizeof want, "wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", n, type, type);
    if (ft_test_count(fn, want) != 1)
        goto bad;
    if (ft_test_count(fn, "wgmma.mma_async") != 1)
        goto bad;
    /* the accumulators, in order */
    if (ft_test_count(fn, "\"+f\"(") != nd)
        goto bad;
    for (i = 0; i < nd; i++) {
        snprintf(want, sizeof want, "\"+f\"(d[%d])", i);
        if (strstr(fn, want) == NULL)
            goto bad;
    }
    snprintf(want, sizeof want, "\"+f\"(d[%d])", nd);
    if (strstr(fn, want) != NULL)
        goto bad;
    /* every operand is used, and nothing past them */
    operands = ft_test_count(fn, "\"+f\"(") + ft_test_count(fn, "\"l\"(") + ft_test_count(fn, "\"r\"(");
    if (operands != nd + ninputs)
        goto bad;
    memset(used, 0, sizeof used);
    for (p = strchr(fn, '%'); p != NULL; p = strchr(p + 1, '%')) {
        char *end;
        long k = strtol(p + 1, &end, 10);
        if (end == p + 1)
            continue;
        if (k < 0 || k >= (long)sizeof used)
            goto bad;
        used[k] = 1;
        if (k > max)
            max = (int)k;
    }
    if (max != operands - 1)
        goto bad;
    for (i = 0; i <= max; i++)
        if (!used[i])
            goto bad;
    /* the accumulator list in the braces is %0..%{nd-1}, then the other operands */
    if (reg_a) {
        snprintf(want, sizeof want, "\"%%%d\"\n                 \"}, {%%%d, %%%d, %%%d, %%%d}, %%%d, p, 1, 1, 1;", nd - 1,
                 nd, nd + 1, nd + 2, nd + 3, nd + 4);
        if (strstr(fn, want) == NULL)
            goto bad;
        snprintf(want, sizeof want, "setp.ne.b32 p, %%%d, 0;", nd + 5);
    } else {
        snprintf(want, sizeof want, "\"%%%d\"\n                 \"}, %%%d, %%%d, p, 1, 1, 0, 0;", nd - 1, nd, nd + 1);
        if (strstr(fn, want) == NULL)
            goto bad;
        snprintf(want, sizeof want, "setp.ne.b32 p, %%%d, 0;", nd + 2);
    }
    if (strstr(fn, want) == NULL)
        goto bad;
    free(fn);
    return;
bad:
    fprintf(stderr, "%s (n=%d, %s):\n%s\n", name, n, type, fn);
    free(fn);
    FT_FAIL_("%s: expected \"%s\"", name, want);
}

/* Every head dimension and key tile of the spec, both dtypes: the wrappers match the variant,
 * are defined once, before the template, and are valid wgmma shapes. */
static void test_wgmma_wrappers(void)
{
    ft_spec *spec = load_sm90();
    const ft_family *fam = ft__family_find("flash_fwd_sm90");
    int pd, pb, pt, id, ib, it;
    ft_arch arch;
    ft_err err;

    ASSERT_TRUE(spec != NULL && fam != NULL);
    ASSERT_OK(ft__arch_builtin("sm_90a", &arch, &err), &err);
    pd = ft__spec_param_index(spec, "d");
    pb = ft__spec_param_index(spec, "bn");
    pt = ft__spec_param_index(spec, "dtype");
    ASSERT_TRUE(pd >= 0 && pb >= 0 && pt >= 0);
    for (id = 0; id < spec->params[pd].nvalues; id++) {
        for (ib = 0; ib < spec->params[pb].nvalues; ib++) {
            for (it = 0; it < spec->params[pt].nvalues; it++) {
                const int d = (int)spec->params[pd].ints[id], bn = (int)spec->params[pb].ints[ib];
                const char *type = spec->params[pt].strings[it];
                const char *other = strcmp(type, "f16") == 0 ? ".f32.bf16.bf16" : ".f32.f16.f16";
                char text[512];
                ft_kernel_source src;
                ft_variant v;
                const char *def_s, *def_o, *tmpl;

                /* wgmma's N: a multiple of 8 (16 keeps k-steps of P whole), at most 256 */
                ASSERT_TRUE(bn % 16 == 0 && bn >= 16 && bn <= 256);
                ASSERT_TRUE(d % 16 == 0 && d >= 16 && d <= 256);
                snprintf(text, sizeof text,
                         "d=%d,bm=64,bn=%d,stages=2,causal=1,dtype=%s,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1", d, bn, type);
                ASSERT_OK(ft__variant_parse(spec, text, &v, &err), &err);
                ASSERT_OK(ft__emit(spec, fam, &v, &arch, &src, &err), &err);
                check_wrapper(src.text, "ft_wgmma_s", bn, type, 0);
                if (!ft_test_failed_)
                    check_wrapper(src.text, "ft_wgmma_o", d, type, 1);
                if (ft_test_failed_) {
                    fprintf(stderr, "variant %s\n", text);
                    ft__kernel_source_free(&src);
                    ft__spec_free(spec);
                    return;
                }
                def_s = strstr(src.text, "void ft_wgmma_s(");
                def_o = strstr(src.text, "void ft_wgmma_o(");
                tmpl = strstr(src.text, "#error \"flash_fwd_sm90 needs FTP_D");
                ASSERT_EQ(ft_test_count(src.text, "void ft_wgmma_s("), 1);
                ASSERT_EQ(ft_test_count(src.text, "void ft_wgmma_o("), 1);
                ASSERT_TRUE(tmpl != NULL && def_s != NULL && def_o != NULL);
                ASSERT_TRUE(def_s < tmpl && def_o < tmpl);
                ASSERT_TRUE(strstr(src.text, "#define FTP_D ") != NULL);
                ASSERT_TRUE(strstr(src.text, "#define FTP_D ") < def_s); /* after the parameters */
                ASSERT_TRUE(strstr(src.text, other) == NULL);
                ft__kernel_source_free(&src);
            }
        }
    }
    ft__spec_free(spec);
}

/* The generated source of one variant: parameters, threads, shared memory, entry. */
static void test_emit_sm90(void)
{
    static const struct {
        const char *variant;
        int threads;
        int q_bufs; /* a second Q buffer where it fits in sm_90a's 227 KiB */
    } cases[] = {
        {"d=128,bm=128,bn=128,stages=2,causal=0,dtype=f16,pingpong=1,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1", 384, 2},
        {"d=64,bm=64,bn=80,stages=3,causal=1,dtype=bf16,pingpong=0,overlap=0,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1", 256, 2},
        {"d=96,bm=192,bn=64,stages=2,causal=1,dtype=f16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1", 512, 2},
        {"d=256,bm=128,bn=80,stages=2,causal=1,dtype=bf16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1", 384, 1},
        {"d=128,bm=128,bn=176,stages=2,causal=1,dtype=f16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1", 384, 1},
        {"d=64,bm=192,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=0,balance=2,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1", 512, 2},
    };
    ft_spec *spec = load_sm90();
    const ft_family *fam = ft__family_find("flash_fwd_sm90");
    ft_arch arch;
    ft_err err;
    size_t i;

    ASSERT_TRUE(spec != NULL && fam != NULL);
    ASSERT_OK(ft__arch_builtin("sm_90a", &arch, &err), &err);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_kernel_source src;
        ft_variant v;
        char want[256];
        long long d, bm, bn, st, smem = 0;

        ASSERT_OK(ft__variant_parse(spec, cases[i].variant, &v, &err), &err);
        ASSERT_EQ(ft__family_threads(fam, spec, &v), cases[i].threads);
        ASSERT_OK(ft__spec_smem(spec, &v, &arch, &smem, &err), &err);
        ASSERT_OK(ft__emit(spec, fam, &v, &arch, &src, &err), &err);
        ASSERT_EQ(src.threads, cases[i].threads);
        ASSERT_EQ(src.smem_dynamic, smem);
        d = ft__variant_int(spec, &v, "d", 0);
        bm = ft__variant_int(spec, &v, "bm", 0);
        bn = ft__variant_int(spec, &v, "bn", 0);
        st = ft__variant_int(spec, &v, "stages", 0);
        /* the Q buffers and the K and V ring of 16-bit elements, plus alignment, barriers and
         * block slots (under 2 KiB); a second Q buffer exactly when it fits */
        {
            const long long tiles = 2 * (cases[i].q_bufs * bm * d + 2 * st * bn * d);
            ASSERT_TRUE(smem >= tiles + 1024 && smem < tiles + 2048);
            ASSERT_TRUE(smem <= arch.smem_per_block);
            if (cases[i].q_bufs == 1)
                ASSERT_TRUE(smem + 2 * bm * d > arch.smem_per_block);
        }
        snprintf(want, sizeof want, "#define FT_SMEM_BYTES %lld\n", smem);
        ASSERT_CONTAINS(src.text, want);
        snprintf(want, sizeof want, "#define FTP_BN %lld\n", bn);
        ASSERT_CONTAINS(src.text, want);
        ASSERT_CONTAINS(src.text, strstr(cases[i].variant, "dtype=f16") ? "#define FTP_DTYPE_F16 1\n"
                                                                       : "#define FTP_DTYPE_BF16 1\n");
        ASSERT_CONTAINS(src.text, strstr(cases[i].variant, "pingpong=1") ? "#define FTP_PINGPONG 1\n"
                                                                        : "#define FTP_PINGPONG 0\n");
        snprintf(want, sizeof want, "ft_flash_fwd_sm90_d%lld_bm%lld_bn%lld_stages%lld_", d, bm, bn, st);
        ASSERT_TRUE(strncmp(src.entry, want, strlen(want)) == 0);
        ASSERT_CONTAINS(src.text, src.entry);
        { /* the grid: persistent but for causal balance=0; pairs with 1; a block counter with 2 */
            const long long causal = ft__variant_int(spec, &v, "causal", 0);
            const long long balance = ft__variant_int(spec, &v, "balance", 0);
            ft_launch_facts f;
            snprintf(want, sizeof want, "#define FTP_BALANCE %lld\n", balance);
            ASSERT_CONTAINS(src.text, want);
            ft__family_launch(fam, cases[i].variant, src.threads, src.smem_dynamic, &f);
            ASSERT_EQ(f.persistent, !causal || balance != 0);
            ASSERT_EQ(f.pair_blocks, causal && balance == 1);
            ASSERT_EQ(f.block_counter, causal && balance == 2);
        }
        ft__kernel_source_free(&src);
    }
    ft__spec_free(spec);
}

/* ---- pruning and compiling --------------------------------------------------------------- */

static int gcd(int a, int b)
{
    while (b != 0) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int consumer_limit(long long bm, long long ctas)
{
    return bm == 64 ? (ctas == 2 ? 232 : 255) : bm == 128 ? 240 : 160;
}

/* The dynamic shared memory of a forward variant with q_bufs Q buffers, as the spec's formula
 * and the template's layout count it. */
static long long smem_with(const ft_spec *spec, const ft_variant *v, long long q_bufs)
{
    const long long d = ft__variant_int(spec, v, "d", 0), bm = ft__variant_int(spec, v, "bm", 0);
    const long long bn = ft__variant_int(spec, v, "bn", 0), stages = ft__variant_int(spec, v, "stages", 0);
    const long long dk = (d + 15) / 16 * 16;
    long long body = q_bufs * bm * dk * 2 + 2 * stages * bn * dk * 2;
    if (ft__variant_int(spec, v, "psmem", 0) != 0)
        body = (body + 1023) / 1024 * 1024 + bm * bn * 2;
    return 1024 + body + 8 * (8 + 4 * stages) + 128;
}

/* The shared memory a CTA may take: per block, or half the multiprocessor's less the 1 KiB
 * the hardware keeps for each CTA where two share it (ctas=2). */
static long long smem_budget(const ft_spec *spec, const ft_variant *v, const ft_arch *arch)
{
    return ft__variant_int(spec, v, "ctas", 1) == 2 ? arch->smem_per_sm / 2 - 1024 : arch->smem_per_block;
}

/* Whether a second Q buffer fits beside the K/V ring. */
static int two_q_buffers(const ft_spec *spec, const ft_variant *v, const ft_arch *arch)
{
    return smem_with(spec, v, 2) <= smem_budget(spec, v, arch);
}

/* The whole space on sm_90a: ping-pong only with two or three consumer warpgroups, P through shared
 * memory only with three and 144-key tiles only with it, 112-key tiles only above d = 128,
 * exponentials by FMA only up to d = 64, the skipped rescale only from d = 128, the early one
 * only overlapped and above d = 128, the overlap across blocks only without ping-pong, O through
 * shared memory with two Q buffers where they fit, else through the one (at d = 256 with 128-row
 * tiles), and then not overlapped across blocks, two CTAs a multiprocessor only with 64-row tiles
 * that fit half its shared memory and 232 registers a consumer thread, the
 * consumers' register estimate (no
 * packed P with psmem) within setmaxnreg's share, shared memory within the opt-in limit;
 * FlashAttention-4's 192 x 144 tile with P through shared memory is kept at d = 80 and 96. */
/* The constraint that keeps pack=1 out until the GPU verifies it (specs/flash_fwd_sm90.lua). */
#define PACK_GPU_REASON "query heads packed into a block's rows only once the GPU verifies them"

/* The tallies of test_sm90_pruning, filled item by item (check_pruned_item). */
typedef struct pruning_counts {
    const ft_spec *spec;
    const ft_arch *arch;
    int pingpong, regs, balance, psmem, wide, narrow, b112, pexp, skip, early, across, smem, kept, fa4, ostore_kept, early_kept, across_kept, late_kept, late_across, two_many, two_big, two_kept, pack, pack_kept, pack_gpu;
} pruning_counts;

/* One variant of the whole space, pruned (handed over as pruning turns it away) or kept. */
static void check_pruned_item(void *ud, const ft_plan *plan, const ft_plan_item *it)
{
    pruning_counts *k = ud;
    long long d = ft__variant_int(k->spec, &it->variant, "d", 0);
    long long bm = ft__variant_int(k->spec, &it->variant, "bm", 0);
    long long bn = ft__variant_int(k->spec, &it->variant, "bn", 0);
    long long pp = ft__variant_int(k->spec, &it->variant, "pingpong", 0);
    long long ps = ft__variant_int(k->spec, &it->variant, "psmem", 0);
    long long ctas = ft__variant_int(k->spec, &it->variant, "ctas", 0);
    long long est = d / 2 + bn / 2 + (ps ? 8 : bn / 4) + 32;
    (void)plan;
    if (ft_test_failed_)
        return; /* one failure is enough to read */
    if (pp == 1 && bm == 64) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_STREQ(it->reason, "ping-pong takes two or three consumer warpgroups");
        k->pingpong++;
    } else if (ft__variant_int(k->spec, &it->variant, "balance", 0) != 0 &&
               ft__variant_int(k->spec, &it->variant, "causal", 0) == 0) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_STREQ(it->reason, "balanced units and the longest-first order are for causal row blocks");
        k->balance++;
    } else if (ps == 1 && bm != 192) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "P through shared memory is for 192-row tiles");
        k->psmem++;
    } else if (bn == 144 && ps == 0) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "144-key tiles take P through shared memory");
        k->wide++;
    } else if (ps == 1 && bn > 144 && ft__variant_int(k->spec, &it->variant, "causal", 0) == 1) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "causal tiles with P through shared memory take at most 144 keys");
        k->narrow++;
    } else if (bn == 112 && d <= 128) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "112-key tiles are for head dims above 128");
        k->b112++;
    } else if (ft__variant_int(k->spec, &it->variant, "pexp", 0) != 0 && d > 64) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "exponentials by FMA where they pace the tensor cores");
        k->pexp++;
    } else if (ft__variant_int(k->spec, &it->variant, "skip_rescale", 0) != 0 && d < 128) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "the rescale is skipped where O is wide enough");
        k->skip++;
    } else if (ft__variant_int(k->spec, &it->variant, "early_rescale", 0) != 0 &&
               (d <= 128 || ft__variant_int(k->spec, &it->variant, "overlap", 0) == 0)) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "the early rescale is for the overlapped schedule");
        k->early++;
    } else if (ft__variant_int(k->spec, &it->variant, "overlap", 0) == 2 && pp == 1) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_STREQ(it->reason, "blocks overlapped across take no ping-pong turns");
        k->across++;
    } else if (est > consumer_limit(bm, ctas)) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_STREQ(it->reason, "consumer registers within what setmaxnreg gives them");
        k->regs++;
    } else if (ctas == 2 && bm != 64) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "two CTAs a multiprocessor take one consumer warpgroup");
        k->two_many++;
    } else if (ctas == 2 && smem_with(k->spec, &it->variant, two_q_buffers(k->spec, &it->variant, k->arch) ? 2 : 1) >
                                smem_budget(k->spec, &it->variant, k->arch)) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "two CTAs a multiprocessor fit its shared memory");
        k->two_big++;
    } else if (ft__variant_int(k->spec, &it->variant, "pack", 0) != 0 && d > 128) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_STREQ(it->reason, "query heads packed into a block's rows at head dims up to 128");
        k->pack++;
    } else if (ft__variant_int(k->spec, &it->variant, "ostore", 0) != 0 &&
               ft__variant_int(k->spec, &it->variant, "overlap", 0) == 2 && !two_q_buffers(k->spec, &it->variant, k->arch)) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        ASSERT_CONTAINS(it->reason, "O through the only Q buffer ends the block");
        k->late_across++;
    }
    /* pack=1 failed the GPU's verify (2026-12-07): never kept, turned away by that constraint
     * where nothing before it turns them away */
    if (ft__variant_int(k->spec, &it->variant, "pack", 0) != 0) {
        ASSERT_EQ(it->status, FT_PLAN_PRUNED);
        k->pack_gpu += strcmp(it->reason, PACK_GPU_REASON) == 0;
    }
    if (strncmp(it->reason, "shared memory ", 14) == 0) { /* the limit's reason */
        ASSERT_TRUE(it->smem_dynamic > k->arch->smem_per_block);
        k->smem++;
    }
    /* the 192 x 128 tile at d = 64 (FlashAttention-3's causal choice) fits three warpgroups */
    if (d == 64 && bm == 192 && bn == 128 && pp == 0 && ctas == 1 &&
        ft__variant_int(k->spec, &it->variant, "skip_rescale", 0) == 0 &&
        ft__variant_int(k->spec, &it->variant, "early_rescale", 0) == 0)
        ASSERT_TRUE(it->status == FT_PLAN_PENDING || strstr(it->reason, "balanced") != NULL ||
                    strcmp(it->reason, PACK_GPU_REASON) == 0);
    if (it->status == FT_PLAN_PENDING) {
        ASSERT_TRUE(it->smem_dynamic > 0 && it->smem_dynamic <= k->arch->smem_per_block);
        ASSERT_EQ(it->threads, 128 * (bm / 64 + 1));
        k->kept++;
        k->fa4 += (d == 80 || d == 96) && bm == 192 && bn == 144 && ps == 1;
        /* two Q buffers where they fit (with ostore as without) */
        ASSERT_EQ(it->smem_dynamic, smem_with(k->spec, &it->variant, two_q_buffers(k->spec, &it->variant, k->arch) ? 2 : 1));
        if (ft__variant_int(k->spec, &it->variant, "ostore", 0) != 0) {
            k->ostore_kept++;
            k->late_kept += !two_q_buffers(k->spec, &it->variant, k->arch) && d == 256 && bm == 128;
        }
        k->early_kept += ft__variant_int(k->spec, &it->variant, "early_rescale", 0) != 0;
        k->two_kept += ctas == 2;
        k->across_kept += ft__variant_int(k->spec, &it->variant, "overlap", 0) == 2;
        k->pack_kept += ft__variant_int(k->spec, &it->variant, "pack", 0) != 0;
    }
}

static void test_sm90_pruning(void)
{
    ft_spec *spec = load_sm90();
    ft_plan *plan = NULL;
    ft_arch arch;
    ft_err err;
    pruning_counts k;
    int i;

    ASSERT_TRUE(spec != NULL);
    ASSERT_OK(ft__arch_builtin("sm_90a", &arch, &err), &err);
    memset(&k, 0, sizeof k);
    k.spec = spec, k.arch = &arch;
    /* (the pruned ones checked as they are turned away: kept as items, the whole space took 3.6 GB) */
    ASSERT_OK(ft__plan_build_streamed(spec, &arch, NULL, 0, check_pruned_item, &k, &plan, &err), &err);
    ASSERT_EQ(plan->nitems + plan->count[FT_PLAN_PRUNED], spec->nvariants);
    ASSERT_EQ(spec->nvariants, 7 * 3 * 8 * 2 * 2 * 2 * 2 * 3 * 3 * 2 * 2 * 2 * 2 * 2 * 2 * 2);
    for (i = 0; i < plan->nitems; i++)
        check_pruned_item(&k, plan, &plan->items[i]);
    ASSERT_TRUE(!ft_test_failed_);
    ASSERT_TRUE(k.psmem > 0 && k.wide > 0 && k.narrow > 0 && k.b112 > 0 && k.pexp > 0 && k.skip > 0 && k.early > 0 && k.across > 0);
    ASSERT_TRUE(k.ostore_kept > 0 && k.early_kept > 0 && k.across_kept > 0 && k.late_kept > 0 && k.late_across > 0);
    ASSERT_TRUE(k.two_many > 0 && k.two_big > 0 && k.two_kept > 0);
    ASSERT_TRUE(k.pack > 0 && k.pack_kept == 0 && k.pack_gpu > 0);
    ASSERT_TRUE(k.fa4 > 0);
    ASSERT_EQ(k.pingpong, spec->nvariants / 2 / 3); /* k.pingpong=1 with bm 64 */
    ASSERT_TRUE(k.regs > 0);
    ASSERT_TRUE(k.balance > 0);
    ASSERT_TRUE(k.smem > 0);
    ASSERT_TRUE(k.kept > 0);
    ASSERT_EQ(plan->count[FT_PLAN_PENDING], k.kept);
    ft__plan_free(plan);
    ft__spec_free(spec);
}

/* A sample of the kept space that takes every value of every parameter at least once (but
 * pack = 1, which the spec keeps out until the GPU verifies it: test_sm90_pruning) compiles
 * with NVRTC for sm_90a (the template's static_assert checks the spec's smem formula against
 * its own layout), within the target's limits; the ping-pong, overlap d=128 variant the tuner
 * favours does not spill, nor d = 64's 192 x 128 tile under three consumer warpgroups (the
 * register estimate lets it through on that ground). */
static void test_sm90_compile_sample(void)
{
    static const char *const no_spill[] = {
        "d=128,bm=128,bn=128,stages=2,causal=0,dtype=f16,pingpong=1,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=0",
        "d=64,bm=192,bn=128,stages=3,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=0",
    };
    ft_spec *spec = load_sm90();
    const char *cache_dir = getenv("FLASHTUNE_CACHE_DIR");
    unsigned char seen[FT_MAX_PARAMS][64];
    ft_cache *cache = NULL;
    ft_plan *plan = NULL;
    ft_arch arch;
    ft_err err;
    int i, k, p, stride = 1009, sampled = 0, found_no_spill = 0;

    ASSERT_TRUE(spec != NULL);
    ASSERT_OK(ft__arch_builtin("sm_90", &arch, &err), &err);
    ASSERT_OK(ft__plan_build(spec, &arch, NULL, 0, &plan, &err), &err);
    ASSERT_STREQ(plan->arch.name, "sm_90a");
    memset(seen, 0, sizeof seen);
    /* Visit the items in a scrambled order (a stride coprime with their number) so that the
     * sample mixes the values rather than taking the first ones of the space. */
    while (gcd(stride, plan->nitems) != 1)
        stride++;
    for (k = 0; k < plan->nitems; k++) {
        ft_plan_item *it = &plan->items[(long long)k * stride % plan->nitems];
        int fresh = strcmp(it->variant_str, no_spill[0]) == 0 || strcmp(it->variant_str, no_spill[1]) == 0;
        if (it->status != FT_PLAN_PENDING)
            continue;
        for (p = 0; p < spec->nparams; p++)
            fresh |= !seen[p][it->variant.idx[p]];
        if (!fresh) {
            it->status = FT_PLAN_PRUNED; /* not in the sample */
            plan->count[FT_PLAN_PENDING]--;
            plan->count[FT_PLAN_PRUNED]++;
            snprintf(it->reason, sizeof it->reason, "not sampled");
            continue;
        }
        for (p = 0; p < spec->nparams; p++)
            seen[p][it->variant.idx[p]] = 1;
        sampled++;
    }
    for (p = 0; p < spec->nparams; p++)
        for (i = 0; i < spec->params[p].nvalues; i++) {
            const int pruned = strcmp(spec->params[p].name, "pack") == 0 && spec->params[p].ints[i] == 1;
            if (seen[p][i] == pruned)
                FT_FAIL_("%s variant has value %d of parameter %s", pruned ? "a kept" : "no kept", i,
                         spec->params[p].name);
        }
    if (cache_dir != NULL && cache_dir[0] != '\0')
        ASSERT_OK(ft__cache_open(cache_dir, &cache, &err), &err);
    ASSERT_OK(ft__plan_compile(plan, cache, 2, NULL, NULL, NULL, &err), &err);
    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        if (it->status == FT_PLAN_PRUNED)
            continue;
        if (it->status != FT_PLAN_COMPILED)
            fprintf(stderr, "%s: %s: %s\n", it->variant_str, ft__plan_status_name(it->status), it->reason);
        ASSERT_EQ(it->status, FT_PLAN_COMPILED);
        ASSERT_TRUE(it->report.registers > 0);
        printf("  compiled %s: %d registers, %lld/%lld bytes spilled%s\n", it->variant_str,
               it->report.registers, it->report.spill_stores, it->report.spill_loads,
               it->cache_hit ? " (cached)" : "");
        for (p = 0; p < 2; p++) {
            if (strcmp(it->variant_str, no_spill[p]) == 0) {
                ASSERT_EQ(it->report.spill_stores, 0);
                ASSERT_EQ(it->report.spill_loads, 0);
                found_no_spill |= 1 << p;
            }
        }
    }
    ASSERT_EQ(plan->count[FT_PLAN_COMPILED], sampled);
    ASSERT_EQ(found_no_spill, 3);
    ft__plan_free(plan);
    ft__cache_close(cache);
    ft__spec_free(spec);
}

/* A spec with spills = "reject" (tests/specs/reject_spills.lua, two sm_80 variants): NVRTC's
 * ptxas report decides; the variant that spills is over the limits with the sizes as its
 * reason, the other compiles. */
static void test_plan_rejects_spills(void)
{
    ft_spec *spec = NULL;
    ft_plan *plan = NULL;
    ft_arch arch;
    ft_err err;
    int i, over = 0, compiled = 0;

    ASSERT_OK(ft__spec_load(FT_SOURCE_DIR "/tests/specs/reject_spills.lua", NULL, &spec, &err), &err);
    ASSERT_OK(ft__arch_builtin("sm_80", &arch, &err), &err);
    ASSERT_OK(ft__plan_build(spec, &arch, NULL, 0, &plan, &err), &err);
    ASSERT_EQ(plan->count[FT_PLAN_PENDING], 2);
    ASSERT_OK(ft__plan_compile(plan, NULL, 2, NULL, NULL, NULL, &err), &err);
    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        if (it->status == FT_PLAN_PRUNED)
            continue;
        printf("  %s: %s, %lld/%lld bytes spilled\n", it->variant_str, ft__plan_status_name(it->status),
               it->report.spill_stores, it->report.spill_loads);
        if (ft__variant_int(spec, &it->variant, "d", 0) == 256) {
            ASSERT_EQ(it->status, FT_PLAN_OVER_LIMITS);
            ASSERT_TRUE(it->report.spill_stores > 0 || it->report.spill_loads > 0);
            ASSERT_CONTAINS(it->reason, "spills ");
            ASSERT_STREQ(it->reason_class, "spills registers (the spec rejects spills)");
            over++;
        } else {
            ASSERT_EQ(it->status, FT_PLAN_COMPILED);
            ASSERT_EQ(it->report.spill_stores, 0);
            ASSERT_EQ(it->report.spill_loads, 0);
            compiled++;
        }
    }
    ASSERT_EQ(over, 1);
    ASSERT_EQ(compiled, 1);
    ft__plan_free(plan);
    ft__spec_free(spec);
}

/* The forward specs' head dims: d is open, and the constraints keep every multiple of 8 from 32
 * to 256 (72, 88, 120, 200 joining when asked for; 36 and 264 pruned with the first constraint's
 * words), in the three forward families. At an odd multiple of 8 the tiles in shared memory are
 * the head dim rounded up to 16 wide: the sm80 families' rows of 16·k + 8 elements (an odd
 * number of chunks), the sm_90a family's of 16·k in column blocks of the widest swizzle span that
 * divides that (72: 80 in blocks of 16, 88: 96 in 32, 120: 128 in 64), the span its tensor maps
 * take as a launch fact; its P·V wgmma is m64n{that width}k16 (whole column blocks of V). */
/* Eight head dims the spec does not list, as a tune of recorded misses asks for them at once,
 * join the sm_90a forward (FT_MAX_VARIANTS has room for them), and the tuner's plan of one of
 * them holds the variants pruning keeps only, counting the others. */
static void test_many_open_head_dims(void)
{
    ft_spec *spec = load_sm90();
    ft_plan *plan = NULL, *all = NULL;
    ft_variant filter;
    unsigned mask = 0;
    ft_arch arch;
    ft_err err;
    int i;

    ASSERT_TRUE(spec != NULL);
    ASSERT_OK(ft__spec_add_values(spec, "d=72,d=88,d=104,d=120,d=136,d=152,d=168,d=184", &err), &err);
    ASSERT_EQ(spec->nvariants, 3096576LL / 7 * 15);
    ASSERT_OK(ft__arch_builtin("sm_90a", &arch, &err), &err);
    ASSERT_OK(ft__variant_filter_parse(spec, "d=104,dtype=bf16,causal=1", &filter, &mask, &err), &err);
    ASSERT_OK(ft__plan_build_kept(spec, &arch, &filter, mask, &plan, &err), &err);
    ASSERT_OK(ft__plan_build(spec, &arch, &filter, mask, &all, &err), &err);
    ASSERT_EQ(plan->nitems, plan->count[FT_PLAN_PENDING]);
    ASSERT_TRUE(plan->nitems > 0 && plan->count[FT_PLAN_PRUNED] > 0);
    ASSERT_EQ(all->nitems, spec->nvariants / 15 / 2 / 2);
    ASSERT_EQ(plan->count[FT_PLAN_PRUNED], all->count[FT_PLAN_PRUNED]);
    ASSERT_EQ(plan->count[FT_PLAN_PENDING], all->count[FT_PLAN_PENDING]);
    for (i = 0; i < plan->nitems; i++)
        ASSERT_EQ(plan->items[i].status, FT_PLAN_PENDING);
    ft__plan_free(plan);
    ft__plan_free(all);
    ft__spec_free(spec);
}

static void test_fwd_head_dims_by_8(void)
{
    static const struct {
        const char *spec, *arch, *variant;
        const char *reason; /* NULL: kept */
        long long smem;     /* the spec's shared memory, kept variants */
        int span;           /* sm_90a: the tensor maps' swizzle span */
    } cases[] = {
        {"flash_fwd.lua", "sm_80", "d=72,bm=64,bn=64,warps=4,stages=2,causal=0,dtype=f16,qreg=1,overlap=1", NULL,
         (64 + 2 * 2 * 64) * 88 * 2, 0},
        {"flash_fwd.lua", "sm_80", "d=200,bm=64,bn=32,warps=4,stages=2,causal=1,dtype=bf16,qreg=0,overlap=0", NULL,
         (64 + 2 * 2 * 32) * 216 * 2, 0},
        {"flash_fwd.lua", "sm_80", "d=36,bm=64,bn=64,warps=4,stages=2,causal=0,dtype=f16,qreg=0,overlap=0",
         "head dims are multiples of 8 from 32 to 256", 0, 0},
        {"flash_fwd.lua", "sm_80", "d=264,bm=64,bn=64,warps=4,stages=2,causal=0,dtype=f16,qreg=0,overlap=0",
         "head dims are multiples of 8 from 32 to 256", 0, 0},
        {"flash_fwd_sm90.lua", "sm_90a", "d=72,bm=128,bn=128,stages=2,causal=0,dtype=f16,pingpong=1,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
         NULL, 1024 + 2 * 128 * 80 * 2 + 2 * 2 * 128 * 80 * 2 + 8 * (8 + 8) + 128, 16},
        {"flash_fwd_sm90.lua", "sm_90a", "d=88,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
         NULL, 1024 + 2 * 128 * 96 * 2 + 2 * 2 * 128 * 96 * 2 + 8 * (8 + 8) + 128, 32},
        {"flash_fwd_sm90.lua", "sm_90a", "d=120,bm=128,bn=128,stages=2,causal=0,dtype=f16,pingpong=0,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
         NULL, 1024 + 2 * 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2 + 8 * (8 + 8) + 128, 64},
        {"flash_fwd_sm90.lua", "sm_90a", "d=36,bm=128,bn=128,stages=2,causal=0,dtype=f16,pingpong=1,overlap=1,balance=0,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1",
         "head dims are multiples of 8 from 32 to 256", 0, 0},
        {"flash_decode.lua", "sm_80", "d=72,bn=16,warps=4,stages=2,mt=1,pack=1,causal=0,dtype=f16", NULL,
         (16 + 4 * 2 * 2 * 16) * 88 * 2, 0},
        {"flash_decode.lua", "sm_80", "d=264,bn=16,warps=4,stages=2,mt=1,pack=1,causal=0,dtype=f16",
         "head dims are multiples of 8 from 32 to 256", 0, 0},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        ft_spec *spec = NULL;
        const ft_family *fam;
        ft_variant v;
        ft_arch arch;
        ft_kernel_source ks;
        ft_launch_facts facts;
        ft_err err;
        int keep, di;

        snprintf(path, sizeof path, "%s/specs/%s", FT_SOURCE_DIR, cases[i].spec);
        ASSERT_OK(ft__spec_load(path, NULL, &spec, &err), &err);
        di = ft__spec_param_index(spec, "d");
        ASSERT_TRUE(di >= 0 && spec->params[di].open);
        ASSERT_OK(ft__arch_builtin(cases[i].arch, &arch, &err), &err);
        keep = ft_test_spec_case(spec, &arch, cases[i].variant, cases[i].reason, &v);
        ASSERT_TRUE(keep >= 0);
        if (keep) {
            fam = ft__family_find(spec->template_name);
            ASSERT_TRUE(fam != NULL);
            ASSERT_OK(ft__emit(spec, fam, &v, &arch, &ks, &err), &err);
            if (ks.smem_dynamic != cases[i].smem)
                FT_FAIL_("%s: shared memory %lld, want %lld", cases[i].variant, ks.smem_dynamic, cases[i].smem);
            if (cases[i].span > 0) {
                char wrapper[64];
                int d = atoi(cases[i].variant + 2);
                snprintf(wrapper, sizeof wrapper, "wgmma.mma_async.sync.aligned.m64n%dk16", (d + 15) / 16 * 16);
                ASSERT_TRUE(strstr(ks.text, wrapper) != NULL);
                ft__family_launch(fam, cases[i].variant, ks.threads, ks.smem_dynamic, &facts);
                ASSERT_EQ(facts.tma_span, cases[i].span);
                ASSERT_EQ(facts.head_dim, d);
            }
            ft__kernel_source_free(&ks);
        }
        ft__spec_free(spec);
    }
}

/* flash_bwd_sm90's spec on sm_90a, for the two tests below. */
static ft_spec *load_bwd_sm90(ft_arch *arch)
{
    ft_spec *spec = NULL;
    ft_err err;
    if (ft__spec_load(FT_SOURCE_DIR "/specs/flash_bwd_sm90.lua", NULL, &spec, &err) != FT_OK ||
        ft__arch_builtin("sm_90a", arch, &err) != FT_OK) {
        fprintf(stderr, "flash_bwd_sm90 on sm_90a: %s\n", err.msg);
        ft__spec_free(spec);
        return NULL;
    }
    return spec;
}

/* Whether variant (kept by pruning) generates a source holding `define`. */
static int source_defines(ft_spec *spec, const ft_arch *arch, const char *variant, const char *define)
{
    ft_kernel_source ks;
    ft_variant v;
    ft_err err;
    int n;
    if (ft_test_spec_case(spec, arch, variant, NULL, &v) != 1 ||
        ft__emit(spec, ft__family_find(spec->template_name), &v, arch, &ks, &err) != FT_OK)
        return 0;
    n = ft_test_count(ks.text, define);
    ft__kernel_source_free(&ks);
    return n == 1;
}

/* The variants of filter compiled with NVRTC (two threads): `pending` of them kept by pruning,
 * each printed; of those, `serialised` with early_dv = serialised_dv rejected because ptxas
 * serialised their wgmmas, `compiled` others compiled without spills. */
static void check_plan(ft_spec *spec, const ft_arch *arch, const char *filter, int pending, int serialised_dv,
                       int compiled, int serialised)
{
    ft_plan *plan = NULL;
    ft_variant f;
    unsigned mask;
    ft_err err;
    int i, n_compiled = 0, n_serialised = 0;

    memset(&err, 0, sizeof err);
    ASSERT_OK(ft__variant_filter_parse(spec, filter, &f, &mask, &err), &err);
    ASSERT_OK(ft__plan_build(spec, arch, &f, mask, &plan, &err), &err);
    if (plan->count[FT_PLAN_PENDING] != pending || ft__plan_compile(plan, NULL, 2, NULL, NULL, NULL, &err) != FT_OK) {
        const int kept = plan->count[FT_PLAN_PENDING];
        ft__plan_free(plan);
        FT_FAIL_("%s: %d variants kept (%d expected), or: %s", filter, kept, pending, err.msg);
    }
    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        if (it->status == FT_PLAN_PRUNED)
            continue;
        printf("  %s: %s %s\n", it->variant_str, ft__plan_status_name(it->status), it->reason);
        if (ft__variant_int(spec, &it->variant, "early_dv", 0) == serialised_dv) {
            n_serialised += it->status == FT_PLAN_OVER_LIMITS && strcmp(it->reason_class, "wgmmas serialised by ptxas") == 0;
        } else {
            n_compiled += it->status == FT_PLAN_COMPILED && it->report.spill_stores + it->report.spill_loads == 0;
        }
    }
    ft__plan_free(plan);
    ASSERT_EQ(n_compiled, compiled);
    ASSERT_EQ(n_serialised, serialised);
}

/* flash_bwd_sm90's s_ahead: pruned with kvsplit (the constraint's words), a kept variant's source
 * defines FTP_S_AHEAD, and NVRTC's compile of d = 128's two-consumer structure keeps its wgmmas
 * asynchronous with early_dv 0 and 2 (no spills either) but not with early_dv = 1, which ptxas
 * serialises for lack of registers and the plan rejects (early_dv = 3 is pruned with it). Guards
 * the template's ptxas-facing steps (the last block's unused Sᵀ, dK/dV's zeroing before the first
 * Sᵀ, Sᵀ retired before dPᵀ with early_dv 1 or 2): losing one serialises every variant with
 * s_ahead = 1. */
static void test_bwd_sm90_s_ahead(void)
{
    ft_arch arch;
    ft_spec *spec = load_bwd_sm90(&arch);
    ft_variant v;

    ASSERT_TRUE(spec != NULL);
    ASSERT_EQ(ft_test_spec_case(spec, &arch, "d=192,bm=64,bn=64,causal=0,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,"
                                             "s_ahead=1,dtype=bf16",
                                "with shared keys the next block's Sᵀ is not issued ahead", &v),
              0);
    ASSERT_TRUE(source_defines(spec, &arch, "d=128,bm=64,bn=128,causal=1,early_dv=2,lpt=0,kvsplit=0,dq_red=0,det=0,"
                                            "s_ahead=1,dtype=bf16",
                               "#define FTP_S_AHEAD 1\n"));
    check_plan(spec, &arch, "d=128,bm=64,bn=128,causal=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=1,gqa=loop,dtype=bf16", 3, 1, 2,
               1);
    ft__spec_free(spec);
}

/* flash_bwd_sm90's early_dv=3 (dV's k16 steps issued as Pᵀ's columns are packed, dSᵀ from the
 * packed Pᵀ): pruned with kvsplit and with s_ahead (the constraints' words); at d = 128 with two
 * consumer warpgroups, where keeping Pᵀ in fp32 beside the streamed steps made ptxas serialise
 * every wgmma, NVRTC compiles it asynchronous and without spills, causal or not (masked blocks
 * stream too), and its source defines FTP_EARLY_DV 3. */
static void test_bwd_sm90_stream_dv(void)
{
    ft_arch arch;
    ft_spec *spec = load_bwd_sm90(&arch);
    ft_variant v;

    ASSERT_TRUE(spec != NULL);
    ASSERT_EQ(ft_test_spec_case(spec, &arch, "d=192,bm=64,bn=64,causal=0,early_dv=3,lpt=0,kvsplit=1,dq_red=1,det=0,"
                                             "s_ahead=0,dtype=bf16",
                                "with shared keys dV's product needs both warpgroups' Pᵀ: it cannot start while dPᵀ runs",
                                &v),
              0);
    ASSERT_EQ(ft_test_spec_case(spec, &arch, "d=128,bm=64,bn=128,causal=1,early_dv=3,lpt=0,kvsplit=0,dq_red=0,det=0,"
                                             "s_ahead=1,dtype=bf16",
                                "dV's steps issued one by one as Pᵀ is made are not with the next block's Sᵀ issued ahead",
                                &v),
              0);
    ASSERT_TRUE(source_defines(spec, &arch, "d=128,bm=64,bn=128,causal=1,early_dv=3,lpt=0,kvsplit=0,dq_red=0,det=0,"
                                            "s_ahead=0,dtype=bf16",
                               "#define FTP_EARLY_DV 3\n"));
    check_plan(spec, &arch,
               "d=128,bm=64,bn=128,early_dv=3,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=0,gqa=loop,dtype=bf16", 2, -1,
               2, 0);
    ft__spec_free(spec);
}

/* flash_bwd_sm90 with 80 query rows a block (FlashAttention-4's d = 128 tile, which no wgmma's m
 * of 64 holds): dQ computed transposed. Pruned with shared keys and where a warpgroup's dQ
 * columns are no whole passes of 64 (d = 96 over two warpgroups: 48 each, the constraint's
 * words); a kept variant's source has passes of 64 columns, Sᵀ and dPᵀ as m64n80, and a dQᵀ
 * wrapper of n = 80 with A transposed (MN-major: K's columns) and B not (the dS tile, K-major):
 * "1, 0", which no other wrapper has. NVRTC compiles d = 128's causal two-consumer structure
 * without spills with early_dv 0, 2 and 3 (1 spills: the plan rejects it). */
static void test_bwd_sm90_dq_transposed(void)
{
    ft_arch arch;
    ft_spec *spec = load_bwd_sm90(&arch);
    ft_variant v;
    ft_kernel_source ks;
    ft_err err;

    ASSERT_TRUE(spec != NULL);
    ASSERT_EQ(ft_test_spec_case(spec, &arch, "d=128,bm=80,bn=64,causal=0,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,"
                                             "s_ahead=0,dtype=bf16",
                                "two warpgroups sharing keys share 64 of them, and each computes half of a block's queries' Sᵀ",
                                &v),
              0);
    ASSERT_EQ(ft_test_spec_case(spec, &arch, "d=96,bm=80,bn=128,causal=0,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0,"
                                             "s_ahead=0,dtype=bf16",
                                "each warpgroup's dQ columns go in passes of a multiple of 16 columns (at most 112; "
                                "transposed, of 64), its dK and dV columns are a multiple of 16",
                                &v),
              0);
    ASSERT_EQ(ft_test_spec_case(spec, &arch, "d=128,bm=80,bn=128,causal=1,early_dv=2,lpt=0,kvsplit=0,dq_red=0,det=1,"
                                             "s_ahead=0,dtype=bf16",
                                NULL, &v),
              1);
    ASSERT_OK(ft__emit(spec, ft__family_find("flash_bwd_sm90"), &v, &arch, &ks, &err), &err);
    ASSERT_EQ(ft_test_count(ks.text, "#define FTP_DQ_WIDTH 64\n"), 1);
    ASSERT_EQ(ft_test_count(ks.text, "wgmma.mma_async.sync.aligned.m64n80k16"), 2); /* Sᵀ and dPᵀ's, dQᵀ's */
    ASSERT_EQ(ft_test_count(ks.text, "p, 1, 1, 1, 0;"), 1);
    ft__kernel_source_free(&ks);
    check_plan(spec, &arch, "d=128,bm=80,bn=128,causal=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,gqa=loop,dtype=bf16", 4, 1,
               3, 0);
    ft__spec_free(spec);
}

/* A two-valued knob of flash_bwd_sm90 whose define is `define`: each of the n variant texts in
 * pruned is turned away with the constraint's words; `on`'s source defines it 1, and `off`'s (a
 * text without the knob, so its default) 0. */
static void check_knob(ft_spec *spec, const ft_arch *arch, const char *define, const char *const *pruned,
                       size_t n, const char *words, const char *on, const char *off)
{
    char line[64];
    ft_variant v;
    size_t i;

    for (i = 0; i < n; i++)
        ASSERT_EQ(ft_test_spec_case(spec, arch, pruned[i], words, &v), 0);
    snprintf(line, sizeof line, "#define %s 1\n", define);
    ASSERT_TRUE(source_defines(spec, arch, on, line));
    snprintf(line, sizeof line, "#define %s 0\n", define);
    ASSERT_TRUE(source_defines(spec, arch, off, line));
}

/* flash_bwd_sm90's dq_late (the staged dQ partial handed over once the next block's Sᵀ and dPᵀ
 * are issued): pruned with dq_red (nothing staged), with s_ahead and with kvsplit (the
 * constraint's words); a kept variant's source defines FTP_DQ_LATE 1, a variant text without the
 * knob takes its default (0: the built-in defaults' kernels as they were); NVRTC compiles
 * d = 128's defaults' twins (two consumers, early_dv = 1, causal or not) with it, asynchronous and
 * without spills. */
static void test_bwd_sm90_dq_late(void)
{
    static const char *const pruned[] = {
        /* dq_red: nothing staged */
        "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=1,det=0,s_ahead=0,dq_late=1,dtype=bf16",
        /* s_ahead */
        "d=128,bm=64,bn=128,causal=1,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=1,dq_late=1,dtype=bf16",
        /* kvsplit */
        "d=256,bm=64,bn=64,causal=0,early_dv=0,lpt=0,kvsplit=1,dq_red=0,det=0,s_ahead=0,dq_late=1,dtype=bf16",
    };
    ft_arch arch;
    ft_spec *spec = load_bwd_sm90(&arch);

    ASSERT_TRUE(spec != NULL);
    check_knob(spec, &arch, "FTP_DQ_LATE", pruned, sizeof pruned / sizeof pruned[0],
               "the dQ partial's late hand-off is of a staged partial, without the next Sᵀ issued ahead or shared keys",
               "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=1,s_ahead=0,dq_late=1,dtype=bf16",
               "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dtype=bf16");
    check_plan(spec, &arch,
               "d=128,bm=64,bn=128,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=1,qrot=0,gqa=loop,dtype=bf16", 2, -1,
               2, 0);
    ft__spec_free(spec);
}

/* flash_bwd_sm90's qrot (key block j starts its walk at row block j, so the CTAs running at once
 * add into different dQ tiles): pruned causal and deterministic (the constraint's words); a kept
 * variant's source defines FTP_QROT 1, a variant text without the knob takes its default (0: the
 * built-in defaults' kernels as they were); NVRTC compiles the non-causal twins of d = 128's and
 * d = 64's defaults (two consumers; staged or from registers) without spills. */
static void test_bwd_sm90_qrot(void)
{
    static const char *const pruned[] = {
        /* causal: the walks start at the diagonal */
        "d=128,bm=64,bn=128,causal=1,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=1,dtype=bf16",
        /* det: the additions' order is the walk's */
        "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=1,s_ahead=0,dq_late=0,qrot=1,dtype=bf16",
    };
    ft_arch arch;
    ft_spec *spec = load_bwd_sm90(&arch);

    ASSERT_TRUE(spec != NULL);
    check_knob(spec, &arch, "FTP_QROT", pruned, sizeof pruned / sizeof pruned[0],
               "the walks start at different query blocks only without a causal mask (whose walks start at the "
               "diagonal, apart already) and without a fixed order of dQ's additions",
               "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=1,dtype=bf16",
               "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,dtype=bf16");
    check_plan(spec, &arch,
               "d=128,bm=64,bn=128,causal=0,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=1,gqa=loop,dtype=bf16",
               1, -1, 1, 0);
    check_plan(spec, &arch,
               "d=64,bm=128,bn=128,causal=0,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0,s_ahead=0,dq_late=0,qrot=1,gqa=loop,dtype=bf16",
               1, -1, 1, 0);
    ft__spec_free(spec);
}

/* flash_bwd_sm90's gqa: the spec's workloads include grouped shapes; atomic is pruned with det
 * (the constraint's words: the sums' order varies); a kept variant's source defines FTP_GQA_ATOMIC, a variant text without the knob takes
 * its default (loop: the built-in defaults' kernels as they were); the launch facts say which
 * (ops/bwd.c then gives the main kernel one block per query head and the workspace the fp32
 * sums, test_ops); NVRTC compiles the atomic twins of d = 128's causal default and of d = 256's
 * kvsplit structure without spills. */
static void test_bwd_sm90_gqa_atomic(void)
{
    static const char atomic[] =
        "d=128,bm=64,bn=128,causal=1,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dq_late=0,qrot=0,gqa=atomic,"
        "dtype=bf16";
    static const char plain[] = "d=128,bm=64,bn=128,causal=1,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=0,dtype=bf16";
    const ft_family *fam = ft__family_find("flash_bwd_sm90");
    ft_launch_facts facts;
    ft_arch arch;
    ft_spec *spec = load_bwd_sm90(&arch);
    ft_variant v;

    ASSERT_TRUE(spec != NULL && fam != NULL && fam->launch != NULL);
    /* the tuner's workloads: the grid's 24, then 6 with 8 query heads a K/V head (d = 64 and 128,
     * 1k, 4k, 16k), where loop and atomic differ */
    ASSERT_EQ(spec->nworkloads, 30);
    for (int i = 24; i < 30; i++)
        ASSERT_EQ(spec->workloads[i].hq, 8 * spec->workloads[i].hkv);
    ASSERT_EQ(spec->workloads[23].hq, spec->workloads[23].hkv);
    ASSERT_EQ(ft_test_spec_case(spec, &arch,
                                "d=128,bm=64,bn=128,causal=1,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=1,gqa=atomic,dtype=bf16",
                                "dK and dV summed by atomics have no fixed order of additions", &v),
              0);
    ASSERT_TRUE(source_defines(spec, &arch, atomic, "#define FTP_GQA_ATOMIC 1\n"));
    ASSERT_TRUE(source_defines(spec, &arch, plain, "#define FTP_GQA_LOOP 1\n"));
    memset(&facts, 0, sizeof facts);
    fam->launch(atomic, &facts);
    ASSERT_EQ(facts.gqa_atomic, 1);
    memset(&facts, 0, sizeof facts);
    fam->launch(plain, &facts);
    ASSERT_EQ(facts.gqa_atomic, 0);
    check_plan(spec, &arch, atomic, 1, -1, 1, 0);
    check_plan(spec, &arch,
               "d=256,bm=64,bn=64,causal=1,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,s_ahead=0,dq_late=0,qrot=0,gqa=atomic,"
               "dtype=bf16",
               1, -1, 1, 0);
    ft__spec_free(spec);
}

/* flash_fwd_sm90's pack: the spec's workloads include grouped d = 64 shapes (where the tuner
 * would measure pack = 1: tune_fake_sm90.sh, through a copy of the spec that keeps it); pruned
 * above d = 128 and, until the GPU verifies a mend, everywhere (the constraints' words: the twin
 * of d = 64's causal default is one that failed); a pack = 1 variant's source defines FTP_PACK
 * 1, a variant text without the knob takes 0; the launch facts say pack_gqa (ops/fwd.c then
 * plans the packed grid: test_ops). */
static void test_fwd_sm90_pack(void)
{
    static const char twin[] = "d=64,bm=192,bn=128,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=0,balance=0,psmem=0,"
                               "pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=1";
    static const char plain[] = "d=64,bm=192,bn=128,stages=2,causal=0,dtype=bf16,pingpong=0,overlap=0,balance=0";
    const ft_family *fam = ft__family_find("flash_fwd_sm90");
    ft_spec *spec = load_sm90();
    ft_kernel_source ks;
    ft_launch_facts facts;
    ft_arch arch;
    ft_variant v;
    ft_err err;
    int i;

    ASSERT_TRUE(spec != NULL && fam != NULL && fam->launch != NULL);
    ASSERT_OK(ft__arch_builtin("sm_90a", &arch, &err), &err);
    /* the grid's 22 workloads, then 3 with 8 query heads a K/V head at d = 64 (1k, 4k, 16k) */
    ASSERT_EQ(spec->nworkloads, 25);
    for (i = 22; i < 25; i++)
        ASSERT_TRUE(spec->workloads[i].d == 64 && spec->workloads[i].hq == 8 * spec->workloads[i].hkv);
    for (i = 0; i < 22; i++)
        ASSERT_EQ(spec->workloads[i].hq, spec->workloads[i].hkv);
    ASSERT_EQ(ft_test_spec_case(spec, &arch,
                                "d=192,bm=128,bn=96,stages=2,causal=0,dtype=bf16,pingpong=1,overlap=1,balance=0,ostore=1,pack=1",
                                "query heads packed into a block's rows at head dims up to 128", &v),
              0);
    ASSERT_EQ(ft_test_spec_case(spec, &arch,
                                "d=64,bm=128,bn=128,stages=3,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=0,psmem=0,"
                                "pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=1",
                                PACK_GPU_REASON, &v),
              0);
    ASSERT_EQ(ft_test_spec_case(spec, &arch, twin, PACK_GPU_REASON, &v), 0);
    ASSERT_OK(ft__emit(spec, fam, &v, &arch, &ks, &err), &err); /* (the pruned twin, as a scratch spec would keep it) */
    ASSERT_EQ(ft_test_count(ks.text, "#define FTP_PACK 1\n"), 1);
    ft__kernel_source_free(&ks);
    ASSERT_TRUE(source_defines(spec, &arch, plain, "#define FTP_PACK 0\n"));
    memset(&facts, 0, sizeof facts);
    fam->launch(twin, &facts);
    ASSERT_TRUE(facts.pack_gqa == 1 && facts.tma == 1 && facts.split_kv == 0);
    memset(&facts, 0, sizeof facts);
    fam->launch(plain, &facts);
    ASSERT_EQ(facts.pack_gqa, 0);
    ft__spec_free(spec);
}

/* The backward's sm_90a head dims: d is open, and the constraints keep every multiple of 8 from
 * 32 to 256 (36 and 264 pruned with the first constraint's words). The tiles are the head dim
 * rounded up to 16 wide, with kvsplit to 32 (two warpgroups of whole k16 steps): the shared
 * memory, the dK/dV wgmma's n, the tensor maps' span and the workspace's dQ tiles follow that
 * width (the launch facts' tile_dim), the maps' head dim the call's (TMA fills the rest with
 * zeros). kvsplit at 184 takes tiles 192 wide, and so does 176, a multiple of 16 whose half is
 * not; at 200 and 208 its 224-wide tiles in blocks of 16 have one wholly past the head dim (TMA
 * fills that box with zeros as it does a box partly past: verified on an H200, 2026-12-05). */
static void test_bwd_head_dims_by_8(void)
{
    static const struct {
        const char *variant;
        const char *reason; /* NULL: kept */
        int width, span;    /* the tiles' width, the maps' swizzle span */
        int bm, bn, kvsplit, dq_red;
    } cases[] = {
        {"d=72,bm=64,bn=64,causal=1,early_dv=0,lpt=0,kvsplit=0,dq_red=0,det=0,s_ahead=0,dtype=bf16", NULL, 80, 16,
         64, 64, 0, 0},
        {"d=88,bm=64,bn=128,causal=0,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0,s_ahead=0,dtype=f16", NULL, 96, 16,
         64, 128, 0, 1},
        {"d=120,bm=64,bn=128,causal=1,early_dv=1,lpt=0,kvsplit=0,dq_red=0,det=1,s_ahead=0,dtype=bf16", NULL, 128, 64,
         64, 128, 0, 0},
        {"d=168,bm=64,bn=64,causal=0,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,s_ahead=0,dtype=bf16", NULL, 192, 32,
         64, 64, 1, 1},
        {"d=184,bm=64,bn=64,causal=1,early_dv=0,lpt=0,kvsplit=1,dq_red=0,det=1,s_ahead=0,dtype=f16", NULL, 192, 32,
         64, 64, 1, 0},
        /* a multiple of 16 too is 32-aligned with kvsplit: 176 in 192-wide tiles, 240 in 256 */
        {"d=176,bm=64,bn=64,causal=1,early_dv=0,lpt=0,kvsplit=1,dq_red=0,det=1,s_ahead=0,dtype=f16", NULL, 192, 32,
         64, 64, 1, 0},
        {"d=240,bm=64,bn=64,causal=0,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,s_ahead=0,dtype=bf16", NULL, 256, 64,
         64, 64, 1, 1},
        /* 208 and 200: 224 wide in blocks of 16, the last wholly past the head dim */
        {"d=208,bm=64,bn=64,causal=0,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,s_ahead=0,dtype=bf16", NULL, 224, 16,
         64, 64, 1, 1},
        {"d=200,bm=64,bn=64,causal=1,early_dv=0,lpt=0,kvsplit=1,dq_red=0,det=0,s_ahead=0,dtype=f16", NULL, 224, 16,
         64, 64, 1, 0},
        {"d=36,bm=64,bn=64,causal=0,early_dv=0,lpt=0,kvsplit=0,dq_red=1,det=0,s_ahead=0,dtype=bf16",
         "head dims are multiples of 8 from 32 to 256", 0, 0, 0, 0, 0, 0},
        {"d=264,bm=64,bn=64,causal=0,early_dv=0,lpt=0,kvsplit=1,dq_red=1,det=0,s_ahead=0,dtype=bf16",
         "head dims are multiples of 8 from 32 to 256", 0, 0, 0, 0, 0, 0},
    };
    const ft_family *fam = ft__family_find("flash_bwd_sm90");
    ft_spec *spec = NULL;
    ft_arch arch;
    ft_err err;
    size_t i;

    ASSERT_TRUE(fam != NULL);
    ASSERT_OK(ft__spec_load(FT_SOURCE_DIR "/specs/flash_bwd_sm90.lua", NULL, &spec, &err), &err);
    ASSERT_OK(ft__arch_builtin("sm_90a", &arch, &err), &err);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_variant v;
        ft_kernel_source ks;
        ft_launch_facts facts;
        char wrapper[80];
        const int w = cases[i].width, bm = cases[i].bm, bn = cases[i].bn, split = cases[i].kvsplit;
        int keep = ft_test_spec_case(spec, &arch, cases[i].variant, cases[i].reason, &v);
        long long smem;

        ASSERT_TRUE(keep >= 0);
        if (!keep)
            continue;
        ASSERT_OK(ft__emit(spec, fam, &v, &arch, &ks, &err), &err);
        /* 1024 to align, K and V, two stages of Q and dO, two dSᵀ (kvsplit: and Pᵀ) tiles, the dQ
         * staging tile (not with dq_red), two stages of LSE and D, the mbarriers: w wide */
        smem = 1024 + 2LL * bn * w * 2 + 2LL * 2 * bm * w * 2 + 2LL * (1 + split) * bn * bm * 2 +
               (1 - cases[i].dq_red) * (long long)bm * w * 4 + 2 * 2 * bm * 4 + 64;
        if (ks.smem_dynamic != smem)
            FT_FAIL_("%s: shared memory %lld, want %lld", cases[i].variant, ks.smem_dynamic, smem);
        snprintf(wrapper, sizeof wrapper, "wgmma.mma_async.sync.aligned.m64n%dk16", split ? w / 2 : w);
        ASSERT_TRUE(strstr(ks.text, wrapper) != NULL);
        {
            char tile_d[40];
            snprintf(tile_d, sizeof tile_d, "#define FTP_TILE_D %d\n", w);
            ASSERT_EQ(ft_test_count(ks.text, tile_d), 1);
        }
        ft__family_launch(fam, cases[i].variant, ks.threads, ks.smem_dynamic, &facts);
        ASSERT_EQ(facts.head_dim, atoi(cases[i].variant + 2));
        ASSERT_EQ(facts.tile_dim, w);
        ASSERT_EQ(facts.tma_span, cases[i].span);
        ft__kernel_source_free(&ks);
    }
    ft__spec_free(spec);
}

/* A variant's text may leave out a parameter that has a default: text written before `ctas`
 * (or without the knobs at all) names the kernel with their defaults, formatted in full; a
 * parameter without a default (bm) must be there. */
static void test_variant_defaults(void)
{
    ft_spec *spec = load_sm90();
    ft_variant a, b;
    ft_err err;
    char text[512];

    ASSERT_TRUE(spec != NULL);
    ASSERT_OK(ft__variant_parse(spec, "d=64,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=1,overlap=1,"
                                      "balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0",
                                &a, &err), &err);
    ASSERT_EQ(ft__variant_int(spec, &a, "ctas", 0), 1);
    ASSERT_EQ(ft__variant_int(spec, &a, "pack", -1), 0);
    ASSERT_OK(ft__variant_parse(spec, "d=64,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=1,overlap=1,balance=1",
                                &b, &err), &err);
    ASSERT_EQ(memcmp(&a, &b, sizeof a), 0);
    ft__variant_format(spec, &b, text, sizeof text);
    ASSERT_STREQ(text, "d=64,bm=128,bn=128,stages=2,causal=1,dtype=bf16,pingpong=1,overlap=1,balance=1,psmem=0,pexp=0,"
                       "skip_rescale=0,ostore=0,early_rescale=0,ctas=1,pack=0");
    ASSERT_OK(ft__variant_parse(spec, "d=64,bm=64,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=0,ctas=2",
                                &a, &err), &err);
    ASSERT_EQ(ft__variant_int(spec, &a, "ctas", 0), 2);
    ASSERT_EQ(ft__variant_parse(spec, "d=64,bn=128,stages=2,causal=1,dtype=bf16,pingpong=0,overlap=1,balance=0", &a, &err),
              FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "lacks parameter 'bm'");
    ft__spec_free(spec);
}

FT_TEST_MAIN(FT_CASE(test_builtin_table), FT_CASE(test_load_builtin_index), FT_CASE(test_load_default_names),
             FT_CASE(test_family_target), FT_CASE(test_plan_target), FT_CASE(test_wgmma_wrappers),
             FT_CASE(test_emit_sm90), FT_CASE(test_sm90_pruning), FT_CASE(test_sm90_compile_sample),
             FT_CASE(test_plan_rejects_spills), FT_CASE(test_fwd_head_dims_by_8), FT_CASE(test_many_open_head_dims), FT_CASE(test_fwd_sm90_pack),
             FT_CASE(test_bwd_sm90_s_ahead), FT_CASE(test_bwd_sm90_stream_dv), FT_CASE(test_bwd_sm90_dq_transposed),
             FT_CASE(test_bwd_sm90_dq_late), FT_CASE(test_bwd_sm90_qrot), FT_CASE(test_bwd_sm90_gqa_atomic),
             FT_CASE(test_bwd_head_dims_by_8), FT_CASE(test_variant_defaults))
