/* A strict JSON reader (see jsonparse.h for what it refuses, and why it is not SQLite's). */
#define _POSIX_C_SOURCE 200809L
#include "jsonparse.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NUMBER_CHARS 64

typedef struct parser {
    const char *text;
    size_t pos, len;
    const ft_json_limits *lim;
    ft_json_doc *doc;
    char *out;          /* where the next decoded string goes in doc->strings */
    ft_json_error *e;
    int failed;
} parser;

static int fail_at(parser *p, size_t at, const char *why)
{
    if (!p->failed) {
        p->failed = 1;
        p->e->at = at;
        snprintf(p->e->why, sizeof p->e->why, "%s", why);
    }
    return 0;
}

static void free_node(ft_json *n)
{
    int i;

    for (i = 0; i < n->n; i++)
        free_node(&n->kids[i]);
    free(n->kids);
    n->kids = NULL;
    n->n = 0;
}

void ft__json_free(ft_json_doc *doc)
{
    if (doc == NULL)
        return;
    free_node(&doc->root);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

const ft_json *ft__json_member(const ft_json *obj, const char *key)
{
    int i;

    if (obj == NULL || obj->type != FT_JSON_OBJECT || key == NULL)
        return NULL;
    for (i = 0; i < obj->n; i++)
        if (strcmp(obj->kids[i].key, key) == 0)
            return &obj->kids[i];
    return NULL;
}

static void skip_space(parser *p)
{
    while (p->pos < p->len) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static int hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    int i;

    for (i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The length of the well-formed UTF-8 sequence at s (n bytes left), or 0 (RFC 3629: no overlong
 * forms, no surrogates, nothing beyond U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))
            return 0; /* overlong, or a surrogate */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
            return 0; /* overlong, or beyond U+10FFFF */
        return 4;
    }
    return 0;
}

/* A string literal at p->pos (its opening quote), decoded into doc->strings. */
static int parse_string(parser *p, const char **out, size_t *out_len)
{
    const unsigned char *t = (const unsigned char *)p->text;
    size_t start = p->pos;
    char *o = p->out;

    p->pos++;
    for (;;) {
        unsigned char c;
        if (p->pos >= p->len)
            return fail_at(p, start, "an unterminated string");
        c = t[p->pos];
        if (c == '"')
            break;
        if (c < 0x20)
            return fail_at(p, p->pos, "a control character in a string (it must be escaped)");
        if (c == '\\') {
            unsigned cp, lo;
            size_t at = p->pos;
            if (p->pos + 1 >= p->len)
                return fail_at(p, start, "an unterminated string");
            c = t[p->pos + 1];
            p->pos += 2;
            switch (c) {
            case '"': *o++ = '"'; continue;
            case '\\': *o++ = '\\'; continue;
            case '/': *o++ = '/'; continue;
            case 'b': *o++ = '\b'; continue;
            case 'f': *o++ = '\f'; continue;
            case 'n': *o++ = '\n'; continue;
            case 'r': *o++ = '\r'; continue;
            case 't': *o++ = '\t'; continue;
            case 'u': break;
            default: return fail_at(p, at, "an unknown escape in a string");
            }
            if (p->pos + 4 > p->len || !hex4(p->text + p->pos, &cp))
                return fail_at(p, at, "a \\u escape without four hex digits");
            p->pos += 4;
            if (cp == 0)
                return fail_at(p, at, "\\u0000 (a NUL character) in a string");
            if (cp >= 0xdc00 && cp <= 0xdfff)
                return fail_at(p, at, "a low surrogate escape without a high one before it");
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (p->pos + 6 > p->len || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u' ||
                    !hex4(p->text + p->pos + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
                    return fail_at(p, at, "a high surrogate escape without a low one after it");
                p->pos += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            o += put_utf8(o, cp);
            continue;
        }
        {
            size_t n = utf8_len(t + p->pos, p->len - p->pos);
            if (n == 0)
                return fail_at(p, p->pos, "invalid UTF-8 in a string");
            memcpy(o, t + p->pos, n);
            o += n;
            p->pos += n;
        }
    }
    p->pos++; /* the closing quote */
    *o = '\0';
    *out = p->out;
    *out_len = (size_t)(o - p->out);
    p->out = o + 1;
    return 1;
}

/* A number at p->pos, by RFC 8259's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int parse_number(parser *p, ft_json *n)
{
    const char *t = p->text;
    size_t i = p->pos, start = p->pos;
    char buf[MAX_NUMBER_CHARS + 1], *end = NULL;
    int integer = 1;
    double v;

    if (i < p->len && t[i] == '-')
        i++;
    if (i >= p->len || t[i] < '0' || t[i] > '9')
        return fail_at(p, start, "a malformed number");
    if (t[i] == '0') {
        i++;
        if (i < p->len && t[i] >= '0' && t[i] <= '9')
            return fail_at(p, start, "a number with a leading zero");
    } else {
        while (i < p->len && t[i] >= '0' && t[i] <= '9')
            i++;
    }
    if (i < p->len && t[i] == '.') {
        integer = 0;
        i++;
        if (i >= p->len || t[i] < '0' || t[i] > '9')
            return fail_at(p, start, "a malformed number (no digit after '.')");
        while (i < p->len && t[i] >= '0' && t[i] <= '9')
            i++;
    }
    if (i < p->len && (t[i] == 'e' || t[i] == 'E')) {
        integer = 0;
        i++;
        if (i < p->len && (t[i] == '+' || t[i] == '-'))
            i++;
        if (i >= p->len || t[i] < '0' || t[i] > '9')
            return fail_at(p, start, "a malformed number (no digit in the exponent)");
        while (i < p->len && t[i] >= '0' && t[i] <= '9')
            i++;
    }
    if (i - start > MAX_NUMBER_CHARS)
        return fail_at(p, start, "a number of more than 64 characters");
    memcpy(buf, t + start, i - start);
    buf[i - start] = '\0';
    errno = 0;
    v = strtod(buf, &end); /* in the C locale: ft__json_parse sets it for this thread */
    if (end != buf + (i - start) || isnan(v) || isinf(v))
        return fail_at(p, start, "a number too large for a double");
    if (errno == ERANGE && fabs(v) > DBL_MIN)
        return fail_at(p, start, "a number out of range");
    n->type = FT_JSON_NUMBER;
    n->num = v;
    if (integer) {
        long long iv;
        errno = 0;
        iv = strtoll(buf, &end, 10);
        if (errno == 0 && end == buf + (i - start)) {
            n->is_int = 1;
            n->ival = iv;
        }
    }
    p->pos = i;
    return 1;
}

static int parse_value(parser *p, ft_json *n, int depth);

static int cmp_key(const void *a, const void *b)
{
    const ft_json *x = *(const ft_json *const *)a, *y = *(const ft_json *const *)b;
    int c = strcmp(x->key, y->key);

    if (c != 0)
        return c;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Refuses an object with two members of one key (sorted, so that many keys cost n log n). */
static int check_duplicates(parser *p, const ft_json *obj)
{
    const ft_json **order;
    int i, ok = 1;

    if (obj->n < 2)
        return 1;
    order = malloc((size_t)obj->n * sizeof *order);
    if (order == NULL)
        return fail_at(p, obj->at, "out of memory");
    for (i = 0; i < obj->n; i++)
        order[i] = &obj->kids[i];
    qsort(order, (size_t)obj->n, sizeof *order, cmp_key);
    for (i = 1; i < obj->n && ok; i++) {
        if (strcmp(order[i - 1]->key, order[i]->key) == 0) {
            char why[sizeof p->e->why];
            snprintf(why, sizeof why, "a duplicate key \"%.80s\" in an object", order[i]->key);
            ok = fail_at(p, order[i]->at, why);
        }
    }
    free(order);
    return ok;
}

static int parse_container(parser *p, ft_json *n, int depth, char close)
{
    int cap = 0;

    p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == close) {
        p->pos++;
        return 1;
    }
    for (;;) {
        ft_json *kid;
        const char *key = NULL;
        size_t key_len = 0, key_at;
        skip_space(p);
        key_at = p->pos;
        if (close == '}') {
            if (p->pos >= p->len || p->text[p->pos] != '"')
                return fail_at(p, p->pos, "an object key that is not a string");
            if (!parse_string(p, &key, &key_len))
                return 0;
            skip_space(p);
            if (p->pos >= p->len || p->text[p->pos] != ':')
                return fail_at(p, p->pos, "no ':' after an object key");
            p->pos++;
        }
        if (n->n == cap) {
            int ncap = cap ? cap * 2 : 8;
            ft_json *k;
            if (ncap > INT_MAX / 2)
                return fail_at(p, n->at, "too many members");
            k = realloc(n->kids, (size_t)ncap * sizeof *k);
            if (k == NULL)
                return fail_at(p, n->at, "out of memory");
            n->kids = k;
            cap = ncap;
        }
        kid = &n->kids[n->n];
        memset(kid, 0, sizeof *kid);
        n->n++; /* counted now, so that a failure below frees what the member holds */
        if (!parse_value(p, kid, depth + 1))
            return 0;
        if (close == '}') {
            kid->key = key;
            kid->at = key_at;
        }
        skip_space(p);
        if (p->pos < p->len && p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->text[p->pos] == close) {
            p->pos++;
            return close == '}' ? check_duplicates(p, n) : 1;
        }
        return fail_at(p, p->pos, close == '}' ? "an object member not followed by ',' or '}'"
                                               : "an array element not followed by ',' or ']'");
    }
}

static int literal(parser *p, const char *word)
{
    size_t n = strlen(word);

    return p->len - p->pos >= n && memcmp(p->text + p->pos, word, n) == 0;
}

static int parse_value(parser *p, ft_json *n, int depth)
{
    char c;

    skip_space(p);
    n->at = p->pos;
    p->doc->nodes++;
    if (p->doc->nodes > p->lim->max_nodes)
        return fail_at(p, p->pos, "more values than a document may have");
    if (p->pos >= p->len)
        return fail_at(p, p->pos, "the text ends where a value should be");
    c = p->text[p->pos];
    if ((c == '{' || c == '[') && depth > p->lim->max_depth)
        return fail_at(p, p->pos, "arrays and objects nested too deeply");
    if (c == '{') {
        n->type = FT_JSON_OBJECT;
        return parse_container(p, n, depth, '}');
    }
    if (c == '[') {
        n->type = FT_JSON_ARRAY;
        return parse_container(p, n, depth, ']');
    }
    if (c == '"') {
        n->type = FT_JSON_STRING;
        return parse_string(p, &n->str, &n->len);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
        return parse_number(p, n);
    if (literal(p, "null")) {
        n->type = FT_JSON_NULL;
        p->pos += 4;
        return 1;
    }
    if (literal(p, "true")) {
        n->type = FT_JSON_BOOL;
        n->num = 1;
        p->pos += 4;
        return 1;
    }
    if (literal(p, "false")) {
        n->type = FT_JSON_BOOL;
        p->pos += 5;
        return 1;
    }
    return fail_at(p, p->pos, "an unexpected character");
}

int ft__json_parse(const char *text, size_t len, const ft_json_limits *limits, ft_json_doc *doc,
                   ft_json_error *e)
{
    static const ft_json_limits defaults = {64, (size_t)1 << 20};
    locale_t c_locale = (locale_t)0, old = (locale_t)0;
    parser p;
    int ok = 0;

    memset(doc, 0, sizeof *doc);
    memset(e, 0, sizeof *e);
    memset(&p, 0, sizeof p);
    p.text = text;
    p.len = len;
    p.lim = limits != NULL ? limits : &defaults;
    p.doc = doc;
    p.e = e;
    if (text == NULL && len > 0) {
        fail_at(&p, 0, "no text");
        goto out;
    }
    /* Every decoded string is shorter than its literal, with room for its NUL. */
    doc->strings = malloc(len + 1);
    if (doc->strings == NULL) {
        fail_at(&p, 0, "out of memory");
        goto out;
    }
    p.out = doc->strings;
    /* Numbers are read as RFC 8259 writes them, whatever locale the application set. */
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (c_locale == (locale_t)0) {
        fail_at(&p, 0, "cannot set up the C locale");
        goto out;
    }
    old = uselocale(c_locale);
    ok = parse_value(&p, &doc->root, 1);
    uselocale(old);
    if (ok) {
        skip_space(&p);
        if (p.pos != p.len)
            ok = fail_at(&p, p.pos, "text after the end of the value");
    }
out:
    if (c_locale != (locale_t)0)
        freelocale(c_locale);
    if (!ok)
        ft__json_free(doc);
    return ok;
}
