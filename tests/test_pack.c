/* Tests of kernel packs without a GPU: the file round trip, every damaged byte and every
 * truncation refused, versions, the kernel-set view, the merge into a database, and
 * ft_context_create with a pack or kernel set (checked before the driver is loaded). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "flashtune.h"
#include "ft_test.h"
#include "common/fs.h"
#include "common/sha256.h"
#include "runtime/driver.h"
#include "tuning_db/pack.h"

static const unsigned char cubin_a[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 'k', 'e', 'r', 'n', 'e', 'l', '_', 'a', 0, 0xff};
static const char k_variant_b[] = "d=64,bm=128,bn=64,warps=4,stages=1,causal=1,dtype=f16,qreg=0,overlap=0";
static const unsigned char cubin_b[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 'k', 'e', 'r', 'n', 'e', 'l', '_', 'b', 1};

/* A pack of two kernels and three winners, built in memory (the strings and cubins are
 * borrowed: do not ft__pack_free it). */
static void sample_pack(ft_pack *p, ft_pack_kernel k[2], ft_pack_winner w[3])
{
    int i;

    memset(p, 0, sizeof *p);
    memset(k, 0, 2 * sizeof *k);
    memset(w, 0, 3 * sizeof *w);
    snprintf(p->flashtune_version, sizeof p->flashtune_version, "%s", FT_VERSION_STRING);
    snprintf(p->created, sizeof p->created, "2026-11-30T08:15:02Z");
    snprintf(p->device.name, sizeof p->device.name, "Test \"GPU\"\\ 1");
    p->device.cc = 90, p->device.sms = 132, p->device.smem_per_block = 232448, p->device.smem_per_sm = 233472;
    p->device.l2_bytes = 62914560, p->device.driver_version = 13000;
    snprintf(p->device.nvrtc_version, sizeof p->device.nvrtc_version, "13.0");
    for (i = 0; i < 2; i++) {
        ft_db_kernel *d = &k[i].k;
        snprintf(d->family, sizeof d->family, "flash_fwd_sm80");
        snprintf(d->variant, sizeof d->variant, "d=64,bm=%d,bn=64,warps=4,stages=1,causal=%d,dtype=f16,qreg=0,overlap=0",
                 i ? 128 : 64, i);
        snprintf(d->arch, sizeof d->arch, "sm_90");
        snprintf(d->template_hash, sizeof d->template_hash, "%064d", 7);
        snprintf(d->source_hash, sizeof d->source_hash, "%063d%d", 0, i);
        snprintf(d->entry, sizeof d->entry, "kernel_%c", 'a' + i);
        d->source = i ? "// kernel b\n\"quoted\" \t tab\n" : "// kernel a\n";
        d->cubin = i ? (const void *)cubin_b : (const void *)cubin_a;
        d->cubin_size = i ? sizeof cubin_b : sizeof cubin_a;
        d->registers = 100 + i, d->spill_stores = i, d->spill_loads = 2 * i, d->smem_static = 0;
        d->smem_dynamic = 27648 + i, d->threads = 128, d->compile_ms = 1234.5678901234567;
        k[i].rows_per_block = ft__pack_rows_per_block(d->variant);
    }
    for (i = 0; i < 3; i++) {
        ft_db_result *r = &w[i].r;
        w[i].kernel = i == 2 ? 1 : 0;
        ft__db_bucket(i == 1 ? "bf16" : "f16", 64, i == 2, 4, 16, 1024 << i, 1024 << i, &r->bucket);
        r->batch = 4, r->heads_q = 16, r->heads_kv = 16 >> i, r->seqlen_q = 1024 << i, r->seqlen_k = 1024 << i;
        r->status = FT_RESULT_OK;
        r->median_ms = 0.1 + 1.0 / 3.0 * (i + 1);
        r->iqr_ms = 0.001 * (i + 1);
        r->tflops = 123.456789012345 * (i + 1);
        r->max_error = i == 1 ? NAN : 3e-4;
        r->repetitions = 20 + i;
        snprintf(w[i].measured_at, sizeof w[i].measured_at, "2026-11-30 08:15:0%d", i);
    }
    p->kernels = k;
    p->nkernels = 2;
    p->winners = w;
    p->nwinners = 3;
}

/* Writes the sample pack to a temporary file; returns its bytes (malloc'd). */
static char *sample_file(char *path, size_t cap, size_t *size)
{
    ft_pack p;
    ft_pack_kernel k[2];
    ft_pack_winner w[3];
    char *data = NULL;
    ft_err err;
    int fd;

    snprintf(path, cap, "/tmp/ft_test_pack.XXXXXX");
    fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    close(fd);
    sample_pack(&p, k, w);
    if (ft__pack_write(&p, path, size, &err) != FT_OK || ft__read_file(path, &data, size, &err) != FT_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    return data;
}

static void test_round_trip(void)
{
    ft_pack want, got;
    ft_pack_kernel k[2];
    ft_pack_winner w[3];
    char path[64];
    size_t size = 0;
    ft_err err;
    int i;

    sample_pack(&want, k, w);
    snprintf(path, sizeof path, "/tmp/ft_test_pack_rt.XXXXXX");
    ASSERT_TRUE(mkdtemp(path) != NULL);
    strcat(path, "/a.ftpack");
    ASSERT_OK(ft__pack_write(&want, path, &size, &err), &err);
    ASSERT_TRUE(size > sizeof cubin_a + sizeof cubin_b);
    ASSERT_OK(ft__pack_read(path, &got, &err), &err);
    ASSERT_STREQ(got.sha256, want.sha256);
    ASSERT_STREQ(got.created, want.created);
    ASSERT_STREQ(got.device.name, want.device.name);
    ASSERT_EQ(got.device.cc, 90);
    ASSERT_EQ(got.device.l2_bytes, want.device.l2_bytes);
    ASSERT_EQ(got.device.driver_version, 13000);
    ASSERT_STREQ(got.device.nvrtc_version, "13.0");
    ASSERT_EQ(got.nkernels, 2);
    ASSERT_EQ(got.nwinners, 3);
    for (i = 0; i < 2; i++) {
        const ft_db_kernel *a = &want.kernels[i].k, *b = &got.kernels[i].k;
        ASSERT_STREQ(b->variant, a->variant);
        ASSERT_STREQ(b->entry, a->entry);
        ASSERT_STREQ(b->source_hash, a->source_hash);
        ASSERT_STREQ(b->source, a->source);
        ASSERT_EQ(b->cubin_size, a->cubin_size);
        ASSERT_TRUE(memcmp(b->cubin, a->cubin, a->cubin_size) == 0);
        ASSERT_EQ(b->smem_dynamic, a->smem_dynamic);
        ASSERT_EQ(b->spill_loads, a->spill_loads);
        ASSERT_TRUE(b->compile_ms == a->compile_ms);
        ASSERT_EQ(got.kernels[i].rows_per_block, i ? 128 : 64);
    }
    for (i = 0; i < 3; i++) {
        const ft_db_result *a = &want.winners[i].r, *b = &got.winners[i].r;
        ASSERT_EQ(got.winners[i].kernel, want.winners[i].kernel);
        ASSERT_STREQ(b->bucket.dtype, a->bucket.dtype);
        ASSERT_EQ(b->bucket.seqlen_bucket, a->bucket.seqlen_bucket);
        ASSERT_EQ(b->bucket.causal, a->bucket.causal);
        ASSERT_EQ(b->heads_kv, a->heads_kv);
        ASSERT_TRUE(b->median_ms == a->median_ms); /* exact: 17 significant digits */
        ASSERT_TRUE(b->tflops == a->tflops);
        ASSERT_TRUE(isnan(a->max_error) ? isnan(b->max_error) : b->max_error == a->max_error);
        ASSERT_STREQ(got.winners[i].measured_at, want.winners[i].measured_at);
    }
    ft__pack_free(&got);
    unlink(path);
    *strrchr(path, '/') = '\0';
    rmdir(path);
}

/* Every single flipped byte and every truncation is refused as corrupt. */
static void test_every_damage_refused(void)
{
    char path[64];
    size_t size = 0, i;
    char *data = sample_file(path, sizeof path, &size);
    ft_pack p;
    ft_err err;
    ft_status rc;

    ASSERT_TRUE(data != NULL);
    ASSERT_OK(ft__pack_parse(data, size, "x.ftpack", &p, &err), &err);
    ft__pack_free(&p);
    for (i = 0; i < size; i++) {
        data[i] ^= 0x01;
        rc = ft__pack_parse(data, size, "x.ftpack", &p, &err);
        data[i] ^= 0x01;
        if (rc != FT_ERR_CORRUPT)
            FT_FAIL_("a flipped byte at offset %zu of %zu gives %s, not FT_ERR_CORRUPT", i, size, ft_status_name(rc));
        ASSERT_CONTAINS(err.msg, "x.ftpack");
        ASSERT_EQ(p.nkernels, 0); /* nothing is handed out on failure */
    }
    for (i = 0; i < size; i++) {
        rc = ft__pack_parse(data, i, "x.ftpack", &p, &err);
        if (rc != FT_ERR_CORRUPT)
            FT_FAIL_("a pack cut to %zu of %zu bytes gives %s", i, size, ft_status_name(rc));
    }
    /* A blob damaged together with the whole-file checksum: the per-kernel sha256 catches it. */
    {
        uint8_t d[32];
        char hex[65], *nl = memchr(data, '\n', size);
        size_t hlen = (size_t)(nl - data) + 1;
        data[size - 1] ^= 0x20;
        ft__sha256(data + hlen, size - hlen, d);
        ft__sha256_hex(d, hex);
        memcpy(nl - 64, hex, 64);
        rc = ft__pack_parse(data, size, "x.ftpack", &p, &err);
        ASSERT_EQ(rc, FT_ERR_CORRUPT);
        ASSERT_CONTAINS(err.msg, "sha256 does not match in kernel 1");
    }
    free(data);
    unlink(path);
}

static void test_magic_and_version(void)
{
    char path[64];
    size_t size = 0;
    char *data = sample_file(path, sizeof path, &size);
    ft_pack p;
    ft_err err;

    ASSERT_TRUE(data != NULL);
    ASSERT_TRUE(memcmp(data, "FTPACK 1 ", 9) == 0);
    data[7] = '2'; /* a newer format */
    ASSERT_EQ(ft__pack_parse(data, size, "x.ftpack", &p, &err), FT_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(err.msg, "format version 2");
    data[7] = '1';
    data[0] = 'X';
    ASSERT_EQ(ft__pack_parse(data, size, "x.ftpack", &p, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "x.ftpack is not a flashtune pack");
    ASSERT_EQ(ft__pack_parse("", 0, "empty.ftpack", &p, &err), FT_ERR_CORRUPT);
    ASSERT_EQ(ft__pack_read("/nonexistent/dir/x.ftpack", &p, &err), FT_ERR_IO);
    free(data);
    unlink(path);
}

static void test_kernel_set_view(void)
{
    char path[64];
    size_t size = 0;
    char *data = sample_file(path, sizeof path, &size);
    const ft_kernel_set *s = NULL;
    ft_kernel_set bad;
    ft_kernel_set_entry e;
    ft_pack p;
    ft_err err;

    ASSERT_TRUE(data != NULL);
    ASSERT_OK(ft__pack_parse(data, size, "x.ftpack", &p, &err), &err);
    ASSERT_OK(ft__pack_kernel_set(&p, &s, &err), &err);
    ASSERT_OK(ft__kernel_set_check(s, &err), &err);
    ASSERT_EQ(s->count, 3);
    ASSERT_EQ(s->cc, 90);
    ASSERT_STREQ(s->device_name, "Test \"GPU\"\\ 1");
    ASSERT_EQ(s->entries[1].dtype, FT_BF16);
    ASSERT_EQ(s->entries[2].causal, 1);
    ASSERT_EQ(s->entries[2].rows_per_block, 128);
    ASSERT_EQ(s->entries[2].cubin_size, sizeof cubin_b);
    ASSERT_TRUE(memcmp(s->entries[2].cubin, cubin_b, sizeof cubin_b) == 0);
    ASSERT_STREQ(s->entries[0].entry, "kernel_a");
    ASSERT_STREQ(s->entries[0].family, "flash_fwd_sm80");
    ASSERT_STREQ(s->entries[2].variant, k_variant_b);
    bad = *s;
    bad.version = 99;
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "version 99");
    bad = *s;
    e = s->entries[0];
    e.seqlen_bucket = 1000; /* not a power of two */
    bad.entries = &e;
    bad.count = 1;
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ft__pack_free(&p);
    free(data);
    unlink(path);
}

static void test_import_into_db(void)
{
    char dir[64], db_path[96];
    ft_pack p;
    ft_pack_kernel k[2];
    ft_pack_winner w[3];
    ft_db *db = NULL;
    ft_db_row row;
    ft_db_device other;
    long long dev_id = -1, other_id = -1;
    void *cubin = NULL;
    size_t n = 0;
    int found = 0, winning = 0, i;
    ft_err err;

    snprintf(dir, sizeof dir, "/tmp/ft_test_pack_db.XXXXXX");
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(db_path, sizeof db_path, "%s/t.db", dir);
    sample_pack(&p, k, w);
    ASSERT_OK(ft__db_open(db_path, 0, &db, &err), &err);
    ASSERT_OK(ft__pack_import(db, &p, NULL, &winning, &err), &err);
    ASSERT_EQ(winning, 3);
    ASSERT_OK(ft__db_device_id(db, &p.device, &dev_id, &err), &err);
    for (i = 0; i < 3; i++) {
        ASSERT_OK(ft__db_winner(db, dev_id, &w[i].r.bucket, &row, &cubin, &n, &found, &err), &err);
        ASSERT_EQ(found, 1);
        ASSERT_STREQ(row.variant, k[w[i].kernel].k.variant);
        ASSERT_TRUE(row.result.median_ms == w[i].r.median_ms);
        ASSERT_STREQ(row.measured_at, w[i].measured_at);
        ASSERT_EQ(n, k[w[i].kernel].k.cubin_size);
        ASSERT_TRUE(memcmp(cubin, k[w[i].kernel].k.cubin, n) == 0);
        free(cubin);
        cubin = NULL;
    }
    /* Imported again for another device (--force): recorded for that one. */
    other = p.device;
    snprintf(other.name, sizeof other.name, "Other GPU");
    ASSERT_OK(ft__pack_import(db, &p, &other, &winning, &err), &err);
    ASSERT_EQ(winning, 3);
    ASSERT_OK(ft__db_device_id(db, &other, &other_id, &err), &err);
    ASSERT_NE(other_id, dev_id);
    ASSERT_OK(ft__db_winner(db, other_id, &w[2].r.bucket, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ft__db_close(db);
    unlink(db_path);
    rmdir(dir);
}

/* What ft_context_create does with a pack or kernel set on this machine: it checks them
 * first, then needs the driver. */
static int have_gpu(void)
{
    const ft_cuda *cu = NULL;
    ft_err err;
    return ft__cuda_load(&cu, &err) == FT_OK;
}

static void test_context_with_pack(void)
{
    char path[64], bad_path[80];
    size_t size = 0;
    char *data = sample_file(path, sizeof path, &size);
    ft_context_options o;
    ft_context *ctx = (ft_context *)&o; /* must be reset to NULL on failure */
    ft_status rc;
    int gpu = have_gpu();

    ASSERT_TRUE(data != NULL);
    ft_context_options_init(&o);
    ASSERT_EQ(o.version, 2);
    ASSERT_TRUE(o.pack == NULL && o.kernels == NULL);
    o.pack = path;
    o.cache_dir = "";
    rc = ft_context_create(&o, &ctx);
    if (!gpu) {
        if (rc != FT_ERR_NO_DRIVER && rc != FT_ERR_NO_DEVICE)
            FT_FAIL_("ft_context_create with a pack and no GPU gives %s: %s", ft_status_name(rc), ft_last_error(NULL));
        ASSERT_TRUE(ctx == NULL);
        ASSERT_TRUE(ft_last_error(NULL)[0] != '\0');
    } else {
        ASSERT_TRUE(rc == FT_OK || rc == FT_ERR_UNSUPPORTED); /* cc 9.0 or not */
        ft_context_destroy(ctx);
    }

    /* A damaged pack is FT_ERR_CORRUPT, GPU or not: it is read before the driver. */
    snprintf(bad_path, sizeof bad_path, "%s.bad", path);
    data[size / 2] ^= 0x40;
    ASSERT_TRUE(ft__write_file_atomic(bad_path, data, size, 0, NULL) == FT_OK);
    o.pack = bad_path;
    ctx = (ft_context *)&o;
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_CORRUPT);
    ASSERT_TRUE(ctx == NULL);
    ASSERT_CONTAINS(ft_last_error(NULL), "corrupt flashtune pack");
    o.pack = "/nonexistent/x.ftpack";
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_IO);

    /* Misuse: both, or a database besides. */
    o.pack = path;
    o.kernels = (const ft_kernel_set *)&o;
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_INVALID_ARGUMENT);
    o.kernels = NULL;
    o.database = "/tmp/some.db";
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(NULL), "replaces the database");
    free(data);
    unlink(bad_path);
    unlink(path);
}

static void test_context_with_kernel_set(void)
{
    char path[64];
    size_t size = 0;
    char *data = sample_file(path, sizeof path, &size);
    const ft_kernel_set *s = NULL;
    ft_kernel_set copy;
    ft_context_options o;
    ft_context *ctx = NULL;
    ft_pack p;
    ft_err err;
    ft_status rc;

    ASSERT_TRUE(data != NULL);
    ASSERT_OK(ft__pack_parse(data, size, "x", &p, &err), &err);
    ASSERT_OK(ft__pack_kernel_set(&p, &s, &err), &err);
    ft_context_options_init(&o);
    o.cache_dir = "";
    copy = *s;
    copy.version = 7;
    o.kernels = &copy;
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(NULL), "kernel set has version 7");
    o.kernels = s;
    rc = ft_context_create(&o, &ctx);
    if (!have_gpu()) {
        if (rc != FT_ERR_NO_DRIVER && rc != FT_ERR_NO_DEVICE)
            FT_FAIL_("ft_context_create with a kernel set and no GPU gives %s", ft_status_name(rc));
    } else {
        ASSERT_TRUE(rc == FT_OK || rc == FT_ERR_UNSUPPORTED);
    }
    ft_context_destroy(ctx);
    ft__pack_free(&p);
    free(data);
    unlink(path);
}

/* A program built against version 1 of the options: a smaller structure, initialised by the
 * version-1 function, still works; an unknown version is refused. */
static void test_options_version_1(void)
{
    size_t v1 = offsetof(ft_context_options, pack);
    unsigned char *mem = malloc(v1 + 16);
    ft_context_options *o = (ft_context_options *)mem;
    ft_context *ctx = NULL;
    ft_context_options v3;
    ft_status rc;
    size_t i;

    ASSERT_TRUE(mem != NULL);
    memset(mem, 0xab, v1 + 16);
    (ft_context_options_init)(o);
    ASSERT_EQ(o->version, 1);
    for (i = v1; i < v1 + 16; i++) /* nothing written past a version-1 structure */
        ASSERT_EQ(mem[i], 0xab);
    o->cache_dir = "";
    o->database = "";
    rc = ft_context_create(o, &ctx); /* the 0xab bytes after it are not read as pack or kernels */
    if (!have_gpu())
        ASSERT_TRUE(rc == FT_ERR_NO_DRIVER || rc == FT_ERR_NO_DEVICE);
    else
        ASSERT_EQ(rc, FT_OK);
    ft_context_destroy(ctx);
    ctx = NULL;
    ft_context_options_init(&v3);
    v3.version = 3;
    ASSERT_EQ(ft_context_create(&v3, &ctx), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(NULL), "ft_context_options_init");
    free(mem);
}

/* ft_attention_kernel without a context or a buffer fails cleanly and leaves buf empty. */
static void test_attention_kernel_arguments(void)
{
    char which[16] = "unchanged";
    ft_attention_args a;

    memset(&a, 0, sizeof a);
    ASSERT_EQ(ft_attention_kernel(NULL, &a, which, sizeof which), FT_ERR_INVALID_ARGUMENT);
    ASSERT_STREQ(which, "");
    ASSERT_CONTAINS(ft_last_error(NULL), "ctx and args must not be NULL");
    ASSERT_EQ(ft_attention_kernel(NULL, NULL, which, 0), FT_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(ft_attention_kernel(NULL, &a, NULL, 16), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(NULL), "buf must hold");
}

FT_TEST_MAIN(FT_CASE(test_round_trip), FT_CASE(test_every_damage_refused), FT_CASE(test_magic_and_version),
             FT_CASE(test_kernel_set_view), FT_CASE(test_import_into_db), FT_CASE(test_context_with_pack),
             FT_CASE(test_context_with_kernel_set), FT_CASE(test_options_version_1),
             FT_CASE(test_attention_kernel_arguments))
