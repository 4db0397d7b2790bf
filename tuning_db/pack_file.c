/*
 * Kernel packs: the file (pack.h has the format): export from a database, writing, reading the
 * header and the index.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fs.h"
#include "common/json.h"
#include "common/jsonparse.h"
#include "common/sha256.h"
#include "common/strbuf.h"
#include "generator/check.h"
#include "generator/family.h"
#include "tuning_db/pack_internal.h"

#define MAX_JSON_DEPTH 4   /* the index: root, kernels, a kernel, its blob (winners, a winner, its key) */
#define MAX_HEADER 200     /* bytes of the header line, newline included */

/* ---- export from a database ---------------------------------------------------------------- */

typedef struct collect_ctx {
    long long device_id;
    ft_db_row *rows;
    int n, cap;
    int failed;
} collect_ctx;

static int collect_winner(void *ud, const ft_db_row *row)
{
    collect_ctx *c = ud;

    if (row->result.device_id != c->device_id || !row->winner)
        return 0;
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 64;
        ft_db_row *rows = realloc(c->rows, (size_t)cap * sizeof *rows);
        if (rows == NULL) {
            c->failed = 1;
            return 1;
        }
        c->rows = rows;
        c->cap = cap;
    }
    c->rows[c->n++] = *row;
    return 0;
}

static void free_kernel(ft_pack_kernel *pk)
{
    free((void *)pk->k.source);
    free((void *)pk->k.cubin);
    memset(pk, 0, sizeof *pk);
}

/* Counts a winner left out because import would refuse it; keeps why for the first. */
static void note_refused(ft_pack_skipped *s, const ft_key *k, const char *variant, const char *why)
{
    char key[FT_KEY_TEXT_MAX];

    ft__key_format(k, key, sizeof key);
    if (s->refused == 0)
        snprintf(s->first, sizeof s->first, "%s %s (%s): %s", k->op != NULL ? k->op->name : "?",
                 ft__pack_printable(key) ? key : "?", ft__pack_printable(variant) ? variant : "?", why);
    s->refused++;
}

ft_status ft__pack_from_db(ft_db *db, long long device_id, ft_pack *out, ft_pack_skipped *skipped, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    ft_pack_skipped skip;
    collect_ctx c;
    ft_db_filter f;
    ft_pack_kernel cand;
    long long *ids = NULL; /* kernel id of each pack kernel */
    char why[700];
    int i, j;

    memset(&c, 0, sizeof c);
    memset(&skip, 0, sizeof skip);
    memset(&cand, 0, sizeof cand);
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (db == NULL || out == NULL) {
        ft__fail(err, rc, "ft__pack_from_db: NULL argument");
        goto out;
    }
    c.device_id = device_id;
    ft__db_filter_init(&f);
    f.winners_only = 1;
    rc = ft__db_query(db, &f, collect_winner, &c, err);
    if (rc == FT_OK && c.failed)
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory collecting winners");
    if (rc != FT_OK)
        goto out;
    if (c.n == 0) {
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: device %lld has no winners", ft__db_path(db), device_id);
        goto out;
    }
    if (c.n > FT_PACK_MAX_WINNERS) {
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "%s: device %lld has %d winners, more than the %d a pack may hold",
                      ft__db_path(db), device_id, c.n, FT_PACK_MAX_WINNERS);
        goto out;
    }
    out->device = c.rows[0].device;
    if (!ft__pack_check_device(&out->device, why, sizeof why)) {
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "%s: device %lld cannot be exported: %s", ft__db_path(db),
                      device_id, why);
        goto out;
    }
    out->kernels = calloc((size_t)c.n, sizeof *out->kernels);
    out->winners = calloc((size_t)c.n, sizeof *out->winners);
    ids = calloc((size_t)c.n, sizeof *ids);
    if (out->kernels == NULL || out->winners == NULL || ids == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    snprintf(out->flashtune_version, sizeof out->flashtune_version, "%s", FT_VERSION_STRING);
    ft__pack_utc_now(out->created, sizeof out->created);
    /* Each winner with its kernel, checked as import checks them: what fails is left out. */
    for (i = 0; i < c.n; i++) {
        const ft_db_row *row = &c.rows[i];
        const ft_pack_kernel *pk;
        ft_pack_winner w;
        for (j = 0; j < out->nkernels && ids[j] != row->result.kernel_id; j++)
            ;
        if (j == out->nkernels) {
            rc = ft__db_kernel_get(db, row->result.kernel_id, &cand.k, err);
            if (rc != FT_OK)
                goto out;
            cand.rows_per_block = ft__pack_rows_per_block(cand.k.family, cand.k.variant);
            if (cand.k.cubin == NULL || cand.k.source == NULL) {
                skip.no_cubin++;
                free_kernel(&cand);
                continue;
            }
            if (!ft__pack_check_kernel(&cand, &out->device, why, sizeof why)) {
                note_refused(&skip, &row->result.key, cand.k.variant, why);
                free_kernel(&cand);
                continue;
            }
            pk = &cand;
        } else {
            pk = &out->kernels[j];
        }
        memset(&w, 0, sizeof w);
        w.kernel = j;
        w.r = row->result;
        w.r.device_id = 0;
        w.r.kernel_id = 0;
        w.r.reason[0] = '\0';
        snprintf(w.measured_at, sizeof w.measured_at, "%s", row->measured_at);
        if (!ft__pack_check_winner(&w, pk, why, sizeof why)) {
            note_refused(&skip, &w.r.key, pk->k.variant, why);
            if (pk == &cand)
                free_kernel(&cand);
            continue;
        }
        if (pk == &cand) { /* the kernel's first winner: the kernel joins the pack */
            out->kernels[j] = cand;
            memset(&cand, 0, sizeof cand);
            ids[j] = row->result.kernel_id;
            out->nkernels++;
        }
        out->winners[out->nwinners++] = w;
    }
    if (out->nwinners == 0) {
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: none of the %d winners of %s can be exported (%d have no stored "
                      "cubin: tune again to store them; %d would be refused by import%s%s)", ft__db_path(db), c.n,
                      out->device.name, skip.no_cubin, skip.refused, skip.refused ? ", the first: " : "", skip.first);
        goto out;
    }
    rc = ft__pack_check(out, err); /* what was kept passes, together: import takes it */
    if (rc != FT_OK)
        ft__err_prefix(err, "%s: cannot export device %lld", ft__db_path(db), device_id);
out:
    free_kernel(&cand);
    if (rc != FT_OK && out != NULL)
        ft__pack_free(out);
    if (skipped != NULL)
        *skipped = skip;
    free(ids);
    free(c.rows);
    return rc;
}

/* ---- writing ----------------------------------------------------------------------------- */

static void sb_key_string(ft_strbuf *sb, const char *key, const char *value)
{
    ft__sb_printf(sb, "\"%s\": ", key);
    ft__json_string_sb(sb, value);
}

static void sb_key_real(ft_strbuf *sb, const char *key, double v)
{
    if (isnan(v) || isinf(v))
        ft__sb_printf(sb, "\"%s\": null", key);
    else
        ft__sb_printf(sb, "\"%s\": %.17g", key, v);
}

static void sb_blob(ft_strbuf *sb, const char *key, size_t offset, const void *data, size_t size)
{
    char hex[65];

    ft__pack_sha256_hex(data, size, hex);
    ft__sb_printf(sb, "\"%s\": {\"offset\": %zu, \"size\": %zu, \"sha256\": \"%s\"}", key, offset, size, hex);
}

ft_status ft__pack_write(ft_pack *p, const char *path, size_t *bytes, ft_err *err)
{
    ft_status rc = FT_ERR_OUT_OF_MEMORY;
    ft_strbuf idx = FT_STRBUF_INIT;
    char *file = NULL, *index = NULL;
    char header[160];
    size_t blob_bytes = 0, off = 0, total = 0, hlen, ilen;
    uint8_t digest[32];
    ft_sha256 sh;
    int i;

    if (bytes != NULL)
        *bytes = 0;
    if (p == NULL || path == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__pack_write: NULL argument");
    /* Only what import accepts is written. */
    rc = ft__pack_check(p, err);
    if (rc != FT_OK) {
        ft__err_prefix(err, "%s: not written: import would refuse the pack", path);
        goto out;
    }
    rc = FT_ERR_OUT_OF_MEMORY;
    ft__sb_printf(&idx, "{\"format\": \"flashtune-pack\", \"version\": %d, ", FT_PACK_VERSION);
    sb_key_string(&idx, "flashtune", p->flashtune_version);
    ft__sb_puts(&idx, ", ");
    sb_key_string(&idx, "created", p->created);
    ft__sb_puts(&idx, ",\n \"device\": {");
    sb_key_string(&idx, "name", p->device.name);
    ft__sb_printf(&idx, ", \"cc\": %d, \"sms\": %d, \"smem_per_block\": %lld, \"smem_per_sm\": %lld, "
                  "\"l2_bytes\": %lld, \"driver_version\": %d, ", p->device.cc, p->device.sms,
                  p->device.smem_per_block, p->device.smem_per_sm, p->device.l2_bytes, p->device.driver_version);
    sb_key_string(&idx, "nvrtc_version", p->device.nvrtc_version);
    ft__sb_puts(&idx, "},\n \"kernels\": [");
    for (i = 0; i < p->nkernels; i++) {
        const ft_pack_kernel *pk = &p->kernels[i];
        const ft_db_kernel *k = &pk->k;
        size_t slen = strlen(k->source);
        ft__sb_puts(&idx, i ? ",\n  {" : "\n  {");
        sb_key_string(&idx, "family", k->family);
        ft__sb_puts(&idx, ", ");
        sb_key_string(&idx, "variant", k->variant);
        ft__sb_puts(&idx, ", ");
        sb_key_string(&idx, "arch", k->arch);
        ft__sb_puts(&idx, ", ");
        sb_key_string(&idx, "template_hash", k->template_hash);
        ft__sb_puts(&idx, ", ");
        sb_key_string(&idx, "source_hash", k->source_hash);
        ft__sb_puts(&idx, ", ");
        sb_key_string(&idx, "entry", k->entry);
        ft__sb_printf(&idx, ", \"threads\": %d, \"rows_per_block\": %d, \"registers\": %d, \"spill_stores\": %lld, "
                      "\"spill_loads\": %lld, \"smem_static\": %lld, \"smem_dynamic\": %lld, ", k->threads,
                      pk->rows_per_block, k->registers, k->spill_stores, k->spill_loads, k->smem_static,
                      k->smem_dynamic);
        sb_key_real(&idx, "compile_ms", k->compile_ms);
        ft__sb_puts(&idx, ",\n   ");
        sb_blob(&idx, "cubin", off, k->cubin, k->cubin_size);
        off += k->cubin_size;
        ft__sb_puts(&idx, ",\n   ");
        sb_blob(&idx, "source", off, k->source, slen);
        off += slen;
        ft__sb_puts(&idx, "}");
    }
    blob_bytes = off;
    ft__sb_puts(&idx, "],\n \"winners\": [");
    for (i = 0; i < p->nwinners; i++) {
        const ft_pack_winner *w = &p->winners[i];
        const ft_db_result *r = &w->r;
        ft__sb_printf(&idx, "%s{\"kernel\": %d, ", i ? ",\n  " : "\n  ", w->kernel);
        char key[FT_KEY_TEXT_MAX];
        ft__key_format(&r->key, key, sizeof key);
        sb_key_string(&idx, "op", r->key.op->name);
        ft__sb_printf(&idx, ", \"key\": %s, \"batch\": %d, \"heads_q\": %d, \"heads_kv\": %d, \"seqlen_q\": %d, "
                      "\"seqlen_k\": %d, ",
                      key, r->batch, r->heads_q, r->heads_kv, r->seqlen_q, r->seqlen_k);
        sb_key_real(&idx, "median_ms", r->median_ms);
        ft__sb_puts(&idx, ", ");
        sb_key_real(&idx, "iqr_ms", r->iqr_ms);
        ft__sb_puts(&idx, ", ");
        sb_key_real(&idx, "tflops", r->tflops);
        ft__sb_puts(&idx, ", ");
        sb_key_real(&idx, "max_error", r->max_error);
        ft__sb_printf(&idx, ", \"repetitions\": %d, ", r->repetitions);
        sb_key_string(&idx, "measured_at", w->measured_at);
        ft__sb_puts(&idx, "}");
    }
    ft__sb_puts(&idx, "]}\n");
    index = ft__sb_take(&idx);
    if (index == NULL) {
        ft__fail(err, rc, "out of memory writing %s", path);
        goto out;
    }
    ilen = strlen(index);
    if (ilen > FT_PACK_MAX_INDEX || blob_bytes > FT_PACK_MAX_FILE - ilen - MAX_HEADER) {
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "%s: not written: a pack of %zu bytes of index and %zu of blobs is "
                      "larger than a reader accepts (%zu of index, %zu in all)", path, ilen, blob_bytes,
                      FT_PACK_MAX_INDEX, FT_PACK_MAX_FILE);
        goto out;
    }

    /* The checksum over the index and the blobs, then the header that carries it. */
    ft__sha256_init(&sh);
    ft__sha256_update(&sh, index, ilen);
    for (i = 0; i < p->nkernels; i++) {
        ft__sha256_update(&sh, p->kernels[i].k.cubin, p->kernels[i].k.cubin_size);
        ft__sha256_update(&sh, p->kernels[i].k.source, strlen(p->kernels[i].k.source));
    }
    ft__sha256_final(&sh, digest);
    ft__sha256_hex(digest, p->sha256);
    snprintf(header, sizeof header, "%s %d %zu %zu %s\n", FT_PACK_MAGIC, FT_PACK_VERSION, ilen, blob_bytes, p->sha256);
    hlen = strlen(header);
    total = hlen + ilen + blob_bytes;
    file = malloc(total);
    if (file == NULL) {
        ft__fail(err, rc, "out of memory for a %zu-byte pack", total);
        goto out;
    }
    memcpy(file, header, hlen);
    memcpy(file + hlen, index, ilen);
    off = hlen + ilen;
    for (i = 0; i < p->nkernels; i++) {
        size_t slen = strlen(p->kernels[i].k.source);
        memcpy(file + off, p->kernels[i].k.cubin, p->kernels[i].k.cubin_size);
        off += p->kernels[i].k.cubin_size;
        memcpy(file + off, p->kernels[i].k.source, slen);
        off += slen;
    }
    rc = ft__write_file_atomic(path, file, total, FT_WRITE_DURABLE, err);
    if (rc == FT_OK && bytes != NULL)
        *bytes = total;
out:
    ft__sb_free(&idx);
    free(index);
    free(file);
    return rc;
}

/* ---- reading: the header ------------------------------------------------------------------ */

typedef struct pack_header {
    size_t hlen;                   /* the header line's bytes, its newline included */
    unsigned long long ilen, blen; /* the index's and the blobs' bytes */
    int version;                   /* the format version, which the index must repeat */
    char sha256[65];
} pack_header;

/* A decimal number of 1 to 19 digits without a leading zero at *p (before end); advances *p. */
static int header_number(const char **p, const char *end, unsigned long long *out)
{
    const char *s = *p;
    unsigned long long v = 0;
    int n = 0;

    while (s < end && *s >= '0' && *s <= '9' && n < 19) {
        v = v * 10 + (unsigned long long)(*s - '0');
        s++;
        n++;
    }
    if (n == 0 || (n > 1 && **p == '0') || (s < end && *s >= '0' && *s <= '9'))
        return 0;
    *out = v;
    *p = s;
    return 1;
}

/* The header line at the start of text (size bytes, possibly only the file's first ones):
 * magic, version, sizes within the limits, checksum. */
static ft_status parse_header(const char *text, size_t size, const char *name, pack_header *h, ft_err *err)
{
    const size_t mlen = strlen(FT_PACK_MAGIC);
    const char *nl, *p;
    unsigned long long version = 0;
    size_t i;

    memset(h, 0, sizeof *h);
    if (size < mlen + 1 || memcmp(text, FT_PACK_MAGIC " ", mlen + 1) != 0)
        return ft__fail(err, FT_ERR_CORRUPT, "%s is not a flashtune pack (it does not start with \"%s \")", name,
                        FT_PACK_MAGIC);
    nl = memchr(text, '\n', size < MAX_HEADER ? size : MAX_HEADER);
    if (nl == NULL)
        return ft__fail(err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: the header line is not terminated "
                        "within %d bytes", name, MAX_HEADER);
    p = text + mlen + 1;
    if (!header_number(&p, nl, &version) || version < 1 || p == nl || *p != ' ')
        return ft__fail(err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: the header has no format version", name);
    if (version > FT_PACK_VERSION)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s is a flashtune pack of format version %llu; this flashtune (%s) "
                        "reads versions 1 to %d (a newer flashtune wrote it)", name, version, FT_VERSION_STRING,
                        FT_PACK_VERSION);
    h->version = (int)version;
    p++;
    if (!header_number(&p, nl, &h->ilen) || p == nl || *p != ' ')
        goto malformed;
    p++;
    if (!header_number(&p, nl, &h->blen) || p == nl || *p != ' ')
        goto malformed;
    p++;
    if (nl - p != 64 || h->ilen < 2)
        goto malformed;
    for (i = 0; i < 64; i++)
        if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
            goto malformed;
    memcpy(h->sha256, p, 64);
    h->sha256[64] = '\0';
    h->hlen = (size_t)(nl - text) + 1;
    if (h->ilen > FT_PACK_MAX_INDEX)
        return ft__fail(err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: its header announces an index of %llu "
                        "bytes, more than the %zu a pack may have", name, h->ilen, FT_PACK_MAX_INDEX);
    if (h->blen > FT_PACK_MAX_FILE || h->hlen + h->ilen + h->blen > FT_PACK_MAX_FILE)
        return ft__fail(err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: its header announces %llu bytes, more "
                        "than the %zu a pack may have", name, (unsigned long long)h->hlen + h->ilen + h->blen,
                        FT_PACK_MAX_FILE);
    return FT_OK;
malformed:
    return ft__fail(err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: a malformed header line", name);
}

/* The file is exactly as long as its header says. */
static ft_status check_size(const pack_header *h, size_t size, const char *name, ft_err *err)
{
    unsigned long long want = (unsigned long long)h->hlen + h->ilen + h->blen;

    if (want == size)
        return FT_OK;
    return ft__fail(err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: its header announces %llu bytes, the file "
                    "has %zu (%s)", name, want, size, size < want ? "truncated" : "extra bytes at the end");
}

/* ---- reading: the index -------------------------------------------------------------------- */

typedef struct reader {
    const char *name;
    ft_err *err;
    ft_status rc;
} reader;

static int bad(reader *r, const char *in, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records the first problem (FT_ERR_CORRUPT naming the file and where); returns 0. */
static int bad(reader *r, const char *in, const char *fmt, ...)
{
    if (r->rc == FT_OK) {
        char msg[400];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        r->rc = ft__fail(r->err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: %s%s%s", r->name, msg,
                         in != NULL ? " in " : "", in != NULL ? in : "");
    }
    return 0;
}

static const char *const root_keys[] = {"format", "version", "flashtune", "created", "device", "kernels",
                                        "winners", NULL};
static const char *const device_keys[] = {"name", "cc", "sms", "smem_per_block", "smem_per_sm", "l2_bytes",
                                          "driver_version", "nvrtc_version", NULL};
static const char *const kernel_keys[] = {"family", "variant", "arch", "template_hash", "source_hash", "entry",
                                          "threads", "rows_per_block", "registers", "spill_stores", "spill_loads",
                                          "smem_static", "smem_dynamic", "compile_ms", "cubin", "source", NULL};
static const char *const blob_keys[] = {"offset", "size", "sha256", NULL};
static const char *const winner_keys[] = {"kernel", "op", "key", "batch", "heads_q", "heads_kv", "seqlen_q",
                                          "seqlen_k", "median_ms", "iqr_ms", "tflops", "max_error", "repetitions",
                                          "measured_at", NULL};
/* Version 1: the forward's bucket as five fields of the winner. */
static const char *const winner_keys_v1[] = {"kernel", "dtype", "head_dim", "causal", "seqlen_bucket", "bh_bucket",
                                             "batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "median_ms",
                                             "iqr_ms", "tflops", "max_error", "repetitions", "measured_at", NULL};

/* An object holding no key but those of the format (each once: the parser refuses repeats). */
static int only_keys(reader *r, const ft_json *obj, const char *const *keys, const char *in)
{
    int i, k;

    if (obj == NULL || obj->type != FT_JSON_OBJECT)
        return bad(r, NULL, "%s is not an object", in);
    for (i = 0; i < obj->n; i++) {
        for (k = 0; keys[k] != NULL && strcmp(keys[k], obj->kids[i].key) != 0; k++)
            ;
        if (keys[k] == NULL)
            return bad(r, in, "an unknown key \"%.60s\"", ft__pack_printable(obj->kids[i].key) ? obj->kids[i].key : "?");
    }
    return 1;
}

static int get_str(reader *r, const ft_json *obj, const char *key, char *out, size_t cap, const char *in)
{
    const ft_json *n = ft__json_member(obj, key);

    if (n == NULL || n->type != FT_JSON_STRING)
        return bad(r, in, "the string '%s' is missing", key);
    if (n->len >= cap)
        return bad(r, in, "'%s' is too long", key);
    memcpy(out, n->str, n->len + 1);
    return 1;
}

static int get_ll(reader *r, const ft_json *obj, const char *key, long long min, long long max, long long *out,
                  const char *in)
{
    const ft_json *n = ft__json_member(obj, key);

    if (n == NULL || n->type != FT_JSON_NUMBER || !n->is_int || n->ival < min || n->ival > max)
        return bad(r, in, "the integer '%s' is missing or out of range", key);
    *out = n->ival;
    return 1;
}

static int get_int(reader *r, const ft_json *obj, const char *key, long long min, long long max, int *out,
                   const char *in)
{
    long long v = 0;

    if (!get_ll(r, obj, key, min, max, &v, in))
        return 0;
    *out = (int)v;
    return 1;
}

/* A number or null (NAN). */
static int get_real(reader *r, const ft_json *obj, const char *key, double *out, const char *in)
{
    const ft_json *n = ft__json_member(obj, key);

    if (n != NULL && n->type == FT_JSON_NULL) {
        *out = NAN;
        return 1;
    }
    if (n == NULL || n->type != FT_JSON_NUMBER)
        return bad(r, in, "the number '%s' is missing", key);
    *out = n->num;
    return 1;
}

/* A blob: it starts where the one before it ended (*next), it matches its sha256; its bytes
 * are copied, with a NUL after them. A text blob holds no NUL. */
static int get_blob(reader *r, const ft_json *kernel, const char *key, const unsigned char *blobs, size_t nblobs,
                    size_t *next, int text, void **out, size_t *size, const char *in)
{
    const ft_json *b = ft__json_member(kernel, key);
    long long off = 0, len = 0;
    char want[65], hex[65], what[32];
    char *copy;

    snprintf(what, sizeof what, "the blob '%s'", key);
    if (!only_keys(r, b, blob_keys, what))
        return 0;
    if (!get_ll(r, b, "offset", 0, (long long)nblobs, &off, in) || !get_ll(r, b, "size", 1, (long long)nblobs, &len, in) ||
        !get_str(r, b, "sha256", want, sizeof want, in))
        return 0;
    if ((size_t)off != *next)
        return bad(r, in, "the %s starts at byte %lld of the blobs, not at %zu where the one before it ends (the "
                   "blobs follow each other without gaps or overlaps)", key, off, *next);
    if ((size_t)len > nblobs - (size_t)off)
        return bad(r, in, "the %s lies outside the file", key);
    ft__pack_sha256_hex(blobs + off, (size_t)len, hex);
    if (strcmp(hex, want) != 0)
        return bad(r, in, "the %s's sha256 does not match", key);
    if (text && memchr(blobs + off, '\0', (size_t)len) != NULL)
        return bad(r, in, "the %s holds a NUL byte", key);
    copy = malloc((size_t)len + 1);
    if (copy == NULL) {
        if (r->rc == FT_OK)
            r->rc = ft__fail(r->err, FT_ERR_OUT_OF_MEMORY, "out of memory reading %s", r->name);
        return 0;
    }
    memcpy(copy, blobs + off, (size_t)len);
    copy[len] = '\0';
    *out = copy;
    *size = (size_t)len;
    *next += (size_t)len;
    return 1;
}

static int read_kernel(reader *r, const ft_json *n, const unsigned char *blobs, size_t nblobs, size_t *next,
                       ft_pack_kernel *pk, int index)
{
    ft_db_kernel *k = &pk->k;
    char in[48];
    void *cubin = NULL, *source = NULL;
    size_t cubin_size = 0, source_size = 0;
    int ok;

    snprintf(in, sizeof in, "kernel %d", index);
    if (!only_keys(r, n, kernel_keys, in))
        return 0;
    ok = get_str(r, n, "family", k->family, sizeof k->family, in) &&
         get_str(r, n, "variant", k->variant, sizeof k->variant, in) &&
         get_str(r, n, "arch", k->arch, sizeof k->arch, in) &&
         get_str(r, n, "template_hash", k->template_hash, sizeof k->template_hash, in) &&
         get_str(r, n, "source_hash", k->source_hash, sizeof k->source_hash, in) &&
         get_str(r, n, "entry", k->entry, sizeof k->entry, in) &&
         get_int(r, n, "threads", 1, 4096, &k->threads, in) &&
         get_int(r, n, "rows_per_block", 1, 4096, &pk->rows_per_block, in) &&
         get_int(r, n, "registers", 0, 1 << 20, &k->registers, in) &&
         get_ll(r, n, "spill_stores", 0, 1LL << 40, &k->spill_stores, in) &&
         get_ll(r, n, "spill_loads", 0, 1LL << 40, &k->spill_loads, in) &&
         get_ll(r, n, "smem_static", 0, 1LL << 30, &k->smem_static, in) &&
         get_ll(r, n, "smem_dynamic", 0, 1LL << 30, &k->smem_dynamic, in) &&
         get_real(r, n, "compile_ms", &k->compile_ms, in) &&
         get_blob(r, n, "cubin", blobs, nblobs, next, 0, &cubin, &cubin_size, in) &&
         get_blob(r, n, "source", blobs, nblobs, next, 1, &source, &source_size, in);
    if (!ok) {
        free(cubin);
        free(source);
        return 0;
    }
    k->cubin = cubin;
    k->cubin_size = cubin_size;
    k->source = source;
    return 1;
}

/* A winner's key: version 2 names the operation and gives its key as an object of the
 * operation's fields; version 1's winners are the forward's, their bucket five fields. A key of
 * an older form of its operation's (version 1's, and the forward's without "group" and "sq") gets
 * the fields it lacks from the winner's shape, res's (ft__key_parse_shaped). */
static int read_key(reader *r, const ft_json *n, int version, ft_db_result *res, const char *in)
{
    ft_strbuf sb = FT_STRBUF_INIT;
    const ft_json *key;
    const ft_op *op;
    char name[16];
    ft_err kerr;
    int i, ok = 0;

    if (version == 1) {
        char dtype[8];
        int head_dim, causal, seqlen, bh;
        if (!get_str(r, n, "dtype", dtype, sizeof dtype, in) || !get_int(r, n, "head_dim", 1, 1 << 16, &head_dim, in) ||
            !get_int(r, n, "causal", 0, 1, &causal, in) ||
            !get_int(r, n, "seqlen_bucket", 1, 1 << 30, &seqlen, in) || !get_int(r, n, "bh_bucket", 1, 1 << 30, &bh, in))
            return 0;
        ft__sb_printf(&sb, "{\"dtype\":\"%s\",\"d\":%d,\"causal\":%d,\"seqlen\":%d,\"bh\":%d}", dtype, head_dim,
                      causal, seqlen, bh);
        op = &ft__op_fwd;
    } else {
        if (!get_str(r, n, "op", name, sizeof name, in))
            return 0;
        op = ft__op_find(name);
        if (op == NULL)
            return bad(r, in, "its operation '%.15s' is not one this build has", ft__pack_printable(name) ? name : "?");
        key = ft__json_member(n, "key");
        if (key == NULL || key->type != FT_JSON_OBJECT || key->n > FT_KEY_MAX_FIELDS + 1)
            return bad(r, in, "%s", "its key is not an object of its operation's fields");
        /* The members as flat JSON again, checked by the operation's key parser: strings and
         * integers only. */
        ft__sb_puts(&sb, "{");
        for (i = 0; i < key->n; i++) {
            const ft_json *m = &key->kids[i];
            if (m->type == FT_JSON_STRING && ft__pack_all_of(m->str, IDENT_, 1) && ft__pack_all_of(m->key, IDENT_, 1))
                ft__sb_printf(&sb, "%s\"%s\":\"%s\"", i ? "," : "", m->key, m->str);
            else if (m->type == FT_JSON_NUMBER && m->is_int && ft__pack_all_of(m->key, IDENT_, 1))
                ft__sb_printf(&sb, "%s\"%s\":%lld", i ? "," : "", m->key, m->ival);
            else
                goto bad_key;
        }
        ft__sb_puts(&sb, "}");
    }
    if (sb.failed) {
        r->rc = ft__fail(r->err, FT_ERR_OUT_OF_MEMORY, "out of memory reading %s", r->name);
        goto out;
    }
    if (ft__key_parse_shaped(op, sb.data, res->batch, res->heads_q, res->heads_kv, res->seqlen_q, res->seqlen_k,
                             &res->key, &kerr) != FT_OK)
        goto bad_key;
    ok = 1;
    goto out;
bad_key:
    ok = bad(r, in, "its key is not one of operation %s (fields dtype, %s...)", op->name, op->key_fields[0]);
out:
    ft__sb_free(&sb);
    return ok;
}

static int read_winner(reader *r, const ft_json *n, int nkernels, int version, ft_pack_winner *w, int index)
{
    ft_db_result *res = &w->r;
    char in[48];
    int ok;

    snprintf(in, sizeof in, "winner %d", index);
    if (!only_keys(r, n, version == 1 ? winner_keys_v1 : winner_keys, in))
        return 0;
    ok = get_int(r, n, "kernel", 0, nkernels - 1, &w->kernel, in) &&
         get_int(r, n, "batch", 1, 1 << 30, &res->batch, in) &&
         get_int(r, n, "heads_q", 1, 1 << 30, &res->heads_q, in) &&
         get_int(r, n, "heads_kv", 1, 1 << 30, &res->heads_kv, in) &&
         get_int(r, n, "seqlen_q", 1, 1 << 30, &res->seqlen_q, in) &&
         get_int(r, n, "seqlen_k", 1, 1 << 30, &res->seqlen_k, in) && read_key(r, n, version, res, in) &&
         get_real(r, n, "median_ms", &res->median_ms, in) && get_real(r, n, "iqr_ms", &res->iqr_ms, in) &&
         get_real(r, n, "tflops", &res->tflops, in) && get_real(r, n, "max_error", &res->max_error, in) &&
         get_int(r, n, "repetitions", 0, 1 << 30, &res->repetitions, in) &&
         get_str(r, n, "measured_at", w->measured_at, sizeof w->measured_at, in);
    if (!ok)
        return 0;
    res->status = FT_RESULT_OK;
    return 1;
}

static ft_status read_index(const ft_json *root, const unsigned char *blobs, size_t nblobs, int header_version,
                            const char *name, ft_pack *p, ft_err *err)
{
    reader r = {name, err, FT_OK};
    const ft_json *dev, *kernels, *winners;
    char format[32];
    size_t next = 0;
    int version = 0, i;

    if (!only_keys(&r, root, root_keys, "the index"))
        goto out;
    if (!get_str(&r, root, "format", format, sizeof format, "the index") ||
        !get_int(&r, root, "version", 1, FT_PACK_VERSION, &version, "the index") ||
        !get_str(&r, root, "flashtune", p->flashtune_version, sizeof p->flashtune_version, "the index") ||
        !get_str(&r, root, "created", p->created, sizeof p->created, "the index"))
        goto out;
    if (strcmp(format, "flashtune-pack") != 0) {
        bad(&r, NULL, "the index's format is '%.20s'", ft__pack_printable(format) ? format : "?");
        goto out;
    }
    if (version != header_version) {
        bad(&r, NULL, "the index says format version %d, the header %d", version, header_version);
        goto out;
    }
    dev = ft__json_member(root, "device");
    if (!only_keys(&r, dev, device_keys, "the device"))
        goto out;
    if (!get_str(&r, dev, "name", p->device.name, sizeof p->device.name, "the device") ||
        !get_int(&r, dev, "cc", 10, 999, &p->device.cc, "the device") ||
        !get_int(&r, dev, "sms", 1, 1 << 20, &p->device.sms, "the device") ||
        !get_ll(&r, dev, "smem_per_block", 0, 1LL << 40, &p->device.smem_per_block, "the device") ||
        !get_ll(&r, dev, "smem_per_sm", 0, 1LL << 40, &p->device.smem_per_sm, "the device") ||
        !get_ll(&r, dev, "l2_bytes", 0, 1LL << 50, &p->device.l2_bytes, "the device") ||
        !get_int(&r, dev, "driver_version", 0, 1 << 30, &p->device.driver_version, "the device") ||
        !get_str(&r, dev, "nvrtc_version", p->device.nvrtc_version, sizeof p->device.nvrtc_version, "the device"))
        goto out;
    kernels = ft__json_member(root, "kernels");
    winners = ft__json_member(root, "winners");
    if (kernels == NULL || kernels->type != FT_JSON_ARRAY || winners == NULL || winners->type != FT_JSON_ARRAY) {
        bad(&r, NULL, "%s are missing", "the kernels or the winners");
        goto out;
    }
    if (winners->n == 0 || kernels->n == 0) {
        bad(&r, NULL, "%s", "it holds no winners");
        goto out;
    }
    if (kernels->n > FT_PACK_MAX_KERNELS || winners->n > FT_PACK_MAX_WINNERS) {
        bad(&r, NULL, "it holds %d kernels and %d winners, more than the %d and %d a pack may hold", kernels->n,
            winners->n, FT_PACK_MAX_KERNELS, FT_PACK_MAX_WINNERS);
        goto out;
    }
    p->kernels = calloc((size_t)kernels->n, sizeof *p->kernels);
    p->winners = calloc((size_t)winners->n, sizeof *p->winners);
    if (p->kernels == NULL || p->winners == NULL) {
        r.rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory reading %s", name);
        goto out;
    }
    for (i = 0; i < kernels->n; i++) {
        if (!read_kernel(&r, &kernels->kids[i], blobs, nblobs, &next, &p->kernels[i], i))
            goto out;
        p->nkernels++;
    }
    if (next != nblobs) {
        bad(&r, NULL, "%zu bytes of its blobs belong to no kernel", nblobs - next);
        goto out;
    }
    for (i = 0; i < winners->n; i++) {
        if (!read_winner(&r, &winners->kids[i], p->nkernels, version, &p->winners[i], i))
            goto out;
        p->nwinners++;
    }
out:
    return r.rc;
}

ft_status ft__pack_parse(const void *data, size_t size, const char *name, ft_pack *out, ft_err *err)
{
    const char *text = data;
    const ft_json_limits lim = {MAX_JSON_DEPTH,
                                64 + 32 * (size_t)FT_PACK_MAX_KERNELS + 24 * (size_t)FT_PACK_MAX_WINNERS};
    ft_status rc = FT_ERR_CORRUPT;
    ft_json_error je;
    ft_json_doc doc;
    pack_header h;
    char sum[65];
    ft_err why;

    memset(&doc, 0, sizeof doc);
    if (out == NULL || (data == NULL && size > 0))
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__pack_parse: NULL argument");
    memset(out, 0, sizeof *out);
    if (name == NULL)
        name = "the pack";
    rc = parse_header(text != NULL ? text : "", size, name, &h, err);
    if (rc == FT_OK)
        rc = check_size(&h, size, name, err);
    if (rc != FT_OK)
        goto out;
    ft__pack_sha256_hex(text + h.hlen, size - h.hlen, sum);
    if (strcmp(sum, h.sha256) != 0) {
        rc = ft__fail(err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: the sha256 of its content is %.12s..., "
                      "the header says %.12s... (a damaged or altered file)", name, sum, h.sha256);
        goto out;
    }
    if (!ft__json_parse(text + h.hlen, (size_t)h.ilen, &lim, &doc, &je)) {
        rc = ft__fail(err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: its index is not valid JSON (%s at byte "
                      "%zu)", name, je.why, h.hlen + je.at);
        goto out;
    }
    rc = read_index(&doc.root, (const unsigned char *)text + h.hlen + h.ilen, (size_t)h.blen, h.version, name, out,
                    err);
    if (rc != FT_OK)
        goto out;
    rc = ft__pack_check(out, &why);
    if (rc != FT_OK) {
        if (rc != FT_ERR_OUT_OF_MEMORY)
            rc = FT_ERR_CORRUPT;
        ft__fail(err, rc, "%s is a corrupt flashtune pack: %s", name, why.msg);
        goto out;
    }
    memcpy(out->sha256, sum, sizeof sum);
out:
    ft__json_free(&doc);
    if (rc != FT_OK)
        ft__pack_free(out);
    return rc;
}

ft_status ft__pack_read(const char *path, ft_pack *out, ft_err *err)
{
    char head[MAX_HEADER], *data = NULL;
    size_t got = 0, file_size = 0, size = 0;
    pack_header h;
    ft_status rc;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (path == NULL || out == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__pack_read: NULL argument");
    /* The header and the size first: nothing more is read of what is not a pack. */
    rc = ft__read_file_head(path, head, sizeof head, &got, &file_size, err);
    if (rc == FT_OK)
        rc = parse_header(head, got, path, &h, err);
    if (rc == FT_OK)
        rc = check_size(&h, file_size, path, err);
    if (rc == FT_OK)
        rc = ft__read_file_max(path, h.hlen + (size_t)h.ilen + (size_t)h.blen, &data, &size, err);
    if (rc == FT_OK)
        rc = ft__pack_parse(data, size, path, out, err);
    free(data);
    return rc;
}

