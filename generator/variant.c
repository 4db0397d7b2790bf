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
    for (i = 0; i < spec->nparams; i++)
        if (!(mask & (1u << i)))
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "variant '%s' lacks parameter '%s'",
                            text, spec->params[i].name);
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
