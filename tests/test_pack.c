/* Tests of kernel packs without a GPU: the file round trip, every damaged byte and every
 * truncation refused, versions, the strict JSON reader, hostile packs (an edited index with its
 * checksum recomputed) refused with their reason, the checks of cubins and variants, limits on
 * what is read and allocated, the merge into a database (which never replaces a kernel), the C
 * export's escaping and names, the kernel-set view, and ft_context_create with a pack or kernel
 * set (checked before the driver is loaded). */
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "flashtune.h"
#include "ft_test.h"
#include "common/fs.h"
#include "common/json.h"
#include "common/jsonparse.h"
#include "common/sha256.h"
#include "common/strbuf.h"
#include "generator/spec.h"
#include "generator/variant.h"
#include "runtime/dispatch.h"
#include "runtime/driver.h"
#include "tuning_db/pack.h"

/* The forward's key of a call (the old bucket's arguments). */
static void fwd_key(const char *dtype, int head_dim, int causal, int batch, int heads_q, int seqlen_q, int seqlen_k,
                    ft_key *out)
{
    ft__key_of(&ft__op_fwd, dtype, head_dim, causal, 0, batch, heads_q, heads_q, seqlen_q, seqlen_k, out);
}

static const char k_variant_b[] = "d=64,bm=128,bn=64,warps=4,stages=1,causal=1,dtype=f16,qreg=0,overlap=0";
static const char *const k_variants[3] = {
    "d=64,bm=64,bn=64,warps=4,stages=1,causal=0,dtype=f16,qreg=0,overlap=0", k_variant_b,
    "d=64,bm=64,bn=64,warps=4,stages=1,causal=0,dtype=bf16,qreg=0,overlap=0"};
static const char *const k_sources[3] = {"// kernel a\n", "// kernel b\n\"quoted\" \t tab\n", "// kernel c\n"};

/* ---- a CUDA ELF image: header, string table, symbol table, section headers ---------------- */

static void put_le(unsigned char *p, uint64_t v, int bytes)
{
    int i;
    for (i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A cubin for sm (ABI version 8, as CUDA 13 writes them, or 7) whose symbol table defines the
 * function entry; padded with `fill` bytes. Returns its size. */
static size_t make_cubin(unsigned char *b, size_t cap, int sm, int abi, const char *entry, unsigned char fill)
{
    size_t elen = strlen(entry), str = 64, strsz = elen + 2, sym, sh, total;

    sym = (str + strsz + 7) & ~(size_t)7;
    sh = sym + 48 + 32; /* two symbols, then some padding */
    total = sh + 3 * 64;
    if (total > cap)
        return 0;
    memset(b, fill, total);
    memcpy(b, "\177ELF", 4);
    b[4] = 2, b[5] = 1, b[6] = 1, b[7] = abi == 8 ? 0x41 : 0x33, b[8] = (unsigned char)abi;
    memset(b + 9, 0, 7);
    put_le(b + 16, 2, 2);    /* ET_EXEC */
    put_le(b + 18, 190, 2);  /* EM_CUDA */
    put_le(b + 20, 1, 4);
    put_le(b + 24, 0, 8);
    put_le(b + 32, 0, 8);
    put_le(b + 40, sh, 8);
    put_le(b + 48, abi == 8 ? (0x06000004u | (unsigned)sm << 8) : (0x00500500u | (unsigned)sm), 4);
    put_le(b + 52, 64, 2);
    put_le(b + 54, 56, 2);
    put_le(b + 56, 0, 2);
    put_le(b + 58, 64, 2);
    put_le(b + 60, 3, 2);
    put_le(b + 62, 0, 2);
    b[str] = '\0';
    memcpy(b + str + 1, entry, elen + 1);
    memset(b + sym, 0, 24);                       /* the null symbol */
    memset(b + sym + 24, 0, 24);
    put_le(b + sym + 24, 1, 4);                   /* st_name: the entry */
    b[sym + 24 + 4] = (1 << 4) | 2;               /* GLOBAL FUNC */
    put_le(b + sym + 24 + 6, 1, 2);               /* defined in section 1 */
    memset(b + sh, 0, 3 * 64);
    put_le(b + sh + 64 + 4, 3, 4);                /* [1] SHT_STRTAB */
    put_le(b + sh + 64 + 24, str, 8);
    put_le(b + sh + 64 + 32, strsz, 8);
    put_le(b + sh + 128 + 4, 2, 4);               /* [2] SHT_SYMTAB, linked to [1] */
    put_le(b + sh + 128 + 24, sym, 8);
    put_le(b + sh + 128 + 32, 48, 8);
    put_le(b + sh + 128 + 40, 1, 4);
    put_le(b + sh + 128 + 56, 24, 8);
    return total;
}

static unsigned char cubins[3][512];
static size_t cubin_sizes[3];

static void sha_hex(const void *d, size_t n, char hex[65])
{
    uint8_t dg[32];
    ft__sha256(d, n, dg);
    ft__sha256_hex(dg, hex);
}

/* A pack of three kernels and three winners, built in memory (the strings and cubins are
 * borrowed: do not ft__pack_free it). */
static void sample_pack(ft_pack *p, ft_pack_kernel k[3], ft_pack_winner w[3])
{
    static const int kernel_of[3] = {0, 2, 1};
    int i;

    memset(p, 0, sizeof *p);
    memset(k, 0, 3 * sizeof *k);
    memset(w, 0, 3 * sizeof *w);
    snprintf(p->flashtune_version, sizeof p->flashtune_version, "%s", FT_VERSION_STRING);
    snprintf(p->created, sizeof p->created, "2026-11-30T08:15:02Z");
    snprintf(p->device.name, sizeof p->device.name, "Test \"GPU\"\\ 1");
    p->device.cc = 90, p->device.sms = 132, p->device.smem_per_block = 232448, p->device.smem_per_sm = 233472;
    p->device.l2_bytes = 62914560, p->device.driver_version = 13000;
    snprintf(p->device.nvrtc_version, sizeof p->device.nvrtc_version, "13.0");
    for (i = 0; i < 3; i++) {
        ft_db_kernel *d = &k[i].k;
        char entry[16];
        snprintf(entry, sizeof entry, "kernel_%c", 'a' + i);
        cubin_sizes[i] = make_cubin(cubins[i], sizeof cubins[i], 90, 8, entry, (unsigned char)(0xa0 + i));
        snprintf(d->family, sizeof d->family, "flash_fwd_sm80");
        snprintf(d->variant, sizeof d->variant, "%s", k_variants[i]);
        snprintf(d->arch, sizeof d->arch, "sm_90");
        snprintf(d->template_hash, sizeof d->template_hash, "%064d", 7);
        sha_hex(k_sources[i], strlen(k_sources[i]), d->source_hash);
        snprintf(d->entry, sizeof d->entry, "%s", entry);
        d->source = k_sources[i];
        d->cubin = cubins[i];
        d->cubin_size = cubin_sizes[i];
        d->registers = 100 + i, d->spill_stores = i, d->spill_loads = 2 * i, d->smem_static = 0;
        d->smem_dynamic = 27648 + i, d->threads = 128, d->compile_ms = 1234.5678901234567;
        k[i].rows_per_block = ft__pack_rows_per_block(d->family, d->variant);
    }
    for (i = 0; i < 3; i++) {
        ft_db_result *r = &w[i].r;
        w[i].kernel = kernel_of[i];
        ft__key_of(&ft__op_fwd, i == 1 ? "bf16" : "f16", 64, i == 2, 0, 4, 16, 16 >> i, 1024 << i, 1024 << i, &r->key);
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
    p->nkernels = 3;
    p->winners = w;
    p->nwinners = 3;
}

/* Writes the sample pack to a temporary file; returns its bytes (malloc'd). */
static char *sample_file(char *path, size_t cap, size_t *size)
{
    ft_pack p;
    ft_pack_kernel k[3];
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

/* A pack file built from an index and blobs, with a correct header (sizes and sha256). */
static char *assemble(const char *index, size_t ilen, const void *blobs, size_t blen, size_t *size)
{
    char header[200], hex[65], *out;
    const char *at;
    int version;
    ft_sha256 sh;
    uint8_t d[32];
    size_t hlen;

    ft__sha256_init(&sh);
    ft__sha256_update(&sh, index, ilen);
    ft__sha256_update(&sh, blobs, blen);
    ft__sha256_final(&sh, d);
    ft__sha256_hex(d, hex);
    /* the header repeats the index's format version (a reader refuses them apart) */
    at = memmem(index, ilen, "\"version\": ", 11);
    version = at != NULL ? atoi(at + 11) : FT_PACK_VERSION;
    hlen = (size_t)snprintf(header, sizeof header, "FTPACK %d %zu %zu %s\n", version, ilen, blen, hex);
    out = malloc(hlen + ilen + blen + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, header, hlen);
    memcpy(out + hlen, index, ilen);
    memcpy(out + hlen + ilen, blobs, blen);
    *size = hlen + ilen + blen;
    return out;
}

/* The pack with the first occurrence of `from` in its index replaced by `to`, and its header's
 * sizes and sha256 recomputed (what someone editing a pack by hand would do); NULL when the
 * index does not hold `from`. */
static char *edit_pack(const char *data, size_t size, const char *from, const char *to, size_t *out_size)
{
    const char *nl = memchr(data, '\n', size), *at;
    unsigned long long ilen = 0;
    size_t hlen, flen = strlen(from), tlen = strlen(to), nilen;
    char *index, *out;

    if (nl == NULL || sscanf(data, "FTPACK %*d %llu", &ilen) != 1)
        return NULL;
    hlen = (size_t)(nl - data) + 1;
    at = memmem(data + hlen, (size_t)ilen, from, flen);
    if (at == NULL)
        return NULL;
    nilen = (size_t)ilen - flen + tlen;
    index = malloc(nilen + 1);
    if (index == NULL)
        return NULL;
    memcpy(index, data + hlen, (size_t)(at - (data + hlen)));
    memcpy(index + (at - (data + hlen)), to, tlen);
    memcpy(index + (at - (data + hlen)) + tlen, at + flen, (size_t)ilen - (size_t)(at - (data + hlen)) - flen);
    out = assemble(index, nilen, data + hlen + ilen, size - hlen - (size_t)ilen, out_size);
    free(index);
    return out;
}

/* The edited pack is refused as corrupt, naming the file, with `why` in the message. */
static void expect_refused(const char *data, size_t size, const char *from, const char *to, const char *why)
{
    size_t n = 0;
    char *edited = edit_pack(data, size, from, to, &n);
    ft_pack p;
    ft_err err;
    ft_status rc;

    if (edited == NULL)
        FT_FAIL_("the sample pack's index does not hold \"%s\"", from);
    rc = ft__pack_parse(edited, n, "x.ftpack", &p, &err);
    free(edited);
    if (rc != FT_ERR_CORRUPT)
        FT_FAIL_("replacing \"%s\" by \"%s\" gives %s, not FT_ERR_CORRUPT", from, to, ft_status_name(rc));
    ASSERT_CONTAINS(err.msg, "x.ftpack is a corrupt flashtune pack: ");
    ASSERT_CONTAINS(err.msg, why);
    ASSERT_EQ(p.nkernels, 0);
    ASSERT_EQ(p.nwinners, 0);
}

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* ---- the file ----------------------------------------------------------------------------- */

static void test_round_trip(void)
{
    ft_pack want, got;
    ft_pack_kernel k[3];
    ft_pack_winner w[3];
    char path[64];
    size_t size = 0;
    ft_err err;
    int i;

    sample_pack(&want, k, w);
    snprintf(path, sizeof path, "/tmp/ft_test_pack_rt.XXXXXX");
    ASSERT_TRUE(mkdtemp(path) != NULL);
    strcat(path, "/a.ftpack");
    ASSERT_OK(ft__pack_check(&want, &err), &err);
    ASSERT_OK(ft__pack_write(&want, path, &size, &err), &err);
    ASSERT_TRUE(size > cubin_sizes[0] + cubin_sizes[1] + cubin_sizes[2]);
    ASSERT_OK(ft__pack_read(path, &got, &err), &err);
    ASSERT_STREQ(got.sha256, want.sha256);
    ASSERT_STREQ(got.created, want.created);
    ASSERT_STREQ(got.device.name, want.device.name);
    ASSERT_EQ(got.device.cc, 90);
    ASSERT_EQ(got.device.l2_bytes, want.device.l2_bytes);
    ASSERT_EQ(got.device.driver_version, 13000);
    ASSERT_STREQ(got.device.nvrtc_version, "13.0");
    ASSERT_EQ(got.nkernels, 3);
    ASSERT_EQ(got.nwinners, 3);
    for (i = 0; i < 3; i++) {
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
        ASSERT_EQ(got.kernels[i].rows_per_block, i == 1 ? 128 : 64);
    }
    for (i = 0; i < 3; i++) {
        const ft_db_result *a = &want.winners[i].r, *b = &got.winners[i].r;
        ASSERT_EQ(got.winners[i].kernel, want.winners[i].kernel);
        ASSERT_STREQ(b->key.dtype, a->key.dtype);
        ASSERT_EQ(ft__key_get(&b->key, "seqlen", 0), ft__key_get(&a->key, "seqlen", 0));
        ASSERT_EQ(ft__key_get(&b->key, "causal", 0), ft__key_get(&a->key, "causal", 0));
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
        if (i == 7 && rc == FT_ERR_UNSUPPORTED) /* the version digit: '3' becomes '2'... */
            continue;
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
        ASSERT_CONTAINS(err.msg, "sha256 does not match in kernel 2");
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
    ASSERT_TRUE(memcmp(data, "FTPACK 3 ", 9) == 0);
    data[7] = '4'; /* a newer format */
    ASSERT_EQ(ft__pack_parse(data, size, "x.ftpack", &p, &err), FT_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(err.msg, "format version 4");
    data[7] = '2'; /* an older one than the index says */
    ASSERT_EQ(ft__pack_parse(data, size, "x.ftpack", &p, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "the index says format version 3, the header 2");
    data[7] = '3';
    data[0] = 'X';
    ASSERT_EQ(ft__pack_parse(data, size, "x.ftpack", &p, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "x.ftpack is not a flashtune pack");
    ASSERT_EQ(ft__pack_parse("", 0, "empty.ftpack", &p, &err), FT_ERR_CORRUPT);
    ASSERT_EQ(ft__pack_parse(NULL, 0, "empty.ftpack", &p, &err), FT_ERR_CORRUPT);
    ASSERT_EQ(ft__pack_read("/nonexistent/dir/x.ftpack", &p, &err), FT_ERR_IO);
    free(data);
    unlink(path);
}

/* The header's numbers are plain decimals within the limits: nothing else is read past it. */
static void test_header_strict(void)
{
    static const struct {
        const char *header;
        const char *why;
    } cases[] = {
        {"FTPACK 01 10 10 ", "no format version"},
        {"FTPACK +1 10 10 ", "no format version"},
        {"FTPACK 1  10 10 ", "malformed header"},
        {"FTPACK 1 -10 10 ", "malformed header"},
        {"FTPACK 1 010 10 ", "malformed header"},
        {"FTPACK 1 10 +10 ", "malformed header"},
        {"FTPACK 1 99999999999999999999 10 ", "malformed header"},
        {"FTPACK 1 1 10 ", "malformed header"},
        {"FTPACK 1 16777217 10 ", "an index of 16777217 bytes, more than the 16777216"},
        {"FTPACK 1 100 536870912 ", "more than the 536870912 a pack may have"},
    };
    const char *sha = "0000000000000000000000000000000000000000000000000000000000000000";
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[300];
        ft_pack p;
        ft_err err;
        snprintf(text, sizeof text, "%s%s\n{}", cases[i].header, sha);
        if (ft__pack_parse(text, strlen(text), "h.ftpack", &p, &err) != FT_ERR_CORRUPT)
            FT_FAIL_("header \"%s\" is not refused as corrupt", cases[i].header);
        ASSERT_CONTAINS(err.msg, cases[i].why);
    }
    {   /* an uppercase checksum, a header line of 200 bytes and more */
        char text[400];
        ft_pack p;
        ft_err err;
        snprintf(text, sizeof text, "FTPACK 1 2 0 %064d\n{}", 0);
        text[13] = 'A';
        ASSERT_EQ(ft__pack_parse(text, strlen(text), "h", &p, &err), FT_ERR_CORRUPT);
        ASSERT_CONTAINS(err.msg, "malformed header");
        memset(text, ' ', sizeof text);
        memcpy(text, "FTPACK 1 ", 9);
        text[sizeof text - 1] = '\n';
        ASSERT_EQ(ft__pack_parse(text, sizeof text, "h", &p, &err), FT_ERR_CORRUPT);
        ASSERT_CONTAINS(err.msg, "not terminated within 200 bytes");
    }
}

/* ---- the JSON reader ---------------------------------------------------------------------- */

static void test_json_strict(void)
{
    static const struct {
        const char *text;
        const char *why; /* NULL: accepted */
    } cases[] = {
        {"{\"a\": [1, -2.5e3, 0, -0, 1E+2, true, false, null, \"x\"]}", NULL},
        {" \t\r\n[] \n", NULL},
        {"\"\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\\t\\\"\\\\\"", NULL},
        {"\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", NULL},
        {"{\"a\": 1, \"a\": 2}", "duplicate key \"a\""},
        {"{\"b\": {\"x\": 1}, \"a\": 0, \"b\": 2}", "duplicate key \"b\""},
        {"{\"a\": 1, \"b\": {\"a\": 2}}", NULL}, /* one key in two objects */
        {"[[[[[1]]]]]", "nested too deeply"},
        {"[[[[1]]]]", NULL},
        {"01", "leading zero"},
        {"-01", "leading zero"},
        {"1.", "no digit after '.'"},
        {".5", "unexpected character"},
        {"+1", "unexpected character"},
        {"1e", "no digit in the exponent"},
        {"1e+", "no digit in the exponent"},
        {"-", "malformed number"},
        {"0x10", "text after the end"},
        {"1e999", "too large for a double"},
        {"-1e400", "too large for a double"},
        {"1e-400", NULL}, /* underflow to 0 is a number */
        {"12345678901234567890123456789012345678901234567890123456789012345", "more than 64 characters"},
        {"\"a\\u0000b\"", "\\u0000"},
        {"\"\\ud800\"", "high surrogate escape without a low one"},
        {"\"\\ud800\\u0041\"", "high surrogate escape without a low one"},
        {"\"\\udc00\"", "low surrogate escape without a high one"},
        {"\"\\u12\"", "four hex digits"},
        {"\"\\x41\"", "unknown escape"},
        {"\"a\tb\"", "control character"},
        {"\"\xc0\x80\"", "invalid UTF-8"},
        {"\"\xed\xa0\x80\"", "invalid UTF-8"},
        {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"},
        {"\"\xe2\x82\"", "invalid UTF-8"},
        {"\"\xff\"", "invalid UTF-8"},
        {"\"abc", "unterminated string"},
        {"[1, 2", "not followed by ',' or ']'"},
        {"[1,]", "unexpected character"},
        {"{\"a\" 1}", "no ':'"},
        {"{1: 2}", "key that is not a string"},
        {"{\"a\": 1,}", "key that is not a string"},
        {"tru", "unexpected character"},
        {"nulls", "text after the end"},
        {"[] []", "text after the end"},
        {"", "ends where a value should be"},
        {"   ", "ends where a value should be"},
        {"\xef\xbb\xbf{}", "unexpected character"},
        {"// comment\n{}", "unexpected character"},
    };
    const ft_json_limits lim = {4, 1000};
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_json_doc doc;
        ft_json_error e;
        int ok = ft__json_parse(cases[i].text, strlen(cases[i].text), &lim, &doc, &e);
        if (cases[i].why == NULL && !ok)
            FT_FAIL_("case %zu (%s) is refused: %s at %zu", i, cases[i].text, e.why, e.at);
        if (cases[i].why != NULL && ok)
            FT_FAIL_("case %zu (%s) is accepted", i, cases[i].text);
        if (cases[i].why != NULL)
            ASSERT_CONTAINS(e.why, cases[i].why);
        ft__json_free(&doc);
    }
    /* What is decoded: escapes, surrogate pairs, integers. */
    {
        const char *t = "{\"s\": \"\\u00e9\\ud83d\\ude00x\", \"n\": -9007199254740993, \"f\": 2.5, \"big\": 1e300}";
        ft_json_doc doc;
        ft_json_error e;
        const ft_json *n;
        ASSERT_TRUE(ft__json_parse(t, strlen(t), NULL, &doc, &e));
        n = ft__json_member(&doc.root, "s");
        ASSERT_TRUE(n != NULL && n->type == FT_JSON_STRING);
        ASSERT_STREQ(n->str, "\xc3\xa9\xf0\x9f\x98\x80x");
        ASSERT_EQ(n->len, 7);
        n = ft__json_member(&doc.root, "n");
        ASSERT_TRUE(n != NULL && n->is_int);
        ASSERT_EQ(n->ival, -9007199254740993LL); /* exact, beyond a double's integers */
        ASSERT_TRUE(!ft__json_member(&doc.root, "f")->is_int);
        ASSERT_TRUE(!ft__json_member(&doc.root, "big")->is_int);
        ASSERT_TRUE(ft__json_member(&doc.root, "nope") == NULL);
        ft__json_free(&doc);
    }
    /* The number of values is bounded before they are allocated. */
    {
        size_t n = 4001, k;
        char *t = malloc(2 * n + 2);
        ft_json_doc doc;
        ft_json_error e;
        ASSERT_TRUE(t != NULL);
        t[0] = '[';
        for (k = 0; k < n; k++) {
            t[1 + 2 * k] = '0';
            t[2 + 2 * k] = k + 1 < n ? ',' : ']';
        }
        t[2 * n + 1] = '\0';
        ASSERT_TRUE(!ft__json_parse(t, strlen(t), &lim, &doc, &e));
        ASSERT_CONTAINS(e.why, "more values than a document may have");
        free(t);
    }
}

/* What the writer writes, the reader reads: always valid JSON, the same text back. */
static void test_json_writer(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"q\"b\\s/ \t\n\r\x01\x1b[31m\x7f", "q\"b\\s/ \t\n\r\x01\x1b[31m\x7f"},
        {"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"a\xff" "b", "a\xef\xbf\xbd" "b"},          /* not UTF-8: U+FFFD */
        {"\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd"},     /* an overlong NUL */
        {"\xed\xa0\x80x", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx"}, /* a surrogate */
        {"cut \xe2\x82", "cut \xef\xbf\xbd\xef\xbf\xbd"},
    };
    size_t i;

    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ft_strbuf sb = FT_STRBUF_INIT;
        ft_json_doc doc;
        ft_json_error e;
        char *t;
        ft__json_string_sb(&sb, cases[i].in);
        t = ft__sb_take(&sb);
        ASSERT_TRUE(t != NULL);
        if (!ft__json_parse(t, strlen(t), NULL, &doc, &e)) {
            FT_FAIL_("case %zu: the writer wrote %s, which is not JSON: %s", i, t, e.why);
        }
        ASSERT_EQ(doc.root.type, FT_JSON_STRING);
        ASSERT_STREQ(doc.root.str, cases[i].out);
        ft__json_free(&doc);
        free(t);
    }
}

/* ---- cubins and variants ---------------------------------------------------------------------- */

static void test_cubin_checks(void)
{
    unsigned char b[512];
    char why[300];
    size_t n;

    n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
    ASSERT_EQ(ft__cubin_sm(b, n, why, sizeof why), 90);
    ASSERT_TRUE(ft__cubin_check(b, n, 90, "kern", why, sizeof why));
    ASSERT_TRUE(!ft__cubin_check(b, n, 80, "kern", why, sizeof why));
    ASSERT_CONTAINS(why, "its cubin is for sm_90, not for compute capability 8.0");
    ASSERT_TRUE(!ft__cubin_check(b, n, 90, "ker", why, sizeof why)); /* a prefix is not the name */
    ASSERT_CONTAINS(why, "does not define the entry ker");
    ASSERT_TRUE(!ft__cubin_check(b, n, 90, "kernx", why, sizeof why));
    n = make_cubin(b, sizeof b, 80, 7, "kern", 0); /* the older CUDA ELF ABI */
    ASSERT_EQ(ft__cubin_sm(b, n, why, sizeof why), 80);
    ASSERT_TRUE(ft__cubin_check(b, n, 80, "kern", why, sizeof why));
    n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
    b[18] = 62; /* x86-64 */
    ASSERT_EQ(ft__cubin_sm(b, n, why, sizeof why), 0);
    ASSERT_CONTAINS(why, "not a 64-bit little-endian CUDA ELF image");
    b[18] = 190;
    b[7] = 0x50;
    ASSERT_EQ(ft__cubin_sm(b, n, why, sizeof why), 0);
    ASSERT_CONTAINS(why, "unknown ABI");
    ASSERT_EQ(ft__cubin_sm("garbage", 7, why, sizeof why), 0);
    ASSERT_CONTAINS(why, "not an ELF image");
    ASSERT_EQ(ft__cubin_sm(b, 63, why, sizeof why), 0);
    /* Hostile offsets are refused, never followed out of the image. */
    n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
    put_le(b + 40, (uint64_t)-64, 8); /* e_shoff */
    ASSERT_TRUE(!ft__cubin_check(b, n, 90, "kern", why, sizeof why));
    n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
    put_le(b + 60, 0xffff, 2); /* e_shnum */
    ASSERT_TRUE(!ft__cubin_check(b, n, 90, "kern", why, sizeof why));
    n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
    {
        uint64_t sh = 0, sym;
        int i;
        for (i = 0; i < 8; i++)
            sh |= (uint64_t)b[40 + i] << (8 * i);
        put_le(b + sh + 128 + 32, (uint64_t)1 << 40, 8); /* the symbol table's size */
        ASSERT_TRUE(!ft__cubin_check(b, n, 90, "kern", why, sizeof why));
        n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
        put_le(b + sh + 128 + 40, 7, 4); /* its string table: no such section */
        ASSERT_TRUE(!ft__cubin_check(b, n, 90, "kern", why, sizeof why));
        n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
        sym = b[sh + 128 + 24] | (uint64_t)b[sh + 128 + 25] << 8;
        put_le(b + sym + 24, 100000, 4); /* the symbol's name: outside the string table */
        ASSERT_TRUE(!ft__cubin_check(b, n, 90, "kern", why, sizeof why));
        n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
        put_le(b + sh + 64 + 32, 5, 8); /* a string table that cuts the name */
        ASSERT_TRUE(!ft__cubin_check(b, n, 90, "kern", why, sizeof why));
    }
    /* Real targets of the families. */
    ASSERT_TRUE(ft__kernel_target_check("flash_fwd_sm80", "sm_90", 90, why, sizeof why));
    ASSERT_TRUE(ft__kernel_target_check("flash_fwd_sm80", "sm_86", 86, why, sizeof why));
    ASSERT_TRUE(ft__kernel_target_check("flash_fwd_sm90", "sm_90a", 90, why, sizeof why));
    ASSERT_TRUE(!ft__kernel_target_check("flash_fwd_sm90", "sm_90", 90, why, sizeof why));
    ASSERT_CONTAINS(why, "flashtune builds flash_fwd_sm90 for sm_90a");
    ASSERT_TRUE(!ft__kernel_target_check("flash_fwd_sm90", "sm_80", 80, why, sizeof why));
    ASSERT_TRUE(!ft__kernel_target_check("flash_fwd_sm80", "sm_80", 90, why, sizeof why));
    ASSERT_TRUE(ft__kernel_target_check("flash_fwd_next", "sm_90f", 90, why, sizeof why));
    ASSERT_TRUE(!ft__kernel_target_check("flash_fwd_next", "sm_900", 90, why, sizeof why));
}

static void test_variant_checks(void)
{
    const char *v = "d=64,bm=128,bn=64,causal=1,dtype=bf16";
    char why[300], out[16];

    ASSERT_TRUE(ft__variant_check(v, "bf16", 64, 1, 0, 128, why, sizeof why));
    ASSERT_TRUE(ft__variant_check(v, "bf16", 64, 1, 0, 0, why, sizeof why));
    ASSERT_TRUE(!ft__variant_check(v, "bf16", 128, 1, 0, 128, why, sizeof why));
    ASSERT_CONTAINS(why, "its variant computes d=64 causal=1 bf16, not d=128 causal=1 bf16");
    ASSERT_TRUE(!ft__variant_check(v, "f16", 64, 1, 0, 128, why, sizeof why));
    ASSERT_TRUE(!ft__variant_check(v, "bf16", 64, 0, 0, 128, why, sizeof why));
    ASSERT_TRUE(!ft__variant_check(v, "bf16", 64, 1, 0, 64, why, sizeof why));
    ASSERT_CONTAINS(why, "64 rows per block, but its variant has bm=128");
    /* packs and kernel sets compare their record of rows per block with the family's launch facts:
     * bm for the prefill families, 16 per row tile for the decode family (which has no bm) */
    ASSERT_EQ(ft__pack_rows_per_block("flash_fwd_sm80", v), 128);
    ASSERT_EQ(ft__pack_rows_per_block("flash_decode_sm80", "d=128,bn=32,warps=4,stages=2,mt=2,pack=1,causal=0,dtype=bf16"),
              32);
    ASSERT_EQ(ft__pack_rows_per_block("flash_next", v), 0);
    /* determinism: a variant without det serves non-deterministic buckets only */
    ASSERT_TRUE(!ft__variant_check(v, "bf16", 64, 1, 1, 128, why, sizeof why));
    ASSERT_CONTAINS(why, "its variant has det=0, but it serves a deterministic bucket");
    ASSERT_TRUE(ft__variant_check("d=64,causal=0,dtype=f16,det=1", "f16", 64, 0, 1, 0, why, sizeof why));
    ASSERT_TRUE(!ft__variant_check("d=64,causal=0,dtype=f16,det=1", "f16", 64, 0, 0, 0, why, sizeof why));
    ASSERT_TRUE(ft__variant_check("d=64,causal=0,dtype=f16", "f16", 64, 0, 0, 64, why, sizeof why)); /* bm: 64 */
    ASSERT_TRUE(!ft__variant_check("d=64,dtype=f16", "f16", 64, 0, 0, 0, why, sizeof why));
    ASSERT_CONTAINS(why, "lacks d, causal or dtype");
    ASSERT_TRUE(!ft__variant_check("d=064,causal=0,dtype=f16", "f16", 64, 0, 0, 0, why, sizeof why));
    ASSERT_CONTAINS(why, "not a plain integer");
    ASSERT_TRUE(!ft__variant_check("d=64x,causal=0,dtype=f16", "f16", 64, 0, 0, 0, why, sizeof why));
    ASSERT_TRUE(!ft__variant_check("d=-64,causal=0,dtype=f16", "f16", -64, 0, 0, 0, why, sizeof why));
    ASSERT_TRUE(!ft__variant_check("d=64,d=128,causal=0,dtype=f16", "f16", 64, 0, 0, 0, why, sizeof why));
    ASSERT_CONTAINS(why, "names a parameter twice");
    ASSERT_EQ(ft__variant_text_value("d=64,,causal=0", "d", out, sizeof out), -1);
    ASSERT_EQ(ft__variant_text_value("d=64,causal=", "d", out, sizeof out), -1);
    ASSERT_EQ(ft__variant_text_value("d=64 */ x", "d", out, sizeof out), -1);
    ASSERT_EQ(ft__variant_text_value("9d=64", "d", out, sizeof out), -1);
    ASSERT_EQ(ft__variant_text_value("", "d", out, sizeof out), -1);
    ASSERT_EQ(ft__variant_text_value("a=1,bb=2", "b", out, sizeof out), 0);
    ASSERT_EQ(ft__variant_text_value("a=1,bb=2.5-x", "bb", out, sizeof out), 1);
    ASSERT_STREQ(out, "2.5-x");
}

/* The database path's check (runtime/context.c calls it before a stored cubin is loaded). */
static void test_db_winner_check(void)
{
    unsigned char b[512];
    ft_spec *spec = NULL;
    ft_variant v;
    ft_key want;
    char why[400];
    size_t n = make_cubin(b, sizeof b, 90, 8, "kern", 0);
    ft_err err;

    ASSERT_OK(ft__spec_load_builtin(0, &spec, &err), &err);
    ASSERT_OK(ft__variant_parse(spec, "d=64,bm=64,bn=64,warps=4,stages=1,causal=0,dtype=f16,qreg=0,overlap=0", &v,
                                &err), &err);
    fwd_key("f16", 64, 0, 4, 16, 1024, 1024, &want);
    ASSERT_TRUE(ft__db_winner_check(spec, &v, "flash_fwd_sm80", "sm_90", &want, b, n, "kern", 90, why, sizeof why));
    fwd_key("f16", 128, 0, 4, 16, 1024, 1024, &want); /* a d=64 kernel recorded as a d=128 winner */
    ASSERT_TRUE(!ft__db_winner_check(spec, &v, "flash_fwd_sm80", "sm_90", &want, b, n, "kern", 90, why, sizeof why));
    ASSERT_CONTAINS(why, "it computes d=64 causal=0 f16, but it is recorded as the winner of d=128 causal=0 f16");
    fwd_key("bf16", 64, 0, 4, 16, 1024, 1024, &want);
    ASSERT_TRUE(!ft__db_winner_check(spec, &v, "flash_fwd_sm80", "sm_90", &want, b, n, "kern", 90, why, sizeof why));
    fwd_key("f16", 64, 1, 4, 16, 1024, 1024, &want);
    ASSERT_TRUE(!ft__db_winner_check(spec, &v, "flash_fwd_sm80", "sm_90", &want, b, n, "kern", 90, why, sizeof why));
    fwd_key("f16", 64, 0, 4, 16, 1024, 1024, &want);
    ASSERT_TRUE(!ft__db_winner_check(spec, &v, "flash_fwd_sm80", "sm_80", &want, b, n, "kern", 90, why, sizeof why));
    ASSERT_TRUE(!ft__db_winner_check(spec, &v, "flash_fwd_sm80", "sm_90", &want, b, n, "other", 90, why, sizeof why));
    ASSERT_CONTAINS(why, "does not define the entry other");
    n = make_cubin(b, sizeof b, 80, 8, "kern", 0); /* an sm_80 cubin on a 9.0 GPU */
    ASSERT_TRUE(!ft__db_winner_check(spec, &v, "flash_fwd_sm80", "sm_90", &want, b, n, "kern", 90, why, sizeof why));
    ASSERT_CONTAINS(why, "its cubin is for sm_80");
    ft__spec_free(spec);
}

/* ---- hostile packs -------------------------------------------------------------------------- */

static void test_hostile_packs(void)
{
    char path[64], hash1[65], hash0[65], field[200], to[200];
    size_t size = 0;
    char *data = sample_file(path, sizeof path, &size);

    ASSERT_TRUE(data != NULL);
    sha_hex(k_sources[0], strlen(k_sources[0]), hash0);
    sha_hex(k_sources[1], strlen(k_sources[1]), hash1);
    /* A kernel claiming another's source hash. */
    snprintf(field, sizeof field, "\"source_hash\": \"%s\"", hash1);
    snprintf(to, sizeof to, "\"source_hash\": \"%s\"", hash0);
    expect_refused(data, size, field, to, "kernel 1 (d=64,bm=128,");
    expect_refused(data, size, field, to, "is not the sha256 of its source");
    /* A d=64 kernel as the winner of a head_dim 128 bucket, a bf16 one, a causal one. */
    expect_refused(data, size, "\"d\":64", "\"d\":128",
                   "winner 0 (fwd {\"dtype\":\"f16\",\"d\":128,\"causal\":0,\"group\":1,\"sq\":1024,\"seqlen\":1024,\"bh\":64}, "
                   "kernel 0 (d=64,bm=64,");
    expect_refused(data, size, "\"d\":64", "\"d\":128", "its variant computes d=64 causal=0 f16");
    expect_refused(data, size, "{\"kernel\": 0, \"op\": \"fwd\", \"key\": {\"dtype\":\"f16\"",
                   "{\"kernel\": 0, \"op\": \"fwd\", \"key\": {\"dtype\":\"bf16\"",
                   "its variant computes d=64 causal=0 f16, not d=64 causal=0 bf16");
    expect_refused(data, size, "{\"kernel\": 1,", "{\"kernel\": 0,", "its variant computes d=64 causal=0 f16, not "
                   "d=64 causal=1 f16");
    /* Cubins for another SM: the device's capability edited, the kernel's target edited too. */
    expect_refused(data, size, "\"cc\": 90", "\"cc\": 80", "flashtune builds flash_fwd_sm80 for sm_80");
    {
        size_t n1 = 0;
        char *a = edit_pack(data, size, "\"cc\": 90", "\"cc\": 80", &n1);
        char *b = NULL;
        size_t n2 = 0;
        int i;
        ASSERT_TRUE(a != NULL);
        for (i = 0; i < 3; i++) { /* every kernel now claims sm_80: the cubins' ELF headers say sm_90 */
            b = edit_pack(a, n1, "\"arch\": \"sm_90\"", "\"arch\": \"sm_80\"", &n2);
            ASSERT_TRUE(b != NULL);
            free(a);
            a = b;
            n1 = n2;
        }
        {
            ft_pack p;
            ft_err err;
            ASSERT_EQ(ft__pack_parse(a, n1, "x.ftpack", &p, &err), FT_ERR_CORRUPT);
            ASSERT_CONTAINS(err.msg, "its cubin is for sm_90, not for compute capability 8.0 (sm_80)");
        }
        free(a);
    }
    /* Duplicate and unknown keys, a NUL escape, control characters, a mismatched shape. */
    expect_refused(data, size, "\"format\": \"flashtune-pack\"", "\"format\": \"x\", \"format\": \"flashtune-pack\"",
                   "duplicate key \"format\"");
    expect_refused(data, size, "\"d\":64", "\"d\":64, \"d\":128", "duplicate key \"d\"");
    /* The key's fields: its operation's only, integers, an operation this build has. */
    expect_refused(data, size, "\"d\":64", "\"d\":64, \"x\":1", "its key is not one of operation fwd");
    expect_refused(data, size, "\"d\":64", "\"d\":64.0", "its key is not one of operation fwd");
    expect_refused(data, size, "\"op\": \"fwd\"", "\"op\": \"bwd2\"", "its operation 'bwd2' is not one");
    /* A backward winner (a key of its fields, matching its shape) for a forward kernel. */
    expect_refused(data, size, "\"op\": \"fwd\", \"key\": {\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"group\":1,\"sq\":1024,",
                   "\"op\": \"bwd\", \"key\": {\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"det\":0,\"group\":1,",
                   "it is a winner of operation bwd, and its kernel's family flash_fwd_sm80 computes fwd");
    expect_refused(data, size, "\"threads\": 128", "\"threads\": 128, \"threads_x\": 1",
                   "an unknown key \"threads_x\" in kernel 0");
    expect_refused(data, size, "\"name\": \"Test", "\"name\": \"Te\\u0000st", "\\u0000");
    expect_refused(data, size, "\"name\": \"Test", "\"name\": \"\\u001b[31mTest",
                   "the device's name is empty or holds control characters");
    expect_refused(data, size, "\"name\": \"Test", "\"name\": \"\\u009bTest", "control characters");
    expect_refused(data, size, "\"seqlen_q\": 1024", "\"seqlen_q\": 100000",
                   "its shape (b=4,hq=16,sq=100000,sk=1024) has the key {\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"group\":1,"
                   "\"sq\":131072,\"seqlen\":131072");
    expect_refused(data, size, "\"seqlen\":1024", "\"seqlen\":1000",
                   "not its own {\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"group\":1,\"sq\":1024,\"seqlen\":1000");
    /* The group and the query length are checked against the shape as the other buckets are
     * (winner 1: 16 query heads on 8 K/V heads). */
    expect_refused(data, size, "\"group\":2,", "\"group\":1,",
                   "has the key {\"dtype\":\"bf16\",\"d\":64,\"causal\":0,\"group\":2,\"sq\":2048,");
    expect_refused(data, size, "\"sq\":2048,", "\"sq\":1,", "not its own {\"dtype\":\"bf16\",\"d\":64,\"causal\":0,"
                   "\"group\":2,\"sq\":1,");
    {
        char median[64];
        snprintf(median, sizeof median, "\"median_ms\": %.17g,", 0.1 + 1.0 / 3.0);
        expect_refused(data, size, median, "\"median_ms\": 0,", "no positive measured time");
        expect_refused(data, size, median, "\"median_ms\": -0.4,", "no positive measured time");
        expect_refused(data, size, median, "\"median_ms\": null,", "no positive measured time");
        expect_refused(data, size, median, "\"median_ms\": 1e999,", "too large for a double");
    }
    expect_refused(data, size, "\"iqr_ms\": 0.001", "\"iqr_ms\": -1", "a measurement is negative");
    expect_refused(data, size, "\"measured_at\": \"2026-11-30 08:15:00\"", "\"measured_at\": \"yesterday\"",
                   "measured_at is not of the form");
    expect_refused(data, size, "\"rows_per_block\": 128", "\"rows_per_block\": 64", "its variant 128");
    expect_refused(data, size, "\"threads\": 128", "\"threads\": 4096", "threads (4096)");
    expect_refused(data, size, "\"smem_dynamic\": 27648", "\"smem_dynamic\": 999999", "shared memory");
    expect_refused(data, size, "\"entry\": \"kernel_a\"", "\"entry\": \"kernel_b\"",
                   "its cubin does not define the entry kernel_b");
    expect_refused(data, size, "\"entry\": \"kernel_a\"", "\"entry\": \"kernel a\"", "entry or a hash is malformed");
    expect_refused(data, size, "\"variant\": \"d=64,bm=64,bn=64", "\"variant\": \"d=64 */ x,bm=64,bn=64",
                   "variant string is not comma-separated");
    expect_refused(data, size, "\"nvrtc_version\": \"13.0\"", "\"nvrtc_version\": \"13.0 */\"", "NVRTC version");
    expect_refused(data, size, "\"version\": 3,", "\"version\": 3.0,", "the integer 'version'");
    expect_refused(data, size, "\"cc\": 90", "\"cc\": 9e1", "the integer 'cc'");
    /* Blobs that overlap, leave gaps, or point outside. */
    expect_refused(data, size, "\"cubin\": {\"offset\": 0,", "\"cubin\": {\"offset\": 1,",
                   "the cubin starts at byte 1 of the blobs, not at 0");
    {
        char from[80];
        snprintf(from, sizeof from, "\"source\": {\"offset\": %zu,", cubin_sizes[0]);
        expect_refused(data, size, from, "\"source\": {\"offset\": 0,",
                       "the source starts at byte 0 of the blobs, not at");
    }
    free(data);
    unlink(path);
}

/* What ft__pack_check refuses of a pack in memory, and that no such pack is written. */
static void test_pack_check(void)
{
    ft_pack p;
    ft_pack_kernel k[3];
    ft_pack_winner w[4];
    char dir[64], path[96], cpath[96];
    ft_err err;

    snprintf(dir, sizeof dir, "/tmp/ft_test_pack_ck.XXXXXX");
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/p.ftpack", dir);
    snprintf(cpath, sizeof cpath, "%s/p.c", dir);
    sample_pack(&p, k, w);
    ASSERT_OK(ft__pack_check(&p, &err), &err);

    /* A kernel no winner uses. */
    w[1] = w[2];
    p.nwinners = 2;
    ASSERT_EQ(ft__pack_check(&p, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "kernel 2 (d=64,bm=64,bn=64,warps=4,stages=1,causal=0,dtype=bf16,");
    ASSERT_CONTAINS(err.msg, "is the kernel of no winner");
    ASSERT_EQ(ft__pack_write(&p, path, NULL, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "not written: import would refuse the pack");
    ASSERT_EQ(access(path, F_OK), -1);
    ASSERT_EQ(ft__pack_write_c(&p, cpath, "sample", &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(access(cpath, F_OK), -1);

    /* Two kernels of one source hash and target. */
    sample_pack(&p, k, w);
    k[2].k.source = k[0].k.source;
    snprintf(k[2].k.source_hash, sizeof k[2].k.source_hash, "%s", k[0].k.source_hash);
    ASSERT_EQ(ft__pack_check(&p, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "kernels 0 and 2 have one source hash and target (sm_90)");

    /* Two winners of one bucket. */
    sample_pack(&p, k, w);
    w[3] = w[0];
    p.nwinners = 4;
    ASSERT_EQ(ft__pack_check(&p, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "winners 0 and 3 are of one key");

    /* Nothing, or a winner pointing past the kernels. */
    sample_pack(&p, k, w);
    p.nwinners = 0;
    ASSERT_EQ(ft__pack_check(&p, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "0 winners");
    sample_pack(&p, k, w);
    w[2].kernel = 3;
    ASSERT_EQ(ft__pack_check(&p, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "winner 2: its kernel 3 is not one of the 3");

    /* A cubin that is not an ELF image (the 1 KB blob that replaced a 39 KB cubin). */
    sample_pack(&p, k, w);
    {
        static unsigned char garbage[1024];
        memset(garbage, 0x5a, sizeof garbage);
        k[1].k.cubin = garbage;
        k[1].k.cubin_size = sizeof garbage;
        ASSERT_EQ(ft__pack_check(&p, &err), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(err.msg, "kernel 1 (d=64,bm=128,");
        ASSERT_CONTAINS(err.msg, "it is not an ELF image");
    }
    rmdir(dir);
}

/* A pack never replaces a kernel of the database, and a refused import changes no byte of it. */
static void test_import_never_replaces(void)
{
    char dir[64], db_path[96];
    ft_pack p;
    ft_pack_kernel k[3];
    ft_pack_winner w[3];
    unsigned char other[512];
    char *before = NULL, *after = NULL;
    size_t nb = 0, na = 0;
    ft_db *db = NULL;
    ft_db_device dev;
    int winning = 0;
    ft_err err;

    snprintf(dir, sizeof dir, "/tmp/ft_test_pack_db.XXXXXX");
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(db_path, sizeof db_path, "%s/t.db", dir);
    sample_pack(&p, k, w);
    ASSERT_OK(ft__db_open(db_path, 0, &db, &err), &err);
    ASSERT_OK(ft__pack_import(db, &p, NULL, &winning, &err), &err);
    ft__db_close(db);
    db = NULL;
    ASSERT_OK(ft__read_file(db_path, &before, &nb, &err), &err);

    /* The same source (so the same source hash) with another, well-formed cubin. */
    sample_pack(&p, k, w);
    make_cubin(other, sizeof other, 90, 8, "kernel_a", 0x11);
    k[0].k.cubin = other;
    ASSERT_OK(ft__pack_check(&p, &err), &err); /* a valid pack on its own */
    ASSERT_OK(ft__db_open(db_path, 0, &db, &err), &err);
    ASSERT_EQ(ft__pack_import(db, &p, NULL, &winning, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "kernel 0 of the pack (flash_fwd_sm80 d=64,bm=64,");
    ASSERT_CONTAINS(err.msg, "its cubin there is another");
    ASSERT_CONTAINS(err.msg, "a pack never replaces a kernel of the database");

    /* The same source under another variant. */
    sample_pack(&p, k, w);
    snprintf(k[0].k.variant, sizeof k[0].k.variant, "d=64,bm=64,bn=64,warps=4,stages=2,causal=0,dtype=f16,qreg=0,"
             "overlap=0");
    ASSERT_EQ(ft__pack_import(db, &p, NULL, &winning, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "it is flash_fwd_sm80 d=64,bm=64,bn=64,warps=4,stages=1,");

    /* Other resources for the same cubin. */
    sample_pack(&p, k, w);
    k[1].k.smem_dynamic += 1024;
    ASSERT_EQ(ft__pack_import(db, &p, NULL, &winning, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "threads, registers, spills or shared memory there are others");

    /* A GPU of another compute capability, and a pack the checks refuse. */
    sample_pack(&p, k, w);
    dev = p.device;
    dev.cc = 80;
    ASSERT_EQ(ft__pack_import(db, &p, &dev, &winning, &err), FT_ERR_UNSUPPORTED);
    ASSERT_CONTAINS(err.msg, "compute capability 9.0, Test \"GPU\"\\ 1 is 8.0");
    w[0].r.median_ms = 0;
    ASSERT_EQ(ft__pack_import(db, &p, NULL, &winning, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "refused: winner 0");
    ft__db_close(db);
    db = NULL;
    ASSERT_OK(ft__read_file(db_path, &after, &na, &err), &err);
    ASSERT_EQ(na, nb);
    ASSERT_TRUE(memcmp(before, after, nb) == 0);
    free(after);
    after = NULL;

    /* The same pack again is the same kernels: accepted, nothing duplicated. */
    sample_pack(&p, k, w);
    ASSERT_OK(ft__db_open(db_path, 0, &db, &err), &err);
    ASSERT_OK(ft__pack_import(db, &p, NULL, &winning, &err), &err);
    ASSERT_EQ(winning, 3);
    ft__db_close(db);
    free(before);
    unlink(db_path);
    rmdir(dir);
}

/* What is not a pack, or announces more than it holds, is refused before it is read. */
static void test_read_limits(void)
{
    char dir[64], path[128];
    ft_pack p;
    ft_err err;
    long rss;
    int fd;

    snprintf(dir, sizeof dir, "/tmp/ft_test_pack_lim.XXXXXX");
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    ASSERT_EQ(ft__pack_read(dir, &p, &err), FT_ERR_IO);
    ASSERT_CONTAINS(err.msg, "a directory, not a regular file");
    snprintf(path, sizeof path, "%s/fifo", dir);
    ASSERT_EQ(mkfifo(path, 0600), 0);
    ASSERT_EQ(ft__pack_read(path, &p, &err), FT_ERR_IO); /* without blocking: nobody writes to it */
    ASSERT_CONTAINS(err.msg, "a FIFO, not a regular file");
    unlink(path);

    rss = max_rss_kb();
    snprintf(path, sizeof path, "%s/sparse.ftpack", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_TRUE(fd >= 0);
    {
        char head[200];
        int n = snprintf(head, sizeof head, "FTPACK 1 100 1000 %064d\n", 0);
        ASSERT_EQ(write(fd, head, (size_t)n), n);
    }
    ASSERT_EQ(ftruncate(fd, (off_t)2 << 30), 0); /* 2 GiB, sparse */
    close(fd);
    ASSERT_EQ(ft__pack_read(path, &p, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "its header announces 1183 bytes, the file has 2147483648 (extra bytes at the end)");
    fd = open(path, O_WRONLY | O_TRUNC, 0600);
    ASSERT_TRUE(fd >= 0);
    ASSERT_EQ(ftruncate(fd, (off_t)1536 << 20), 0); /* 1.5 GB of zeros: no magic */
    close(fd);
    ASSERT_EQ(ft__pack_read(path, &p, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "is not a flashtune pack");
    fd = open(path, O_WRONLY | O_TRUNC, 0600);
    ASSERT_TRUE(fd >= 0);
    {   /* a header announcing exactly the file's 600 MB: more than a pack may have */
        char head[200];
        int n = snprintf(head, sizeof head, "FTPACK 1 100 %lld %064d\n", (600LL << 20) - 100 - 88, 0);
        ASSERT_EQ(n, 88);
        ASSERT_EQ(write(fd, head, (size_t)n), n);
        ASSERT_EQ(ftruncate(fd, (off_t)600 << 20), 0);
    }
    close(fd);
    ASSERT_EQ(ft__pack_read(path, &p, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "more than the 536870912 a pack may have");
    unlink(path);
    if (max_rss_kb() - rss > 64 * 1024)
        FT_FAIL_("reading the refused files took %ld KB", max_rss_kb() - rss);
    rmdir(dir);
}

/* Many entries pointing at one blob are refused before the blob is copied twice; more kernels
 * than a pack may hold are refused before they are allocated. */
static void test_blob_amplification(void)
{
    const size_t blob = (size_t)4 << 20;
    const int nkernels = 2000;
    ft_strbuf sb = FT_STRBUF_INIT;
    char *blobs = malloc(blob), *index, *file, hex[65];
    size_t size = 0;
    ft_pack p;
    ft_err err;
    long rss;
    int i;

    ASSERT_TRUE(blobs != NULL);
    memset(blobs, 'x', blob);
    sha_hex(blobs, blob, hex);
    ft__sb_printf(&sb, "{\"format\": \"flashtune-pack\", \"version\": 1, \"flashtune\": \"0.1.0\", \"created\": \"x\", "
                  "\"device\": {\"name\": \"G\", \"cc\": 90, \"sms\": 132, \"smem_per_block\": 232448, "
                  "\"smem_per_sm\": 233472, \"l2_bytes\": 1, \"driver_version\": 13000, \"nvrtc_version\": \"13.0\"},"
                  "\"kernels\": [");
    for (i = 0; i < nkernels; i++)
        ft__sb_printf(&sb, "%s{\"family\": \"flash_fwd_sm80\", \"variant\": \"d=64,causal=0,dtype=f16\", \"arch\": "
                      "\"sm_90\", \"template_hash\": \"%064d\", \"source_hash\": \"%s\", \"entry\": \"k\", "
                      "\"threads\": 128, \"rows_per_block\": 64, \"registers\": 1, \"spill_stores\": 0, "
                      "\"spill_loads\": 0, \"smem_static\": 0, \"smem_dynamic\": 0, \"compile_ms\": 1, "
                      "\"cubin\": {\"offset\": 0, \"size\": %zu, \"sha256\": \"%s\"}, "
                      "\"source\": {\"offset\": 0, \"size\": %zu, \"sha256\": \"%s\"}}",
                      i ? "," : "", 0, hex, blob, hex, blob, hex);
    ft__sb_puts(&sb, "], \"winners\": [{}]}\n");
    index = ft__sb_take(&sb);
    ASSERT_TRUE(index != NULL);
    file = assemble(index, strlen(index), blobs, blob, &size);
    ASSERT_TRUE(file != NULL);
    rss = max_rss_kb();
    ASSERT_EQ(ft__pack_parse(file, size, "amp.ftpack", &p, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "the source starts at byte 0 of the blobs, not at 4194304 where the one before it ends");
    if (max_rss_kb() - rss > 64 * 1024)
        FT_FAIL_("refusing the pack took %ld KB", max_rss_kb() - rss);
    free(file);
    free(index);

    /* 4097 kernels: refused by their count. */
    ft__sb_puts(&sb, "{\"format\": \"flashtune-pack\", \"version\": 1, \"flashtune\": \"0.1.0\", \"created\": \"x\", "
                "\"device\": {\"name\": \"G\", \"cc\": 90, \"sms\": 132, \"smem_per_block\": 232448, "
                "\"smem_per_sm\": 233472, \"l2_bytes\": 1, \"driver_version\": 13000, \"nvrtc_version\": \"13.0\"},"
                "\"kernels\": [");
    for (i = 0; i <= FT_PACK_MAX_KERNELS; i++)
        ft__sb_puts(&sb, i ? ",{}" : "{}");
    ft__sb_puts(&sb, "], \"winners\": [{}]}\n");
    index = ft__sb_take(&sb);
    ASSERT_TRUE(index != NULL);
    file = assemble(index, strlen(index), "", 0, &size);
    ASSERT_TRUE(file != NULL);
    ASSERT_EQ(ft__pack_parse(file, size, "many.ftpack", &p, &err), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(err.msg, "it holds 4097 kernels and 1 winners, more than the 4096 and 16384");
    free(file);
    free(index);
    free(blobs);
}

/* ---- the C export ----------------------------------------------------------------------------- */

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    const char *p = hay;

    while (p != NULL) {
        p = strstr(p, needle);
        if (p != NULL) {
            n++;
            p += strlen(needle);
        }
    }
    return n;
}

static void test_c_export_escapes(void)
{
    ft_pack p;
    ft_pack_kernel k[3];
    ft_pack_winner w[3];
    char dir[64], path[96], *text = NULL;
    size_t n = 0;
    ft_err err;

    snprintf(dir, sizeof dir, "/tmp/ft_test_pack_c.XXXXXX");
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/k.c", dir);
    sample_pack(&p, k, w);
    snprintf(p.device.name, sizeof p.device.name, "X */ int injected = 2; /* \\ ?\?/ \"q\" \xc3\xa9");
    snprintf(p.created, sizeof p.created, "*/ int injected2 = 3; /*");
    ASSERT_OK(ft__pack_write_c(&p, path, "hostile_kernels", &err), &err);
    ASSERT_OK(ft__read_file(path, &text, &n, &err), &err);
    /* One comment at the top and one per kernel: no text opens or closes another. */
    ASSERT_EQ(count(text, "/*"), 4);
    ASSERT_EQ(count(text, "*/"), 4);
    ASSERT_EQ(count(text, "??"), 0);
    ASSERT_CONTAINS(text, "Pretuned flashtune kernels for X \\x2a\\x2f int injected = 2; \\x2f\\x2a \\x5c "
                    "\\x3f\\x3f\\x2f \"q\" \\xc3\\xa9 (compute capability 9.0");
    ASSERT_CONTAINS(text, ".device_name = \"X \\052\\057 int injected = 2; \\057\\052 \\134 \\077\\077\\057 "
                    "\\042q\\042 \\303\\251\"");
    ASSERT_CONTAINS(text, "const ft_kernel_set hostile_kernels = {");
    free(text);
    text = NULL;
    /* Names that cannot name the set: nothing is written. */
    unlink(path);
    ASSERT_EQ(ft__pack_write_c(&p, path, "int", &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "'int' cannot name the kernel set: it is a keyword of C");
    ASSERT_EQ(access(path, F_OK), -1);
    rmdir(dir);
}

static void test_c_identifiers(void)
{
    static const char *const ok[] = {"h200_kernels", "K", "a1", "kernels_t2", "Int", "INTERNAL_kernels_x", NULL};
    static const struct {
        const char *name;
        const char *why;
    } bad[] = {
        {"", "empty"}, {"9x", "starts with a digit"}, {"_x", "reserved"}, {"__x", "reserved"},
        {"_Bool", "reserved"}, {"int", "keyword"}, {"while", "keyword"}, {"bool", "keyword"},
        {"nullptr", "keyword"}, {"typeof", "keyword"}, {"constexpr", "keyword"}, {"static_assert", "keyword"},
        {"ft_kernels", "flashtune.h"}, {"FT_F16", "flashtune.h"}, {"FLASHTUNE_H", "flashtune.h"},
        {"size_t", "_t"}, {"int8_t", "_t"}, {"INT8_MAX", "<stdint.h>"}, {"UINT64_C", "<stdint.h>"},
        {"SIZE_MAX", "<stdint.h>"}, {"INTPTR_MIN", "<stdint.h>"}, {"NULL", "<stddef.h>"},
        {"offsetof", "<stddef.h>"}, {"a-b", "other than letters"}, {"h\xc3\xa9", "other than letters"},
        {"a123456789012345678901234567890123456789012345678901234567890123", "longer than 63"},
    };
    char why[200];
    size_t i;

    for (i = 0; ok[i] != NULL; i++)
        if (!ft__c_identifier_check(ok[i], why, sizeof why))
            FT_FAIL_("'%s' is refused: %s", ok[i], why);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (ft__c_identifier_check(bad[i].name, why, sizeof why))
            FT_FAIL_("'%s' is accepted", bad[i].name);
        ASSERT_CONTAINS(why, bad[i].why);
    }
}

/* ---- the kernel-set view --------------------------------------------------------------------- */

static void test_kernel_set_view(void)
{
    char path[64];
    size_t size = 0;
    char *data = sample_file(path, sizeof path, &size);
    const ft_kernel_set *s = NULL;
    ft_kernel_set bad;
    ft_kernel_set_entry e[2];
    const char *one_op[1] = {"fwd"}, *one_key[1] = {NULL};
    unsigned char sm80[512];
    char text[FT_KEY_TEXT_MAX];
    ft_pack p;
    ft_key k;
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
    ASSERT_EQ(s->entries[2].cubin_size, cubin_sizes[1]);
    ASSERT_TRUE(memcmp(s->entries[2].cubin, cubins[1], cubin_sizes[1]) == 0);
    ASSERT_STREQ(s->entries[0].entry, "kernel_a");
    ASSERT_STREQ(s->entries[0].family, "flash_fwd_sm80");
    ASSERT_STREQ(s->entries[2].variant, k_variant_b);
    bad = *s;
    bad.version = 99;
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "version 99");
    bad = *s;
    bad.entries = e;
    bad.count = 1;
    bad.ops = one_op;
    bad.keys = one_key;
    e[0] = s->entries[0];
    one_key[0] = "{\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"seqlen\":1000,\"bh\":64}"; /* not a power of two */
    e[0].seqlen_bucket = 1000;
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "not powers of two");
    e[0] = s->entries[0];
    one_key[0] = "{\"dtype\":\"f16\",\"d\":128,\"causal\":0,\"seqlen\":1024,\"bh\":64}"; /* a d=64 kernel for d=128 calls */
    e[0].head_dim = 128;
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "its variant computes d=64 causal=0 f16, not d=128 causal=0 f16");
    /* An entry whose fields are not its key's, a key of no operation, a malformed key. */
    e[0] = s->entries[0];
    one_key[0] = s->keys[0];
    e[0].causal = 1;
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "its key does not have its dtype, head dim and causality");
    e[0] = s->entries[0];
    one_op[0] = "nope";
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "of an operation this library does not have");
    one_op[0] = "fwd";
    one_key[0] = "{\"dtype\":\"f16\"}";
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "is not a key of operation fwd");
    /* A forward key of the form before "group" and "sq" (a set exported by an earlier version)
     * reads as a prefill key: group 1, sq = seqlen, here entry 0's own key. */
    one_key[0] = "{\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"seqlen\":1024,\"bh\":64}";
    ASSERT_OK(ft__kernel_set_check(&bad, &err), &err);
    ASSERT_OK(ft__kernel_set_key(&bad, 0, &k, &err), &err);
    ft__key_format(&k, text, sizeof text);
    ASSERT_STREQ(text, s->keys[0]);
    ASSERT_STREQ(text, "{\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"group\":1,\"sq\":1024,\"seqlen\":1024,\"bh\":64}");
    one_key[0] = s->keys[0];
    /* A version-1 set (flashtune 0.1) has no keys: its entries' bucket fields are the key, read
     * by name as a prefill key. */
    bad.version = 1;
    bad.ops = NULL;
    bad.keys = NULL;
    ASSERT_OK(ft__kernel_set_check(&bad, &err), &err);
    ASSERT_OK(ft__kernel_set_key(&bad, 0, &k, &err), &err);
    ft__key_format(&k, text, sizeof text);
    ASSERT_STREQ(text, s->keys[0]);
    e[0].seqlen_bucket = 1000;
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    bad.version = 2;
    bad.ops = one_op;
    bad.keys = one_key;
    e[0] = s->entries[0];
    e[0].cubin_size = make_cubin(sm80, sizeof sm80, 80, 8, "kernel_a", 0);
    e[0].cubin = sm80; /* an sm_80 cubin in a set for 9.0 */
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "entry 0 of the kernel set (d=64,bm=64,");
    ASSERT_CONTAINS(err.msg, "its cubin is for sm_80, not for compute capability 9.0");
    e[0] = s->entries[0];
    e[0].entry = "kernel_b";
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "does not define the entry kernel_b");
    e[0] = s->entries[0];
    e[0].family = "flash_fwd_sm90";
    e[0].cubin_size = make_cubin(sm80, sizeof sm80, 80, 8, "kernel_a", 0);
    e[0].cubin = sm80;
    bad.cc = 80; /* the Hopper family in a set for 8.0 */
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "9.0");
    bad.cc = 90;
    e[0] = s->entries[0];
    e[1] = s->entries[0];
    {
        const char *two_ops[2] = {"fwd", "fwd"}, *two_keys[2] = {s->keys[0], s->keys[0]};
        bad.ops = two_ops;
        bad.keys = two_keys;
        bad.count = 2;
        ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
        ASSERT_CONTAINS(err.msg, "two entries for fwd {\"dtype\":\"f16\",\"d\":64,\"causal\":0,\"group\":1,\"sq\":1024,\"seqlen\":1024,\"bh\":64}");
        bad.ops = one_op;
        bad.keys = one_key;
    }
    bad.count = FT_PACK_MAX_WINNERS + 1;
    ASSERT_EQ(ft__kernel_set_check(&bad, &err), FT_ERR_INVALID_ARGUMENT);
    ft__pack_free(&p);
    free(data);
    unlink(path);
}

/* A version-2 pack written before the forward's key had "group" and "sq": each winner's key gets
 * them from the winner's shape (winner 1 has 16 query heads on 8 K/V heads: group 2, where the
 * defaults would say 1 and the pack's checks refuse it), and reads as the pack written today. */
static void test_old_form_keys(void)
{
    static const char *const added[3] = {"\"group\":1,\"sq\":1024,", "\"group\":2,\"sq\":2048,",
                                         "\"group\":4,\"sq\":4096,"};
    char path[64];
    size_t size = 0, n, m;
    char *data = sample_file(path, sizeof path, &size), *old, *next;
    ft_pack now, then;
    ft_err err;
    int i;

    ASSERT_TRUE(data != NULL);
    ASSERT_OK(ft__pack_parse(data, size, "x.ftpack", &now, &err), &err);
    old = edit_pack(data, size, added[0], "", &n);
    ASSERT_TRUE(old != NULL);
    for (i = 1; i < 3; i++) {
        next = edit_pack(old, n, added[i], "", &m);
        ASSERT_TRUE(next != NULL);
        free(old);
        old = next;
        n = m;
    }
    ASSERT_TRUE(memmem(old, n, "\"sq\":", 5) == NULL);
    ASSERT_OK(ft__pack_parse(old, n, "old.ftpack", &then, &err), &err);
    ASSERT_OK(ft__pack_check(&then, &err), &err);
    ASSERT_EQ(then.nwinners, 3);
    for (i = 0; i < 3; i++)
        ASSERT_TRUE(ft__key_equal(&then.winners[i].r.key, &now.winners[i].r.key));
    ASSERT_EQ(ft__key_get(&then.winners[1].r.key, "group", 0), 2);
    ASSERT_EQ(ft__key_get(&then.winners[2].r.key, "group", 0), 4);
    ASSERT_EQ(ft__key_get(&then.winners[2].r.key, "sq", 0), 4096);
    ft__pack_free(&then);
    ft__pack_free(&now);
    free(old);
    free(data);
    unlink(path);
}

static void test_import_into_db(void)
{
    char dir[64], db_path[96];
    ft_pack p;
    ft_pack_kernel k[3];
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
        ASSERT_OK(ft__db_winner(db, dev_id, &w[i].r.key, &row, &cubin, &n, &found, &err), &err);
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
    ASSERT_OK(ft__db_winner(db, other_id, &w[2].r.key, &row, NULL, NULL, &found, &err), &err);
    ASSERT_EQ(found, 1);
    ft__db_close(db);
    unlink(db_path);
    rmdir(dir);
}

/* ---- contexts ------------------------------------------------------------------------------- */

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
    char path[64], bad_path[80], dir[64], fifo[96];
    size_t size = 0, n = 0;
    char *data = sample_file(path, sizeof path, &size), *hostile;
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
    data[size / 2] ^= 0x40;
    o.pack = bad_path;
    ctx = (ft_context *)&o;
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_CORRUPT);
    ASSERT_TRUE(ctx == NULL);
    ASSERT_CONTAINS(ft_last_error(NULL), "corrupt flashtune pack");
    /* So is an edited one with its checksum recomputed: a d=64 kernel for d=128 calls. */
    hostile = edit_pack(data, size, "\"d\":64", "\"d\":128", &n);
    ASSERT_TRUE(hostile != NULL);
    ASSERT_TRUE(ft__write_file_atomic(bad_path, hostile, n, 0, NULL) == FT_OK);
    free(hostile);
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_CORRUPT);
    ASSERT_CONTAINS(ft_last_error(NULL), "its variant computes d=64 causal=0 f16, not d=128");
    o.pack = "/nonexistent/x.ftpack";
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_IO);
    /* A directory and a FIFO: refused at once, never read. */
    snprintf(dir, sizeof dir, "/tmp/ft_test_pack_ctx.XXXXXX");
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    o.pack = dir;
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_IO);
    ASSERT_CONTAINS(ft_last_error(NULL), "a directory, not a regular file");
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ASSERT_EQ(mkfifo(fifo, 0600), 0);
    o.pack = fifo;
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_IO);
    ASSERT_CONTAINS(ft_last_error(NULL), "a FIFO, not a regular file");
    unlink(fifo);
    rmdir(dir);

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
    ft_kernel_set_entry e;
    unsigned char sm80[512];
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
    /* An sm_80 cubin in a set for 9.0: refused before the driver. */
    copy = *s;
    e = s->entries[0];
    e.cubin_size = make_cubin(sm80, sizeof sm80, 80, 8, "kernel_a", 0);
    e.cubin = sm80;
    copy.entries = &e;
    copy.count = 1;
    ASSERT_EQ(ft_context_create(&o, &ctx), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(NULL), "its cubin is for sm_80");
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

    ft_attention_args_init(&a);
    ASSERT_EQ(ft_attention_kernel(NULL, &a, which, sizeof which), FT_ERR_INVALID_ARGUMENT);
    ASSERT_STREQ(which, "");
    ASSERT_CONTAINS(ft_last_error(NULL), "ctx and args must not be NULL");
    ASSERT_EQ(ft_attention_kernel(NULL, NULL, which, 0), FT_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(ft_attention_kernel(NULL, &a, NULL, 16), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(ft_last_error(NULL), "buf must hold");
}

/* A pack of format version 1, written by flashtune 0.1's export from the schema-2 fixture
 * (tests/fixtures/fake-v1.ftpack): read as forward winners, it imports, and written again it is
 * a version-2 pack with the same keys. */
static void test_version_1_pack(void)
{
    const char *v1 = FT_SOURCE_DIR "/tests/fixtures/fake-v1.ftpack";
    char dir[64], path[128], db_path[160];
    const ft_kernel_set *set = NULL;
    ft_pack p, again;
    ft_db *db = NULL;
    ft_err err;
    int i, winning = 0;

    ASSERT_OK(ft__pack_read(v1, &p, &err), &err);
    ASSERT_EQ(p.nwinners, 24);
    ASSERT_EQ(p.nkernels, 4);
    for (i = 0; i < p.nwinners; i++) {
        const ft_db_result *r = &p.winners[i].r;
        ft_key shape;
        ASSERT_TRUE(r->key.op == &ft__op_fwd);
        ASSERT_TRUE(ft__key_get(&r->key, "seqlen", 0) >= 512);
        /* the key's group and sq are those of the winner's shape */
        ft__key_of(&ft__op_fwd, r->key.dtype, (int)ft__key_get(&r->key, "d", 0), (int)ft__key_get(&r->key, "causal", 0),
                   0, r->batch, r->heads_q, r->heads_kv, r->seqlen_q, r->seqlen_k, &shape);
        ASSERT_TRUE(ft__key_equal(&shape, &r->key));
    }
    ASSERT_OK(ft__pack_kernel_set(&p, &set, &err), &err);
    ASSERT_EQ(set->version, FT_KERNEL_SET_VERSION);
    ASSERT_STREQ(set->ops[0], "fwd");
    ASSERT_CONTAINS(set->keys[0], "{\"dtype\":\"");
    snprintf(dir, sizeof dir, "/tmp/ft_test_pack.XXXXXX");
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/again.ftpack", dir);
    ASSERT_OK(ft__pack_write(&p, path, NULL, &err), &err);
    ASSERT_OK(ft__pack_read(path, &again, &err), &err);
    ASSERT_EQ(again.nwinners, p.nwinners);
    for (i = 0; i < p.nwinners; i++) {
        ASSERT_TRUE(ft__key_equal(&again.winners[i].r.key, &p.winners[i].r.key));
        ASSERT_TRUE(again.winners[i].r.median_ms == p.winners[i].r.median_ms);
    }
    ft__pack_free(&again);
    /* It imports into a new database: every winner wins its key there. */
    snprintf(db_path, sizeof db_path, "%s/t.db", dir);
    ASSERT_OK(ft__db_open(db_path, 0, &db, &err), &err);
    ASSERT_OK(ft__pack_import(db, &p, NULL, &winning, &err), &err);
    ASSERT_EQ(winning, 24);
    ft__db_close(db);
    ft__pack_free(&p);
    unlink(path);
    unlink(db_path);
    rmdir(dir);
}

FT_TEST_MAIN(FT_CASE(test_version_1_pack), FT_CASE(test_round_trip), FT_CASE(test_every_damage_refused), FT_CASE(test_magic_and_version),
             FT_CASE(test_header_strict), FT_CASE(test_json_strict), FT_CASE(test_json_writer), FT_CASE(test_cubin_checks),
             FT_CASE(test_variant_checks), FT_CASE(test_db_winner_check), FT_CASE(test_hostile_packs),
             FT_CASE(test_pack_check), FT_CASE(test_import_never_replaces), FT_CASE(test_read_limits),
             FT_CASE(test_blob_amplification), FT_CASE(test_c_export_escapes), FT_CASE(test_c_identifiers),
             FT_CASE(test_kernel_set_view), FT_CASE(test_old_form_keys), FT_CASE(test_import_into_db), FT_CASE(test_context_with_pack),
             FT_CASE(test_context_with_kernel_set), FT_CASE(test_options_version_1),
             FT_CASE(test_attention_kernel_arguments))
