#include "ops/problem.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ft_status ft__problem_parse(const char *text, ft_problem *p, ft_err *err)
{
    static const char *const names[] = {"b", "hq", "hkv", "sq", "sk", "d"};
    long vals[6] = {-1, -1, -1, -1, -1, -1};
    char buf[256];
    char *save = NULL;
    char *item;
    int i;

    if (strlen(text) >= sizeof buf)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "shape string too long");
    strcpy(buf, text);
    for (item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        char *end;
        long v;
        while (*item == ' ')
            item++;
        if (eq == NULL)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "'%s' in shape '%s' is not name=value", item, text);
        *eq = '\0';
        for (i = 0; i < 6 && strcmp(item, names[i]) != 0; i++)
            ;
        if (i == 6)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                            "unknown dimension '%s' in shape '%s' (known: b, hq, hkv, sq, sk, d)", item, text);
        errno = 0;
        v = strtol(eq + 1, &end, 10);
        if (errno != 0 || end == eq + 1 || (*end != '\0' && *end != ' ') || v <= 0 || v > (1L << 30))
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "%s must be a positive integer, not '%s'", item, eq + 1);
        vals[i] = v;
    }
    if (vals[0] < 0 || vals[1] < 0 || vals[3] < 0 || vals[5] < 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "shape '%s' needs at least b, hq, sq and d", text);
    p->batch = (int)vals[0];
    p->heads_q = (int)vals[1];
    p->heads_kv = vals[2] > 0 ? (int)vals[2] : p->heads_q;
    p->seqlen_q = (int)vals[3];
    p->seqlen_k = vals[4] > 0 ? (int)vals[4] : p->seqlen_q;
    p->head_dim = (int)vals[5];
    return ft__problem_validate(p, err);
}

void ft__problem_format(const ft_problem *p, char *out, size_t cap)
{
    snprintf(out, cap, "b=%d,hq=%d,hkv=%d,sq=%d,sk=%d,d=%d", p->batch, p->heads_q, p->heads_kv, p->seqlen_q,
             p->seqlen_k, p->head_dim);
}

ft_status ft__problem_validate(const ft_problem *p, ft_err *err)
{
    if (p->batch <= 0 || p->heads_q <= 0 || p->heads_kv <= 0 || p->seqlen_q <= 0 || p->seqlen_k <= 0 ||
        p->head_dim <= 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "every size must be positive");
    if (p->heads_q % p->heads_kv != 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "hq (%d) must be a multiple of hkv (%d)", p->heads_q,
                        p->heads_kv);
    if (p->layout == FT_LAYOUT_QKV_PACKED && (p->seqlen_q != p->seqlen_k || p->heads_q != p->heads_kv))
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the packed QKV layout needs sq == sk and hq == hkv");
    if (p->scale < 0 || !isfinite(p->scale))
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "the softmax scale must be positive (0: 1/sqrt(d))");
    return FT_OK;
}

float ft__problem_scale(const ft_problem *p)
{
    return p->scale > 0 ? p->scale : (float)(1.0 / sqrt((double)p->head_dim));
}

static ft_strides bshd(int seqlen, int heads, int d)
{
    ft_strides s = {(int64_t)seqlen * heads * d, (int64_t)heads * d, d};
    return s;
}

static ft_strides bhsd(int seqlen, int heads, int d)
{
    ft_strides s = {(int64_t)seqlen * heads * d, d, (int64_t)seqlen * d};
    return s;
}

void ft__problem_layout(const ft_problem *p, ft_layout_plan *out)
{
    const size_t d = (size_t)p->head_dim;
    size_t q_elems = (size_t)p->batch * p->seqlen_q * p->heads_q * d;
    size_t kv_elems = (size_t)p->batch * p->seqlen_k * p->heads_kv * d;
    int t;

    memset(out, 0, sizeof *out);
    for (t = 0; t < 4; t++)
        out->buffer[t] = t;
    out->elems[0] = q_elems;
    out->elems[1] = kv_elems;
    out->elems[2] = kv_elems;
    out->elems[3] = q_elems;
    switch (p->layout) {
    case FT_LAYOUT_BSHD:
        out->strides[0] = out->strides[3] = bshd(p->seqlen_q, p->heads_q, p->head_dim);
        out->strides[1] = out->strides[2] = bshd(p->seqlen_k, p->heads_kv, p->head_dim);
        break;
    case FT_LAYOUT_BHSD:
        out->strides[0] = out->strides[3] = bhsd(p->seqlen_q, p->heads_q, p->head_dim);
        out->strides[1] = out->strides[2] = bhsd(p->seqlen_k, p->heads_kv, p->head_dim);
        break;
    case FT_LAYOUT_QKV_PACKED: {
        ft_strides s = {(int64_t)p->seqlen_q * 3 * p->heads_q * p->head_dim, (int64_t)3 * p->heads_q * p->head_dim,
                        p->head_dim};
        out->elems[0] = 3 * q_elems;
        out->elems[1] = out->elems[2] = 0;
        for (t = 0; t < 3; t++) {
            out->buffer[t] = 0;
            out->offset[t] = (size_t)t * p->heads_q * d;
            out->strides[t] = s;
        }
        out->strides[3] = bshd(p->seqlen_q, p->heads_q, p->head_dim);
        break;
    }
    }
}

const char *ft__layout_name(ft_layout l)
{
    switch (l) {
    case FT_LAYOUT_BSHD: return "bshd";
    case FT_LAYOUT_BHSD: return "bhsd";
    case FT_LAYOUT_QKV_PACKED: return "qkv";
    }
    return "?";
}

int ft__layout_parse(const char *name, ft_layout *out)
{
    if (strcmp(name, "bshd") == 0)
        *out = FT_LAYOUT_BSHD;
    else if (strcmp(name, "bhsd") == 0)
        *out = FT_LAYOUT_BHSD;
    else if (strcmp(name, "qkv") == 0)
        *out = FT_LAYOUT_QKV_PACKED;
    else
        return 0;
    return 1;
}
