/*
 * Kernel packs: what the strings of a pack may hold and every check of its content
 * (ft__pack_check), which reading, writing, the C export and the merge all go through, so that
 * what export writes, import and the runtime accept, and what they accept, they have checked.
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
#include "generator/variant.h"
#include "generator/family.h"
#include "tuning_db/pack_internal.h"

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
    free(p->entry_ops);
    free(p->entry_keys);
    free(p->key_texts);
    memset(p, 0, sizeof *p);
}

int ft__pack_rows_per_block(const char *family, const char *variant)
{
    const ft_family *fam = ft__family_find(family);
    ft_launch_facts f;

    if (fam == NULL)
        return 0; /* a family this build does not have: no kernel of it loads */
    ft__family_launch(fam, variant, 0, 0, &f);
    return f.rows_per_block;
}

void ft__pack_utc_now(char *out, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;

    if (gmtime_r(&t, &tm) == NULL || strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(out, cap, "unknown");
}

int ft__pack_pow2(long long v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

void ft__pack_sha256_hex(const void *data, size_t size, char hex[65])
{
    uint8_t d[32];

    ft__sha256(data, size, d);
    ft__sha256_hex(d, hex);
}

/* ---- what the strings of a pack may hold --------------------------------------------------- */

/* UTF-8 without control characters (C0, DEL, C1): text that is safe on a terminal. */
int ft__pack_printable(const char *s)
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

int ft__pack_all_of(const char *s, const char *set, size_t min_len)
{
    size_t n = strlen(s);

    return n >= min_len && strspn(s, set) == n;
}


static int hex64(const char *s)
{
    return strlen(s) == 64 && ft__pack_all_of(s, "0123456789abcdef", 64);
}

/* A C identifier (the kernel's function name in its cubin). */
int ft__pack_identifier(const char *s)
{
    return ft__pack_all_of(s, IDENT_, 1) && !(s[0] >= '0' && s[0] <= '9');
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

int ft__pack_refuse(char *why, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
    return 0;
}

int ft__pack_check_device(const ft_db_device *d, char *why, size_t cap)
{
    if (d->name[0] == '\0' || !ft__pack_printable(d->name))
        return ft__pack_refuse(why, cap, "the device's name is empty or holds control characters or invalid UTF-8");
    if (d->cc < 10 || d->cc > 999)
        return ft__pack_refuse(why, cap, "the device's compute capability %d is not one", d->cc);
    if (d->sms < 1 || d->smem_per_block < 0 || d->smem_per_sm < 0 || d->l2_bytes < 0 || d->driver_version < 0)
        return ft__pack_refuse(why, cap, "the device's multiprocessors, shared memory, L2 or driver are out of range");
    if (!ft__pack_all_of(d->nvrtc_version, "0123456789.", 1))
        return ft__pack_refuse(why, cap, "the device's NVRTC version is not digits and dots");
    return 1;
}

/* The checks of one kernel for device d (see ft__pack_check). */
int ft__pack_check_kernel(const ft_pack_kernel *pk, const ft_db_device *d, char *why, size_t cap)
{
    const ft_db_kernel *k = &pk->k;
    char hex[65], msg[300];
    size_t slen;

    if (!ft__pack_all_of(k->family, LOWER_DIGITS_, 1) || !target_name(k->arch) || !ft__pack_identifier(k->entry) ||
        !hex64(k->template_hash) || !hex64(k->source_hash))
        return ft__pack_refuse(why, cap, "its family, target, entry or a hash is malformed");
    if (ft__variant_text_value(k->variant, "d", msg, sizeof msg) < 0) /* what it computes: check_winner */
        return ft__pack_refuse(why, cap, "its variant string is not comma-separated name=value pairs of letters, digits, "
                      "'_', '.' and '-'");
    if (k->cubin == NULL || k->cubin_size == 0 || k->source == NULL)
        return ft__pack_refuse(why, cap, "it has no cubin or no source");
    slen = strlen(k->source);
    if (slen == 0)
        return ft__pack_refuse(why, cap, "its source is empty");
    ft__pack_sha256_hex(k->source, slen, hex);
    if (strcmp(hex, k->source_hash) != 0)
        return ft__pack_refuse(why, cap, "its source_hash %.12s... is not the sha256 of its source (%.12s...)", k->source_hash,
                      hex);
    if (!ft__kernel_target_check(k->family, k->arch, d->cc, msg, sizeof msg))
        return ft__pack_refuse(why, cap, "%s", msg);
    if (!ft__family_cubin_check(k->family, k->cubin, k->cubin_size, d->cc, k->entry, msg, sizeof msg))
        return ft__pack_refuse(why, cap, "%s", msg);
    if (pk->rows_per_block != ft__pack_rows_per_block(k->family, k->variant))
        return ft__pack_refuse(why, cap, "it takes %d rows per block, its variant %d", pk->rows_per_block,
                      ft__pack_rows_per_block(k->family, k->variant));
    if (k->threads < 1 || k->threads > 1024 || k->registers < 0 || k->registers > 255 || k->spill_stores < 0 ||
        k->spill_loads < 0 || k->smem_static < 0 || k->smem_dynamic < 0 ||
        (d->smem_per_block > 0 && k->smem_static + k->smem_dynamic > d->smem_per_block))
        return ft__pack_refuse(why, cap, "its threads (%d), registers (%d) or shared memory (%lld + %lld bytes) are out of range "
                      "for the device (%lld bytes per block)", k->threads, k->registers, k->smem_static,
                      k->smem_dynamic, d->smem_per_block);
    if (!measure(k->compile_ms))
        return ft__pack_refuse(why, cap, "its compile time is negative");
    return 1;
}

/* The checks of one winner with its kernel (see ft__pack_check). */
int ft__pack_check_winner(const ft_pack_winner *w, const ft_pack_kernel *pk, char *why, size_t cap)
{
    const ft_db_result *r = &w->r;
    const ft_key *k = &r->key;
    long long d = ft__key_get(k, "d", -1), causal = ft__key_get(k, "causal", -1);
    char msg[300], have[FT_KEY_TEXT_MAX], want[FT_KEY_TEXT_MAX];
    ft_key shape;

    const ft_family *fam = ft__family_find(pk->k.family);

    if (k->op == NULL)
        return ft__pack_refuse(why, cap, "its operation is not one this build has");
    if (fam == NULL)
        return ft__pack_refuse(why, cap, "its kernel's family is not one this build has");
    if (fam->op != k->op)
        return ft__pack_refuse(why, cap, "it is a winner of operation %s, and its kernel's family %s computes %s",
                               k->op->name, fam->name, fam->op->name);
    if (strcmp(k->dtype, "f16") != 0 && strcmp(k->dtype, "bf16") != 0)
        return ft__pack_refuse(why, cap, "its dtype is not f16 or bf16");
    if (d < 1 || d > 4096 || (causal != 0 && causal != 1))
        return ft__pack_refuse(why, cap, "its head dim or causality is out of range");
    if (r->batch < 1 || r->heads_q < 1 || r->heads_kv < 1 || r->heads_q % r->heads_kv != 0 || r->seqlen_q < 1 ||
        r->seqlen_k < 1)
        return ft__pack_refuse(why, cap, "its shape is not one (batch, heads and lengths positive, heads_q a multiple of "
                      "heads_kv)");
    /* The key the operation gives the shape: the key's buckets must be those (which also makes
     * them powers of two, at least the operation's least). Determinism is the call's choice,
     * not the shape's: the recorded one, 0 or 1. */
    if (ft__key_get(k, "det", 0) != 0 && ft__key_get(k, "det", 0) != 1)
        return ft__pack_refuse(why, cap, "its determinism is not 0 or 1");
    ft__key_of(k->op, k->dtype, (int)d, (int)causal, (int)ft__key_get(k, "det", 0), r->batch, r->heads_q, r->heads_kv,
               r->seqlen_q, r->seqlen_k, &shape);
    if (!ft__key_equal(&shape, k)) {
        ft__key_format(&shape, want, sizeof want);
        ft__key_format(k, have, sizeof have);
        return ft__pack_refuse(why, cap, "its shape (b=%d,hq=%d,sq=%d,sk=%d) has the key %s, not its own %s", r->batch,
                               r->heads_q, r->seqlen_q, r->seqlen_k, want, have);
    }
    if (!(isfinite(r->median_ms) && r->median_ms > 0))
        return ft__pack_refuse(why, cap, "it has no positive measured time");
    if (!measure(r->iqr_ms) || !measure(r->tflops) || !measure(r->max_error) || r->repetitions < 0)
        return ft__pack_refuse(why, cap, "a measurement is negative or infinite");
    if (w->measured_at[0] != '\0' && !timestamp(w->measured_at))
        return ft__pack_refuse(why, cap, "its measured_at is not of the form 2026-11-30 08:15:02");
    /* (its kernel's rows per block were checked against its family's launch facts with the kernel) */
    if (!ft__variant_check(pk->k.variant, k->dtype, (int)d, (int)causal, (int)ft__key_get(k, "det", 0), 0, msg,
                           sizeof msg))
        return ft__pack_refuse(why, cap, "%s", msg);
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

static int cmp_winner(const void *a, const void *b)
{
    const ft_pack_winner *x = *(const ft_pack_winner *const *)a, *y = *(const ft_pack_winner *const *)b;

    return ft__key_cmp(&x->r.key, &y->r.key);
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
    if (!ft__pack_printable(p->flashtune_version) || !ft__pack_printable(p->created)) {
        ft__fail(err, rc, "its flashtune version or creation time holds control characters or invalid UTF-8");
        goto out;
    }
    if (!ft__pack_check_device(&p->device, why, sizeof why)) {
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
        if (!ft__pack_check_kernel(&p->kernels[i], &p->device, why, sizeof why)) {
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
        if (!ft__pack_check_winner(w, &p->kernels[w->kernel], why, sizeof why)) {
            kernel_name(p, w->kernel, name, sizeof name);
            char key[FT_KEY_TEXT_MAX];
            ft__key_format(&w->r.key, key, sizeof key);
            ft__fail(err, rc, "winner %d (%s %s, %s): %s", i, w->r.key.op != NULL ? w->r.key.op->name : "?",
                     ft__pack_printable(key) ? key : "?", name, why);
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
            ft__fail(err, rc, "winners %d and %d are of one key", a < b ? a : b, a < b ? b : a);
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

