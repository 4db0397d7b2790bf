/*
 * Lua specs: loading a spec and the validation of the table it returns.
 */
#include "generator/spec_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "common/fs.h"
#include "common/strbuf.h"
#include "common/text.h"
#include "generator/sandbox.h"
#include "generator/variant.h"


static const char *const top_fields[] = {"name",        "template", "description",
                                         "params",      "constraints", "smem",
                                         "registers",   "workloads",   "spills", NULL};
static const char *const param_fields[] = {"name", "values", "doc", "open", "default", NULL};
static const char *const workload_fields[] = {"b", "hq", "hkv", "sq", "sk", "d", NULL};


/* ---- validation of the returned table ---------------------------------------------------- */

static ft_status spec_error(load_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static ft_status spec_error(load_ctx *c, const char *fmt, ...)
{
    char msg[FT_ERR_MSG_MAX];
    char clean[FT_ERR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ft__fail(c->err, FT_ERR_SPEC, "%s: %s", c->spec->path,
                    ft__printable_str(clean, sizeof clean, msg));
}

/* A malloc'd copy of the len bytes at s as printable text (common/text.h), or NULL. */
static char *printable_dup(const char *s, size_t len)
{
    size_t need = ft__printable(NULL, 0, s, len);
    char *copy = malloc(need + 1);

    if (copy != NULL)
        ft__printable(copy, need + 1, s, len);
    return copy;
}

static ft_status out_of_memory(load_ctx *c)
{
    return ft__fail(c->err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory", c->spec->path);
}

/* How a value reads in a message: "nil", "a boolean", "64.5", "the string 'x'". */
const char *ft__spec_describe(lua_State *L, int idx, char *buf, size_t cap)
{
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        snprintf(buf, cap, "nil");
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx))
            snprintf(buf, cap, "%lld", (long long)lua_tointeger(L, idx));
        else
            snprintf(buf, cap, "%.14g", (double)lua_tonumber(L, idx));
        break;
    case LUA_TSTRING: {
        size_t len = 0;
        const char *str = lua_tolstring(L, idx, &len);
        char shown[200];
        ft__printable(shown, sizeof shown, str, len < 40 ? len : 40);
        snprintf(buf, cap, "the string '%s'", shown);
        break;
    }
    default:
        snprintf(buf, cap, "a %s", luaL_typename(L, idx));
        break;
    }
    return buf;
}

/* How a table key reads in a message: "'name'", "[3]". */
static const char *describe_key(lua_State *L, int idx, char *buf, size_t cap)
{
    int t = lua_type(L, idx);

    if (t == LUA_TSTRING) {
        size_t len = 0;
        const char *str = lua_tolstring(L, idx, &len);
        char shown[200];
        ft__printable(shown, sizeof shown, str, len < 40 ? len : 40);
        snprintf(buf, cap, "'%s'", shown);
    }
    else if (t == LUA_TNUMBER && lua_isinteger(L, idx))
        snprintf(buf, cap, "[%lld]", (long long)lua_tointeger(L, idx));
    else if (t == LUA_TNUMBER)
        snprintf(buf, cap, "[%.14g]", (double)lua_tonumber(L, idx));
    else
        snprintf(buf, cap, "with a %s key", luaL_typename(L, idx));
    return buf;
}

static void join_names(const char *const *names, char *buf, size_t cap)
{
    size_t len = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; names[i] != NULL && len < cap; i++) {
        int n = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", names[i]);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

static int is_identifier(const char *s, size_t len)
{
    size_t i;

    if (len == 0 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return 0;
    for (i = 1; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_'))
            return 0;
    }
    return 1;
}

/* Pushes t[key] without metamethods and returns its type. t is an absolute index. */
static int raw_field(lua_State *L, int t, const char *key)
{
    lua_pushstring(L, key);
    return lua_rawget(L, t);
}

/* Checks that every key of the table at t is one of allowed. where is NULL at the top
 * level, else the table's place ("params[2]"). */
static ft_status check_fields(load_ctx *c, lua_State *L, int t, const char *where,
                              const char *const *allowed)
{
    int top = lua_gettop(L);
    ft_status rc = FT_ERR_SPEC;
    char names[256];
    char key[96];

    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
        int known = 0;
        int i;
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -2);
            for (i = 0; allowed[i] != NULL && !known; i++)
                known = strcmp(k, allowed[i]) == 0;
        }
        if (!known) {
            join_names(allowed, names, sizeof names);
            describe_key(L, -2, key, sizeof key);
            if (where == NULL && lua_type(L, -2) == LUA_TSTRING)
                spec_error(c, "unknown field %s (allowed: %s)", key, names);
            else if (where == NULL)
                spec_error(c, "unexpected entry %s in the spec table (allowed fields: %s)", key,
                           names);
            else
                spec_error(c, "%s has an unknown field %s (allowed: %s)", where, key, names);
            goto out;
        }
        lua_pop(L, 1);
    }
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

/* Checks that the table at t is a list (keys 1..n and nothing else); *n gets its length. */
static ft_status check_list(load_ctx *c, lua_State *L, int t, const char *what, lua_Integer *n)
{
    int top = lua_gettop(L);
    lua_Integer len = (lua_Integer)lua_rawlen(L, t);
    lua_Integer count = 0;
    ft_status rc = FT_ERR_SPEC;
    char key[96];

    *n = 0;
    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
        lua_Integer k = lua_isinteger(L, -2) ? lua_tointeger(L, -2) : 0;
        if (k < 1 || k > len) {
            spec_error(c, "%s must be a list, but it has the key %s", what,
                       describe_key(L, -2, key, sizeof key));
            goto out;
        }
        count++;
        lua_pop(L, 1);
    }
    if (count != len) {
        spec_error(c, "%s must be a list without holes", what);
        goto out;
    }
    *n = len;
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

/* Field `name` of the table at t, pushed onto the stack (the caller restores its top), as a
 * list: *n gets its length, 0 when it is absent and optional. FT_ERR_SPEC when it is absent and
 * required, or not a list (of_what says of what, in the message). */
static ft_status list_field(load_ctx *c, lua_State *L, int t, const char *name, const char *of_what, int required,
                            lua_Integer *n)
{
    char buf[96];
    int type = raw_field(L, t, name);

    *n = 0;
    if (type == LUA_TNIL)
        return required ? spec_error(c, "field '%s' is missing", name) : FT_OK;
    if (type != LUA_TTABLE)
        return spec_error(c, "field '%s' must be a list of %s, not %s", name, of_what,
                          ft__spec_describe(L, -1, buf, sizeof buf));
    return check_list(c, L, lua_gettop(L), name, n);
}

/* A string field: label names it in messages ("field 'name'", "params[2].doc"). */
static ft_status string_field(load_ctx *c, lua_State *L, int t, const char *key, const char *label,
                              int required, char **out)
{
    int top = lua_gettop(L);
    ft_status rc = FT_ERR_SPEC;
    int type = raw_field(L, t, key);
    char buf[96];

    if (type == LUA_TNIL && !required) {
        rc = FT_OK;
        goto out;
    }
    if (type == LUA_TNIL) {
        spec_error(c, "%s is missing", label);
        goto out;
    }
    if (type != LUA_TSTRING) {
        spec_error(c, "%s must be a string, not %s", label, ft__spec_describe(L, -1, buf, sizeof buf));
        goto out;
    }
    if (lua_rawlen(L, -1) == 0) {
        spec_error(c, "%s must not be empty", label);
        goto out;
    }
    *out = printable_dup(lua_tostring(L, -1), lua_rawlen(L, -1));
    if (*out == NULL) {
        rc = out_of_memory(c);
        goto out;
    }
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

/* spills = "allow" (the default) or "reject": whether a variant whose compiled code spills
 * registers to local memory stays a candidate. */
static ft_status load_spills(load_ctx *c, lua_State *L, int t, ft_spec *spec)
{
    char *value = NULL;
    ft_status rc = string_field(c, L, t, "spills", "field 'spills'", 0, &value);

    if (rc == FT_OK && value != NULL) {
        if (strcmp(value, "reject") == 0) {
            spec->reject_spills = 1;
        } else if (strcmp(value, "allow") != 0) {
            spec_error(c, "field 'spills' must be \"allow\" or \"reject\", not \"%s\"", value);
            rc = FT_ERR_SPEC;
        }
    }
    free(value);
    return rc;
}

/* An identifier string at idx (a parameter name or value); label names it. */
static ft_status check_identifier(load_ctx *c, lua_State *L, int idx, const char *label,
                                  const char *rule)
{
    size_t len = 0;
    const char *s = lua_tolstring(L, idx, &len);
    char buf[96];

    if (!is_identifier(s, len))
        return spec_error(c, "%s is %s, which is not an identifier; %s", label,
                          ft__spec_describe(L, idx, buf, sizeof buf), rule);
    if (len > MAX_IDENT)
        return spec_error(c, "%s is longer than %d characters", label, MAX_IDENT);
    return FT_OK;
}

static ft_status load_values(load_ctx *c, lua_State *L, int t, int pi)
{
    static const char *const what = "values must be integers or identifier strings";
    int top = lua_gettop(L);
    ft_param *p = &c->spec->params[pi];
    ft_status rc = FT_ERR_SPEC;
    lua_Integer n = 0;
    lua_Integer j;
    int k;
    char label[64];
    char buf[96];

    snprintf(label, sizeof label, "params[%d].values", pi + 1);
    rc = check_list(c, L, t, label, &n);
    if (rc != FT_OK)
        goto out;
    rc = FT_ERR_SPEC;
    if (n == 0) {
        spec_error(c, "%s is empty", label);
        goto out;
    }
    if (n > FT_MAX_VALUES) {
        spec_error(c, "%s has %lld entries; at most %d are allowed", label, (long long)n,
                   FT_MAX_VALUES);
        goto out;
    }
    p->kind = lua_rawgeti(L, t, 1) == LUA_TSTRING ? FT_PARAM_STRING : FT_PARAM_INT;
    lua_pop(L, 1);
    /* room for every value an open parameter may gain (ft__spec_add_value): the array never
     * moves once loaded */
    if (p->kind == FT_PARAM_INT)
        p->ints = calloc(FT_MAX_VALUES, sizeof *p->ints);
    else
        p->strings = calloc((size_t)n, sizeof *p->strings);
    if (p->ints == NULL && p->strings == NULL) {
        rc = out_of_memory(c);
        goto out;
    }
    p->nvalues = p->nlisted = (int)n;
    for (j = 1; j <= n; j++) {
        int type = lua_rawgeti(L, t, j);
        int i = (int)j - 1;
        snprintf(label, sizeof label, "params[%d].values[%lld]", pi + 1, (long long)j);
        if (type == LUA_TNUMBER) {
            int isint = 0;
            lua_Integer x = lua_tointegerx(L, -1, &isint);
            if (!isint) {
                spec_error(c, "%s is %s; %s", label, ft__spec_describe(L, -1, buf, sizeof buf), what);
                goto out;
            }
            if (p->kind != FT_PARAM_INT) {
                spec_error(c, "params[%d].values mixes integers and strings", pi + 1);
                goto out;
            }
            if (x < 0) {
                spec_error(c, "%s is %lld; integer values must not be negative (the value is "
                              "part of the kernel's name in the generated source)",
                           label, (long long)x);
                goto out;
            }
            for (k = 0; k < i; k++) {
                if (p->ints[k] == (long long)x) {
                    spec_error(c, "%s repeats values[%d] (%lld)", label, k + 1, (long long)x);
                    goto out;
                }
            }
            p->ints[i] = (long long)x;
        } else if (type == LUA_TSTRING) {
            const char *s = lua_tostring(L, -1);
            if (check_identifier(c, L, -1, label, what) != FT_OK)
                goto out;
            if (p->kind != FT_PARAM_STRING) {
                spec_error(c, "params[%d].values mixes integers and strings", pi + 1);
                goto out;
            }
            for (k = 0; k < i; k++) {
                if (strcmp(p->strings[k], s) == 0) {
                    spec_error(c, "%s repeats values[%d] ('%s')", label, k + 1, s);
                    goto out;
                }
            }
            p->strings[i] = ft__strdup(s);
            if (p->strings[i] == NULL) {
                rc = out_of_memory(c);
                goto out;
            }
        } else {
            spec_error(c, "%s is %s; %s", label, ft__spec_describe(L, -1, buf, sizeof buf), what);
            goto out;
        }
        lua_pop(L, 1);
    }
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

static ft_status load_param(load_ctx *c, lua_State *L, int t, int pi)
{
    int top = lua_gettop(L);
    ft_param *p = &c->spec->params[pi];
    ft_status rc = FT_ERR_SPEC;
    int type;
    int k;
    char where[64];
    char label[80];
    char buf[96];

    snprintf(where, sizeof where, "params[%d]", pi + 1);
    if (lua_type(L, t) != LUA_TTABLE) {
        spec_error(c, "%s must be a table { name = \"...\", values = { ... } }, not %s", where,
                   ft__spec_describe(L, t, buf, sizeof buf));
        goto out;
    }
    rc = check_fields(c, L, t, where, param_fields);
    if (rc != FT_OK)
        goto out;
    rc = FT_ERR_SPEC;
    snprintf(label, sizeof label, "%s.name", where);
    type = raw_field(L, t, "name");
    if (type == LUA_TNIL) {
        spec_error(c, "%s is missing", label);
        goto out;
    }
    if (type != LUA_TSTRING) {
        spec_error(c, "%s must be a string, not %s", label, ft__spec_describe(L, -1, buf, sizeof buf));
        goto out;
    }
    if (check_identifier(c, L, -1, label,
                         "names are letters, digits and '_', not starting with a digit") != FT_OK)
        goto out;
    for (k = 0; k < pi; k++) {
        if (strcmp(c->spec->params[k].name, lua_tostring(L, -1)) == 0) {
            spec_error(c, "%s '%s' is already the name of params[%d]", label, lua_tostring(L, -1),
                       k + 1);
            goto out;
        }
    }
    p->name = ft__strdup(lua_tostring(L, -1));
    if (p->name == NULL) {
        rc = out_of_memory(c);
        goto out;
    }
    lua_pop(L, 1);
    snprintf(label, sizeof label, "%s.doc", where);
    rc = string_field(c, L, t, "doc", label, 0, &p->doc);
    if (rc != FT_OK)
        goto out;
    rc = FT_ERR_SPEC;
    snprintf(label, sizeof label, "%s.values", where);
    type = raw_field(L, t, "values");
    if (type == LUA_TNIL) {
        spec_error(c, "%s is missing", label);
        goto out;
    }
    if (type != LUA_TTABLE) {
        spec_error(c, "%s must be a list of values, not %s", label,
                   ft__spec_describe(L, -1, buf, sizeof buf));
        goto out;
    }
    rc = load_values(c, L, lua_gettop(L), pi);
    if (rc != FT_OK)
        goto out;
    rc = FT_ERR_SPEC;
    lua_pop(L, 1);
    snprintf(label, sizeof label, "%s.open", where);
    type = raw_field(L, t, "open");
    if (type != LUA_TNIL && type != LUA_TBOOLEAN) {
        spec_error(c, "%s must be true or false, not %s", label, ft__spec_describe(L, -1, buf, sizeof buf));
        goto out;
    }
    p->open = type == LUA_TBOOLEAN && lua_toboolean(L, -1);
    if (p->open && p->kind != FT_PARAM_INT) {
        spec_error(c, "%s: only a parameter of integer values can be open", label);
        goto out;
    }
    lua_pop(L, 1);
    snprintf(label, sizeof label, "%s.default", where);
    p->dflt = -1;
    type = raw_field(L, t, "default");
    if (type != LUA_TNIL) {
        for (k = 0; k < p->nvalues && p->dflt < 0; k++) {
            if (p->kind == FT_PARAM_INT ? lua_isinteger(L, -1) && lua_tointeger(L, -1) == p->ints[k]
                                        : type == LUA_TSTRING && strcmp(lua_tostring(L, -1), p->strings[k]) == 0)
                p->dflt = k;
        }
        if (p->dflt < 0) {
            spec_error(c, "%s must be one of the parameter's values, not %s", label,
                       ft__spec_describe(L, -1, buf, sizeof buf));
            goto out;
        }
    }
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

static ft_status load_params(load_ctx *c, lua_State *L, int t)
{
    int top = lua_gettop(L);
    ft_spec *spec = c->spec;
    ft_status rc = FT_ERR_SPEC;
    lua_Integer n = 0;
    lua_Integer i;
    double total = 1;

    rc = list_field(c, L, t, "params", "parameters", 1, &n);
    if (rc != FT_OK)
        goto out;
    rc = FT_ERR_SPEC;
    if (n == 0) {
        spec_error(c, "params is empty; a spec needs at least one parameter");
        goto out;
    }
    if (n > FT_MAX_PARAMS) {
        spec_error(c, "params has %lld entries; at most %d are allowed", (long long)n,
                   FT_MAX_PARAMS);
        goto out;
    }
    for (i = 1; i <= n; i++) {
        lua_rawgeti(L, top + 1, i);
        rc = load_param(c, L, lua_gettop(L), (int)i - 1);
        if (rc != FT_OK)
            goto out;
        lua_pop(L, 1);
        total *= spec->params[i - 1].nvalues;
    }
    spec->nparams = (int)n;
    if (total > FT_MAX_VARIANTS) {
        rc = spec_error(c, "params describe %.0f variants (the product of their value counts); "
                           "at most %d are allowed",
                        total, FT_MAX_VARIANTS);
        goto out;
    }
    spec->nvariants = (long long)total;
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

/* A name the generated source defines for a parameter's value (generator/emit.c):
 * FTP_<NAME> for an integer parameter, FTP_<NAME>_<VALUE> for each value of a string one. */
typedef struct macro_name {
    char text[2 * MAX_IDENT + 8];
    int param;
    int value; /* -1 for an integer parameter */
} macro_name;

static void upper_into(char *dst, const char *src)
{
    size_t i;

    for (i = 0; src[i] != '\0'; i++)
        dst[i] = (char)(src[i] >= 'a' && src[i] <= 'z' ? src[i] - 'a' + 'A' : src[i]);
    dst[i] = '\0';
}

static int macro_cmp(const void *a, const void *b)
{
    const macro_name *x = a;
    const macro_name *y = b;
    int d = strcmp(x->text, y->text);

    if (d != 0)
        return d;
    return x->param != y->param ? x->param - y->param : x->value - y->value;
}

static void describe_macro_origin(const ft_spec *spec, const macro_name *m, char *buf, size_t cap)
{
    const ft_param *p = &spec->params[m->param];

    if (m->value < 0)
        snprintf(buf, cap, "params[%d] '%s'", m->param + 1, p->name);
    else
        snprintf(buf, cap, "params[%d] '%s' with the value '%s'", m->param + 1, p->name,
                 p->strings[m->value]);
}

/* Two parameters (or values) whose macros in the generated source would be the same name
 * ('d' and 'D' both give FTP_D; NVRTC only warns when the second redefines the first, so a
 * kernel compiled with D=128 would read as d=64) are refused. */
static ft_status check_macro_names(load_ctx *c)
{
    const ft_spec *spec = c->spec;
    macro_name *names = NULL;
    ft_status rc = FT_OK;
    size_t n = 0;
    size_t total = 0;
    size_t i;
    int pi;
    int vi;

    for (pi = 0; pi < spec->nparams; pi++)
        total += spec->params[pi].kind == FT_PARAM_INT ? 1 : (size_t)spec->params[pi].nvalues;
    names = calloc(total, sizeof *names);
    if (names == NULL)
        return out_of_memory(c);
    for (pi = 0; pi < spec->nparams; pi++) {
        const ft_param *p = &spec->params[pi];
        char name[MAX_IDENT + 1];
        upper_into(name, p->name);
        for (vi = 0; vi < (p->kind == FT_PARAM_INT ? 1 : p->nvalues); vi++) {
            macro_name *m = &names[n++];
            m->param = pi;
            m->value = p->kind == FT_PARAM_INT ? -1 : vi;
            if (p->kind == FT_PARAM_INT) {
                snprintf(m->text, sizeof m->text, "FTP_%s", name);
            } else {
                char value[MAX_IDENT + 1];
                upper_into(value, p->strings[vi]);
                snprintf(m->text, sizeof m->text, "FTP_%s_%s", name, value);
            }
        }
    }
    qsort(names, n, sizeof *names, macro_cmp);
    for (i = 1; i < n; i++) {
        if (strcmp(names[i - 1].text, names[i].text) == 0) {
            char a[200];
            char b[200];
            describe_macro_origin(spec, &names[i - 1], a, sizeof a);
            describe_macro_origin(spec, &names[i], b, sizeof b);
            rc = spec_error(c, "%s and %s both become the macro %s in the generated source; "
                               "names must differ in more than letter case",
                            a, b, names[i].text);
            break;
        }
    }
    free(names);
    return rc;
}

size_t ft__param_longest_value(const ft_param *p)
{
    size_t longest = 0;
    int i;

    for (i = 0; i < p->nvalues; i++) {
        char buf[32];
        size_t l = p->kind == FT_PARAM_INT ? (size_t)snprintf(buf, sizeof buf, "%lld", p->ints[i])
                                           : strlen(p->strings[i]);
        if (l > longest)
            longest = l;
    }
    return longest;
}

/* The length of the spec's longest variant string, parameter pi's longest value taken to be at
 * least `at_least` characters long. */
static size_t longest_variant(const ft_spec *spec, int pi, size_t at_least)
{
    size_t len = 0;
    int i;

    for (i = 0; i < spec->nparams; i++) {
        const ft_param *p = &spec->params[i];
        const size_t longest = ft__param_longest_value(p);
        len += (i > 0 ? 1 : 0) + strlen(p->name) + 1 + (i == pi && at_least > longest ? at_least : longest);
    }
    return len;
}

/* The longest variant string must fit the buffers that hold one (FT_VARIANT_STR_MAX), or
 * two variants could be cut to the same text. */
static ft_status check_variant_length(load_ctx *c)
{
    const size_t len = longest_variant(c->spec, -1, 0);

    if (len >= FT_VARIANT_STR_MAX)
        return spec_error(c, "the longest variant string of these params has %zu characters; "
                             "at most %d fit (use shorter names or values)",
                          len, FT_VARIANT_STR_MAX - 1);
    return FT_OK;
}

/* Keeps the function at idx in the registry; *line gets where it is defined. */
static int keep_function(lua_State *L, int idx, int *line)
{
    lua_Debug ar;

    lua_pushvalue(L, idx);
    *line = lua_getinfo(L, ">S", &ar) != 0 ? ar.linedefined : -1;
    lua_pushvalue(L, idx);
    return luaL_ref(L, LUA_REGISTRYINDEX);
}

static ft_status load_constraint(load_ctx *c, lua_State *L, int t, int i)
{
    static const char *const shape = "must be { \"text\", function }";
    int top = lua_gettop(L);
    ft_spec_lua *S = c->spec->lua;
    ft_status rc = FT_ERR_SPEC;
    char where[64];
    char buf[96];

    snprintf(where, sizeof where, "constraints[%d]", i + 1);
    if (lua_type(L, t) != LUA_TTABLE) {
        spec_error(c, "%s %s, not %s", where, shape, ft__spec_describe(L, t, buf, sizeof buf));
        goto out;
    }
    lua_pushnil(L);
    while (lua_next(L, t) != 0) {
        lua_Integer k = lua_isinteger(L, -2) ? lua_tointeger(L, -2) : 0;
        if (k != 1 && k != 2) {
            spec_error(c, "%s %s; it has an extra entry %s", where, shape,
                       describe_key(L, -2, buf, sizeof buf));
            goto out;
        }
        lua_pop(L, 1);
    }
    if (lua_rawgeti(L, t, 1) != LUA_TSTRING || lua_rawlen(L, -1) == 0) {
        spec_error(c, "%s %s; its first element is %s", where, shape,
                   ft__spec_describe(L, -1, buf, sizeof buf));
        goto out;
    }
    if (lua_rawgeti(L, t, 2) != LUA_TFUNCTION) {
        spec_error(c, "%s %s; its second element is %s", where, shape,
                   ft__spec_describe(L, -1, buf, sizeof buf));
        goto out;
    }
    c->spec->constraint_names[i] = printable_dup(lua_tostring(L, -2), lua_rawlen(L, -2));
    if (c->spec->constraint_names[i] == NULL) {
        rc = out_of_memory(c);
        goto out;
    }
    S->constraint_refs[i] = keep_function(L, lua_gettop(L), &S->constraint_lines[i]);
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

static ft_status load_constraints(load_ctx *c, lua_State *L, int t)
{
    int top = lua_gettop(L);
    ft_spec_lua *S = c->spec->lua;
    ft_status rc = FT_ERR_SPEC;
    lua_Integer n = 0;
    lua_Integer i;

    rc = list_field(c, L, t, "constraints", "{ \"text\", function }", 0, &n);
    if (rc != FT_OK || n == 0)
        goto out;
    if (n > INT_MAX / 2) {
        rc = spec_error(c, "constraints has too many entries");
        goto out;
    }
    c->spec->constraint_names = calloc((size_t)n, sizeof *c->spec->constraint_names);
    S->constraint_refs = calloc((size_t)n, sizeof *S->constraint_refs);
    S->constraint_lines = calloc((size_t)n, sizeof *S->constraint_lines);
    if (c->spec->constraint_names == NULL || S->constraint_refs == NULL ||
        S->constraint_lines == NULL) {
        rc = out_of_memory(c);
        goto out;
    }
    c->spec->nconstraints = (int)n;
    for (i = 1; i <= n; i++) {
        lua_rawgeti(L, top + 1, i);
        rc = load_constraint(c, L, lua_gettop(L), (int)i - 1);
        if (rc != FT_OK)
            goto out;
        lua_pop(L, 1);
    }
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

/* smem (required) or registers (optional): a function(v, arch). */
static ft_status load_function(load_ctx *c, lua_State *L, int t, const char *key, int required,
                               int *ref, int *line)
{
    int top = lua_gettop(L);
    ft_status rc = FT_ERR_SPEC;
    char buf[96];
    int type = raw_field(L, t, key);

    if (type == LUA_TNIL && !required) {
        rc = FT_OK;
        goto out;
    }
    if (type == LUA_TNIL) {
        spec_error(c, "field '%s' is missing; it must be a function(v, arch)", key);
        goto out;
    }
    if (type != LUA_TFUNCTION) {
        spec_error(c, "field '%s' must be a function(v, arch), not %s", key,
                   ft__spec_describe(L, -1, buf, sizeof buf));
        goto out;
    }
    *ref = keep_function(L, top + 1, line);
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

static ft_status load_workload(load_ctx *c, lua_State *L, int t, int wi)
{
    int top = lua_gettop(L);
    ft_workload *w = &c->spec->workloads[wi];
    int *fields[] = {&w->b, &w->hq, &w->hkv, &w->sq, &w->sk, &w->d};
    ft_status rc = FT_ERR_SPEC;
    int i;
    char where[64];
    char buf[96];

    snprintf(where, sizeof where, "workloads[%d]", wi + 1);
    if (lua_type(L, t) != LUA_TTABLE) {
        spec_error(c, "%s must be a table { b = , hq = , hkv = , sq = , sk = , d = }, not %s",
                   where, ft__spec_describe(L, t, buf, sizeof buf));
        goto out;
    }
    rc = check_fields(c, L, t, where, workload_fields);
    if (rc != FT_OK)
        goto out;
    rc = FT_ERR_SPEC;
    for (i = 0; workload_fields[i] != NULL; i++) {
        int type = raw_field(L, t, workload_fields[i]);
        int isint = 0;
        lua_Integer x = type == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (type == LUA_TNIL) {
            spec_error(c, "%s.%s is missing", where, workload_fields[i]);
            goto out;
        }
        if (!isint || x <= 0) {
            spec_error(c, "%s.%s is %s; it must be a positive integer", where, workload_fields[i],
                       ft__spec_describe(L, -1, buf, sizeof buf));
            goto out;
        }
        if (x > INT_MAX) {
            spec_error(c, "%s.%s is %lld; it must be at most %d", where, workload_fields[i],
                       (long long)x, INT_MAX);
            goto out;
        }
        *fields[i] = (int)x;
        lua_pop(L, 1);
    }
    if (w->hq % w->hkv != 0) {
        spec_error(c, "%s: hq (%d) must be a multiple of hkv (%d)", where, w->hq, w->hkv);
        goto out;
    }
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

static ft_status load_workloads(load_ctx *c, lua_State *L, int t)
{
    int top = lua_gettop(L);
    ft_status rc = FT_ERR_SPEC;
    lua_Integer n = 0;
    lua_Integer i;

    rc = list_field(c, L, t, "workloads", "workloads", 0, &n);
    if (rc != FT_OK || n == 0)
        goto out;
    if (n > INT_MAX / (lua_Integer)sizeof(ft_workload)) {
        rc = spec_error(c, "workloads has too many entries");
        goto out;
    }
    c->spec->workloads = calloc((size_t)n, sizeof *c->spec->workloads);
    if (c->spec->workloads == NULL) {
        rc = out_of_memory(c);
        goto out;
    }
    c->spec->nworkloads = (int)n;
    for (i = 1; i <= n; i++) {
        lua_rawgeti(L, top + 1, i);
        rc = load_workload(c, L, lua_gettop(L), (int)i - 1);
        if (rc != FT_OK)
            goto out;
        lua_pop(L, 1);
    }
    rc = FT_OK;
out:
    lua_settop(L, top);
    return rc;
}

/* Validates the value the chunk returned (at t) and fills the spec. */
static ft_status validate(load_ctx *c, lua_State *L, int t)
{
    ft_spec *spec = c->spec;
    ft_spec_lua *S = spec->lua;
    ft_status rc = FT_ERR_SPEC;
    char buf[96];

    if (lua_type(L, t) != LUA_TTABLE) {
        spec_error(c, "a spec must return a table, but the chunk returned %s",
                   ft__spec_describe(L, t, buf, sizeof buf));
        goto out;
    }
    rc = check_fields(c, L, t, NULL, top_fields);
    if (rc == FT_OK)
        rc = string_field(c, L, t, "name", "field 'name'", 1, &spec->name);
    if (rc == FT_OK)
        rc = string_field(c, L, t, "template", "field 'template'", 1, &spec->template_name);
    if (rc == FT_OK)
        rc = string_field(c, L, t, "description", "field 'description'", 0, &spec->description);
    if (rc == FT_OK)
        rc = load_spills(c, L, t, spec);
    if (rc == FT_OK)
        rc = load_params(c, L, t);
    if (rc == FT_OK)
        rc = check_macro_names(c);
    if (rc == FT_OK)
        rc = check_variant_length(c);
    if (rc == FT_OK)
        rc = load_constraints(c, L, t);
    if (rc == FT_OK)
        rc = load_function(c, L, t, "smem", 1, &S->smem_ref, &S->smem_line);
    if (rc == FT_OK)
        rc = load_function(c, L, t, "registers", 0, &S->registers_ref, &S->registers_line);
    if (rc == FT_OK)
        rc = load_workloads(c, L, t);
    if (rc == FT_OK)
        spec->has_registers = S->registers_ref != LUA_NOREF;
out:
    return rc;
}

/* Runs in lua_pcall: opens the sandbox, loads and runs the chunk, validates its result. */
static int load_driver(lua_State *L)
{
    load_ctx *c = lua_touserdata(L, 1);
    ft_spec_lua *S = c->spec->lua;
    char chunkname[1100];
    int status;

    ft__spec_open_sandbox(L, S);
    ft__spec_begin_call(S, 1);
    snprintf(chunkname, sizeof chunkname, "@%s", c->spec->path);
    /* Mode "t": a precompiled chunk is refused ("attempt to load a binary chunk"). */
    status = luaL_loadbufferx(L, c->text, c->size, chunkname, "t");
    if (status != LUA_OK) {
        ft__spec_end_call(S);
        c->rc = ft__spec_lua_failure(S, status, "", c->err);
        return 0;
    }
    lua_call(L, 0, 1);
    ft__spec_end_call(S);
    S->line = 0;
    c->rc = validate(c, L, lua_gettop(L));
    return 0;
}

/* A limit from the caller, or the default where it gives none (0). */
static long long limit_or(long long given, long long fallback)
{
    return given > 0 ? given : fallback;
}

static long long size_limit_or(size_t given, size_t fallback)
{
    size_t n = given > 0 ? given : fallback;

    return n > (size_t)LLONG_MAX ? LLONG_MAX : (long long)n;
}

static void set_limits(ft_spec_lua *S, const ft_sandbox_limits *limits)
{
    ft_sandbox_limits none;

    if (limits == NULL) {
        memset(&none, 0, sizeof none);
        limits = &none;
    }
    S->cap = limits->memory_bytes > 0 ? limits->memory_bytes : DEFAULT_MEMORY_BYTES;
    S->instructions.load = limit_or(limits->load_instructions, DEFAULT_LOAD_INSTRUCTIONS);
    S->instructions.call = limit_or(limits->call_instructions, DEFAULT_CALL_INSTRUCTIONS);
    S->match_steps.load = limit_or(limits->load_match_steps, DEFAULT_LOAD_MATCH_STEPS);
    S->match_steps.call = limit_or(limits->call_match_steps, DEFAULT_CALL_MATCH_STEPS);
    S->alloc_bytes.load = size_limit_or(limits->load_alloc_bytes, DEFAULT_LOAD_ALLOC_BYTES);
    S->alloc_bytes.call = size_limit_or(limits->call_alloc_bytes, DEFAULT_CALL_ALLOC_BYTES);
    S->cpu_ms.load = limit_or(limits->load_cpu_ms, DEFAULT_LOAD_CPU_MS);
    S->cpu_ms.call = limit_or(limits->call_cpu_ms, DEFAULT_CALL_CPU_MS);
}

/* Loads the chunk of size bytes at text; path names it in messages. */
static ft_status spec_load(const char *path, const char *dir, const char *text, size_t size,
                           const ft_sandbox_limits *limits, ft_spec **out, ft_err *err)
{
    ft_status rc = FT_ERR_OUT_OF_MEMORY;
    ft_spec *spec = NULL;
    ft_spec_lua *S = NULL;
    load_ctx c;
    int status;
    char cap[64];

    spec = calloc(1, sizeof *spec);
    if (spec == NULL) {
        ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto out;
    }
    spec->path = ft__strdup(path);
    spec->lua = calloc(1, sizeof *spec->lua);
    if (spec->path == NULL || spec->lua == NULL) {
        ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
        goto out;
    }
    S = spec->lua;
    S->path = spec->path;
    snprintf(S->dir, sizeof S->dir, "%s", dir != NULL ? dir : "");
    set_limits(S, limits);
    S->alloc_left = UNMETERED;
    S->meter.exceeded = ft__spec_meter_exceeded;
    S->smem_ref = LUA_NOREF;
    S->registers_ref = LUA_NOREF;
    S->arch_ref = LUA_NOREF;
    S->L = lua_newstate(ft__spec_sandbox_alloc, S);
    if (S->L == NULL && S->refused) {
        ft__spec_format_bytes(S->cap, cap, sizeof cap);
        rc = ft__fail(err, FT_ERR_SPEC, "%s: memory cap of %s is too small for a Lua state",
                      path, cap);
        goto out;
    }
    if (S->L == NULL) {
        ft__fail(err, FT_ERR_OUT_OF_MEMORY, "%s: cannot create a Lua state", path);
        goto out;
    }
    c.spec = spec;
    c.err = err;
    c.rc = FT_OK;
    c.text = text;
    c.size = size;
    lua_pushcfunction(S->L, ft__spec_message_handler);
    lua_pushcfunction(S->L, load_driver);
    lua_pushlightuserdata(S->L, &c);
    status = lua_pcall(S->L, 1, 0, 1);
    ft__spec_end_call(S);
    if (status != LUA_OK)
        rc = ft__spec_lua_failure(S, status, "", err);
    else
        rc = c.rc;
    lua_settop(S->L, 0);
    if (rc != FT_OK)
        goto out;
    *out = spec;
    spec = NULL;
out:
    ft__spec_free(spec);
    return rc;
}

/* Where the chunk of a file starts: after a UTF-8 byte order mark and a first line that
 * starts with '#' (as lua.c and luaL_loadfile skip them), keeping that line's newline so
 * that line numbers stay right. */
static size_t chunk_start(const char *text, size_t size)
{
    size_t at = 0;

    if (size >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        at = 3;
    if (at < size && text[at] == '#') {
        const char *nl = memchr(text + at, '\n', size - at);
        at = nl != NULL ? (size_t)(nl - text) : size;
    }
    return at;
}

ft_status ft__spec_load(const char *path, const ft_sandbox_limits *limits, ft_spec **out,
                        ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    char *text = NULL;
    size_t size = 0;
    size_t at;
    ft_err read_err;

    if (out != NULL)
        *out = NULL;
    if (path == NULL || out == NULL) {
        ft__fail(err, rc, "ft__spec_load: path and out are required");
        goto out;
    }
    /* fs.h: a FIFO or a device is refused without blocking, a huge file before it is read. */
    rc = ft__read_file_max(path, FT_SPEC_MAX_BYTES, &text, &size, &read_err);
    if (rc != FT_OK) {
        ft__fail(err, rc, "cannot open %s", read_err.msg);
        goto out;
    }
    at = chunk_start(text, size);
    {
        const char *slash = strrchr(path, '/');
        char dir[1024];
        if (slash == NULL)
            snprintf(dir, sizeof dir, ".");
        else if (slash == path)
            snprintf(dir, sizeof dir, "/");
        else
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        rc = spec_load(path, dir, text + at, size - at, limits, out, err);
    }
out:
    free(text);
    return rc;
}

ft_status ft__spec_load_buffer(const char *name, const void *data, size_t size,
                               const ft_sandbox_limits *limits, ft_spec **out, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;

    if (out != NULL)
        *out = NULL;
    if (name == NULL || out == NULL || (data == NULL && size > 0))
        ft__fail(err, rc, "ft__spec_load_buffer: name, out and data are required");
    else
        rc = spec_load(name, NULL, data != NULL ? data : "", size, limits, out, err);
    return rc;
}

ft_status ft__spec_load_text(const char *name, const char *text, const ft_sandbox_limits *limits,
                             ft_spec **out, ft_err *err)
{
    if (text == NULL) {
        if (out != NULL)
            *out = NULL;
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "ft__spec_load_text: text is required");
    }
    return ft__spec_load_buffer(name, text, strlen(text), limits, out, err);
}

void ft__spec_free(ft_spec *spec)
{
    int i;
    int j;

    if (spec == NULL)
        return;
    if (spec->lua != NULL) {
        if (spec->lua->L != NULL)
            lua_close(spec->lua->L);
        free(spec->lua->constraint_refs);
        free(spec->lua->constraint_lines);
        ft__spec_memo_free(spec->lua);
        free(spec->lua);
    }
    for (i = 0; i < FT_MAX_PARAMS; i++) {
        ft_param *p = &spec->params[i];
        free(p->name);
        free(p->doc);
        free(p->ints);
        if (p->strings != NULL)
            for (j = 0; j < p->nvalues; j++)
                free(p->strings[j]);
        free(p->strings);
    }
    if (spec->constraint_names != NULL)
        for (i = 0; i < spec->nconstraints; i++)
            free(spec->constraint_names[i]);
    free(spec->constraint_names);
    free(spec->workloads);
    free(spec->description);
    free(spec->template_name);
    free(spec->name);
    free(spec->path);
    free(spec);
}

int ft__spec_param_index(const ft_spec *spec, const char *name)
{
    int i;

    if (spec == NULL || name == NULL)
        return -1;
    for (i = 0; i < spec->nparams; i++)
        if (strcmp(spec->params[i].name, name) == 0)
            return i;
    return -1;
}


int ft__param_has_int(const ft_param *p, long long value)
{
    int i;

    for (i = 0; p->kind == FT_PARAM_INT && i < p->nvalues; i++)
        if (p->ints[i] == value)
            return 1;
    return 0;
}

ft_status ft__spec_add_value(ft_spec *spec, int pi, long long value, ft_err *err)
{
    ft_param *p;
    char digits[32];

    if (spec == NULL || pi < 0 || pi >= spec->nparams)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "no parameter %d to add a value to", pi);
    p = &spec->params[pi];
    if (ft__param_has_int(p, value))
        return FT_OK;
    if (!p->open)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "parameter '%s' of spec %s is not open: %lld is not added",
                        p->name, spec->name, value);
    if (value < 0)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "parameter '%s' of spec %s takes no negative value (%lld)",
                        p->name, spec->name, value);
    if (p->nvalues >= FT_MAX_VALUES)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "parameter '%s' of spec %s has %d values, the most it can have: "
                        "%lld is not added", p->name, spec->name, p->nvalues, value);
    if (spec->nvariants / p->nvalues * (p->nvalues + 1) > FT_MAX_VARIANTS)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "with %s=%lld spec %s would have more than %d variants", p->name,
                        value, spec->name, FT_MAX_VARIANTS);
    if (longest_variant(spec, pi, (size_t)snprintf(digits, sizeof digits, "%lld", value)) >= FT_VARIANT_STR_MAX)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "with %s=%lld the variant strings of spec %s would pass %d "
                        "characters", p->name, value, spec->name, FT_VARIANT_STR_MAX - 1);
    p->ints[p->nvalues] = value;
    p->nvalues++;
    spec->nvariants = spec->nvariants / (p->nvalues - 1) * p->nvalues;
    return FT_OK;
}

ft_status ft__spec_add_values(ft_spec *spec, const char *text, ft_err *err)
{
    const char *s = text;

    while (s != NULL && *s != '\0') {
        const char *end = strchr(s, ','), *eq = strchr(s, '=');
        const size_t n = end != NULL ? (size_t)(end - s) : strlen(s);
        if (eq != NULL && eq < s + n) {
            char name[64], val[64], *stop;
            const char *a = s, *b = eq;
            long long x;
            int pi;
            while (a < b && isspace((unsigned char)*a))
                a++;
            while (b > a && isspace((unsigned char)b[-1]))
                b--;
            if ((size_t)(b - a) < sizeof name && (size_t)(s + n - eq - 1) < sizeof val) {
                memcpy(name, a, (size_t)(b - a));
                name[b - a] = '\0';
                memcpy(val, eq + 1, (size_t)(s + n - eq - 1));
                val[s + n - eq - 1] = '\0';
                pi = ft__spec_param_index(spec, name);
                errno = 0;
                x = strtoll(val, &stop, 10);
                while (isspace((unsigned char)*stop))
                    stop++;
                if (pi >= 0 && spec->params[pi].open && errno == 0 && stop != val && *stop == '\0' && x >= 0) {
                    ft_status rc = ft__spec_add_value(spec, pi, x, err);
                    if (rc != FT_OK)
                        return rc;
                }
            }
        }
        s = end != NULL ? end + 1 : NULL;
    }
    return FT_OK;
}
