#include "variant.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ft__variant_nth(const ft_spec *spec, long long n, ft_variant *out)
{
    int i;

    memset(out, 0, sizeof *out);
    for (i = spec->nparams - 1; i >= 0; i--) {
        int k = spec->params[i].nvalues;
        out->idx[i] = (int)(n % k);
        n /= k;
    }
}

static size_t format_value(const ft_param *p, int idx, char *buf, size_t cap)
{
    int n;

    if (p->kind == FT_PARAM_INT)
        n = snprintf(buf, cap, "%lld", p->ints[idx]);
    else
        n = snprintf(buf, cap, "%s", p->strings[idx]);
    return n < 0 ? 0 : (size_t)n;
}

size_t ft__variant_format(const ft_spec *spec, const ft_variant *v, char *buf, size_t cap)
{
    size_t len = 0;
    int i;

    if (cap > 0)
        buf[0] = '\0';
    for (i = 0; i < spec->nparams; i++) {
        const ft_param *p = &spec->params[i];
        char val[64];
        int n;

        format_value(p, v->idx[i], val, sizeof val);
        n = snprintf(buf + (len < cap ? len : cap), len < cap ? cap - len : 0, "%s%s=%s",
                     i ? "," : "", p->name, val);
        if (n > 0)
            len += (size_t)n;
    }
    return len;
}

static void list_values(const ft_param *p, char *buf, size_t cap)
{
    size_t len = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < p->nvalues && len + 1 < cap; i++) {
        char val[64];
        format_value(p, i, val, sizeof val);
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", val);
    }
}

/* Finds the index of a textual value among a parameter's values, or -1. */
static int value_index(const ft_param *p, const char *text)
{
    int i;

    if (p->kind == FT_PARAM_INT) {
        char *end;
        long long x;
        errno = 0;
        x = strtoll(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0')
            return -1;
        for (i = 0; i < p->nvalues; i++)
            if (p->ints[i] == x)
                return i;
        return -1;
    }
    for (i = 0; i < p->nvalues; i++)
        if (strcmp(p->strings[i], text) == 0)
            return i;
    return -1;
}

const char *ft__dtype_name(const char *text)
{
    static const char *const f16[] = {"f16", "fp16", "float16", "half"}, *const bf16[] = {"bf16", "bfloat16"};
    size_t i;

    for (i = 0; i < sizeof f16 / sizeof f16[0]; i++)
        if (strcmp(text, f16[i]) == 0)
            return "f16";
    for (i = 0; i < sizeof bf16 / sizeof bf16[0]; i++)
        if (strcmp(text, bf16[i]) == 0)
            return "bf16";
    return NULL;
}

static char *trim(char *s)
{
    char *e;

    while (isspace((unsigned char)*s))
        s++;
    e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

ft_status ft__variant_filter_parse(const ft_spec *spec, const char *text, ft_variant *out,
                                   unsigned *mask, ft_err *err)
{
    char buf[1024];
    char *save = NULL;
    char *item;
    unsigned seen = 0;

    memset(out, 0, sizeof *out);
    *mask = 0;
    if (strlen(text) >= sizeof buf)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "variant string too long");
    strcpy(buf, text);
    for (item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        char *name;
        char *val;
        int pi;
        int vi;

        if (eq == NULL)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                            "'%s' in variant '%s' is not name=value", trim(item), text);
        *eq = '\0';
        name = trim(item);
        val = trim(eq + 1);
        pi = ft__spec_param_index(spec, name);
        if (pi < 0) {
            char names[512];
            size_t len = 0;
            int i;
            names[0] = '\0';
            for (i = 0; i < spec->nparams && len + 1 < sizeof names; i++)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "",
                                        spec->params[i].name);
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                            "unknown parameter '%s' in variant '%s' (spec %s has: %s)", name, text,
                            spec->name, names);
        }
        if (seen & (1u << pi))
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "parameter '%s' given twice in '%s'",
                            name, text);
        vi = value_index(&spec->params[pi], val);
        if (vi < 0 && strcmp(name, "dtype") == 0 && ft__dtype_name(val) != NULL)
            vi = value_index(&spec->params[pi], ft__dtype_name(val));
        if (vi < 0) {
            char vals[512];
            list_values(&spec->params[pi], vals, sizeof vals);
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                            "'%s' is not a value of parameter '%s' (spec %s allows: %s)", val,
                            name, spec->name, vals);
        }
        out->idx[pi] = vi;
        seen |= 1u << pi;
    }
    *mask = seen;
    return FT_OK;
}

ft_status ft__variant_parse(const ft_spec *spec, const char *text, ft_variant *out, ft_err *err)
{
    unsigned mask;
    ft_status rc = ft__variant_filter_parse(spec, text, out, &mask, err);
    int i;

    if (rc != FT_OK)
        return rc;
    for (i = 0; i < spec->nparams; i++) {
        if (mask & (1u << i))
            continue;
        if (spec->params[i].dflt < 0)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "variant '%s' lacks parameter '%s'",
                            text, spec->params[i].name);
        out->idx[i] = spec->params[i].dflt; /* a knob the text predates, or leaves at its default */
    }
    return FT_OK;
}

int ft__variant_matches(const ft_variant *v, const ft_variant *filter, unsigned mask)
{
    int i;

    for (i = 0; i < FT_MAX_PARAMS; i++)
        if ((mask & (1u << i)) && v->idx[i] != filter->idx[i])
            return 0;
    return 1;
}

long long ft__variant_int(const ft_spec *spec, const ft_variant *v, const char *name,
                          long long fallback)
{
    int i = ft__spec_param_index(spec, name);

    if (i < 0 || spec->params[i].kind != FT_PARAM_INT)
        return fallback;
    return spec->params[i].ints[v->idx[i]];
}

const char *ft__variant_str(const ft_spec *spec, const ft_variant *v, const char *name)
{
    int i = ft__spec_param_index(spec, name);

    if (i < 0 || spec->params[i].kind != FT_PARAM_STRING)
        return NULL;
    return spec->params[i].strings[v->idx[i]];
}

/* A reason into why (cap bytes); returns 0. */
static int text_fail(char *why, size_t cap, const char *msg)
{
    if (why != NULL && cap > 0)
        snprintf(why, cap, "%s", msg);
    return 0;
}

/* ---- variant strings ---------------------------------------------------------------------- */

#define VARIANT_MAX 512

static int name_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

static int value_char(char c)
{
    return name_char(c, 0) || c == '.' || c == '-';
}

/* Checks the syntax; with name, copies its value. 1 found, 0 absent, -1 malformed (why). */
static int scan_variant(const char *variant, const char *name, char *out, size_t cap, char *why, size_t wcap)
{
    const char *p = variant, *names[64];
    size_t lens[64];
    int count = 0, found = 0, i;

    if (variant == NULL || variant[0] == '\0' || strlen(variant) >= VARIANT_MAX) {
        text_fail(why, wcap, "its variant string is empty or too long");
        return -1;
    }
    for (;;) {
        const char *n = p, *v;
        size_t nl, vl;
        while (name_char(*p, p == n))
            p++;
        nl = (size_t)(p - n);
        if (nl == 0 || *p != '=') {
            text_fail(why, wcap, "its variant string is not name=value pairs separated by commas");
            return -1;
        }
        p++;
        v = p;
        while (value_char(*p))
            p++;
        vl = (size_t)(p - v);
        if (vl == 0 || (*p != ',' && *p != '\0')) {
            text_fail(why, wcap, "its variant string has an empty value or a character a value may not hold");
            return -1;
        }
        for (i = 0; i < count; i++) {
            if (lens[i] == nl && memcmp(names[i], n, nl) == 0) {
                text_fail(why, wcap, "its variant string names a parameter twice");
                return -1;
            }
        }
        if (count == (int)(sizeof names / sizeof names[0])) {
            text_fail(why, wcap, "its variant string has too many parameters");
            return -1;
        }
        names[count] = n;
        lens[count++] = nl;
        if (name != NULL && strlen(name) == nl && memcmp(n, name, nl) == 0) {
            if (vl >= cap) {
                text_fail(why, wcap, "a value of its variant string is too long");
                return -1;
            }
            memcpy(out, v, vl);
            out[vl] = '\0';
            found = 1;
        }
        if (*p == '\0')
            break;
        p++;
    }
    return found;
}

int ft__variant_text_value(const char *variant, const char *name, char *out, size_t cap)
{
    return scan_variant(variant, name, out, cap, NULL, 0);
}

/* A non-negative decimal integer parameter (no sign, no leading zeros), or -1 (absent: def). */
static long variant_int(const char *variant, const char *name, long def, char *why, size_t cap)
{
    char v[32], msg[96];
    long x = 0;
    size_t i;
    int r = scan_variant(variant, name, v, sizeof v, why, cap);

    if (r < 0)
        return -1;
    if (r == 0)
        return def;
    for (i = 0; v[i] != '\0'; i++) {
        if (v[i] < '0' || v[i] > '9' || (i == 0 && v[i] == '0' && v[1] != '\0') || i >= 9) {
            snprintf(msg, sizeof msg, "its variant's %s=%s is not a plain integer", name, v);
            text_fail(why, cap, msg);
            return -1;
        }
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

int ft__variant_check(const char *variant, const char *dtype, int head_dim, int causal, int det, int rows_per_block,
                      char *why, size_t cap)
{
    char vt[16], msg[200];
    long d, c, bm, dt;
    int r;

    r = scan_variant(variant, "dtype", vt, sizeof vt, why, cap);
    if (r < 0)
        return 0;
    d = variant_int(variant, "d", -2, why, cap);
    c = variant_int(variant, "causal", -2, why, cap);
    bm = variant_int(variant, "bm", 64, why, cap);
    dt = variant_int(variant, "det", 0, why, cap);
    if (d == -1 || c == -1 || bm == -1 || dt == -1)
        return 0;
    if (r == 0 || d == -2 || c == -2)
        return text_fail(why, cap, "its variant string lacks d, causal or dtype");
    if (d != head_dim || c != (causal != 0) || dtype == NULL || strcmp(vt, dtype) != 0) {
        snprintf(msg, sizeof msg, "its variant computes d=%ld causal=%ld %s, not d=%d causal=%d %s", d, c, vt,
                 head_dim, causal != 0, dtype != NULL ? dtype : "?");
        return text_fail(why, cap, msg);
    }
    if (dt != (det != 0)) {
        snprintf(msg, sizeof msg, "its variant has det=%ld, but it serves a%s deterministic bucket", dt,
                 det ? "" : " non-");
        return text_fail(why, cap, msg);
    }
    if (rows_per_block > 0 && bm != rows_per_block) {
        snprintf(msg, sizeof msg, "it takes %d rows per block, but its variant has bm=%ld", rows_per_block, bm);
        return text_fail(why, cap, msg);
    }
    return 1;
}

