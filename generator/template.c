#include "template.h"

#include <stdio.h>
#include <string.h>

#include "common/sha256.h"
#include "generator/emit.h"
#include "generator/family.h"

#define MAX_DEPTH 8
#define MAX_FILES 32

typedef struct expansion {
    const char *seen[MAX_FILES]; /* headers already written into this source */
    int nseen;
} expansion;

/* The quoted name of an `#include "NAME"` line starting at line (len bytes), into out; 0 when
 * the line is not one. */
static int include_name(const char *line, size_t len, char *out, size_t cap)
{
    const char *p = line, *end = line + len, *q;
    size_t n;

    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p != '#')
        return 0;
    p++;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if ((size_t)(end - p) < 7 || strncmp(p, "include", 7) != 0)
        return 0;
    p += 7;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p != '"')
        return 0;
    p++;
    q = memchr(p, '"', (size_t)(end - p));
    if (q == NULL)
        return 0;
    n = (size_t)(q - p);
    if (n == 0 || n >= cap)
        return 0;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

static ft_status expand(expansion *x, const char *name, const char *from, int depth, ft_strbuf *sb, ft_err *err)
{
    const ft_embedded_file *f = ft__template_file(name);
    const char *p, *end;
    int i;

    if (f == NULL)
        return ft__fail(err, FT_ERR_INTERNAL, "%s%s%s is not an embedded template file", from ? from : "",
                        from ? " includes " : "", name);
    if (depth > MAX_DEPTH)
        return ft__fail(err, FT_ERR_INTERNAL, "%s: includes nested deeper than %d", name, MAX_DEPTH);
    for (p = f->data, end = f->data + f->size; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl != NULL ? (size_t)(nl - p) + 1 : (size_t)(end - p);
        char inc[128];

        if (!include_name(p, len, inc, sizeof inc)) {
            ft__sb_append(sb, p, len);
            p += len;
            continue;
        }
        p += len;
        for (i = 0; i < x->nseen; i++)
            if (strcmp(x->seen[i], inc) == 0)
                break;
        if (i < x->nseen)
            continue; /* written once already */
        if (x->nseen == MAX_FILES)
            return ft__fail(err, FT_ERR_INTERNAL, "%s: more than %d included files", name, MAX_FILES);
        f = ft__template_file(inc);
        x->seen[x->nseen++] = f != NULL ? f->name : "";
        ft__sb_printf(sb, "// ---- %s ----\n", inc);
        if (expand(x, inc, name, depth + 1, sb, err) != FT_OK)
            return err != NULL ? err->code : FT_ERR_INTERNAL;
        ft__sb_printf(sb, "// ---- end of %s ----\n", inc);
    }
    return FT_OK;
}

ft_status ft__template_expand(const char *name, ft_strbuf *sb, ft_err *err)
{
    expansion x;

    memset(&x, 0, sizeof x);
    return expand(&x, name, NULL, 0, sb, err);
}

void ft__template_hash(const char *name, char out[65])
{
    ft_strbuf sb = FT_STRBUF_INIT;
    char version[32];
    uint8_t digest[32];
    ft_sha256 s;

    ft__sha256_init(&s);
    snprintf(version, sizeof version, "generator %d\n", FT_GENERATOR_VERSION);
    ft__sha256_update(&s, version, strlen(version));
    if (ft__template_file(name) != NULL && ft__template_expand(name, &sb, NULL) == FT_OK && sb.data != NULL)
        ft__sha256_update(&s, sb.data, sb.len);
    ft__sha256_final(&s, digest);
    ft__sha256_hex(digest, out);
    ft__sb_free(&sb);
}
