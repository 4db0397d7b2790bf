/* Tests of variants, source generation, NVRTC compilation, the ptxas report and the cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/sha256.h"
#include "ft_test.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "runtime/compile.h"
#include "runtime/timing.h"
#include "tuner/plan.h"

static ft_spec *load_default(void)
{
    ft_spec *spec = NULL;
    ft_err err;
    if (ft__spec_load(FT_SOURCE_DIR "/specs/flash_fwd.lua", NULL, &spec, &err) != FT_OK)
        fprintf(stderr, "load: %s\n", err.msg);
    return spec;
}

static void test_sha256_vectors(void)
{
    /* FIPS 180-4 examples. */
    static const char *abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    static const char *two = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
    static const char *empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    uint8_t d[32];
    char hex[65];
    ft_sha256 s;
    int i;

    ft__sha256("abc", 3, d);
    ft__sha256_hex(d, hex);
    ASSERT_STREQ(hex, abc);
    ft__sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, d);
    ft__sha256_hex(d, hex);
    ASSERT_STREQ(hex, two);
    ft__sha256("", 0, d);
    ft__sha256_hex(d, hex);
    ASSERT_STREQ(hex, empty);
    /* Streaming in odd pieces gives the same digest. */
    ft__sha256_init(&s);
    for (i = 0; i < 56; i += 7)
        ft__sha256_update(&s, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq" + i, 7);
    ft__sha256_final(&s, d);
    ft__sha256_hex(d, hex);
    ASSERT_STREQ(hex, two);
}

static void test_variant_round_trip(void)
{
    ft_spec *spec = load_default();
    long long n;

    ASSERT_TRUE(spec != NULL);
    ASSERT_EQ(spec->nvariants, 8 * 2 * 3 * 2 * 3 * 2 * 2 * 2 * 2);
    for (n = 0; n < spec->nvariants; n += 7) {
        ft_variant v, back;
        char text[512], again[512];
        ft_err err;
        ft__variant_nth(spec, n, &v);
        ft__variant_format(spec, &v, text, sizeof text);
        ASSERT_OK(ft__variant_parse(spec, text, &back, &err), &err);
        ASSERT_EQ(memcmp(v.idx, back.idx, sizeof(int) * (size_t)spec->nparams), 0);
        ft__variant_format(spec, &back, again, sizeof again);
        ASSERT_STREQ(text, again);
    }
    ft__spec_free(spec);
}

static void test_variant_parse_errors(void)
{
    ft_spec *spec = load_default();
    ft_variant v;
    unsigned mask;
    ft_err err;

    ASSERT_TRUE(spec != NULL);
    /* any order and spaces are fine */
    ASSERT_OK(ft__variant_parse(spec, " qreg=0, dtype=bf16,causal=1,stages=2,warps=4,bn=64,bm=128,d=128 , overlap=1",
                                &v, &err), &err);
    ASSERT_STREQ(ft__variant_str(spec, &v, "dtype"), "bf16");
    ASSERT_EQ(ft__variant_int(spec, &v, "d", -1), 128);
    ASSERT_EQ(ft__variant_parse(spec, "d=128,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0,tile=3",
                                &v, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "unknown parameter 'tile'");
    ASSERT_EQ(ft__variant_parse(spec, "d=100,bm=128,bn=64,warps=4,stages=2,causal=1,dtype=f16,qreg=0,overlap=0",
                                &v, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "'100' is not a value of parameter 'd'");
    ASSERT_EQ(ft__variant_parse(spec, "d=128,bm=128", &v, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "lacks parameter 'bn'");
    ASSERT_EQ(ft__variant_parse(spec, "d=128,d=64", &v, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "given twice");
    ASSERT_EQ(ft__variant_parse(spec, "d128", &v, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "not name=value");
    ASSERT_OK(ft__variant_filter_parse(spec, "d=128,causal=1", &v, &mask, &err), &err);
    ASSERT_EQ(__builtin_popcount(mask), 2);
    ft__spec_free(spec);
}

static void test_plan_pruning(void)
{
    ft_spec *spec = load_default();
    ft_plan *plan = NULL;
    ft_arch a90, a86;
    ft_err err;
    int i, warp_rows = 0, smem = 0, regs = 0;

    ASSERT_TRUE(spec != NULL);
    ASSERT_OK(ft__arch_builtin("sm_90", &a90, &err), &err);
    ASSERT_OK(ft__arch_builtin("sm_86", &a86, &err), &err);
    ASSERT_OK(ft__plan_build(spec, &a90, NULL, 0, &plan, &err), &err);
    ASSERT_EQ(plan->nitems, spec->nvariants);
    for (i = 0; i < plan->nitems; i++) {
        const ft_plan_item *it = &plan->items[i];
        long long bm = ft__variant_int(spec, &it->variant, "bm", 0);
        long long w = ft__variant_int(spec, &it->variant, "warps", 0);
        if (bm % (16 * w) != 0) {
            /* every variant the first constraint rejects is pruned with its text */
            ASSERT_EQ(it->status, FT_PLAN_PRUNED);
            ASSERT_STREQ(it->reason, "each warp owns a multiple of 16 query rows");
            warp_rows++;
        }
        if (it->status == FT_PLAN_PENDING)
            ASSERT_TRUE(it->smem_dynamic > 0 && it->smem_dynamic <= a90.smem_per_block);
        if (strstr(it->reason, "shared memory") != NULL) {
            ASSERT_TRUE(it->smem_dynamic > a90.smem_per_block);
            smem++;
        }
        regs += strstr(it->reason, "register estimate") != NULL;
    }
    ASSERT_EQ(warp_rows, spec->nvariants / 4);
    ASSERT_TRUE(regs > 0);
    ASSERT_TRUE(smem > 0);
    ASSERT_EQ(plan->count[FT_PLAN_PRUNED] + plan->count[FT_PLAN_PENDING], plan->nitems);
    ft__plan_free(plan);

    /* sm_86 has 99 KiB per block: the formula prunes more there */
    ASSERT_OK(ft__plan_build(spec, &a86, NULL, 0, &plan, &err), &err);
    regs = 0;
    for (i = 0; i < plan->nitems; i++)
        regs += strstr(plan->items[i].reason, "shared memory") != NULL;
    ASSERT_TRUE(regs > smem);
    ft__plan_free(plan);
    ft__spec_free(spec);
}

static void test_emit(void)
{
    ft_spec *spec = load_default();
    ft_kernel_source src;
    ft_variant v;
    ft_arch arch;
    ft_err err;

    ASSERT_TRUE(spec != NULL);
    ASSERT_OK(ft__arch_builtin("sm_90", &arch, &err), &err);
    ASSERT_OK(ft__variant_parse(spec, "d=96,bm=64,bn=32,warps=4,stages=3,causal=1,dtype=bf16,qreg=1,overlap=0", &v, &err),
              &err);
    ASSERT_OK(ft__emit(spec, ft__family_find("flash_fwd_sm80"), &v, &arch, &src, &err), &err);
    ASSERT_CONTAINS(src.text, "#define FTP_D 96\n");
    ASSERT_CONTAINS(src.text, "#define FTP_STAGES 3\n");
    ASSERT_CONTAINS(src.text, "#define FTP_DTYPE_BF16 1\n");
    ASSERT_CONTAINS(src.text, "#define FT_SMEM_BYTES 53248\n"); /* (64 + 2*3*32) * (96 + 8) * 2 */
    ASSERT_CONTAINS(src.text, "// variant   d=96,bm=64,bn=32,warps=4,stages=3,causal=1,dtype=bf16,qreg=1,overlap=0");
    ASSERT_STREQ(src.entry, "ft_flash_fwd_sm80_d96_bm64_bn32_warps4_stages3_causal1_dtypebf16_qreg1_overlap0");
    ASSERT_CONTAINS(src.text, "FT_DEFINE_KERNEL(ft_flash_fwd_sm80_d96_bm64_bn32_warps4_stages3_causal1_dtypebf16_qreg1_overlap0)");
    ASSERT_EQ(src.threads, 128);
    ASSERT_EQ(src.smem_dynamic, 53248);
    ASSERT_EQ(strlen(src.template_hash), 64);
    ft__kernel_source_free(&src);
    ft__spec_free(spec);
}

static void test_report_parse(void)
{
    static const char *log =
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     24 bytes stack frame, 40 bytes spill stores, 52 bytes spill loads\n"
        "ptxas info    : Used 255 registers, used 1 barriers, 8200 bytes smem, 400 bytes cmem[0]\n"
        "ptxas info    : Compile time = 489.686 ms\n";
    ft_resource_report r;
    char first[128];

    ASSERT_EQ(ft__parse_ptxas_report(log, &r), 1);
    ASSERT_EQ(r.registers, 255);
    ASSERT_EQ(r.barriers, 1);
    ASSERT_EQ(r.smem_static, 8200);
    ASSERT_EQ(r.stack_frame, 24);
    ASSERT_EQ(r.spill_stores, 40);
    ASSERT_EQ(r.spill_loads, 52);
    ASSERT_EQ(ft__log_wgmma_serialized(log, first, sizeof first), 0);
    ASSERT_STREQ(first, "");
    ASSERT_EQ(ft__log_wgmma_serialized(NULL, first, sizeof first), 0);
    ASSERT_EQ(ft__log_wgmma_serialized(
                  "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
                  "ptxas info    : (C7520) Potential Performance Loss: wgmma.mma_async instructions are "
                  "serialized due to program dependence on compiler-inserted WG.AR in divergent path in "
                  "the function 'k'\n"
                  "ptxas info    : Function properties for k\n",
                  first, sizeof first),
              1);
    ASSERT_STREQ(first, "C7520: program dependence on compiler-inserted WG.AR in divergent path");
    ASSERT_EQ(ft__log_wgmma_serialized("ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async "
                                       "instructions are serialized due to insufficient register resources "
                                       "for the wgmma pipeline in the function 'k'",
                                       first, 12),
              1);
    ASSERT_STREQ(first, "C7511: insu"); /* cut to the buffer */
    /* a source of several kernels (the backward's pre, main and post): the registers,
     * barriers and static shared memory of the kernel with the most registers (not the post
     * kernel's larger static tile, which no dynamic shared memory joins), the largest frame,
     * every kernel's spills */
    ASSERT_EQ(ft__parse_ptxas_report(
                  "ptxas info    : Compiling entry function 'k_post' for 'sm_90a'\n"
                  "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                  "ptxas info    : Used 28 registers, used 2 barriers, 17408 bytes smem\n"
                  "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
                  "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
                  "ptxas info    : Used 255 registers, used 1 barriers, 64 bytes smem\n"
                  "ptxas info    : Compiling entry function 'k_pre' for 'sm_90a'\n"
                  "ptxas         .     0 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
                  "ptxas info    : Used 47 registers, used 0 barriers\n",
                  &r),
              1);
    ASSERT_EQ(r.registers, 255);
    ASSERT_EQ(r.barriers, 1);
    ASSERT_EQ(r.smem_static, 64);
    ASSERT_EQ(r.stack_frame, 16);
    ASSERT_EQ(r.spill_stores, 12);
    ASSERT_EQ(r.spill_loads, 16);
    ASSERT_EQ(ft__parse_ptxas_report("nothing here\n", &r), 0);
    ASSERT_EQ(r.registers, -1);
    ft__log_first_error("k.cu(3): warning: x\nk.cu(7): error: identifier \"y\" is undefined\n", first,
                        sizeof first);
    ASSERT_STREQ(first, "k.cu(7): error: identifier \"y\" is undefined");
}

static const char tiny_kernel[] =
    "extern \"C\" __global__ void tiny(float *x) { x[threadIdx.x] = exp2f(x[threadIdx.x]); }\n";

static void test_compile_and_cache(void)
{
    char dir[] = "/tmp/ft-cache-test-XXXXXX";
    char path[4200];
    ft_cache *cache = NULL;
    ft_compiled a, b, c;
    ft_cache_stats s;
    uint8_t key[32];
    ft_err err;
    FILE *f;

    ASSERT_TRUE(mkdtemp(dir) != NULL);
    ASSERT_OK(ft__cache_open(dir, &cache, &err), &err);
    ASSERT_OK(ft__compile(tiny_kernel, "tiny.cu", "sm_80", cache, &a, &err), &err);
    ASSERT_EQ(a.cache_hit, 0);
    ASSERT_TRUE(a.cubin_size > 0);
    ASSERT_TRUE(a.report.registers > 0);
    ASSERT_OK(ft__compile(tiny_kernel, "tiny.cu", "sm_80", cache, &b, &err), &err);
    ASSERT_EQ(b.cache_hit, 1);
    ASSERT_EQ(b.cubin_size, a.cubin_size);
    ASSERT_EQ(memcmp(a.cubin, b.cubin, a.cubin_size), 0);
    ASSERT_EQ(b.report.registers, a.report.registers);
    ASSERT_STREQ(b.log, a.log);
    /* another target is another key */
    ft__compiled_free(&b);
    ASSERT_OK(ft__compile(tiny_kernel, "tiny.cu", "sm_90", cache, &b, &err), &err);
    ASSERT_EQ(b.cache_hit, 0);

    /* Flip one byte in the middle of the sm_80 entry: detected, removed, recompiled. */
    ft__compile_key(tiny_kernel, "sm_80", key);
    ft__cache_path(cache, key, path, sizeof path);
    f = fopen(path, "r+b");
    ASSERT_TRUE(f != NULL);
    fseek(f, 200, SEEK_SET);
    fputc(fgetc(f) ^ 0x5a, f);
    fclose(f);
    ASSERT_OK(ft__compile(tiny_kernel, "tiny.cu", "sm_80", cache, &c, &err), &err);
    ASSERT_EQ(c.cache_hit, 0);
    ASSERT_EQ(memcmp(a.cubin, c.cubin, a.cubin_size), 0);
    s = ft__cache_stats(cache);
    ASSERT_EQ(s.corrupt, 1);
    ft__compiled_free(&c);
    /* Truncated entry: same. */
    ASSERT_EQ(truncate(path, 100), 0);
    ASSERT_OK(ft__compile(tiny_kernel, "tiny.cu", "sm_80", cache, &c, &err), &err);
    ASSERT_EQ(c.cache_hit, 0);
    ASSERT_EQ(ft__cache_stats(cache).corrupt, 2);
    ft__compiled_free(&c);
    /* and now it hits again */
    ASSERT_OK(ft__compile(tiny_kernel, "tiny.cu", "sm_80", cache, &c, &err), &err);
    ASSERT_EQ(c.cache_hit, 1);

    ft__compiled_free(&a);
    ft__compiled_free(&b);
    ft__compiled_free(&c);
    ft__cache_close(cache);
}

static void test_compile_error(void)
{
    ft_compiled out;
    ft_err err;

    ASSERT_EQ(ft__compile("extern \"C\" __global__ void bad() { undefined_thing(); }\n", "bad.cu", "sm_80",
                          NULL, &out, &err),
              FT_ERR_COMPILE);
    ASSERT_CONTAINS(err.msg, "bad.cu");
    ASSERT_CONTAINS(err.msg, "undefined_thing");
    ASSERT_TRUE(out.log != NULL);
    ASSERT_TRUE(out.cubin == NULL);
    ft__compiled_free(&out);
}

/* A representative subset of the default space compiles for every target, without errors,
 * and every kept variant's resources fit the target. */
static void test_plan_compile_subset(void)
{
    static const char *const archs[] = {"sm_80", "sm_86", "sm_90"};
    static const char *const filters[] = {
        "d=128,bm=128,bn=64,warps=4,stages=2,qreg=0,causal=1,dtype=f16,overlap=0",
        "d=64,bm=64,bn=128,warps=4,stages=3,qreg=1,causal=0,dtype=bf16,overlap=1",
        "d=96,bm=128,bn=32,warps=8,stages=1,qreg=1,causal=1,dtype=f16,overlap=0",
        "d=256,bm=64,bn=32,warps=4,stages=2,qreg=0,causal=0,dtype=bf16,overlap=1",
        "d=32,bm=128,bn=128,warps=8,stages=2,qreg=1,causal=1,dtype=bf16,overlap=1",
    };
    ft_spec *spec = load_default();
    size_t a, f;

    ASSERT_TRUE(spec != NULL);
    for (a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        for (f = 0; f < sizeof filters / sizeof filters[0]; f++) {
            ft_plan *plan = NULL;
            ft_variant filter;
            unsigned mask;
            ft_arch arch;
            ft_err err;
            ASSERT_OK(ft__arch_builtin(archs[a], &arch, &err), &err);
            ASSERT_OK(ft__variant_filter_parse(spec, filters[f], &filter, &mask, &err), &err);
            ASSERT_OK(ft__plan_build(spec, &arch, &filter, mask, &plan, &err), &err);
            ASSERT_EQ(plan->nitems, 1);
            if (plan->items[0].status == FT_PLAN_PENDING) {
                ASSERT_OK(ft__plan_compile(plan, NULL, 2, NULL, NULL, NULL, &err), &err);
                if (plan->items[0].status != FT_PLAN_COMPILED)
                    fprintf(stderr, "%s on %s: %s\n", filters[f], archs[a], plan->items[0].reason);
                ASSERT_EQ(plan->items[0].status, FT_PLAN_COMPILED);
                ASSERT_TRUE(plan->items[0].report.registers > 0);
            }
            ft__plan_free(plan);
        }
    }
    ft__spec_free(spec);
}

/* The timing's heat phase ends once it has run its time and two batches agree, or at its cap. */
static void test_heat_done(void)
{
    /* not yet its time, however steady */
    ASSERT_TRUE(!ft__heat_done(100, 1.0, 1.0, 150));
    /* its time, but one batch only, or the last two apart by more than FT_HEAT_AGREE */
    ASSERT_TRUE(!ft__heat_done(160, 0, 1.0, 150));
    ASSERT_TRUE(!ft__heat_done(160, 0.90, 0.95, 150));
    ASSERT_TRUE(!ft__heat_done(160, 1.0, 1.0 + 2 * FT_HEAT_AGREE, 150));
    /* its time and steady, slower or faster */
    ASSERT_TRUE(ft__heat_done(160, 1.0, 1.0 + FT_HEAT_AGREE / 2, 150));
    ASSERT_TRUE(ft__heat_done(160, 1.0, 1.0 - FT_HEAT_AGREE / 2, 150));
    /* never steady: the cap ends it */
    ASSERT_TRUE(!ft__heat_done(150 + FT_HEAT_EXTRA_MS - 1, 0.8, 0.9, 150));
    ASSERT_TRUE(ft__heat_done(150 + FT_HEAT_EXTRA_MS, 0.8, 0.9, 150));
}

/* The two halves of ft__plan_compile: an item compiled without its source is a compile error
 * (not a crash); generated first, it compiles; items not pending are left alone. */
static void test_plan_emit_then_compile(void)
{
    ft_spec *spec = load_default();
    ft_plan *plan = NULL;
    ft_variant filter;
    unsigned mask;
    ft_arch arch;
    ft_err err;
    int idx[2], i, n = 0;

    ASSERT_TRUE(spec != NULL);
    ASSERT_OK(ft__arch_builtin("sm_80", &arch, &err), &err);
    ASSERT_OK(ft__variant_filter_parse(spec, "d=64,bm=64,bn=64,warps=4,stages=1,qreg=0,dtype=f16,overlap=0",
                                       &filter, &mask, &err), &err);
    ASSERT_OK(ft__plan_build(spec, &arch, &filter, mask, &plan, &err), &err);
    for (i = 0; i < plan->nitems && n < 2; i++)
        if (plan->items[i].status == FT_PLAN_PENDING)
            idx[n++] = i;
    ASSERT_EQ(n, 2);
    /* the first without its source */
    ASSERT_OK(ft__plan_compile_items(plan, idx, 1, NULL, 1, NULL, NULL, NULL, &err), &err);
    ASSERT_EQ(plan->items[idx[0]].status, FT_PLAN_COMPILE_ERROR);
    ASSERT_CONTAINS(plan->items[idx[0]].reason, "no source generated");
    /* the second generated, then compiled; the first (no longer pending) is skipped */
    ASSERT_OK(ft__plan_emit_items(plan, idx + 1, 1, &err), &err);
    ASSERT_TRUE(plan->items[idx[1]].source.text != NULL);
    ASSERT_OK(ft__plan_compile_items(plan, idx, 2, NULL, 1, NULL, NULL, NULL, &err), &err);
    ASSERT_EQ(plan->items[idx[0]].status, FT_PLAN_COMPILE_ERROR);
    ASSERT_EQ(plan->items[idx[1]].status, FT_PLAN_COMPILED);
    ASSERT_EQ(plan->count[FT_PLAN_COMPILE_ERROR], 1);
    ASSERT_EQ(plan->count[FT_PLAN_COMPILED], 1);
    ft__plan_free(plan);
    ft__spec_free(spec);
}

FT_TEST_MAIN(FT_CASE(test_sha256_vectors), FT_CASE(test_heat_done), FT_CASE(test_plan_emit_then_compile), FT_CASE(test_variant_round_trip),
             FT_CASE(test_variant_parse_errors), FT_CASE(test_plan_pruning), FT_CASE(test_emit),
             FT_CASE(test_report_parse), FT_CASE(test_compile_and_cache), FT_CASE(test_compile_error),
             FT_CASE(test_plan_compile_subset))
