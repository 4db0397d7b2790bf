/*
 * Kernel packs: writing, reading and checking the file (the format is in pack.h), the C
 * source export, the kernel-set view the runtime uses, and the merge into a database.
 *
 * A pack comes from elsewhere: every check of its content is in ft__pack_check, which reading,
 * writing, the C export and the merge all go through, so that what export writes, import and
 * the runtime accept, and what they accept, they have checked.
 */
#define _POSIX_C_SOURCE 200809L
#include "tuning_db/pack.h"

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
#include "generator/family.h"
#include "runtime/dispatch.h"

#define MAX_JSON_DEPTH 4   /* the index: root, kernels, a kernel, its blob */
#define MAX_HEADER 200     /* bytes of the header line, newline included */

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

/* The integer value of parameter `name` in a variant string, or def (absent, malformed, or not
 * a positive integer). */
static int variant_value(const char *variant, const char *name, int def)
{
    char v[32], *end = NULL;
    long x;

    if (ft__variant_text_value(variant, name, v, sizeof v) != 1)
        return def;
    errno = 0;
    x = strtol(v, &end, 10);
    return errno == 0 && *end == '\0' && x > 0 && x <= 1 << 20 ? (int)x : def;
}

int ft__pack_rows_per_block(const char *variant)
{
    return variant_value(variant, "bm", 64);
}

ft_status ft__kernel_set_load(const ft_cuda *cu, const ft_arch *arch, const ft_kernel_set_entry *e, ft_kernel *out,
                              ft_err *err)
{
    const ft_family *fam = ft__family_find(e->family);
    char why[300];
    ft_status rc;

    if (fam == NULL)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s: unknown kernel family '%s'", e->entry, e->family);
    if (!ft__family_supports_arch(fam, arch, why, sizeof why))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s: %s", e->entry, why);
    if (!ft__cubin_check(e->cubin, e->cubin_size, arch->cc, e->entry, why, sizeof why))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s cannot run on %s: %s", e->entry, arch->name, why);
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

static void sha256_hex_of(const void *data, size_t size, char hex[65])
{
    uint8_t d[32];

    ft__sha256(data, size, d);
    ft__sha256_hex(d, hex);
}

/* ---- what the strings of a pack may hold --------------------------------------------------- */

/* UTF-8 without control characters (C0, DEL, C1): text that is safe on a terminal. */
static int printable(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    while (*p != '\0') {
        unsigned c = *p;
        size_t n, i;
        if (c < 0x20 || c == 0x7f)
            return 0;
        if (c < 0x80) {
            p++;
            continue;
        }
        n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        if (n == 0 || c > 0xf4)
            return 0;
        for (i = 1; i < n; i++)
            if ((p[i] & 0xc0) != 0x80)
                return 0;
        if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) || (c == 0xf0 && p[1] < 0x90) ||
            (c == 0xf4 && p[1] >= 0x90))
            return 0;
        if (c == 0xc2 && p[1] < 0xa0) /* U+0080..U+009F: C1 controls */
            return 0;
        p += n;
    }
    return 1;
}

static int all_of(const char *s, const char *set, size_t min_len)
{
    size_t n = strlen(s);

    return n >= min_len && strspn(s, set) == n;
}

#define LOWER_DIGITS_ "abcdefghijklmnopqrstuvwxyz0123456789_"
#define IDENT_ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"

static int hex64(const char *s)
{
    return strlen(s) == 64 && all_of(s, "0123456789abcdef", 64);
}

/* A C identifier (the kernel's function name in its cubin). */
static int identifier(const char *s)
{
    return all_of(s, IDENT_, 1) && !(s[0] >= '0' && s[0] <= '9');
}

/* "sm_90", "sm_90a". */
static int target_name(const char *s)
{
    size_t n = strlen(s), d;

    if (strncmp(s, "sm_", 3) != 0)
        return 0;
    d = strspn(s + 3, "0123456789");
    return d >= 2 && d <= 3 && (3 + d == n || (3 + d + 1 == n && s[n - 1] >= 'a' && s[n - 1] <= 'z'));
}

/* "2026-11-30 08:15:02", as the database writes CURRENT_TIMESTAMP. */
static int timestamp(const char *s)
{
    static const char form[] = "dddd-dd-dd dd:dd:dd";
    size_t i;

    if (strlen(s) != sizeof form - 1)
        return 0;
    for (i = 0; form[i] != '\0'; i++)
        if (form[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != form[i])
            return 0;
    return 1;
}

/* NaN (not measured) or a finite number >= 0. */
static int measure(double v)
{
    return isnan(v) || (isfinite(v) && v >= 0);
}

/* ---- the checks of a pack's content (ft__pack_check) ------------------------------------------ */

static int refuse(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int refuse(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return 0;
}

static int check_device(const ft_db_device *d, char *why, size_t cap)
{
    if (d->name[0] == '\0' || !printable(d->name))
        return refuse(why, cap, "the device's name is empty or holds control characters or invalid UTF-8");
    if (d->cc < 10 || d->cc > 999)
        return refuse(why, cap, "the device's compute capability %d is not one", d->cc);
    if (d->sms < 1 || d->smem_per_block < 0 || d->smem_per_sm < 0 || d->l2_bytes < 0 || d->driver_version < 0)
        return refuse(why, cap, "the device's multiprocessors, shared memory, L2 or driver are out of range");
    if (!all_of(d->nvrtc_version, "0123456789.", 1))
        return refuse(why, cap, "the device's NVRTC version is not digits and dots");
    return 1;
}

/* The checks of one kernel for device d (see ft__pack_check). */
static int check_kernel(const ft_pack_kernel *pk, const ft_db_device *d, char *why, size_t cap)
{
    const ft_db_kernel *k = &pk->k;
    char hex[65], msg[300];
    size_t slen;

    if (!all_of(k->family, LOWER_DIGITS_, 1) || !target_name(k->arch) || !identifier(k->entry) ||
        !hex64(k->template_hash) || !hex64(k->source_hash))
        return refuse(why, cap, "its family, target, entry or a hash is malformed");
    if (ft__variant_text_value(k->variant, "d", msg, sizeof msg) < 0) /* what it computes: check_winner */
        return refuse(why, cap, "its variant string is not comma-separated name=value pairs of letters, digits, "
                      "'_', '.' and '-'");
    if (k->cubin == NULL || k->cubin_size == 0 || k->source == NULL)
        return refuse(why, cap, "it has no cubin or no source");
    slen = strlen(k->source);
    if (slen == 0)
        return refuse(why, cap, "its source is empty");
    sha256_hex_of(k->source, slen, hex);
    if (strcmp(hex, k->source_hash) != 0)
        return refuse(why, cap, "its source_hash %.12s... is not the sha256 of its source (%.12s...)", k->source_hash,
                      hex);
    if (!ft__kernel_target_check(k->family, k->arch, d->cc, msg, sizeof msg))
        return refuse(why, cap, "%s", msg);
    if (!ft__cubin_check(k->cubin, k->cubin_size, d->cc, k->entry, msg, sizeof msg))
        return refuse(why, cap, "%s", msg);
    if (pk->rows_per_block != ft__pack_rows_per_block(k->variant))
        return refuse(why, cap, "it takes %d rows per block, its variant %d", pk->rows_per_block,
                      ft__pack_rows_per_block(k->variant));
    if (k->threads < 1 || k->threads > 1024 || k->registers < 0 || k->registers > 255 || k->spill_stores < 0 ||
        k->spill_loads < 0 || k->smem_static < 0 || k->smem_dynamic < 0 ||
        (d->smem_per_block > 0 && k->smem_static + k->smem_dynamic > d->smem_per_block))
        return refuse(why, cap, "its threads (%d), registers (%d) or shared memory (%lld + %lld bytes) are out of range "
                      "for the device (%lld bytes per block)", k->threads, k->registers, k->smem_static,
                      k->smem_dynamic, d->smem_per_block);
    if (!measure(k->compile_ms))
        return refuse(why, cap, "its compile time is negative");
    return 1;
}

/* The checks of one winner with its kernel (see ft__pack_check). */
static int check_winner(const ft_pack_winner *w, const ft_pack_kernel *pk, char *why, size_t cap)
{
    const ft_db_result *r = &w->r;
    const ft_db_bucket *b = &r->bucket;
    ft_db_bucket shape;
    char msg[300];

    if (strcmp(b->dtype, "f16") != 0 && strcmp(b->dtype, "bf16") != 0)
        return refuse(why, cap, "its dtype is not f16 or bf16");
    if (b->head_dim < 1 || b->head_dim > 4096 || (b->causal != 0 && b->causal != 1))
        return refuse(why, cap, "its head dim or causality is out of range");
    if (!is_pow2(b->seqlen_bucket) || !is_pow2(b->bh_bucket) || b->seqlen_bucket < 64)
        return refuse(why, cap, "its buckets (seqlen %d, b*h %d) are not powers of two (seqlen at least 64)",
                      b->seqlen_bucket, b->bh_bucket);
    if (r->batch < 1 || r->heads_q < 1 || r->heads_kv < 1 || r->heads_q % r->heads_kv != 0 || r->seqlen_q < 1 ||
        r->seqlen_k < 1)
        return refuse(why, cap, "its shape is not one (batch, heads and lengths positive, heads_q a multiple of "
                      "heads_kv)");
    ft__db_bucket(b->dtype, b->head_dim, b->causal, r->batch, r->heads_q, r->seqlen_q, r->seqlen_k, &shape);
    if (!ft__db_bucket_equal(&shape, b))
        return refuse(why, cap, "its shape (b=%d,hq=%d,sq=%d,sk=%d) is in bucket seqlen<=%d b*h<=%d, not in its own "
                      "(seqlen<=%d, b*h<=%d)", r->batch, r->heads_q, r->seqlen_q, r->seqlen_k, shape.seqlen_bucket,
                      shape.bh_bucket, b->seqlen_bucket, b->bh_bucket);
    if (!(isfinite(r->median_ms) && r->median_ms > 0))
        return refuse(why, cap, "it has no positive measured time");
    if (!measure(r->iqr_ms) || !measure(r->tflops) || !measure(r->max_error) || r->repetitions < 0)
        return refuse(why, cap, "a measurement is negative or infinite");
    if (w->measured_at[0] != '\0' && !timestamp(w->measured_at))
        return refuse(why, cap, "its measured_at is not of the form 2026-11-30 08:15:02");
    if (!ft__variant_check(pk->k.variant, b->dtype, b->head_dim, b->causal, pk->rows_per_block, msg, sizeof msg))
        return refuse(why, cap, "%s", msg);
    return 1;
}

/* "kernel 3 (d=64,...)", the variant only when it is safe to print. */
static void kernel_name(const ft_pack *p, int i, char *out, size_t cap)
{
    const char *v = p->kernels[i].k.variant;
    char dummy[4];

    if (ft__variant_text_value(v, "d", dummy, sizeof dummy) >= 0)
        snprintf(out, cap, "kernel %d (%s)", i, v);
    else
        snprintf(out, cap, "kernel %d", i);
}

static int cmp_kernel(const void *a, const void *b)
{
    const ft_pack_kernel *x = *(const ft_pack_kernel *const *)a, *y = *(const ft_pack_kernel *const *)b;
    int c = strcmp(x->k.source_hash, y->k.source_hash);

    return c != 0 ? c : strcmp(x->k.arch, y->k.arch);
}

static int cmp_bucket(const ft_db_bucket *x, const ft_db_bucket *y)
{
    int c = strcmp(x->dtype, y->dtype);

    if (c != 0)
        return c;
    if (x->head_dim != y->head_dim)
        return x->head_dim < y->head_dim ? -1 : 1;
    if (x->causal != y->causal)
        return x->causal < y->causal ? -1 : 1;
    if (x->seqlen_bucket != y->seqlen_bucket)
        return x->seqlen_bucket < y->seqlen_bucket ? -1 : 1;
    return x->bh_bucket < y->bh_bucket ? -1 : x->bh_bucket > y->bh_bucket;
}

static int cmp_winner(const void *a, const void *b)
{
    const ft_pack_winner *x = *(const ft_pack_winner *const *)a, *y = *(const ft_pack_winner *const *)b;

    return cmp_bucket(&x->r.bucket, &y->r.bucket);
}

ft_status ft__pack_check(const ft_pack *p, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    const ft_pack_kernel **ko = NULL;
    const ft_pack_winner **wo = NULL;
    char *used = NULL, why[700], name[600];
    int i;

    if (p == NULL) {
        ft__fail(err, rc, "ft__pack_check: NULL argument");
        goto out;
    }
    if (p->nkernels < 1 || p->nkernels > FT_PACK_MAX_KERNELS || p->nwinners < 1 ||
        p->nwinners > FT_PACK_MAX_WINNERS || p->kernels == NULL || p->winners == NULL) {
        ft__fail(err, rc, "it holds %d kernels and %d winners (a pack holds 1 to %d kernels and 1 to %d winners)",
                 p->nkernels, p->nwinners, FT_PACK_MAX_KERNELS, FT_PACK_MAX_WINNERS);
        goto out;
    }
    if (!printable(p->flashtune_version) || !printable(p->created)) {
        ft__fail(err, rc, "its flashtune version or creation time holds control characters or invalid UTF-8");
        goto out;
    }
    if (!check_device(&p->device, why, sizeof why)) {
        ft__fail(err, rc, "%s", why);
        goto out;
    }
    ko = malloc((size_t)p->nkernels * sizeof *ko);
    wo = malloc((size_t)p->nwinners * sizeof *wo);
    used = calloc((size_t)p->nkernels, 1);
    if (ko == NULL || wo == NULL || used == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory checking a pack");
        goto out;
    }
    for (i = 0; i < p->nkernels; i++) {
        if (!check_kernel(&p->kernels[i], &p->device, why, sizeof why)) {
            kernel_name(p, i, name, sizeof name);
            ft__fail(err, rc, "%s: %s", name, why);
            goto out;
        }
        ko[i] = &p->kernels[i];
    }
    for (i = 0; i < p->nwinners; i++) {
        const ft_pack_winner *w = &p->winners[i];
        if (w->kernel < 0 || w->kernel >= p->nkernels) {
            ft__fail(err, rc, "winner %d: its kernel %d is not one of the %d", i, w->kernel, p->nkernels);
            goto out;
        }
        if (!check_winner(w, &p->kernels[w->kernel], why, sizeof why)) {
            kernel_name(p, w->kernel, name, sizeof name);
            ft__fail(err, rc, "winner %d (%s d=%d causal=%d seqlen<=%d b*h<=%d, %s): %s", i,
                     printable(w->r.bucket.dtype) ? w->r.bucket.dtype : "?", w->r.bucket.head_dim,
                     w->r.bucket.causal, w->r.bucket.seqlen_bucket, w->r.bucket.bh_bucket, name, why);
            goto out;
        }
        used[w->kernel] = 1;
        wo[i] = w;
    }
    for (i = 0; i < p->nkernels; i++) {
        if (!used[i]) {
            kernel_name(p, i, name, sizeof name);
            ft__fail(err, rc, "%s is the kernel of no winner", name);
            goto out;
        }
    }
    /* Sorted, so that many entries cost n log n. */
    qsort(ko, (size_t)p->nkernels, sizeof *ko, cmp_kernel);
    for (i = 1; i < p->nkernels; i++) {
        if (cmp_kernel(&ko[i - 1], &ko[i]) == 0) {
            int a = (int)(ko[i - 1] - p->kernels), b = (int)(ko[i] - p->kernels);
            ft__fail(err, rc, "kernels %d and %d have one source hash and target (%s)", a < b ? a : b, a < b ? b : a,
                     ko[i]->k.arch);
            goto out;
        }
    }
    qsort(wo, (size_t)p->nwinners, sizeof *wo, cmp_winner);
    for (i = 1; i < p->nwinners; i++) {
        if (cmp_winner(&wo[i - 1], &wo[i]) == 0) {
            int a = (int)(wo[i - 1] - p->winners), b = (int)(wo[i] - p->winners);
            ft__fail(err, rc, "winners %d and %d are of one bucket", a < b ? a : b, a < b ? b : a);
            goto out;
        }
    }
    rc = FT_OK;
out:
    free(ko);
    free(wo);
    free(used);
    return rc;
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

static void free_kernel(ft_pack_kernel *pk)
{
    free((void *)pk->k.source);
    free((void *)pk->k.cubin);
    memset(pk, 0, sizeof *pk);
}

/* Counts a winner left out because import would refuse it; keeps why for the first. */
static void note_refused(ft_pack_skipped *s, const ft_db_bucket *b, const char *variant, const char *why)
{
    if (s->refused == 0)
        snprintf(s->first, sizeof s->first, "%s d=%d causal=%d seqlen<=%d b*h<=%d (%s): %s",
                 printable(b->dtype) ? b->dtype : "?", b->head_dim, b->causal, b->seqlen_bucket, b->bh_bucket,
                 printable(variant) ? variant : "?", why);
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
    if (!check_device(&out->device, why, sizeof why)) {
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
    utc_now(out->created, sizeof out->created);
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
            cand.rows_per_block = ft__pack_rows_per_block(cand.k.variant);
            if (cand.k.cubin == NULL || cand.k.source == NULL) {
                skip.no_cubin++;
                free_kernel(&cand);
                continue;
            }
            if (!check_kernel(&cand, &out->device, why, sizeof why)) {
                note_refused(&skip, &row->result.bucket, cand.k.variant, why);
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
        if (!check_winner(&w, pk, why, sizeof why)) {
            note_refused(&skip, &w.r.bucket, pk->k.variant, why);
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

    sha256_hex_of(data, size, hex);
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
                        "reads version %d (a newer flashtune wrote it)", name, version, FT_VERSION_STRING,
                        FT_PACK_VERSION);
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
static const char *const winner_keys[] = {"kernel", "dtype", "head_dim", "causal", "seqlen_bucket", "bh_bucket",
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
            return bad(r, in, "an unknown key \"%.60s\"", printable(obj->kids[i].key) ? obj->kids[i].key : "?");
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
    sha256_hex_of(blobs + off, (size_t)len, hex);
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

static int read_winner(reader *r, const ft_json *n, int nkernels, ft_pack_winner *w, int index)
{
    ft_db_result *res = &w->r;
    char in[48];
    int ok;

    snprintf(in, sizeof in, "winner %d", index);
    if (!only_keys(r, n, winner_keys, in))
        return 0;
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
    res->status = FT_RESULT_OK;
    return 1;
}

static ft_status read_index(const ft_json *root, const unsigned char *blobs, size_t nblobs, const char *name,
                            ft_pack *p, ft_err *err)
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
        bad(&r, NULL, "the index's format is '%.20s'", printable(format) ? format : "?");
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
        if (!read_winner(&r, &winners->kids[i], p->nkernels, &p->winners[i], i))
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
    sha256_hex_of(text + h.hlen, size - h.hlen, sum);
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
    rc = read_index(&doc.root, (const unsigned char *)text + h.hlen + h.ilen, (size_t)h.blen, name, out, err);
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
        e->cubin = pk->k.cubin;      /* shared by the winners of one kernel, never copied */
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

void ft__kernel_set_bucket(const ft_kernel_set_entry *e, ft_db_bucket *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->dtype, sizeof out->dtype, "%s", e->dtype == FT_BF16 ? "bf16" : "f16");
    out->head_dim = e->head_dim;
    out->causal = e->causal != 0;
    out->seqlen_bucket = e->seqlen_bucket;
    out->bh_bucket = e->bh_bucket;
}

/* The checks of one entry of an application's kernel set, for a set of compute capability cc. */
static int check_entry(const ft_kernel_set_entry *e, int cc, char *why, size_t cap)
{
    const ft_family *fam;
    char msg[300];
    ft_arch a;

    if ((e->dtype != FT_F16 && e->dtype != FT_BF16) || e->head_dim <= 0 || (e->causal != 0 && e->causal != 1) ||
        !is_pow2(e->seqlen_bucket) || !is_pow2(e->bh_bucket))
        return refuse(why, cap, "its dtype, head dim, causality or buckets are malformed");
    if (e->entry == NULL || !identifier(e->entry) || strlen(e->entry) >= 256 || e->variant == NULL ||
        e->family == NULL || !all_of(e->family, LOWER_DIGITS_, 1))
        return refuse(why, cap, "its entry, variant or family is missing or malformed");
    if (e->cubin == NULL || e->cubin_size == 0 || e->threads <= 0 || e->threads > 1024 || e->rows_per_block <= 0 ||
        e->smem_dynamic < 0)
        return refuse(why, cap, "it has no cubin, or its threads, rows per block or shared memory are out of range");
    if (!ft__variant_check(e->variant, e->dtype == FT_BF16 ? "bf16" : "f16", e->head_dim, e->causal,
                           e->rows_per_block, msg, sizeof msg))
        return refuse(why, cap, "%s", msg);
    fam = ft__family_find(e->family);
    memset(&a, 0, sizeof a);
    snprintf(a.name, sizeof a.name, "sm_%d", cc);
    a.cc = cc;
    if (fam != NULL && !ft__family_supports_arch(fam, &a, msg, sizeof msg))
        return refuse(why, cap, "%s", msg);
    if (!ft__cubin_check(e->cubin, e->cubin_size, cc, e->entry, msg, sizeof msg))
        return refuse(why, cap, "%s", msg);
    return 1;
}

static int cmp_set_bucket(const void *a, const void *b)
{
    return cmp_bucket(a, b);
}

ft_status ft__kernel_set_check(const ft_kernel_set *s, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    ft_db_bucket *buckets = NULL;
    char why[400];
    int i;

    if (s == NULL) {
        ft__fail(err, rc, "the kernel set is NULL");
        goto out;
    }
    if (s->version != FT_KERNEL_SET_VERSION) {
        ft__fail(err, rc, "the kernel set has version %d; this library reads version %d (export it again with this "
                 "flashtune)", s->version, FT_KERNEL_SET_VERSION);
        goto out;
    }
    if (s->count < 0 || s->count > FT_PACK_MAX_WINNERS || (s->count > 0 && s->entries == NULL) ||
        s->device_name == NULL || s->cc < 10 || s->cc > 999) {
        ft__fail(err, rc, "the kernel set has no entries (or more than %d), no device name or no compute capability",
                 FT_PACK_MAX_WINNERS);
        goto out;
    }
    buckets = calloc((size_t)(s->count > 0 ? s->count : 1), sizeof *buckets);
    if (buckets == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory checking a kernel set");
        goto out;
    }
    for (i = 0; i < s->count; i++) {
        const ft_kernel_set_entry *e = &s->entries[i];
        if (!check_entry(e, s->cc, why, sizeof why)) {
            ft__fail(err, rc, "entry %d of the kernel set (%s) is malformed: %s", i,
                     e->variant != NULL && printable(e->variant) ? e->variant : "no variant", why);
            goto out;
        }
        ft__kernel_set_bucket(e, &buckets[i]);
    }
    qsort(buckets, (size_t)s->count, sizeof *buckets, cmp_set_bucket);
    for (i = 1; i < s->count; i++) {
        if (cmp_bucket(&buckets[i - 1], &buckets[i]) == 0) {
            ft__fail(err, rc, "the kernel set has two entries for %s d=%d causal=%d seqlen<=%d b*h<=%d",
                     buckets[i].dtype, buckets[i].head_dim, buckets[i].causal, buckets[i].seqlen_bucket,
                     buckets[i].bh_bucket);
            goto out;
        }
    }
    rc = FT_OK;
out:
    free(buckets);
    return rc;
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

ft_status ft__pack_list(const ft_kernel_set *s, ft_pack_line_fn fn, void *ud, ft_err *err)
{
    const ft_kernel_set_entry **order;
    int i;

    order = malloc((size_t)(s->count > 0 ? s->count : 1) * sizeof *order);
    if (order == NULL)
        return ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory listing %d winners", s->count);
    for (i = 0; i < s->count; i++)
        order[i] = &s->entries[i];
    qsort(order, (size_t)s->count, sizeof *order, cmp_entry);
    for (i = 0; i < s->count; i++) {
        const ft_kernel_set_entry *e = order[i];
        char line[1200], hex[65];
        sha256_hex_of(e->cubin, e->cubin_size, hex);
        snprintf(line, sizeof line, "%s %d %d %d %d %s %s %d %d %lld %zu %s", e->dtype == FT_BF16 ? "bf16" : "f16",
                 e->head_dim, e->causal, e->seqlen_bucket, e->bh_bucket, e->variant ? e->variant : "-", e->entry,
                 e->threads, e->rows_per_block, e->smem_dynamic, e->cubin_size, hex);
        fn(ud, line);
    }
    free(order);
    return FT_OK;
}

/* ---- the C source ------------------------------------------------------------------------- */

/* A string literal: '"', '\\', '?' (no trigraphs), '*' and '/' (no text that looks like a
 * comment) and every byte outside printable ASCII as three-digit octal escapes, which no
 * following character can extend. */
static void c_string(FILE *f, const char *s)
{
    const unsigned char *p;

    fputc('"', f);
    for (p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\' || *p == '?' || *p == '*' || *p == '/' || *p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\%03o", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Text inside a block comment: printable ASCII but '*', '/' (no "*" "/" can close the comment
 * and no "/" "*" open another), '\\' (no line splice) and '?' (no trigraph); those and every
 * other byte as \xHH. */
static void c_comment(FILE *f, const char *s)
{
    const unsigned char *p;

    for (p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p < 0x20 || *p >= 0x7f || *p == '*' || *p == '/' || *p == '\\' || *p == '?')
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

static void c_double(FILE *f, double v)
{
    if (isnan(v) || isinf(v))
        fputs("0.0", f);
    else
        fprintf(f, "%.17g", v);
}

int ft__c_identifier_check(const char *s, char *why, size_t cap)
{
    /* The keywords of C11 and C23 (C23's are macros of C11's headers), and GNU C's asm. */
    static const char *const keywords[] = {
        "alignas", "alignof", "auto", "bool", "break", "case", "char", "const", "constexpr", "continue",
        "default", "do", "double", "else", "enum", "extern", "false", "float", "for", "goto", "if", "inline",
        "int", "long", "nullptr", "register", "restrict", "return", "short", "signed", "sizeof", "static",
        "static_assert", "struct", "switch", "thread_local", "true", "typedef", "typeof", "typeof_unqual",
        "union", "unsigned", "void", "volatile", "while", "asm", NULL};
    /* What <stddef.h> and <stdint.h> (included by flashtune.h) define besides names ending in _t. */
    static const char *const macros[] = {"NULL", "offsetof", "unreachable", NULL};
    static const char *const macro_prefixes[] = {"INT", "UINT", "SIZE_", "PTRDIFF_", "SIG_ATOMIC_", "WCHAR_",
                                                 "WINT_", NULL};
    size_t n, i;

    if (s == NULL || s[0] == '\0')
        return refuse(why, cap, "it is empty");
    n = strlen(s);
    if (n > 63)
        return refuse(why, cap, "it is longer than 63 characters");
    if (!all_of(s, IDENT_, 1))
        return refuse(why, cap, "it holds characters other than letters, digits and '_'");
    if (s[0] >= '0' && s[0] <= '9')
        return refuse(why, cap, "it starts with a digit");
    if (s[0] == '_')
        return refuse(why, cap, "names starting with '_' are reserved for the C implementation");
    for (i = 0; keywords[i] != NULL; i++)
        if (strcmp(s, keywords[i]) == 0)
            return refuse(why, cap, "it is a keyword of C");
    if (strncmp(s, "ft_", 3) == 0 || strncmp(s, "FT_", 3) == 0 || strncmp(s, "FLASHTUNE_", 10) == 0)
        return refuse(why, cap, "names starting with ft_, FT_ or FLASHTUNE_ belong to flashtune.h");
    if (n >= 2 && strcmp(s + n - 2, "_t") == 0)
        return refuse(why, cap, "names ending in _t are reserved for types (those of <stddef.h> and <stdint.h>)");
    for (i = 0; macros[i] != NULL; i++)
        if (strcmp(s, macros[i]) == 0)
            return refuse(why, cap, "it is a macro of <stddef.h>");
    if (strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n)
        for (i = 0; macro_prefixes[i] != NULL; i++)
            if (strncmp(s, macro_prefixes[i], strlen(macro_prefixes[i])) == 0)
                return refuse(why, cap, "names of capitals starting with %s are macros of <stdint.h>",
                              macro_prefixes[i]);
    return 1;
}

ft_status ft__pack_write_c(const ft_pack *p, const char *path, const char *symbol, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    char *text = NULL, why[200];
    size_t size = 0;
    FILE *f = NULL;
    size_t b;
    int i, failed;

    if (p == NULL || path == NULL || symbol == NULL) {
        ft__fail(err, rc, "ft__pack_write_c: NULL argument");
        goto out;
    }
    if (!ft__c_identifier_check(symbol, why, sizeof why)) {
        ft__fail(err, rc, "%s: not written: '%.80s' cannot name the kernel set: %s", path,
                 printable(symbol) ? symbol : "?", why);
        goto out;
    }
    rc = ft__pack_check(p, err);
    if (rc != FT_OK) {
        ft__err_prefix(err, "%s: not written", path);
        goto out;
    }
    f = open_memstream(&text, &size);
    if (f == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
        goto out;
    }
    fputs("/*\n * Pretuned flashtune kernels for ", f);
    c_comment(f, p->device.name);
    fprintf(f, " (compute capability %d.%d, %d SMs, driver %d, NVRTC ", p->device.cc / 10, p->device.cc % 10,
            p->device.sms, p->device.driver_version);
    c_comment(f, p->device.nvrtc_version);
    fprintf(f, "):\n * %d buckets, %d kernels.\n * Generated by `flashtune export --format c` (flashtune ", p->nwinners,
            p->nkernels);
    c_comment(f, p->flashtune_version);
    fputs(") on ", f);
    c_comment(f, p->created);
    fprintf(f, ". Do not edit.\n"
               " *\n"
               " * Compile this file into the application and hand the set to the runtime:\n"
               " *     extern const ft_kernel_set %s;\n"
               " *     ft_context_options o;\n"
               " *     ft_context_options_init(&o);\n"
               " *     o.kernels = &%s;\n"
               " *     ft_context_create(&o, &ctx);\n"
               " */\n"
               "#include <stddef.h>\n\n#include \"flashtune.h\"\n\n",
            symbol, symbol);
    for (i = 0; i < p->nkernels; i++) {
        const ft_db_kernel *k = &p->kernels[i].k;
        const unsigned char *c = k->cubin;
        fputs("/* ", f);
        c_comment(f, k->variant);
        fprintf(f, " */\nstatic _Alignas(16) const unsigned char %s_cubin_%d[%zu] = {", symbol, i, k->cubin_size);
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
    failed = ferror(f) != 0;
    if (fclose(f) != 0)
        failed = 1;
    f = NULL;
    if (failed) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
        goto out;
    }
    rc = ft__write_file_atomic(path, text, size, FT_WRITE_DURABLE, err);
out:
    if (f != NULL)
        fclose(f);
    free(text);
    return rc;
}

/* ---- merging into a database ---------------------------------------------------------------- */

/* Whether the database's kernel of a pack kernel's source hash and target is that kernel. */
static int same_kernel(const ft_db_kernel *local, const ft_db_kernel *k, char *why, size_t cap)
{
    if (strcmp(local->family, k->family) != 0 || strcmp(local->variant, k->variant) != 0 ||
        strcmp(local->template_hash, k->template_hash) != 0 || strcmp(local->entry, k->entry) != 0)
        return refuse(why, cap, "it is %.64s %.300s there", local->family, local->variant);
    if (local->source != NULL && strcmp(local->source, k->source) != 0)
        return refuse(why, cap, "its source there is another");
    if (local->cubin != NULL &&
        (local->cubin_size != k->cubin_size || memcmp(local->cubin, k->cubin, k->cubin_size) != 0))
        return refuse(why, cap, "its cubin there is another (%zu bytes there, %zu in the pack)", local->cubin_size,
                      k->cubin_size);
    if (local->cubin != NULL &&
        (local->threads != k->threads || local->registers != k->registers || local->smem_static != k->smem_static ||
         local->smem_dynamic != k->smem_dynamic || local->spill_stores != k->spill_stores ||
         local->spill_loads != k->spill_loads))
        return refuse(why, cap, "its threads, registers, spills or shared memory there are others");
    return 1;
}

/* A pack never replaces a kernel of the database: each of its kernels is either new there or
 * the same. Looked up through a second, read-only handle, which sees the database as the batch
 * (holding the write lock) found it, without writing. */
static ft_status check_local_kernels(ft_db *db, const ft_pack *p, ft_err *err)
{
    ft_status rc;
    ft_db *ro = NULL;
    ft_db_kernel local;
    char why[500];
    ft_err e2;
    int i;

    memset(&local, 0, sizeof local);
    rc = ft__db_open(ft__db_path(db), 1, &ro, err);
    for (i = 0; i < p->nkernels && rc == FT_OK; i++) {
        const ft_db_kernel *k = &p->kernels[i].k;
        long long id = -1;
        ft_status r2 = ft__db_kernel_id(ro, k, &id, &e2);
        if (r2 == FT_ERR_NOT_FOUND)
            continue;
        if (r2 != FT_OK) {
            rc = ft__fail(err, r2, "%s", e2.msg);
            break;
        }
        rc = ft__db_kernel_get(ro, id, &local, err);
        if (rc == FT_OK && !same_kernel(&local, k, why, sizeof why))
            rc = ft__fail(err, FT_ERR_CORRUPT, "kernel %d of the pack (%s %s) has the source hash and target of "
                          "kernel %lld of %s, but %s: a pack never replaces a kernel of the database",
                          i, k->family, k->variant, id, ft__db_path(db), why);
        free((void *)local.source);
        free((void *)local.cubin);
        memset(&local, 0, sizeof local);
    }
    ft__db_close(ro);
    return rc;
}

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
    rc = ft__pack_check(p, err);
    if (rc != FT_OK) {
        ft__err_prefix(err, "refused");
        goto out;
    }
    if (as != NULL && as->cc != p->device.cc) {
        rc = ft__fail(err, FT_ERR_UNSUPPORTED, "the pack's cubins are for compute capability %d.%d, %s is %d.%d",
                      p->device.cc / 10, p->device.cc % 10, printable(as->name) ? as->name : "the device",
                      as->cc / 10, as->cc % 10);
        goto out;
    }
    ids = calloc((size_t)p->nkernels, sizeof *ids);
    if (ids == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory");
        goto out;
    }
    rc = ft__db_batch_begin(db, err);
    if (rc != FT_OK)
        goto out;
    began = 1;
    rc = check_local_kernels(db, p, err);
    if (rc == FT_OK)
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
