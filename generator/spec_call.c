/*
 * Lua specs: the calls of a spec's functions (constraints, smem, registers) on variants, and
 * the built-in specs.
 */
#include "generator/spec_internal.h"

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


/* ---- calls of the spec's functions ------------------------------------------------------- */

static void push_values(lua_State *L, const ft_spec *spec, const ft_variant *v)
{
    int i;

    lua_createtable(L, 0, spec->nparams);
    for (i = 0; i < spec->nparams; i++) {
        const ft_param *p = &spec->params[i];
        if (p->kind == FT_PARAM_INT)
            lua_pushinteger(L, (lua_Integer)p->ints[v->idx[i]]);
        else
            lua_pushstring(L, p->strings[v->idx[i]]);
        lua_setfield(L, -2, p->name);
    }
}

static int arch_next(lua_State *L);

/* Notes that the call read parameter i. */
static void log_read(read_log *log, int i)
{
    if (!(log->seen & (1u << i))) {
        log->seen |= 1u << i;
        log->order[log->n++] = i;
    }
}

/* __index of a variant view: the value from the real table (upvalue 1), the read noted in the
 * log (upvalue 2) when the key names a parameter. */
static int view_index(lua_State *L)
{
    read_log *log = lua_touserdata(L, lua_upvalueindex(2));
    const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    int i;

    for (i = 0; key != NULL && i < log->spec->nparams; i++)
        if (strcmp(key, log->spec->params[i].name) == 0) {
            log_read(log, i);
            break;
        }
    lua_pushvalue(L, 2);
    lua_gettable(L, lua_upvalueindex(1));
    return 1;
}

/* __pairs of a variant view: every parameter read (in the spec's order), then next over the
 * real table (upvalue 1). */
static int view_pairs(lua_State *L)
{
    read_log *log = lua_touserdata(L, lua_upvalueindex(2));
    int i;

    for (i = 0; i < log->spec->nparams; i++)
        log_read(log, i);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushcclosure(L, arch_next, 1);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

/* The variant table a spec function receives: its parameters' values by name; with a read log
 * (c->log), a view of them that notes which parameters the call reads (reads through
 * v.name and pairs(v); values the function stores in it are its own). */
static void push_variant(lua_State *L, const call_ctx *c)
{
    if (c->log == NULL) {
        push_values(L, c->spec, c->v);
        return;
    }
    lua_createtable(L, 0, 0); /* the view */
    lua_createtable(L, 0, 2); /* its metatable */
    push_values(L, c->spec, c->v);
    lua_pushlightuserdata(L, c->log);
    lua_pushvalue(L, -2);
    lua_pushvalue(L, -2);
    lua_pushcclosure(L, view_pairs, 2); /* view, metatable, values, log, __pairs */
    lua_setfield(L, -4, "__pairs");
    lua_pushcclosure(L, view_index, 2);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
}

static void set_int(lua_State *L, const char *key, long long x)
{
    lua_pushinteger(L, (lua_Integer)x);
    lua_setfield(L, -2, key);
}

/* Whether two targets give the same arch table. */
static int same_arch(const ft_arch *a, const ft_arch *b)
{
    return strncmp(a->name, b->name, sizeof a->name) == 0 && a->cc == b->cc && a->sms == b->sms &&
           a->smem_per_block == b->smem_per_block && a->smem_per_sm == b->smem_per_sm &&
           a->regs_per_sm == b->regs_per_sm && a->regs_per_thread == b->regs_per_thread &&
           a->threads_per_block == b->threads_per_block && a->threads_per_sm == b->threads_per_sm;
}

static int arch_newindex(lua_State *L)
{
    return luaL_error(L, "arch is read-only");
}

/* The iterator of pairs(arch): next over the real table (upvalue 1). */
static int arch_next(lua_State *L)
{
    lua_settop(L, 2);
    if (lua_next(L, lua_upvalueindex(1)) != 0)
        return 2;
    lua_pushnil(L);
    return 1;
}

static int arch_pairs(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushcclosure(L, arch_next, 1);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

/* Pushes the arch table. It is built once per target and kept: an empty table whose
 * metatable reads from the real one and refuses writes, so that no call can change what
 * the next one sees. One that rawset wrote into is replaced. */
static void push_arch(lua_State *L, ft_spec_lua *S, const ft_arch *a)
{
    const char *nul = memchr(a->name, '\0', sizeof a->name);
    int ref;

    if (S->arch_ref != LUA_NOREF && same_arch(&S->arch, a)) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, S->arch_ref);
        lua_pushnil(L);
        if (lua_next(L, -2) == 0)
            return;
        lua_pop(L, 3);
    }
    lua_createtable(L, 0, 0); /* the view */
    lua_createtable(L, 0, 4); /* its metatable */
    lua_createtable(L, 0, 9); /* the real table */
    lua_pushlstring(L, a->name, nul != NULL ? (size_t)(nul - a->name) : sizeof a->name);
    lua_setfield(L, -2, "name");
    set_int(L, "cc", a->cc);
    set_int(L, "sms", a->sms);
    set_int(L, "smem_per_block", a->smem_per_block);
    set_int(L, "smem_per_sm", a->smem_per_sm);
    set_int(L, "regs_per_sm", a->regs_per_sm);
    set_int(L, "regs_per_thread", a->regs_per_thread);
    set_int(L, "threads_per_block", a->threads_per_block);
    set_int(L, "threads_per_sm", a->threads_per_sm);
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, arch_pairs, 1);
    lua_setfield(L, -3, "__pairs");
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, arch_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushliteral(L, "arch is read-only");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    ref = luaL_ref(L, LUA_REGISTRYINDEX);
    luaL_unref(L, LUA_REGISTRYINDEX, S->arch_ref);
    S->arch_ref = ref;
    S->arch = *a;
}

/* "path:12: " for a function defined on line 12, "path: " when unknown. */
static void function_where(const ft_spec *spec, int line, char *buf, size_t cap)
{
    if (line > 0)
        snprintf(buf, cap, "%s:%d: ", spec->path, line);
    else
        snprintf(buf, cap, "%s: ", spec->path);
}

/* Evaluates constraint c->only on the variant table (2) and arch table (3) (ft__spec_check
 * takes them in order, each through its memo). */
static void run_constraint(lua_State *L, call_ctx *c)
{
    ft_spec_lua *S = c->spec->lua;
    const int i = c->only;
    const char *name = c->spec->constraint_names[i];
    char where[FT_ERR_MSG_MAX / 2];
    char variant[512];
    char buf[96];
    int t;

    c->keep = 1;
    c->current = i;
    lua_rawgeti(L, LUA_REGISTRYINDEX, S->constraint_refs[i]);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    ft__spec_begin_call(S, 0);
    lua_call(L, 2, 2);
    ft__spec_end_call(S);
    t = lua_type(L, -2);
    if (t == LUA_TBOOLEAN && lua_toboolean(L, -2))
        return;
    if (t != LUA_TNIL && t != LUA_TBOOLEAN) {
        function_where(c->spec, S->constraint_lines[i], where, sizeof where);
        ft__variant_format(c->spec, c->v, variant, sizeof variant);
        c->rc = ft__fail(c->err, FT_ERR_SPEC,
                         "%sconstraint '%s' returned %s for variant %s; it must return true, "
                         "or false and an optional reason",
                         where, name, ft__spec_describe(L, -2, buf, sizeof buf), variant);
        return;
    }
    c->keep = 0;
    if (c->log != NULL && lua_type(L, -1) == LUA_TSTRING && lua_rawlen(L, -1) > 0 &&
        (c->raw_reason = malloc(lua_rawlen(L, -1))) != NULL) {
        c->raw_len = lua_rawlen(L, -1);
        memcpy(c->raw_reason, lua_tostring(L, -1), c->raw_len);
    }
    if (c->reason != NULL && c->reason_cap > 0 && lua_type(L, -1) == LUA_TSTRING && lua_rawlen(L, -1) > 0)
        ft__printable(c->reason, c->reason_cap, lua_tostring(L, -1), lua_rawlen(L, -1));
    else if (c->reason != NULL && c->reason_cap > 0)
        snprintf(c->reason, c->reason_cap, "%s", name); /* printable since the load */
}

/* smem or registers on the variant table (2) and arch table (3). */
static void run_number(lua_State *L, call_ctx *c)
{
    ft_spec_lua *S = c->spec->lua;
    const char *name = c->what == CALL_SMEM ? "smem" : "registers";
    int ref = c->what == CALL_SMEM ? S->smem_ref : S->registers_ref;
    int line = c->what == CALL_SMEM ? S->smem_line : S->registers_line;
    int isint = 0;
    lua_Integer x;
    char where[FT_ERR_MSG_MAX / 2];
    char variant[512];
    char buf[96];

    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 3);
    ft__spec_begin_call(S, 0);
    lua_call(L, 2, 1);
    ft__spec_end_call(S);
    x = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
    if (!isint || x < 0) {
        function_where(c->spec, line, where, sizeof where);
        ft__variant_format(c->spec, c->v, variant, sizeof variant);
        c->rc = ft__fail(c->err, FT_ERR_SPEC,
                         "%s%s returned %s for variant %s; it must return a non-negative integer",
                         where, name, ft__spec_describe(L, -1, buf, sizeof buf), variant);
        return;
    }
    c->number = (long long)x;
}

/* Runs in lua_pcall: builds v and arch, calls the function(s). */
static int call_driver(lua_State *L)
{
    call_ctx *c = lua_touserdata(L, 1);

    push_variant(L, c);
    push_arch(L, c->spec->lua, c->arch);
    if (c->what == CALL_CHECK)
        run_constraint(L, c);
    else
        run_number(L, c);
    return 0;
}

static ft_status check_args(const ft_spec *spec, const ft_variant *v, const ft_arch *arch,
                            const void *result, ft_err *err)
{
    int i;

    if (spec == NULL || spec->lua == NULL || spec->lua->L == NULL || v == NULL || arch == NULL ||
        result == NULL)
        return ft__fail(err, FT_ERR_INVALID_ARGUMENT, "spec call: a required argument is NULL");
    for (i = 0; i < spec->nparams; i++)
        if (v->idx[i] < 0 || v->idx[i] >= spec->params[i].nvalues)
            return ft__fail(err, FT_ERR_INVALID_ARGUMENT,
                            "%s: variant index %d out of range for parameter '%s'", spec->path,
                            v->idx[i], spec->params[i].name);
    return FT_OK;
}

/* Calls the spec's function(s) in protected mode and reports errors with their context. */
static ft_status call_spec(call_ctx *c)
{
    ft_spec_lua *S = c->spec->lua;
    lua_State *L = S->L;
    char context[1024];
    char variant[512];
    int status;

    c->rc = FT_OK;
    c->current = -1;
    ft__spec_end_call(S); /* nothing of the last call's budgets or errors is left */
    S->fatal = FATAL_NONE;
    S->refused = REFUSED_NONE;
    lua_settop(L, 0);
    lua_pushcfunction(L, ft__spec_message_handler);
    lua_pushcfunction(L, call_driver);
    lua_pushlightuserdata(L, c);
    status = lua_pcall(L, 1, 0, 1);
    ft__spec_end_call(S);
    if (status != LUA_OK) {
        ft__variant_format(c->spec, c->v, variant, sizeof variant);
        if (c->what == CALL_CHECK && c->current >= 0)
            snprintf(context, sizeof context, " (in constraint '%s' for variant %s)",
                     c->spec->constraint_names[c->current], variant);
        else if (c->what == CALL_CHECK)
            snprintf(context, sizeof context, " (for variant %s)", variant);
        else
            snprintf(context, sizeof context, " (in %s for variant %s)",
                     c->what == CALL_SMEM ? "smem" : "registers", variant);
        c->rc = ft__spec_lua_failure(S, status, context, c->err);
    }
    lua_settop(L, 0);
    return c->rc;
}

/* ---- memos --------------------------------------------------------------------------------
 * A spec function is a function of the variant's values and the target: the same values give
 * the same result. Planning calls the constraints, smem and registers on every variant of the
 * space (774144 of the sm_90a forward's), most of which differ only in parameters a function
 * never reads, so each function's results are kept in a tree of the reads it made: an inner
 * node is the parameter the function read next, a child per value of it, a leaf the result.
 * A variant walks down by its values; where the walk ends before a leaf the function runs, its
 * reads noted (a view of the variant, push_variant), and the path is added. A function whose
 * reads differ on the same values (it keeps state between calls) is called every time from
 * then on. Errors are not kept: the next call runs again and fails the same way. */
typedef struct memo_node {
    int param;                  /* the parameter read next; -1: a leaf */
    int nchild;                 /* children allocated (a value added later has none yet) */
    struct memo_node **child;
    int pass;                   /* leaf of a constraint: it holds */
    long long number;           /* leaf of smem or registers */
    char *reason;               /* leaf of a constraint that fails: the reason it returned, as it
                                   returned it (reason_len bytes); NULL: none (its name says why) */
    size_t reason_len;
} memo_node;

static void memo_node_free(memo_node *n)
{
    int i;

    if (n == NULL)
        return;
    for (i = 0; i < n->nchild; i++)
        memo_node_free(n->child[i]);
    free(n->child);
    free(n->reason);
    free(n);
}

void ft__spec_memo_free(ft_spec_lua *S)
{
    int i;

    for (i = 0; S->memo != NULL && i < S->nmemo; i++)
        memo_node_free(S->memo[i]);
    free(S->memo);
    free(S->memo_off);
    S->memo = NULL, S->memo_off = NULL, S->nmemo = 0;
}

/* The memos for target arch: fresh when the target changed (a function may read arch). 0: none
 * (out of memory: every call runs). */
static int memo_ready(ft_spec *spec, const ft_arch *arch)
{
    ft_spec_lua *S = spec->lua;
    const int n = spec->nconstraints + 2;

    if (S->memo != NULL && S->nmemo == n && same_arch(&S->memo_arch, arch))
        return 1;
    ft__spec_memo_free(S);
    S->memo = calloc((size_t)n, sizeof *S->memo);
    S->memo_off = calloc((size_t)n, 1);
    if (S->memo == NULL || S->memo_off == NULL) {
        ft__spec_memo_free(S);
        return 0;
    }
    S->nmemo = n, S->memo_arch = *arch;
    return 1;
}

/* Function f's leaf for v, or NULL where its tree does not reach. */
static const memo_node *memo_find(const ft_spec_lua *S, int f, const ft_variant *v)
{
    const memo_node *n = S->memo_off[f] ? NULL : S->memo[f];

    while (n != NULL && n->param >= 0)
        n = v->idx[n->param] < n->nchild ? n->child[v->idx[n->param]] : NULL;
    return n;
}

static memo_node *memo_new(int param)
{
    memo_node *n = calloc(1, sizeof *n);

    if (n != NULL)
        n->param = param;
    return n;
}

/* Adds the path of a call of function f on v that read log's parameters; returns its leaf, or
 * NULL when it cannot keep it (no memory: nothing is lost; reads that disagree with the tree:
 * the function is left unmemoised). */
static memo_node *memo_add(ft_spec *spec, int f, const ft_variant *v, const read_log *log)
{
    ft_spec_lua *S = spec->lua;
    memo_node **slot = &S->memo[f];
    int k;

    for (k = 0; k <= log->n; k++) {
        const int p = k < log->n ? log->order[k] : -1;
        memo_node *n = *slot;
        if (n == NULL && (n = *slot = memo_new(p)) == NULL)
            return NULL;
        if (n->param != p) {
            S->memo_off[f] = 1;
            return NULL;
        }
        if (p < 0)
            return n;
        if (v->idx[p] >= n->nchild) {
            const int want = spec->params[p].nvalues;
            memo_node **c = realloc(n->child, (size_t)want * sizeof *c);
            if (c == NULL)
                return NULL;
            memset(c + n->nchild, 0, (size_t)(want - n->nchild) * sizeof *c);
            n->child = c, n->nchild = want;
        }
        slot = &n->child[v->idx[p]];
    }
    return NULL;
}

/* One function on v through its memo: CALL_CHECK with c->only the constraint, or smem or
 * registers; fills c->keep (and c->reason) or c->number as call_spec does (the reason of a
 * constraint kept as it returned it, written as run_constraint writes it). */
static ft_status memo_call(call_ctx *c)
{
    ft_spec_lua *S = c->spec->lua;
    const int f = c->what == CALL_CHECK ? c->only : c->spec->nconstraints + (c->what == CALL_SMEM ? 0 : 1);
    const int memo = memo_ready(c->spec, c->arch);
    const memo_node *hit = memo ? memo_find(S, f, c->v) : NULL;
    memo_node *leaf;
    read_log log;

    if (hit != NULL) {
        c->keep = hit->pass, c->number = hit->number;
        if (!hit->pass && c->reason != NULL && c->reason_cap > 0 && hit->reason != NULL)
            ft__printable(c->reason, c->reason_cap, hit->reason, hit->reason_len);
        else if (!hit->pass && c->reason != NULL && c->reason_cap > 0)
            snprintf(c->reason, c->reason_cap, "%s", c->spec->constraint_names[f]);
        return FT_OK;
    }
    memset(&log, 0, sizeof log);
    log.spec = c->spec;
    c->log = memo && !S->memo_off[f] ? &log : NULL;
    if (call_spec(c) == FT_OK && c->log != NULL && (leaf = memo_add(c->spec, f, c->v, &log)) != NULL) {
        leaf->pass = c->keep, leaf->number = c->number;
        if (!c->keep && leaf->reason == NULL)
            leaf->reason = c->raw_reason, leaf->reason_len = c->raw_len, c->raw_reason = NULL;
    }
    free(c->raw_reason);
    c->raw_reason = NULL;
    return c->rc;
}

ft_status ft__spec_check(ft_spec *spec, const ft_variant *v, const ft_arch *arch, int *keep,
                         char *reason, size_t reason_cap, ft_err *err)
{
    ft_status rc;
    call_ctx c;
    int i;

    if (keep != NULL)
        *keep = 0;
    if (reason != NULL && reason_cap > 0)
        reason[0] = '\0';
    rc = check_args(spec, v, arch, keep, err);
    if (rc != FT_OK)
        return rc;
    /* each constraint through its memo, in order, up to the first that fails */
    for (i = 0; i < spec->nconstraints; i++) {
        c = (call_ctx){.spec = spec, .v = v, .arch = arch, .what = CALL_CHECK, .only = i, .reason = reason,
                       .reason_cap = reason_cap, .err = err};
        rc = memo_call(&c);
        if (rc != FT_OK) {
            if (reason != NULL && reason_cap > 0)
                reason[0] = '\0';
            return rc;
        }
        if (!c.keep)
            return FT_OK;
    }
    *keep = 1;
    return FT_OK;
}

ft_status ft__spec_smem(ft_spec *spec, const ft_variant *v, const ft_arch *arch, long long *bytes,
                        ft_err *err)
{
    ft_status rc;
    call_ctx c;

    if (bytes != NULL)
        *bytes = 0;
    rc = check_args(spec, v, arch, bytes, err);
    if (rc != FT_OK)
        goto out;
    c = (call_ctx){.spec = spec, .v = v, .arch = arch, .what = CALL_SMEM, .err = err};
    rc = memo_call(&c);
    if (rc == FT_OK)
        *bytes = c.number;
out:
    return rc;
}

ft_status ft__spec_registers(ft_spec *spec, const ft_variant *v, const ft_arch *arch,
                             long long *regs, ft_err *err)
{
    ft_status rc;
    call_ctx c;

    if (regs != NULL)
        *regs = 0;
    rc = check_args(spec, v, arch, regs, err);
    if (rc != FT_OK)
        goto out;
    if (!spec->has_registers) {
        rc = ft__fail(err, FT_ERR_INVALID_ARGUMENT, "%s: the spec has no registers function",
                      spec->path);
        goto out;
    }
    c = (call_ctx){.spec = spec, .v = v, .arch = arch, .what = CALL_REGISTERS, .err = err};
    rc = memo_call(&c);
    if (rc == FT_OK)
        *regs = c.number;
out:
    return rc;
}

/* The built-in spec a name stands for: "specs/x.lua", "x.lua" or "x". */
static const ft_embedded_file *builtin_spec(const char *name)
{
    const ft_embedded_file *f;

    for (f = ft__builtin_specs; f->name != NULL; f++) {
        const char *base = f->name + strlen("specs/");
        size_t stem = strlen(base) - strlen(".lua");
        if (strcmp(name, f->name) == 0 || strcmp(name, base) == 0 ||
            (strlen(name) == stem && strncmp(name, base, stem) == 0))
            return f;
    }
    return NULL;
}

/* Levenshtein distance of a and b (each cut to 63 characters). */
static int edit_distance(const char *a, const char *b)
{
    int d[64][64];
    const int n = (int)strnlen(a, 63), m = (int)strnlen(b, 63);
    int i, j;

    for (i = 0; i <= n; i++)
        d[i][0] = i;
    for (j = 0; j <= m; j++)
        d[0][j] = j;
    for (i = 1; i <= n; i++)
        for (j = 1; j <= m; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

/* A missing spec file that is no built-in name either: the load's error, then the built-in
 * names and the nearest of them (within a third of the name's length) as a suggestion. */
static ft_status not_found(const char *path, ft_status rc, ft_err *err)
{
    char names[256], stem[64], builtin[16][64];
    const char *base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path, *best = NULL;
    const ft_embedded_file *f;
    size_t n = 0, len;
    int best_d = 1 << 30;
    ft_err load = *err;

    snprintf(stem, sizeof stem, "%s", base);
    len = strlen(stem);
    if (len > 4 && strcmp(stem + len - 4, ".lua") == 0)
        stem[len - 4] = '\0';
    names[0] = '\0';
    for (f = ft__builtin_specs; f->name != NULL; f++) {
        const size_t k = (size_t)(f - ft__builtin_specs);
        int dist;
        if (k >= sizeof builtin / sizeof builtin[0])
            break;
        snprintf(builtin[k], sizeof builtin[k], "%.*s", (int)(strlen(f->name) - strlen("specs/") - strlen(".lua")),
                 f->name + strlen("specs/"));
        if (n < sizeof names)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", builtin[k]);
        dist = edit_distance(stem, builtin[k]);
        if (dist < best_d) {
            best_d = dist;
            best = builtin[k];
        }
    }
    if (best != NULL && best_d > 0 && 3 * best_d <= (int)strlen(stem))
        return ft__fail(err, rc, "%s; no built-in spec has that name either (%s): did you mean %s?", load.msg, names,
                        best);
    return ft__fail(err, rc, "%s; no built-in spec has that name either (%s)", load.msg, names);
}

ft_status ft__spec_load_default(const char *path, ft_spec **out, ft_err *err)
{
    const ft_embedded_file *f = builtin_spec(path != NULL ? path : FT_DEFAULT_SPEC_NAME);
    ft_status rc;

    if (path != NULL && (f == NULL || access(path, F_OK) == 0)) {
        rc = ft__spec_load(path, NULL, out, err);
        if (rc == FT_ERR_IO && f == NULL && access(path, F_OK) != 0)
            rc = not_found(path, rc, err);
        return rc;
    }
    return ft__spec_load_text(f->name, f->data, NULL, out, err);
}

ft_status ft__spec_load_builtin(int i, ft_spec **out, ft_err *err)
{
    int n;

    *out = NULL;
    for (n = 0; ft__builtin_specs[n].name != NULL; n++)
        if (n == i)
            return ft__spec_load_text(ft__builtin_specs[n].name, ft__builtin_specs[n].data, NULL, out, err);
    return ft__fail(err, FT_ERR_NOT_FOUND, "there is no built-in spec %d", i);
}

