/*
 * Kernel packs: writing, reading and checking the file (the format is in pack.h), the C
 * source export, the kernel-set view the runtime uses, and the merge into a database.
 */
#define _POSIX_C_SOURCE 200809L
#include "tuning_db/pack.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fs.h"
#include "common/json.h"
#include "common/sha256.h"
#include "common/strbuf.h"
#include "generator/family.h"

#define MAX_JSON_DEPTH 16

/* ---- small helpers ------------------------------------------------------------------------ */

void ft__pack_free(ft_pack *p)
{
    int i;

    if (p == NULL)
        return;
    for (i = 0; i < p->nkernels; i++) {
        free((void *)p->kernels[i].k.source);
        free((void *)p->kernels[i].k.cubin);
    }
    free(p->kernels);
    free(p->winners);
    free(p->entries);
    memset(p, 0, sizeof *p);
}

/* The integer value of parameter `name` in a variant string, or def. */
static int variant_value(const char *variant, const char *name, int def)
{
    const char *p = variant;
    size_t n = strlen(name);

    while (p != NULL && *p != '\0') {
        if (strncmp(p, name, n) == 0 && p[n] == '=')
            return atoi(p + n + 1) > 0 ? atoi(p + n + 1) : def;
        p = strchr(p, ',');
        if (p != NULL)
            p++;
    }
    return def;
}

int ft__pack_rows_per_block(const char *variant)
{
    return variant_value(variant, "bm", 64);
}

ft_status ft__kernel_set_load(const ft_cuda *cu, const ft_arch *arch, const ft_kernel_set_entry *e, ft_kernel *out,
                              ft_err *err)
{
    const ft_family *fam = ft__family_find(e->family);
    ft_status rc;

    if (fam == NULL)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s: unknown kernel family '%s'", e->entry, e->family);
    rc = ft__kernel_load(cu, e->cubin, e->entry, e->threads, e->rows_per_block, e->smem_dynamic, arch, out, err);
    if (rc == FT_OK && fam->uses_tma) /* as ft__session_load: tensor-map boxes from the variant */
        ft__kernel_use_tma(out, variant_value(e->variant, "bn", 64), variant_value(e->variant, "d", e->head_dim),
                           variant_value(e->variant, "causal", e->causal), variant_value(e->variant, "balance", 0));
    return rc;
}

static void utc_now(char *out, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, cap, "unknown");
}

static int is_pow2(long long v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

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

ft_status ft__pack_from_db(ft_db *db, long long device_id, ft_pack *out, int *left_out, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    collect_ctx c;
    ft_db_filter f;
    long long *ids = NULL; /* kernel id of each pack kernel */
    int i, j, skipped = 0;

    memset(&c, 0, sizeof c);
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (left_out != NULL)
        *left_out = 0;
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
    out->kernels = calloc((size_t)c.n, sizeof *out->kernels);
    out->winners = calloc((size_t)c.n, sizeof *out->winners);
    ids = calloc((size_t)c.n, sizeof *ids);
    if (out->kernels == NULL || out->winners == NULL || ids == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    snprintf(out->flashtune_version, sizeof out->flashtune_version, "%s", FT_VERSION_STRING);
    utc_now(out->created, sizeof out->created);
    out->device = c.rows[0].device;
    for (i = 0; i < c.n; i++) {
        const ft_db_row *row = &c.rows[i];
        ft_pack_winner *w;
        for (j = 0; j < out->nkernels && ids[j] != row->result.kernel_id; j++)
            ;
        if (j == out->nkernels) {
            ft_pack_kernel *pk = &out->kernels[j];
            rc = ft__db_kernel_get(db, row->result.kernel_id, &pk->k, err);
            if (rc != FT_OK)
                goto out;
            if (pk->k.cubin == NULL || pk->k.source == NULL) {
                free((void *)pk->k.source);
                free((void *)pk->k.cubin);
                memset(pk, 0, sizeof *pk);
                skipped++;
                continue;
            }
            pk->rows_per_block = ft__pack_rows_per_block(pk->k.variant);
            ids[j] = row->result.kernel_id;
            out->nkernels++;
        }
        w = &out->winners[out->nwinners++];
        w->kernel = j;
        w->r = row->result;
        w->r.device_id = 0;
        w->r.kernel_id = 0;
        snprintf(w->measured_at, sizeof w->measured_at, "%s", row->measured_at);
    }
    if (out->nwinners == 0) {
        rc = ft__fail(err, FT_ERR_NOT_FOUND, "%s: none of the %d winners of %s has a stored cubin "
                      "(tune again to store them)", ft__db_path(db), c.n, out->device.name);
        goto out;
    }
    rc = FT_OK;
out:
    if (rc != FT_OK && out != NULL)
        ft__pack_free(out);
    if (left_out != NULL)
        *left_out = skipped;
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
    uint8_t d[32];
    char hex[65];

    ft__sha256(data, size, d);
    ft__sha256_hex(d, hex);
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
        size_t slen = k->source != NULL ? strlen(k->source) : 0;
        if (k->cubin == NULL || k->cubin_size == 0 || k->source == NULL) {
            rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "%s: kernel %s has no cubin or no source", path, k->variant);
            goto out;
        }
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
        sb_key_string(&idx, "dtype", r->bucket.dtype);
        ft__sb_printf(&idx, ", \"head_dim\": %d, \"causal\": %d, \"seqlen_bucket\": %d, \"bh_bucket\": %d, "
                      "\"batch\": %d, \"heads_q\": %d, \"heads_kv\": %d, \"seqlen_q\": %d, \"seqlen_k\": %d, ",
                      r->bucket.head_dim, r->bucket.causal, r->bucket.seqlen_bucket, r->bucket.bh_bucket, r->batch,
                      r->heads_q, r->heads_kv, r->seqlen_q, r->seqlen_k);
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

/* ---- a small JSON reader (the index) ------------------------------------------------------ */

typedef enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jnode {
    jtype type;
    double num;
    char *str;      /* J_STR: the decoded string; J_OBJ members: their key */
    char *key;
    struct jnode *kids;
    int nkids;
} jnode;

typedef struct jparser {
    const char *p, *end;
    char why[128];
} jparser;

static void jfree(jnode *n)
{
    int i;

    if (n == NULL)
        return;
    for (i = 0; i < n->nkids; i++)
        jfree(&n->kids[i]);
    free(n->kids);
    free(n->str);
    free(n->key);
}

static void jskip(jparser *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static int jfail(jparser *j, const char *why)
{
    if (j->why[0] == '\0')
        snprintf(j->why, sizeof j->why, "%s", why);
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string literal at j->p (the opening quote) into a malloc'd, NUL-terminated string. */
static int jstring(jparser *j, char **out)
{
    ft_strbuf sb = FT_STRBUF_INIT;

    j->p++;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        if (c < 0x20) {
            ft__sb_free(&sb);
            return jfail(j, "a control character in a string");
        }
        if (c != '\\') {
            ft__sb_append(&sb, (const char *)&c, 1);
            continue;
        }
        if (j->p >= j->end)
            break;
        c = (unsigned char)*j->p++;
        switch (c) {
        case '"': case '\\': case '/': ft__sb_append(&sb, (const char *)&c, 1); break;
        case 'b': ft__sb_puts(&sb, "\b"); break;
        case 'f': ft__sb_puts(&sb, "\f"); break;
        case 'n': ft__sb_puts(&sb, "\n"); break;
        case 'r': ft__sb_puts(&sb, "\r"); break;
        case 't': ft__sb_puts(&sb, "\t"); break;
        case 'u': {
            unsigned v = 0;
            int i;
            char u[3];
            for (i = 0; i < 4; i++) {
                int h = j->p + i < j->end ? hexval(j->p[i]) : -1;
                if (h < 0) {
                    ft__sb_free(&sb);
                    return jfail(j, "a bad \\u escape");
                }
                v = v * 16 + (unsigned)h;
            }
            j->p += 4;
            if (v == 0 || v >= 0x800) { /* the writer only escapes control characters */
                ft__sb_free(&sb);
                return jfail(j, "an unsupported \\u escape");
            }
            if (v < 0x80) {
                u[0] = (char)v;
                ft__sb_append(&sb, u, 1);
            } else {
                u[0] = (char)(0xc0 | (v >> 6));
                u[1] = (char)(0x80 | (v & 0x3f));
                ft__sb_append(&sb, u, 2);
            }
            break;
        }
        default:
            ft__sb_free(&sb);
            return jfail(j, "a bad escape in a string");
        }
    }
    if (j->p >= j->end) {
        ft__sb_free(&sb);
        return jfail(j, "an unterminated string");
    }
    j->p++;
    if (sb.data == NULL && !sb.failed)
        ft__sb_puts(&sb, "");
    *out = ft__sb_take(&sb);
    return *out != NULL ? 1 : jfail(j, "out of memory");
}

static int jvalue(jparser *j, jnode *n, int depth);

static int jappend(jparser *j, jnode *n, jnode *kid)
{
    jnode *k = realloc(n->kids, (size_t)(n->nkids + 1) * sizeof *k);
    if (k == NULL) {
        jfree(kid);
        return jfail(j, "out of memory");
    }
    n->kids = k;
    n->kids[n->nkids++] = *kid;
    return 1;
}

static int jcontainer(jparser *j, jnode *n, int depth, char close)
{
    j->p++;
    jskip(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 1;
    }
    for (;;) {
        jnode kid;
        memset(&kid, 0, sizeof kid);
        jskip(j);
        if (close == '}') {
            if (j->p >= j->end || *j->p != '"')
                return jfail(j, "an object key is not a string");
            if (!jstring(j, &kid.key))
                return 0;
            jskip(j);
            if (j->p >= j->end || *j->p != ':') {
                free(kid.key);
                return jfail(j, "no ':' after an object key");
            }
            j->p++;
        }
        if (!jvalue(j, &kid, depth + 1)) {
            jfree(&kid);
            return 0;
        }
        if (!jappend(j, n, &kid))
            return 0;
        jskip(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return 1;
        }
        return jfail(j, close == '}' ? "an object is not closed" : "an array is not closed");
    }
}

static int jvalue(jparser *j, jnode *n, int depth)
{
    if (depth > MAX_JSON_DEPTH)
        return jfail(j, "nested too deeply");
    jskip(j);
    if (j->p >= j->end)
        return jfail(j, "it ends early");
    switch (*j->p) {
    case '{': n->type = J_OBJ; return jcontainer(j, n, depth, '}');
    case '[': n->type = J_ARR; return jcontainer(j, n, depth, ']');
    case '"': n->type = J_STR; return jstring(j, &n->str);
    default: break;
    }
    if (j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) {
        n->type = J_NULL;
        j->p += 4;
        return 1;
    }
    if (j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0) {
        n->type = J_BOOL;
        n->num = 1;
        j->p += 4;
        return 1;
    }
    if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0) {
        n->type = J_BOOL;
        j->p += 5;
        return 1;
    }
    if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
        char buf[64], *e;
        size_t len = 0;
        while (j->p + len < j->end && len < sizeof buf - 1 && strchr("+-0123456789.eE", j->p[len]) != NULL)
            len++;
        memcpy(buf, j->p, len);
        buf[len] = '\0';
        errno = 0;
        n->num = strtod(buf, &e);
        if (e != buf + len || errno != 0 || !isfinite(n->num))
            return jfail(j, "a malformed number");
        n->type = J_NUM;
        j->p += len;
        return 1;
    }
    return jfail(j, "an unexpected character");
}

/* ---- reading the index ------------------------------------------------------------------ */

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
        char msg[300];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        r->rc = ft__fail(r->err, FT_ERR_CORRUPT, "%s is a corrupt flashtune pack: %s%s%s", r->name, msg,
                         in != NULL ? " in " : "", in != NULL ? in : "");
    }
    return 0;
}

static const jnode *jget(const jnode *obj, const char *key)
{
    int i;

    if (obj == NULL || obj->type != J_OBJ)
        return NULL;
    for (i = 0; i < obj->nkids; i++)
        if (obj->kids[i].key != NULL && strcmp(obj->kids[i].key, key) == 0)
            return &obj->kids[i];
    return NULL;
}

static int get_str(reader *r, const jnode *obj, const char *key, char *out, size_t cap, const char *in)
{
    const jnode *n = jget(obj, key);

    if (n == NULL || n->type != J_STR)
        return bad(r, in, "the string '%s' is missing", key);
    if (strlen(n->str) >= cap)
        return bad(r, in, "'%s' is too long", key);
    memcpy(out, n->str, strlen(n->str) + 1);
    return 1;
}

static int get_ll(reader *r, const jnode *obj, const char *key, long long min, long long max, long long *out,
                  const char *in)
{
    const jnode *n = jget(obj, key);

    if (n == NULL || n->type != J_NUM || n->num != floor(n->num) || n->num < (double)min || n->num > (double)max)
        return bad(r, in, "the integer '%s' is missing or out of range", key);
    *out = (long long)n->num;
    return 1;
}

static int get_int(reader *r, const jnode *obj, const char *key, long long min, long long max, int *out,
                   const char *in)
{
    long long v = 0;

    if (!get_ll(r, obj, key, min, max, &v, in))
        return 0;
    *out = (int)v;
    return 1;
}

/* A number or null (NAN). */
static int get_real(reader *r, const jnode *obj, const char *key, double *out, const char *in)
{
    const jnode *n = jget(obj, key);

    if (n != NULL && n->type == J_NULL) {
        *out = NAN;
        return 1;
    }
    if (n == NULL || n->type != J_NUM)
        return bad(r, in, "the number '%s' is missing", key);
    *out = n->num;
    return 1;
}

/* A blob's range and checksum; its bytes copied (with a NUL after them). */
static int get_blob(reader *r, const jnode *kernel, const char *key, const unsigned char *blobs, size_t nblobs,
                    void **out, size_t *size, const char *in)
{
    const jnode *b = jget(kernel, key);
    long long off = 0, len = 0;
    char want[65], hex[65];
    uint8_t d[32];
    char *copy;

    if (b == NULL || b->type != J_OBJ)
        return bad(r, in, "the blob '%s' is missing", key);
    if (!get_ll(r, b, "offset", 0, (long long)nblobs, &off, in) || !get_ll(r, b, "size", 1, (long long)nblobs, &len, in) ||
        !get_str(r, b, "sha256", want, sizeof want, in))
        return 0;
    if ((size_t)off + (size_t)len > nblobs)
        return bad(r, in, "the %s lies outside the file", key);
    ft__sha256(blobs + off, (size_t)len, d);
    ft__sha256_hex(d, hex);
    if (strcmp(hex, want) != 0)
        return bad(r, in, "the %s's sha256 does not match", key);
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
    return 1;
}

static int read_kernel(reader *r, const jnode *n, const unsigned char *blobs, size_t nblobs, ft_pack_kernel *pk,
                       int index)
{
    ft_db_kernel *k = &pk->k;
    char in[48];
    void *cubin = NULL, *source = NULL;
    size_t cubin_size = 0, source_size = 0;
    int ok;

    snprintf(in, sizeof in, "kernel %d", index);
    if (n->type != J_OBJ)
        return bad(r, NULL, "%s is not an object", in);
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
         get_blob(r, n, "cubin", blobs, nblobs, &cubin, &cubin_size, in) &&
         get_blob(r, n, "source", blobs, nblobs, &source, &source_size, in);
    if (ok && (k->entry[0] == '\0' || k->arch[0] == '\0' || k->source_hash[0] == '\0'))
        ok = bad(r, NULL, "%s has an empty entry, arch or source hash", in);
    if (ok && strlen(source) != source_size)
        ok = bad(r, NULL, "the source of %s holds a NUL byte", in);
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

static int read_winner(reader *r, const jnode *n, int nkernels, ft_pack_winner *w, int index)
{
    ft_db_result *res = &w->r;
    char in[48];
    int ok;

    snprintf(in, sizeof in, "winner %d", index);
    if (n->type != J_OBJ)
        return bad(r, NULL, "%s is not an object", in);
    ok = get_int(r, n, "kernel", 0, nkernels - 1, &w->kernel, in) &&
         get_str(r, n, "dtype", res->bucket.dtype, sizeof res->bucket.dtype, in) &&
         get_int(r, n, "head_dim", 1, 1 << 16, &res->bucket.head_dim, in) &&
         get_int(r, n, "causal", 0, 1, &res->bucket.causal, in) &&
         get_int(r, n, "seqlen_bucket", 1, 1 << 30, &res->bucket.seqlen_bucket, in) &&
         get_int(r, n, "bh_bucket", 1, 1 << 30, &res->bucket.bh_bucket, in) &&
         get_int(r, n, "batch", 1, 1 << 30, &res->batch, in) &&
         get_int(r, n, "heads_q", 1, 1 << 30, &res->heads_q, in) &&
         get_int(r, n, "heads_kv", 1, 1 << 30, &res->heads_kv, in) &&
         get_int(r, n, "seqlen_q", 1, 1 << 30, &res->seqlen_q, in) &&
         get_int(r, n, "seqlen_k", 1, 1 << 30, &res->seqlen_k, in) &&
         get_real(r, n, "median_ms", &res->median_ms, in) && get_real(r, n, "iqr_ms", &res->iqr_ms, in) &&
         get_real(r, n, "tflops", &res->tflops, in) && get_real(r, n, "max_error", &res->max_error, in) &&
         get_int(r, n, "repetitions", 0, 1 << 30, &res->repetitions, in) &&
         get_str(r, n, "measured_at", w->measured_at, sizeof w->measured_at, in);
    if (!ok)
        return 0;
    if (strcmp(res->bucket.dtype, "f16") != 0 && strcmp(res->bucket.dtype, "bf16") != 0)
        return bad(r, NULL, "%s has an unknown dtype", in);
    if (!is_pow2(res->bucket.seqlen_bucket) || !is_pow2(res->bucket.bh_bucket))
        return bad(r, NULL, "%s's buckets are not powers of two", in);
    if (isnan(res->median_ms) || res->median_ms <= 0)
        return bad(r, NULL, "%s has no measured time", in);
    res->status = FT_RESULT_OK;
    return 1;
}

static ft_status read_index(const jnode *root, const unsigned char *blobs, size_t nblobs, const char *name,
                            ft_pack *p, ft_err *err)
{
    reader r = {name, err, FT_OK};
    const jnode *dev, *kernels, *winners;
    char format[32];
    int version = 0, i, j;

    if (root->type != J_OBJ) {
        bad(&r, NULL, "the index is %s", "not an object");
        goto out;
    }
    if (!get_str(&r, root, "format", format, sizeof format, "the index") ||
        !get_int(&r, root, "version", 1, FT_PACK_VERSION, &version, "the index") ||
        !get_str(&r, root, "flashtune", p->flashtune_version, sizeof p->flashtune_version, "the index") ||
        !get_str(&r, root, "created", p->created, sizeof p->created, "the index"))
        goto out;
    if (strcmp(format, "flashtune-pack") != 0) {
        bad(&r, NULL, "the index's format is '%s'", format);
        goto out;
    }
    dev = jget(root, "device");
    if (dev == NULL || dev->type != J_OBJ) {
        bad(&r, NULL, "%s is missing", "the device");
        goto out;
    }
    if (!get_str(&r, dev, "name", p->device.name, sizeof p->device.name, "the device") ||
        !get_int(&r, dev, "cc", 10, 1000, &p->device.cc, "the device") ||
        !get_int(&r, dev, "sms", 1, 1 << 20, &p->device.sms, "the device") ||
        !get_ll(&r, dev, "smem_per_block", 0, 1LL << 40, &p->device.smem_per_block, "the device") ||
        !get_ll(&r, dev, "smem_per_sm", 0, 1LL << 40, &p->device.smem_per_sm, "the device") ||
        !get_ll(&r, dev, "l2_bytes", 0, 1LL << 50, &p->device.l2_bytes, "the device") ||
        !get_int(&r, dev, "driver_version", 0, 1 << 30, &p->device.driver_version, "the device") ||
        !get_str(&r, dev, "nvrtc_version", p->device.nvrtc_version, sizeof p->device.nvrtc_version, "the device"))
        goto out;
    kernels = jget(root, "kernels");
    winners = jget(root, "winners");
    if (kernels == NULL || kernels->type != J_ARR || winners == NULL || winners->type != J_ARR) {
        bad(&r, NULL, "%s are missing", "the kernels or the winners");
        goto out;
    }
    if (winners->nkids == 0 || kernels->nkids == 0) {
        bad(&r, NULL, "%s", "it holds no winners");
        goto out;
    }
    p->kernels = calloc((size_t)kernels->nkids, sizeof *p->kernels);
    p->winners = calloc((size_t)winners->nkids, sizeof *p->winners);
    if (p->kernels == NULL || p->winners == NULL) {
        r.rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory reading %s", name);
        goto out;
    }
    for (i = 0; i < kernels->nkids; i++) {
        if (!read_kernel(&r, &kernels->kids[i], blobs, nblobs, &p->kernels[i], i))
            goto out;
        p->nkernels++;
    }
    for (i = 0; i < winners->nkids; i++) {
        if (!read_winner(&r, &winners->kids[i], p->nkernels, &p->winners[i], i))
            goto out;
        p->nwinners++;
        for (j = 0; j < i; j++) {
            if (ft__db_bucket_equal(&p->winners[j].r.bucket, &p->winners[i].r.bucket)) {
                char in[48];
                snprintf(in, sizeof in, "winner %d", i);
                bad(&r, NULL, "%s repeats an earlier bucket", in);
                goto out;
            }
        }
    }
out:
    return r.rc;
}

ft_status ft__pack_parse(const void *data, size_t size, const char *name, ft_pack *out, ft_err *err)
{
    const char *text = data, *nl, *p;
    ft_status rc = FT_ERR_CORRUPT;
    char header[200], hex[65], sum[65];
    unsigned long long ilen = 0, blen = 0;
    long version;
    size_t hlen;
    uint8_t digest[32];
    jparser j;
    jnode root;
    char *end;
    int n = 0;

    memset(&root, 0, sizeof root);
    if (out == NULL || (data == NULL && size > 0))
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__pack_parse: NULL argument");
    memset(out, 0, sizeof *out);
    if (name == NULL)
        name = "the pack";
    if (size < strlen(FT_PACK_MAGIC) + 1 || memcmp(text, FT_PACK_MAGIC " ", strlen(FT_PACK_MAGIC) + 1) != 0) {
        ft__fail(err, rc, "%s is not a flashtune pack (it does not start with \"%s \")", name, FT_PACK_MAGIC);
        goto out;
    }
    nl = memchr(text, '\n', size < sizeof header ? size : sizeof header);
    if (nl == NULL) {
        ft__fail(err, rc, "%s is a corrupt flashtune pack: the header line is not terminated", name);
        goto out;
    }
    hlen = (size_t)(nl - text) + 1;
    memcpy(header, text, hlen - 1);
    header[hlen - 1] = '\0';
    p = header + strlen(FT_PACK_MAGIC) + 1;
    errno = 0;
    version = strtol(p, &end, 10);
    if (end == p || *end != ' ' || errno != 0 || version < 1) {
        ft__fail(err, rc, "%s is a corrupt flashtune pack: the header has no format version", name);
        goto out;
    }
    if (version > FT_PACK_VERSION) {
        rc = ft__fail(err, FT_ERR_UNSUPPORTED,
                      "%s is a flashtune pack of format version %ld; this flashtune (%s) reads version %d "
                      "(a newer flashtune wrote it)", name, version, FT_VERSION_STRING, FT_PACK_VERSION);
        goto out;
    }
    if (sscanf(end, " %llu %llu %64[0-9a-f]%n", &ilen, &blen, hex, &n) != 3 || end[n] != '\0' || strlen(hex) != 64 ||
        ilen < 2) {
        ft__fail(err, rc, "%s is a corrupt flashtune pack: a malformed header line", name);
        goto out;
    }
    if (ilen > size || blen > size || hlen + ilen + blen != size) {
        ft__fail(err, rc, "%s is a corrupt flashtune pack: its header announces %llu bytes, the file has %zu (%s)",
                 name, (unsigned long long)hlen + ilen + blen, size,
                 size < hlen + ilen + blen ? "truncated" : "extra bytes at the end");
        goto out;
    }
    ft__sha256(text + hlen, size - hlen, digest);
    ft__sha256_hex(digest, sum);
    if (strcmp(sum, hex) != 0) {
        ft__fail(err, rc, "%s is a corrupt flashtune pack: the sha256 of its content is %.12s..., the header says "
                 "%.12s... (a damaged or altered file)", name, sum, hex);
        goto out;
    }
    memset(&j, 0, sizeof j);
    j.p = text + hlen;
    j.end = text + hlen + ilen;
    if (!jvalue(&j, &root, 0) || (jskip(&j), j.p != j.end)) {
        ft__fail(err, rc, "%s is a corrupt flashtune pack: its index is not valid JSON (%s at byte %zu)", name,
                 j.why[0] ? j.why : "text after the end", (size_t)(j.p - text));
        goto out;
    }
    rc = read_index(&root, (const unsigned char *)text + hlen + ilen, (size_t)blen, name, out, err);
    if (rc == FT_OK)
        memcpy(out->sha256, sum, sizeof sum);
out:
    jfree(&root);
    if (rc != FT_OK)
        ft__pack_free(out);
    return rc;
}

ft_status ft__pack_read(const char *path, ft_pack *out, ft_err *err)
{
    char *data = NULL;
    size_t size = 0;
    ft_status rc;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (path == NULL || out == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__pack_read: NULL argument");
    rc = ft__read_file(path, &data, &size, err);
    if (rc == FT_OK)
        rc = ft__pack_parse(data, size, path, out, err);
    free(data);
    return rc;
}

/* ---- the kernel-set view ------------------------------------------------------------------ */

static ft_dtype dtype_of(const char *s)
{
    return strcmp(s, "bf16") == 0 ? FT_BF16 : FT_F16;
}

ft_status ft__pack_kernel_set(ft_pack *p, const ft_kernel_set **out, ft_err *err)
{
    int i;

    if (p == NULL || out == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__pack_kernel_set: NULL argument");
    *out = NULL;
    free(p->entries);
    p->entries = calloc((size_t)(p->nwinners > 0 ? p->nwinners : 1), sizeof *p->entries);
    if (p->entries == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < p->nwinners; i++) {
        const ft_pack_winner *w = &p->winners[i];
        const ft_pack_kernel *pk = &p->kernels[w->kernel];
        ft_kernel_set_entry *e = &p->entries[i];
        e->dtype = dtype_of(w->r.bucket.dtype);
        e->head_dim = w->r.bucket.head_dim;
        e->causal = w->r.bucket.causal;
        e->seqlen_bucket = w->r.bucket.seqlen_bucket;
        e->bh_bucket = w->r.bucket.bh_bucket;
        e->variant = pk->k.variant;
        e->family = pk->k.family;
        e->entry = pk->k.entry;
        e->threads = pk->k.threads;
        e->rows_per_block = pk->rows_per_block;
        e->smem_dynamic = pk->k.smem_dynamic;
        e->cubin = pk->k.cubin;
        e->cubin_size = pk->k.cubin_size;
        e->median_ms = w->r.median_ms;
    }
    memset(&p->set, 0, sizeof p->set);
    p->set.version = FT_KERNEL_SET_VERSION;
    p->set.device_name = p->device.name;
    p->set.cc = p->device.cc;
    p->set.sms = p->device.sms;
    p->set.smem_per_block = p->device.smem_per_block;
    p->set.smem_per_sm = p->device.smem_per_sm;
    p->set.l2_bytes = p->device.l2_bytes;
    p->set.driver_version = p->device.driver_version;
    p->set.nvrtc_version = p->device.nvrtc_version;
    p->set.flashtune_version = p->flashtune_version;
    p->set.created = p->created;
    p->set.count = p->nwinners;
    p->set.entries = p->entries;
    *out = &p->set;
    return FT_OK;
}

ft_status ft__kernel_set_check(const ft_kernel_set *s, ft_err *err)
{
    int i;

    if (s == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the kernel set is NULL");
    if (s->version != FT_KERNEL_SET_VERSION)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the kernel set has version %d; this library reads version %d "
                        "(export it again with this flashtune)", s->version, FT_KERNEL_SET_VERSION);
    if (s->count < 0 || (s->count > 0 && s->entries == NULL) || s->device_name == NULL || s->cc <= 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the kernel set has no entries, device name or compute capability");
    for (i = 0; i < s->count; i++) {
        const ft_kernel_set_entry *e = &s->entries[i];
        if ((e->dtype != FT_F16 && e->dtype != FT_BF16) || e->head_dim <= 0 || (e->causal != 0 && e->causal != 1) ||
            !is_pow2(e->seqlen_bucket) || !is_pow2(e->bh_bucket) || e->entry == NULL || e->entry[0] == '\0' ||
            e->cubin == NULL || e->cubin_size == 0 || e->threads <= 0 || e->rows_per_block <= 0 ||
            e->smem_dynamic < 0 || e->variant == NULL || e->family == NULL)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "entry %d of the kernel set (%s) is malformed", i,
                            e->variant != NULL ? e->variant : "no variant");
    }
    return FT_OK;
}

void ft__kernel_set_bucket(const ft_kernel_set_entry *e, ft_db_bucket *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->dtype, sizeof out->dtype, "%s", e->dtype == FT_BF16 ? "bf16" : "f16");
    out->head_dim = e->head_dim;
    out->causal = e->causal != 0;
    out->seqlen_bucket = e->seqlen_bucket;
    out->bh_bucket = e->bh_bucket;
}

static int cmp_entry(const void *a, const void *b)
{
    const ft_kernel_set_entry *x = *(const ft_kernel_set_entry *const *)a, *y = *(const ft_kernel_set_entry *const *)b;

    if (x->dtype != y->dtype)
        return (int)x->dtype - (int)y->dtype;
    if (x->head_dim != y->head_dim)
        return x->head_dim - y->head_dim;
    if (x->causal != y->causal)
        return x->causal - y->causal;
    if (x->seqlen_bucket != y->seqlen_bucket)
        return x->seqlen_bucket < y->seqlen_bucket ? -1 : 1;
    return x->bh_bucket < y->bh_bucket ? -1 : x->bh_bucket > y->bh_bucket;
}

void ft__pack_list(const ft_kernel_set *s, ft_pack_line_fn fn, void *ud)
{
    const ft_kernel_set_entry **order;
    int i;

    order = malloc((size_t)(s->count > 0 ? s->count : 1) * sizeof *order);
    if (order == NULL)
        return;
    for (i = 0; i < s->count; i++)
        order[i] = &s->entries[i];
    qsort(order, (size_t)s->count, sizeof *order, cmp_entry);
    for (i = 0; i < s->count; i++) {
        const ft_kernel_set_entry *e = order[i];
        char line[1200], hex[65];
        uint8_t d[32];
        ft__sha256(e->cubin, e->cubin_size, d);
        ft__sha256_hex(d, hex);
        snprintf(line, sizeof line, "%s %d %d %d %d %s %s %d %d %lld %zu %s", e->dtype == FT_BF16 ? "bf16" : "f16",
                 e->head_dim, e->causal, e->seqlen_bucket, e->bh_bucket, e->variant ? e->variant : "-", e->entry,
                 e->threads, e->rows_per_block, e->smem_dynamic, e->cubin_size, hex);
        fn(ud, line);
    }
    free(order);
}

/* ---- the C source ------------------------------------------------------------------------- */

static void c_string(FILE *f, const char *s)
{
    const unsigned char *p;

    fputc('"', f);
    for (p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f || *p == '?') /* '?': no trigraphs */
            fprintf(f, "\\%03o", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void c_double(FILE *f, double v)
{
    if (isnan(v) || isinf(v))
        fputs("0.0", f);
    else
        fprintf(f, "%.17g", v);
}

ft_status ft__pack_write_c(const ft_pack *p, const char *path, const char *symbol, ft_err *err)
{
    ft_status rc = FT_ERR_IO;
    char *text = NULL;
    size_t size = 0;
    FILE *f = NULL;
    size_t b;
    int i;

    if (p == NULL || path == NULL || symbol == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__pack_write_c: NULL argument");
    f = open_memstream(&text, &size);
    if (f == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
        goto out;
    }
    fprintf(f, "/*\n * Pretuned flashtune kernels for %s (compute capability %d.%d, %d SMs, driver %d, NVRTC %s):\n"
               " * %d buckets, %d kernels.\n"
               " * Generated by `flashtune export --format c` (flashtune %s) on %s. Do not edit.\n"
               " *\n"
               " * Compile this file into the application and hand the set to the runtime:\n"
               " *     extern const ft_kernel_set %s;\n"
               " *     ft_context_options o;\n"
               " *     ft_context_options_init(&o);\n"
               " *     o.kernels = &%s;\n"
               " *     ft_context_create(&o, &ctx);\n"
               " */\n"
               "#include <stddef.h>\n\n#include \"flashtune.h\"\n\n",
            p->device.name, p->device.cc / 10, p->device.cc % 10, p->device.sms, p->device.driver_version,
            p->device.nvrtc_version, p->nwinners, p->nkernels, p->flashtune_version, p->created, symbol, symbol);
    for (i = 0; i < p->nkernels; i++) {
        const ft_db_kernel *k = &p->kernels[i].k;
        const unsigned char *c = k->cubin;
        fprintf(f, "/* %s */\nstatic _Alignas(16) const unsigned char %s_cubin_%d[%zu] = {", k->variant, symbol, i,
                k->cubin_size);
        for (b = 0; b < k->cubin_size; b++)
            fprintf(f, "%s%u,", b % 24 == 0 ? "\n    " : "", c[b]);
        fprintf(f, "\n};\n\n");
    }
    fprintf(f, "static const ft_kernel_set_entry %s_entries[%d] = {\n", symbol, p->nwinners);
    for (i = 0; i < p->nwinners; i++) {
        const ft_pack_winner *w = &p->winners[i];
        const ft_pack_kernel *pk = &p->kernels[w->kernel];
        fprintf(f, "    {.dtype = %s, .head_dim = %d, .causal = %d, .seqlen_bucket = %d, .bh_bucket = %d,\n"
                   "     .variant = ", strcmp(w->r.bucket.dtype, "bf16") == 0 ? "FT_BF16" : "FT_F16",
                w->r.bucket.head_dim, w->r.bucket.causal, w->r.bucket.seqlen_bucket, w->r.bucket.bh_bucket);
        c_string(f, pk->k.variant);
        fprintf(f, ", .family = ");
        c_string(f, pk->k.family);
        fprintf(f, ",\n     .entry = ");
        c_string(f, pk->k.entry);
        fprintf(f, ",\n     .threads = %d, .rows_per_block = %d, .smem_dynamic = %lld,\n"
                   "     .cubin = %s_cubin_%d, .cubin_size = sizeof %s_cubin_%d, .median_ms = ",
                pk->k.threads, pk->rows_per_block, pk->k.smem_dynamic, symbol, w->kernel, symbol, w->kernel);
        c_double(f, w->r.median_ms);
        fprintf(f, "},\n");
    }
    fprintf(f, "};\n\nextern const ft_kernel_set %s;\nconst ft_kernel_set %s = {\n    .version = %d,\n"
               "    .device_name = ", symbol, symbol, FT_KERNEL_SET_VERSION);
    c_string(f, p->device.name);
    fprintf(f, ",\n    .cc = %d, .sms = %d, .smem_per_block = %lld, .smem_per_sm = %lld, .l2_bytes = %lld,\n"
               "    .driver_version = %d, .nvrtc_version = ", p->device.cc, p->device.sms, p->device.smem_per_block,
            p->device.smem_per_sm, p->device.l2_bytes, p->device.driver_version);
    c_string(f, p->device.nvrtc_version);
    fprintf(f, ",\n    .flashtune_version = ");
    c_string(f, p->flashtune_version);
    fprintf(f, ", .created = ");
    c_string(f, p->created);
    fprintf(f, ",\n    .count = %d, .entries = %s_entries,\n};\n", p->nwinners, symbol);
    if (fclose(f) != 0) {
        f = NULL;
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
        goto out;
    }
    f = NULL;
    rc = ft__write_file_atomic(path, text, size, FT_WRITE_DURABLE, err);
out:
    if (f != NULL)
        fclose(f);
    free(text);
    return rc;
}

/* ---- merging into a database ---------------------------------------------------------------- */

ft_status ft__pack_import(ft_db *db, const ft_pack *p, const ft_db_device *as, int *winning, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    long long device_id = -1, *ids = NULL;
    int i, began = 0, won = 0;

    if (winning != NULL)
        *winning = 0;
    if (db == NULL || p == NULL) {
        ft__fail(err, rc, "ft__pack_import: NULL argument");
        goto out;
    }
    ids = calloc((size_t)(p->nkernels > 0 ? p->nkernels : 1), sizeof *ids);
    if (ids == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    rc = ft__db_batch_begin(db, err);
    if (rc != FT_OK)
        goto out;
    began = 1;
    rc = ft__db_device_id(db, as != NULL ? as : &p->device, &device_id, err);
    for (i = 0; i < p->nkernels && rc == FT_OK; i++)
        rc = ft__db_kernel_id(db, &p->kernels[i].k, &ids[i], err);
    for (i = 0; i < p->nwinners && rc == FT_OK; i++) {
        ft_db_result r = p->winners[i].r;
        r.device_id = device_id;
        r.kernel_id = ids[p->winners[i].kernel];
        r.status = FT_RESULT_OK;
        r.reason[0] = '\0';
        rc = ft__db_record(db, &r, err);
        if (rc == FT_OK && p->winners[i].measured_at[0] != '\0')
            rc = ft__db_set_measured_at(db, &r, p->winners[i].measured_at, err);
    }
    /* Which of them now win their bucket (a faster local result, or a stale version, may not). */
    for (i = 0; i < p->nwinners && rc == FT_OK; i++) {
        ft_db_row row;
        int found = 0;
        rc = ft__db_winner(db, device_id, &p->winners[i].r.bucket, &row, NULL, NULL, &found, err);
        if (rc == FT_OK && found && row.result.kernel_id == ids[p->winners[i].kernel])
            won++;
    }
out:
    if (began)
        rc = ft__db_batch_end(db, rc, err);
    if (rc == FT_OK && winning != NULL)
        *winning = won;
    free(ids);
    return rc;
}
