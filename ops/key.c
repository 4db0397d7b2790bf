#include "ops/op.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ft__key_format(const ft_key *k, char *out, size_t cap)
{
    size_t n;
    int i;

    n = (size_t)snprintf(out, cap, "{\"dtype\":\"%s\"", k->dtype);
    for (i = 0; i < k->nfields && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, ",\"%s\":%lld", k->fields[i].name, k->fields[i].value);
    if (n < cap)
        snprintf(out + n, cap - n, "}");
}

long long ft__key_get(const ft_key *k, const char *name, long long def)
{
    int i;

    for (i = 0; i < k->nfields; i++)
        if (strcmp(k->fields[i].name, name) == 0)
            return k->fields[i].value;
    return def;
}

int ft__key_equal(const ft_key *a, const ft_key *b)
{
    int i;

    if (a->op != b->op || strcmp(a->dtype, b->dtype) != 0 || a->nfields != b->nfields)
        return 0;
    for (i = 0; i < a->nfields; i++)
        if (strcmp(a->fields[i].name, b->fields[i].name) != 0 || a->fields[i].value != b->fields[i].value)
            return 0;
    return 1;
}

int ft__key_cmp(const ft_key *a, const ft_key *b)
{
    int c, i;

    c = strcmp(a->op != NULL ? a->op->name : "", b->op != NULL ? b->op->name : "");
    if (c == 0)
        c = strcmp(a->dtype, b->dtype);
    for (i = 0; c == 0 && i < a->nfields && i < b->nfields; i++) {
        c = strcmp(a->fields[i].name, b->fields[i].name);
        if (c == 0 && a->fields[i].value != b->fields[i].value)
            c = a->fields[i].value < b->fields[i].value ? -1 : 1;
    }
    if (c == 0 && a->nfields != b->nfields)
        c = a->nfields < b->nfields ? -1 : 1;
    return c;
}

void ft__key_of(const ft_op *op, const char *dtype, int head_dim, int causal, int deterministic, int batch,
                int heads_q, int heads_kv, int seqlen_q, int seqlen_k, ft_key *out)
{
    ft_problem p;

    memset(&p, 0, sizeof p);
    p.batch = batch, p.heads_q = heads_q, p.heads_kv = heads_kv, p.seqlen_q = seqlen_q, p.seqlen_k = seqlen_k;
    p.head_dim = head_dim, p.causal = causal != 0, p.bf16 = dtype != NULL && strcmp(dtype, "bf16") == 0;
    p.deterministic = deterministic != 0;
    op->key(&p, out);
    snprintf(out->dtype, sizeof out->dtype, "%s", dtype != NULL ? dtype : "");
}

long long ft__pow2_at_least(long long n, long long floor)
{
    long long p = floor;
    while (p < n && p < (1LL << 62))
        p <<= 1;
    return p;
}

int ft__key_nearest(const ft_key *want, const ft_key *cands, int n)
{
    double best = -1;
    int pick = -1;
    int i;

    for (i = 0; i < n; i++) {
        double d;
        if (cands[i].op != want->op)
            continue;
        d = want->op->distance(want, &cands[i]);
        if (d >= 0 && (pick < 0 || d < best)) {
            best = d;
            pick = i;
        }
    }
    return pick;
}

/* ---- parsing: a flat JSON object of the dtype string and integer fields ---------------------- */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* A JSON string of plain characters (letters, digits, '_') into out. */
static const char *plain_string(const char *p, char *out, size_t cap)
{
    size_t n = 0;

    if (*p != '"')
        return NULL;
    for (p++; *p != '"'; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_') ||
            n + 1 >= cap)
            return NULL;
        out[n++] = *p;
    }
    out[n] = '\0';
    return p + 1;
}

/* Parses text into out; *missing gets the bits of the fields (bit i: key_fields[i]) that the
 * text lacked and the operation's legacy completed (0 for a text of the current form). */
static ft_status parse(const ft_op *op, const char *text, ft_key *out, unsigned *missing, ft_err *err)
{
    const char *p = skip_ws(text);
    unsigned seen = 0, all;
    int have_dtype = 0, nf = 0, i;

    *missing = 0;
    memset(out, 0, sizeof *out);
    out->op = op;
    for (nf = 0; op->key_fields[nf] != NULL; nf++) {
        snprintf(out->fields[nf].name, sizeof out->fields[nf].name, "%s", op->key_fields[nf]);
    }
    out->nfields = nf;
    if (*p != '{')
        goto bad;
    p = skip_ws(p + 1);
    while (*p != '}') {
        char name[16];
        p = plain_string(p, name, sizeof name);
        if (p == NULL)
            goto bad;
        p = skip_ws(p);
        if (*p != ':')
            goto bad;
        p = skip_ws(p + 1);
        if (strcmp(name, "dtype") == 0) {
            if (have_dtype)
                goto bad;
            p = plain_string(p, out->dtype, sizeof out->dtype);
            if (p == NULL)
                goto bad;
            have_dtype = 1;
        } else {
            char *end;
            long long v;
            for (i = 0; i < nf && strcmp(op->key_fields[i], name) != 0; i++)
                ;
            if (i == nf || (seen & (1u << i)))
                goto bad;
            if (!(*p == '-' || (*p >= '0' && *p <= '9')))
                goto bad;
            errno = 0;
            v = strtoll(p, &end, 10);
            if (errno != 0 || *end == '.' || *end == 'e' || *end == 'E')
                goto bad;
            out->fields[i].value = v;
            seen |= 1u << i;
            p = end;
        }
        p = skip_ws(p);
        if (*p == ',')
            p = skip_ws(p + 1);
        else if (*p != '}')
            goto bad;
    }
    all = (1u << nf) - 1;
    if (*skip_ws(p + 1) != '\0' || !have_dtype)
        goto bad;
    if (seen != all && (op->legacy == NULL || !op->legacy(out, all & ~seen)))
        goto bad;
    *missing = all & ~seen;
    return FT_OK;
bad:
    return ft__fail(err, FT_ERR_CORRUPT, "'%.200s' is not a key of operation %s (fields dtype, %s...)", text,
                    op->name, op->key_fields[0] != NULL ? op->key_fields[0] : "");
}

ft_status ft__key_parse(const ft_op *op, const char *text, ft_key *out, ft_err *err)
{
    unsigned missing;

    return parse(op, text, out, &missing, err);
}

ft_status ft__key_parse_shaped(const ft_op *op, const char *text, int batch, int heads_q, int heads_kv, int seqlen_q,
                               int seqlen_k, ft_key *out, ft_err *err)
{
    ft_status rc;
    unsigned missing;
    ft_key shape;
    int i;

    rc = parse(op, text, out, &missing, err);
    if (rc != FT_OK || missing == 0)
        goto out;
    ft__key_of(op, out->dtype, (int)ft__key_get(out, "d", 0), (int)ft__key_get(out, "causal", 0),
               (int)ft__key_get(out, "det", 0), batch, heads_q, heads_kv, seqlen_q, seqlen_k, &shape);
    for (i = 0; i < out->nfields; i++)
        if (missing & (1u << i))
            out->fields[i].value = shape.fields[i].value;
out:
    return rc;
}

void ft__key_describe(const ft_key *k, char *out, size_t cap)
{
    static const char *const buckets[][2] = {{"group", "group"}, {"sq", "sq"}, {"seqlen", "seqlen"}, {"bh", "b*h"}};
    size_t n = 0, b;
    int i;

    if (cap == 0)
        return;
    out[0] = '\0';
    for (i = 0; i < k->nfields && n < cap; i++)
        for (b = 0; b < sizeof buckets / sizeof buckets[0]; b++)
            if (strcmp(k->fields[i].name, buckets[b][0]) == 0)
                n += (size_t)snprintf(out + n, cap - n, "%s%s <= %lld", n > 0 ? ", " : "", buckets[b][1],
                                      k->fields[i].value);
}
