/*
 * Lua 5.4 pattern matching for the spec sandbox: string.find, string.match, string.gmatch and
 * string.gsub as the reference manual (§6.4.1) describes them, written to charge their work to
 * a meter (generator/sandbox.h) so that a pattern that backtracks exponentially ends with an
 * error instead of running for ever.
 *
 * The matcher backtracks as Lua's does, so results (and which errors a pattern raises) are the
 * same: a single character class, set or escape, optionally followed by '*', '+', '-' or '?';
 * %b, %f, back-references %1-%9; captures and position captures; '^' anchors find, match and
 * gsub (not gmatch); '$' anchors the end when it ends the pattern. Nested calls of the matcher
 * are limited to MAX_DEPTH ("pattern too complex") and captures to MAX_CAPTURES.
 */
#include <ctype.h>
#include <limits.h>
#include <stddef.h>
#include <string.h> /* memmem: the build defines _GNU_SOURCE */

#include <lauxlib.h>
#include <lua.h>

#include "generator/pattern.h"

#define MAX_CAPTURES 32 /* Lua's LUA_MAXCAPTURES */
#define MAX_DEPTH 200   /* nested matcher calls (Lua's MAXCCALLS) */
#define CAP_OPEN (-1)   /* a capture whose ')' has not been reached */
#define CAP_POSITION (-2)
#define BYTES_PER_STEP 64 /* what a plain search or a back-reference compares for one step */
#define SPECIALS "^$*+?.([%-"

typedef struct capture {
    const char *start;
    ptrdiff_t len; /* or CAP_OPEN, CAP_POSITION */
} capture;

typedef struct matcher {
    lua_State *L;
    ft_meter *meter;
    const char *fn;    /* "string.find", for the budget's message */
    const char *src;   /* the subject */
    const char *src_end;
    const char *p_end; /* the pattern's end */
    int depth;         /* nested calls left */
    int ncap;
    capture cap[MAX_CAPTURES];
} matcher;

static void step(matcher *m, long long n)
{
    ft__meter_match(m->L, m->meter, n, m->fn);
}

static void matcher_init(matcher *m, lua_State *L, ft_meter *meter, const char *fn,
                         const char *s, size_t ls, const char *p, size_t lp)
{
    m->L = L;
    m->meter = meter;
    m->fn = fn;
    m->src = s;
    m->src_end = s + ls;
    m->p_end = p + lp;
    m->depth = MAX_DEPTH;
    m->ncap = 0;
}

/* Before each attempt at a new subject position. */
static void matcher_reset(matcher *m)
{
    m->depth = MAX_DEPTH;
    m->ncap = 0;
}

/* Where the single-character item at p ends (the character after it): a plain character, an
 * escape %x, or a set [...] whose first character may be ']' (or follow a '^'). */
static const char *item_end(matcher *m, const char *p)
{
    char c = *p++;

    if (c == '%') {
        if (p >= m->p_end)
            luaL_error(m->L, "malformed pattern (ends with '%%')");
        return p + 1;
    }
    if (c != '[')
        return p;
    if (p < m->p_end && *p == '^')
        p++;
    for (;;) {
        if (p >= m->p_end)
            luaL_error(m->L, "malformed pattern (missing ']')");
        c = *p++;
        if (c == '%' && p < m->p_end)
            p++; /* an escaped character, ']' included */
        if (p < m->p_end && *p == ']')
            return p + 1;
    }
}

/* %a, %d, ... (upper case: the complement); any other character stands for itself. */
static int class_matches(int c, int cl)
{
    int r;

    switch (tolower(cl)) {
    case 'a': r = isalpha(c); break;
    case 'c': r = iscntrl(c); break;
    case 'd': r = isdigit(c); break;
    case 'g': r = isgraph(c); break;
    case 'l': r = islower(c); break;
    case 'p': r = ispunct(c); break;
    case 's': r = isspace(c); break;
    case 'u': r = isupper(c); break;
    case 'w': r = isalnum(c); break;
    case 'x': r = isxdigit(c); break;
    case 'z': r = c == 0; break; /* deprecated in the manual, still accepted by Lua 5.4 */
    default: return cl == c;
    }
    if (isupper(cl))
        r = !r;
    return r != 0;
}

/* Whether c is in the set that starts at p ('[') and ends at close (its ']'). */
static int set_matches(int c, const char *p, const char *close)
{
    int in = 1;

    p++;
    if (*p == '^') {
        in = 0;
        p++;
    }
    for (; p < close; p++) {
        if (*p == '%') {
            p++;
            if (class_matches(c, (unsigned char)*p))
                return in;
        } else if (p + 2 < close && p[1] == '-') {
            if ((unsigned char)p[0] <= c && c <= (unsigned char)p[2])
                return in;
            p += 2;
        } else if ((unsigned char)*p == c) {
            return in;
        }
    }
    return !in;
}

/* Whether the subject character at s matches the item p..ep. */
static int single_matches(const matcher *m, const char *s, const char *p, const char *ep)
{
    int c;

    if (s >= m->src_end)
        return 0;
    c = (unsigned char)*s;
    switch (*p) {
    case '.': return 1;
    case '%': return class_matches(c, (unsigned char)p[1]);
    case '[': return set_matches(c, p, ep - 1);
    default: return (unsigned char)*p == c;
    }
}

static const char *match(matcher *m, const char *s, const char *p);

/* %bxy at s: the shortest balanced run from x to its matching y. */
static const char *match_balance(matcher *m, const char *s, const char *p)
{
    const char *end = NULL;
    const char *q;
    int open;
    int close;
    int depth = 1;

    if (p + 1 >= m->p_end)
        luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
    if (s >= m->src_end || *s != *p)
        return NULL;
    open = (unsigned char)p[0];
    close = (unsigned char)p[1];
    for (q = s + 1; q < m->src_end && end == NULL; q++) {
        int c = (unsigned char)*q;
        if (c == close) /* before open: %bxx closes at the next x */
            depth--;
        else if (c == open)
            depth++;
        if (depth == 0)
            end = q + 1;
    }
    step(m, 1 + (q - s));
    return end;
}

/* %1..%9 at s: the text capture l holds, again. */
static const char *match_backref(matcher *m, const char *s, int digit)
{
    int l = digit - '1';
    size_t len;

    if (l < 0 || l >= m->ncap || m->cap[l].len == CAP_OPEN)
        luaL_error(m->L, "invalid capture index %%%d", l + 1);
    if (m->cap[l].len == CAP_POSITION)
        return NULL; /* a position is no text */
    len = (size_t)m->cap[l].len;
    step(m, 1 + (long long)(len / BYTES_PER_STEP));
    if ((size_t)(m->src_end - s) >= len && memcmp(m->cap[l].start, s, len) == 0)
        return s + len;
    return NULL;
}

/* The longest run of the item p..ep at s that lets the rest of the pattern match, backing off
 * one character at a time. */
static const char *expand_longest(matcher *m, const char *s, const char *p, const char *ep)
{
    ptrdiff_t n = 0;

    while (single_matches(m, s + n, p, ep))
        n++;
    step(m, 1 + n);
    for (; n >= 0; n--) {
        const char *r = match(m, s + n, ep + 1);
        if (r != NULL)
            return r;
    }
    return NULL;
}

/* The shortest run of the item p..ep at s that lets the rest of the pattern match. */
static const char *expand_shortest(matcher *m, const char *s, const char *p, const char *ep)
{
    for (;;) {
        const char *r = match(m, s, ep + 1);
        if (r != NULL)
            return r;
        if (!single_matches(m, s, p, ep))
            return NULL;
        s++;
    }
}

static const char *open_capture(matcher *m, const char *s, const char *p, ptrdiff_t what)
{
    const char *r;

    if (m->ncap >= MAX_CAPTURES)
        luaL_error(m->L, "too many captures");
    m->cap[m->ncap].start = s;
    m->cap[m->ncap].len = what;
    m->ncap++;
    r = match(m, s, p);
    if (r == NULL)
        m->ncap--;
    return r;
}

static const char *close_capture(matcher *m, const char *s, const char *p)
{
    const char *r;
    int l;

    for (l = m->ncap - 1; l >= 0 && m->cap[l].len != CAP_OPEN; l--)
        continue;
    if (l < 0)
        luaL_error(m->L, "invalid pattern capture");
    m->cap[l].len = s - m->cap[l].start;
    r = match(m, s, p);
    if (r == NULL)
        m->cap[l].len = CAP_OPEN;
    return r;
}

/* Matches the pattern from p against the subject from s; returns where the match ends, or
 * NULL. Items that need no backtracking are taken in the loop, the others recurse. */
static const char *match(matcher *m, const char *s, const char *p)
{
    const char *r = NULL;

    if (m->depth == 0)
        luaL_error(m->L, "pattern too complex");
    m->depth--;
    step(m, 1);
    while (p < m->p_end) {
        const char *ep;
        step(m, 1);
        if (*p == '(') {
            if (p + 1 < m->p_end && p[1] == ')')
                r = open_capture(m, s, p + 2, CAP_POSITION);
            else
                r = open_capture(m, s, p + 1, CAP_OPEN);
            goto out;
        }
        if (*p == ')') {
            r = close_capture(m, s, p + 1);
            goto out;
        }
        if (*p == '$' && p + 1 == m->p_end) {
            r = s == m->src_end ? s : NULL;
            goto out;
        }
        if (*p == '%' && p + 1 < m->p_end && p[1] == 'b') {
            s = match_balance(m, s, p + 2);
            if (s == NULL)
                goto out;
            p += 4;
            continue;
        }
        if (*p == '%' && p + 1 < m->p_end && p[1] == 'f') {
            int prev;
            int cur;
            p += 2;
            if (p >= m->p_end || *p != '[')
                luaL_error(m->L, "missing '[' after '%%f' in pattern");
            ep = item_end(m, p);
            prev = s == m->src ? 0 : (unsigned char)s[-1];
            cur = s < m->src_end ? (unsigned char)*s : 0;
            if (set_matches(prev, p, ep - 1) || !set_matches(cur, p, ep - 1))
                goto out;
            p = ep;
            continue;
        }
        if (*p == '%' && p + 1 < m->p_end && isdigit((unsigned char)p[1])) {
            s = match_backref(m, s, (unsigned char)p[1]);
            if (s == NULL)
                goto out;
            p += 2;
            continue;
        }
        /* One character class with its quantifier, if any. */
        ep = item_end(m, p);
        if (!single_matches(m, s, p, ep)) {
            if (ep < m->p_end && (*ep == '*' || *ep == '?' || *ep == '-')) {
                p = ep + 1; /* none of it is allowed */
                continue;
            }
            goto out;
        }
        if (ep < m->p_end && *ep == '?') {
            r = match(m, s + 1, ep + 1);
            if (r != NULL)
                goto out;
            p = ep + 1;
            continue;
        }
        if (ep < m->p_end && *ep == '+') {
            r = expand_longest(m, s + 1, p, ep);
            goto out;
        }
        if (ep < m->p_end && *ep == '*') {
            r = expand_longest(m, s, p, ep);
            goto out;
        }
        if (ep < m->p_end && *ep == '-') {
            r = expand_shortest(m, s, p, ep);
            goto out;
        }
        s++;
        p = ep;
    }
    r = s;
out:
    m->depth++;
    return r;
}

/* Pushes capture i of a match from s to e; without captures, "capture 1" is the whole match. */
static void push_capture(matcher *m, int i, const char *s, const char *e)
{
    if (i >= m->ncap) {
        if (i != 0)
            luaL_error(m->L, "invalid capture index %%%d", i + 1);
        lua_pushlstring(m->L, s, (size_t)(e - s));
        return;
    }
    if (m->cap[i].len == CAP_OPEN)
        luaL_error(m->L, "unfinished capture");
    if (m->cap[i].len == CAP_POSITION)
        lua_pushinteger(m->L, (lua_Integer)(m->cap[i].start - m->src) + 1);
    else
        lua_pushlstring(m->L, m->cap[i].start, (size_t)m->cap[i].len);
}

/* Pushes the captures (or, when there are none and s is not NULL, the whole match). */
static int push_captures(matcher *m, const char *s, const char *e)
{
    int n = m->ncap == 0 && s != NULL ? 1 : m->ncap;
    int i;

    luaL_checkstack(m->L, n, "too many captures");
    for (i = 0; i < n; i++)
        push_capture(m, i, s, e);
    return n;
}

/* A position argument made 1-based and clipped below: negative counts from the end. */
static size_t start_position(lua_Integer pos, size_t len)
{
    if (pos > 0)
        return (size_t)pos;
    if (pos == 0 || pos < -(lua_Integer)len)
        return 1;
    return len + (size_t)pos + 1;
}

static int has_specials(const char *p, size_t lp)
{
    size_t i;

    for (i = 0; i < lp; i++)
        if (p[i] != '\0' && strchr(SPECIALS, p[i]) != NULL)
            return 1;
    return 0;
}

static ft_meter *meter_of(lua_State *L)
{
    return lua_touserdata(L, lua_upvalueindex(1));
}

static int find_or_match(lua_State *L, int find)
{
    const char *fn = find ? "string.find" : "string.match";
    ft_meter *meter = meter_of(L);
    size_t ls;
    size_t lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    size_t init = start_position(luaL_optinteger(L, 3, 1), ls) - 1;
    const char *s1;
    int anchor;
    matcher m;

    if (init > ls) {
        luaL_pushfail(L);
        return 1;
    }
    if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
        const char *hit = memmem(s + init, ls - init, p, lp);
        size_t scanned = (hit != NULL ? (size_t)(hit - (s + init)) : ls - init) + 2 * lp;
        ft__meter_match(L, meter, 1 + (long long)(scanned / BYTES_PER_STEP), fn);
        if (hit == NULL) {
            luaL_pushfail(L);
            return 1;
        }
        lua_pushinteger(L, (lua_Integer)(hit - s) + 1);
        lua_pushinteger(L, (lua_Integer)(hit - s + lp));
        return 2;
    }
    anchor = lp > 0 && *p == '^';
    if (anchor) {
        p++;
        lp--;
    }
    matcher_init(&m, L, meter, fn, s, ls, p, lp);
    s1 = s + init;
    for (;;) {
        const char *e;
        matcher_reset(&m);
        e = match(&m, s1, p);
        if (e != NULL && find) {
            lua_pushinteger(L, (lua_Integer)(s1 - s) + 1);
            lua_pushinteger(L, (lua_Integer)(e - s));
            return push_captures(&m, NULL, NULL) + 2;
        }
        if (e != NULL)
            return push_captures(&m, s1, e);
        if (anchor || s1 >= m.src_end)
            break;
        s1++;
    }
    luaL_pushfail(L);
    return 1;
}

static int bounded_find(lua_State *L)
{
    return find_or_match(L, 1);
}

static int bounded_match(lua_State *L)
{
    return find_or_match(L, 0);
}

/* The state of one gmatch iteration, as offsets into the subject (upvalue 2). */
typedef struct gmatch_state {
    size_t next;      /* where the next attempt starts */
    size_t last_end;  /* where the last match ended; SIZE_MAX before the first */
    int done;
} gmatch_state;

/* Upvalues: the meter, the subject, the pattern, the state. */
static int gmatch_next(lua_State *L)
{
    ft_meter *meter = meter_of(L);
    size_t ls;
    size_t lp;
    const char *s = lua_tolstring(L, lua_upvalueindex(2), &ls);
    const char *p = lua_tolstring(L, lua_upvalueindex(3), &lp);
    gmatch_state *g = lua_touserdata(L, lua_upvalueindex(4));
    size_t at;
    matcher m;

    if (g->done)
        return 0;
    matcher_init(&m, L, meter, "string.gmatch", s, ls, p, lp);
    for (at = g->next; at <= ls; at++) {
        const char *e;
        matcher_reset(&m);
        e = match(&m, s + at, p);
        if (e != NULL && (size_t)(e - s) != g->last_end) {
            g->next = (size_t)(e - s);
            g->last_end = g->next;
            return push_captures(&m, s + at, e);
        }
    }
    g->done = 1;
    return 0;
}

static int bounded_gmatch(lua_State *L)
{
    size_t ls;
    size_t init;
    gmatch_state *g;

    luaL_checklstring(L, 1, &ls);
    luaL_checkstring(L, 2);
    init = start_position(luaL_optinteger(L, 3, 1), ls) - 1;
    if (init > ls)
        init = ls + 1; /* past the end: no match, not even an empty one */
    lua_settop(L, 2);
    g = lua_newuserdatauv(L, sizeof *g, 0);
    g->next = init;
    g->last_end = (size_t)-1;
    g->done = 0;
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1); /* meter, s, p, state */
    lua_pushcclosure(L, gmatch_next, 4);
    return 1;
}

/* Appends the replacement string for a match s..e: %0 the match, %1-%9 captures, %% a '%'. */
static void add_replacement_string(matcher *m, luaL_Buffer *b, const char *s, const char *e)
{
    lua_State *L = m->L;
    size_t lr;
    const char *r = lua_tolstring(L, 3, &lr);
    const char *end = r + lr;

    step(m, 1 + (long long)(lr / BYTES_PER_STEP));
    while (r < end) {
        const char *pct = memchr(r, '%', (size_t)(end - r));
        if (pct == NULL) {
            luaL_addlstring(b, r, (size_t)(end - r));
            break;
        }
        luaL_addlstring(b, r, (size_t)(pct - r));
        r = pct + 1;
        if (r < end && *r == '%') {
            luaL_addchar(b, '%');
        } else if (r < end && *r == '0') {
            luaL_addlstring(b, s, (size_t)(e - s));
        } else if (r < end && isdigit((unsigned char)*r)) {
            int i = *r - '1';
            if (i < m->ncap && m->cap[i].len >= 0) {
                luaL_addlstring(b, m->cap[i].start, (size_t)m->cap[i].len);
            } else {
                push_capture(m, i, s, e); /* a position, the whole match, or an error */
                luaL_addvalue(b);
            }
        } else {
            luaL_error(L, "invalid use of '%%' in replacement string");
        }
        r++;
    }
}

/* Appends what replaces the match s..e; returns whether it differs from the match. */
static int add_replacement(matcher *m, luaL_Buffer *b, const char *s, const char *e, int type)
{
    lua_State *L = m->L;

    if (type == LUA_TSTRING || type == LUA_TNUMBER) {
        add_replacement_string(m, b, s, e);
        return 1;
    }
    if (type == LUA_TFUNCTION) {
        int n;
        lua_pushvalue(L, 3);
        n = push_captures(m, s, e);
        lua_call(L, n, 1);
    } else {
        push_capture(m, 0, s, e);
        lua_gettable(L, 3);
    }
    if (!lua_toboolean(L, -1)) {
        lua_pop(L, 1);
        luaL_addlstring(b, s, (size_t)(e - s)); /* false or nil: the match stays */
        return 0;
    }
    if (!lua_isstring(L, -1))
        return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
    luaL_addvalue(b);
    return 1;
}

static int bounded_gsub(lua_State *L)
{
    ft_meter *meter = meter_of(L);
    size_t ls;
    size_t lp;
    const char *s = luaL_checklstring(L, 1, &ls);
    const char *p = luaL_checklstring(L, 2, &lp);
    const char *src = s;
    const char *last = NULL;
    int type = lua_type(L, 3);
    lua_Integer max = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
    lua_Integer n = 0;
    int changed = 0;
    int anchor;
    luaL_Buffer b;
    matcher m;

    luaL_argexpected(L, type == LUA_TNUMBER || type == LUA_TSTRING || type == LUA_TFUNCTION ||
                            type == LUA_TTABLE,
                     3, "string/function/table");
    luaL_buffinit(L, &b);
    anchor = lp > 0 && *p == '^';
    if (anchor) {
        p++;
        lp--;
    }
    matcher_init(&m, L, meter, "string.gsub", s, ls, p, lp);
    while (n < max) {
        const char *e;
        matcher_reset(&m);
        e = match(&m, src, p);
        if (e != NULL && e != last) {
            n++;
            changed |= add_replacement(&m, &b, src, e, type);
            src = last = e;
        } else if (src < m.src_end) {
            luaL_addchar(&b, *src++);
        } else {
            break;
        }
        if (anchor)
            break;
    }
    if (!changed) {
        lua_pushvalue(L, 1);
    } else {
        luaL_addlstring(&b, src, (size_t)(m.src_end - src));
        luaL_pushresult(&b);
    }
    lua_pushinteger(L, n);
    return 2;
}

void ft__pattern_install(lua_State *L, int idx, ft_meter *m)
{
    static const luaL_Reg fns[] = {
        {"find", bounded_find},
        {"match", bounded_match},
        {"gmatch", bounded_gmatch},
        {"gsub", bounded_gsub},
        {NULL, NULL},
    };
    int i;

    idx = lua_absindex(L, idx);
    for (i = 0; fns[i].name != NULL; i++) {
        lua_pushlightuserdata(L, m);
        lua_pushcclosure(L, fns[i].func, 1);
        lua_setfield(L, idx, fns[i].name);
    }
}
