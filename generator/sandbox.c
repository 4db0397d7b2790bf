/*
 * The bounded library functions of the spec sandbox (generator/sandbox.h), apart from pattern
 * matching (generator/pattern.c). Each behaves as the stock Lua 5.4 function of its name.
 */
#include "generator/sandbox.h"

#include "generator/pattern.h"

#include <limits.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#define STRING_MAX ((size_t)INT_MAX) /* the longest result string.rep makes, as Lua's */
#define BYTES_PER_INSTRUCTION 64     /* what one comparison of long strings costs more */
#define SORT_ORDER_ERROR "invalid order function for sorting" /* the stock sort's message */

/* Access a table function needs from its argument. */
enum { NEED_READ = 1, NEED_WRITE = 2, NEED_LEN = 4 };

static ft_meter *meter_of(lua_State *L)
{
    return lua_touserdata(L, lua_upvalueindex(1));
}

/* string.rep(s, n [, sep]). An empty result is made at once: the stock function copies
 * nothing n times to make it, which for n = 2^60 never ends. */
static int bounded_rep(lua_State *L)
{
    size_t l;
    size_t lsep;
    const char *s = luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    const char *sep = luaL_optlstring(L, 3, "", &lsep);
    size_t total;
    lua_Integer k;
    luaL_Buffer b;
    char *p;

    if (n <= 0 || l + lsep == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    /* n copies and n - 1 separators; refused, as Lua does, past INT_MAX bytes */
    if (l + lsep < l || l + lsep > STRING_MAX / (size_t)n)
        return luaL_error(L, "resulting string too large");
    total = (size_t)n * l + (size_t)(n - 1) * lsep;
    p = luaL_buffinitsize(L, &b, total);
    for (k = 0; k < n; k++) {
        if (k > 0 && lsep > 0) {
            memcpy(p, sep, lsep);
            p += lsep;
        }
        memcpy(p, s, l);
        p += l;
    }
    luaL_pushresultsize(&b, total);
    return 1;
}

/* The first position of a range: 1-based, negative from the end, clipped below. */
static size_t range_start(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return (size_t)pos;
    if (pos == 0 || pos < -(lua_Integer)len)
        return 1;
    return len + (size_t)pos + 1;
}

/* The last position of a range: clipped to the string. */
static size_t range_end(lua_Integer pos, size_t len)
{
    if (pos > (lua_Integer)len)
        return len;
    if (pos >= 0)
        return (size_t)pos;
    if (pos < -(lua_Integer)len)
        return 0;
    return len + (size_t)pos + 1;
}

/* string.byte(s [, i [, j]]): j defaults to i as given, before it is made a position. */
static int bounded_byte(lua_State *L)
{
    size_t l;
    const char *s = luaL_checklstring(L, 1, &l);
    lua_Integer i = luaL_optinteger(L, 2, 1);
    size_t first = range_start(i, l);
    size_t last = range_end(luaL_optinteger(L, 3, i), l);
    size_t count;
    size_t k;

    if (first > last)
        return 0;
    count = last - first + 1;
    if (count - 1 >= (size_t)INT_MAX)
        return luaL_error(L, "string slice too long");
    luaL_checkstack(L, (int)count, "string slice too long");
    ft__meter_charge(L, meter_of(L), (long long)count, "string.byte");
    for (k = 0; k < count; k++)
        lua_pushinteger(L, (unsigned char)s[first - 1 + k]);
    return (int)count;
}

/* Whether the metatable at mt has key (without metamethods). */
static int has_field(lua_State *L, int mt, const char *key)
{
    int found;

    lua_pushstring(L, key);
    found = lua_rawget(L, mt) != LUA_TNIL;
    lua_pop(L, 1);
    return found;
}

/* A table argument, or a value whose metatable gives what the function needs (as the stock
 * table library accepts); anything else is the usual "table expected" error. */
static void check_table(lua_State *L, int arg, int need)
{
    int ok = 0;

    if (lua_type(L, arg) == LUA_TTABLE)
        return;
    if (lua_getmetatable(L, arg)) {
        int mt = lua_gettop(L);
        ok = (!(need & NEED_READ) || has_field(L, mt, "__index")) &&
             (!(need & NEED_WRITE) || has_field(L, mt, "__newindex")) &&
             (!(need & NEED_LEN) || has_field(L, mt, "__len"));
        lua_pop(L, 1);
    }
    if (!ok)
        luaL_checktype(L, arg, LUA_TTABLE);
}

static lua_Integer length_of(lua_State *L, int arg, int need)
{
    check_table(L, arg, need | NEED_LEN);
    return luaL_len(L, arg);
}

/* t[to] = t[from] for the table argument 1, charged as one element. */
static void copy_element(lua_State *L, ft_meter *m, int dst, lua_Integer to, lua_Integer from,
                         const char *fn)
{
    ft__meter_charge(L, m, 1, fn);
    lua_geti(L, 1, from);
    lua_seti(L, dst, to);
}

/* table.insert(t, [pos,] value) */
static int bounded_insert(lua_State *L)
{
    ft_meter *m = meter_of(L);
    int nargs = lua_gettop(L);
    lua_Integer n = length_of(L, 1, NEED_READ | NEED_WRITE);
    lua_Integer slot = (lua_Integer)((lua_Unsigned)n + 1u); /* just past the last element */
    lua_Integer pos = slot;
    lua_Integer k;

    if (nargs != 2 && nargs != 3)
        return luaL_error(L, "wrong number of arguments to 'insert'");
    if (nargs == 3) {
        pos = luaL_checkinteger(L, 2);
        /* 1 <= pos <= slot, compared as unsigned so that nothing wraps */
        luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)slot, 2, "position out of bounds");
        for (k = slot; k > pos; k--) /* from the top down: t[k] = t[k - 1] */
            copy_element(L, m, 1, k, k - 1, "table.insert");
    }
    lua_seti(L, 1, pos);
    return 0;
}

/* table.remove(t [, pos]) */
static int bounded_remove(lua_State *L)
{
    ft_meter *m = meter_of(L);
    lua_Integer n = length_of(L, 1, NEED_READ | NEED_WRITE);
    lua_Integer pos = luaL_optinteger(L, 2, n);
    lua_Integer k;

    /* pos == n always works (also for an empty table, n = 0); else 1 <= pos <= n + 1. Lua
     * blames argument 1 for a bad position here, and so do we. */
    if (pos != n)
        luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)n, 1, "position out of bounds");
    lua_geti(L, 1, pos); /* the result */
    for (k = pos; k < n; k++) /* from the bottom up: t[k] = t[k + 1] */
        copy_element(L, m, 1, k, k + 1, "table.remove");
    lua_pushnil(L);
    lua_seti(L, 1, k);
    return 1;
}

/* table.move(a1, f, e, t [, a2]): a2[t..] = a1[f..e], the ranges may overlap. */
static int bounded_move(lua_State *L)
{
    ft_meter *m = meter_of(L);
    lua_Integer f = luaL_checkinteger(L, 2);
    lua_Integer e = luaL_checkinteger(L, 3);
    lua_Integer t = luaL_checkinteger(L, 4);
    int dst = lua_isnoneornil(L, 5) ? 1 : 5;
    lua_Integer count;
    lua_Integer k;
    int downwards;

    check_table(L, 1, NEED_READ);
    check_table(L, dst, NEED_WRITE);
    if (f <= e) {
        luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
        count = e - f + 1;
        luaL_argcheck(L, t <= LUA_MAXINTEGER - count + 1, 4, "destination wrap around");
        /* Into the same table above f and inside the range: copy from the end, so that
         * nothing is overwritten before it is read. */
        downwards = t > f && t <= e && (dst == 1 || lua_compare(L, 1, dst, LUA_OPEQ));
        for (k = 0; k < count; k++) {
            lua_Integer j = downwards ? count - 1 - k : k;
            copy_element(L, m, dst, t + j, f + j, "table.move");
        }
    }
    lua_pushvalue(L, dst);
    return 1;
}

/* Appends t[i] (a string or a number) to b. */
static void add_field(lua_State *L, luaL_Buffer *b, lua_Integer i)
{
    lua_geti(L, 1, i);
    if (!lua_isstring(L, -1))
        luaL_error(L, "invalid value (%s) at index %I in table for 'concat'",
                   luaL_typename(L, -1), (LUAI_UACINT)i);
    luaL_addvalue(b);
}

/* table.concat(t [, sep [, i [, j]]]) */
static int bounded_concat(lua_State *L)
{
    ft_meter *m = meter_of(L);
    lua_Integer n = length_of(L, 1, NEED_READ);
    size_t lsep;
    const char *sep = luaL_optlstring(L, 2, "", &lsep);
    lua_Integer i = luaL_optinteger(L, 3, 1);
    lua_Integer j = luaL_optinteger(L, 4, n);
    luaL_Buffer b;

    luaL_buffinit(L, &b);
    if (i <= j) {
        for (;;) { /* i never passes j, so j = maxinteger cannot wrap */
            ft__meter_charge(L, m, 1, "table.concat");
            add_field(L, &b, i);
            if (i == j)
                break;
            luaL_addlstring(&b, sep, lsep);
            i++;
        }
    }
    luaL_pushresult(&b);
    return 1;
}

/* table.unpack(t [, i [, j]]) */
static int bounded_unpack(lua_State *L)
{
    lua_Integer i = luaL_optinteger(L, 2, 1);
    lua_Integer j = lua_isnoneornil(L, 3) ? luaL_len(L, 1) : luaL_checkinteger(L, 3);
    lua_Unsigned span;
    int count;
    int k;

    if (i > j)
        return 0;
    span = (lua_Unsigned)j - (lua_Unsigned)i; /* one less than the count, so it cannot wrap */
    if (span >= (lua_Unsigned)INT_MAX || !lua_checkstack(L, (int)span + 1))
        return luaL_error(L, "too many results to unpack");
    count = (int)span + 1;
    ft__meter_charge(L, meter_of(L), count, "table.unpack");
    for (k = 0; k < count; k++)
        lua_geti(L, 1, (lua_Integer)((lua_Unsigned)i + (lua_Unsigned)k));
    return count;
}

/* What comparing a and b costs: one, and one more per BYTES_PER_INSTRUCTION bytes of the
 * shorter when both are strings (the comparison reads that much). */
static long long comparison_cost(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TSTRING && lua_type(L, 2) == LUA_TSTRING) {
        size_t la = lua_rawlen(L, 1);
        size_t lb = lua_rawlen(L, 2);
        return 1 + (long long)((la < lb ? la : lb) / BYTES_PER_INSTRUCTION);
    }
    return 1;
}

/* The comparison table.sort makes without a function of the spec's: a < b, counted.
 * Upvalue 1: the meter. */
static int counted_less(lua_State *L)
{
    ft__meter_charge(L, meter_of(L), comparison_cost(L), "table.sort");
    lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
    return 1;
}

/* A C function given to table.sort as its comparison, counted. Upvalues: the meter, the
 * function. */
static int counted_call(lua_State *L)
{
    ft__meter_charge(L, meter_of(L), comparison_cost(L), "table.sort");
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* table.sort(t [, comp]): the stock sort (upvalue 2) with a comparison that charges the meter;
 * a Lua comparison function is left as it is, its instructions count themselves. */
static int bounded_sort(lua_State *L)
{
    lua_Integer n = length_of(L, 1, NEED_READ | NEED_WRITE);

    if (n <= 1)
        return 0; /* nothing to sort, nothing checked (as the stock sort) */
    luaL_argcheck(L, n < INT_MAX, 1, "array too big");
    if (lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        lua_pushvalue(L, lua_upvalueindex(1));
        lua_pushcclosure(L, counted_less, 1);
    } else {
        luaL_checktype(L, 2, LUA_TFUNCTION);
        lua_settop(L, 2);
        if (lua_iscfunction(L, 2)) {
            lua_pushvalue(L, lua_upvalueindex(1));
            lua_insert(L, 2);
            lua_pushcclosure(L, counted_call, 2);
        }
    }
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_insert(L, 1);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        /* The stock sort's own error names the place of its caller, which is us here: name
         * ours instead, as if the spec had called it. Every error goes on up unchanged
         * otherwise (the sandbox's budgets included). */
        if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), SORT_ORDER_ERROR) == 0) {
            luaL_where(L, 1);
            lua_insert(L, -2);
            lua_concat(L, 2);
        }
        return lua_error(L);
    }
    return 0;
}

static void set_closure(lua_State *L, int t, const char *name, lua_CFunction f, ft_meter *m)
{
    lua_pushlightuserdata(L, m);
    lua_pushcclosure(L, f, 1);
    lua_setfield(L, t, name);
}

void ft__sandbox_bound_libs(lua_State *L, ft_meter *m)
{
    int t;

    lua_getglobal(L, LUA_STRLIBNAME);
    t = lua_gettop(L);
    ft__pattern_install(L, t, m);
    set_closure(L, t, "rep", bounded_rep, m);
    set_closure(L, t, "byte", bounded_byte, m);
    lua_pop(L, 1);

    lua_getglobal(L, LUA_TABLIBNAME);
    t = lua_gettop(L);
    set_closure(L, t, "insert", bounded_insert, m);
    set_closure(L, t, "remove", bounded_remove, m);
    set_closure(L, t, "move", bounded_move, m);
    set_closure(L, t, "concat", bounded_concat, m);
    set_closure(L, t, "unpack", bounded_unpack, m);
    lua_pushlightuserdata(L, m);
    lua_getfield(L, t, "sort");
    lua_pushcclosure(L, bounded_sort, 2);
    lua_setfield(L, t, "sort");
    lua_pop(L, 1);
}
