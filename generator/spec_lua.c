/*
 * Lua specs: the sandbox a spec runs in — an allocator with a cap and a budget, instruction,
 * pattern-matching and CPU-time budgets that pcall cannot catch, trimmed libraries, require of
 * the spec's own modules — and the messages of what fails there.
 *
 * Every use of the Lua API that can raise an error (allocating, calling Lua code) happens
 * inside lua_pcall: a state made with lua_newstate has no panic function, and an error
 * outside a protected call would abort the process.
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


/* ---- the sandbox ------------------------------------------------------------------------- */

static ft_spec_lua *state_of(lua_State *L)
{
    void *ud = NULL;

    lua_getallocf(L, &ud);
    return ud;
}

/* Lua's allocator: malloc with a cap on the total it holds, and, while the spec's code runs,
 * a budget for all it allocates (freed or not): every byte a block grows by is charged, so
 * that a loop of large string.reps, each freed before the next, still ends. For a new block
 * ptr is NULL and osize is a type tag, not a size. Shrinking and freeing always succeed. */
void *ft__spec_sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    ft_spec_lua *S = ud;
    size_t old = ptr != NULL ? osize : 0;
    size_t grow = nsize > old ? nsize - old : 0;
    void *p = NULL;

    if (nsize == 0) {
        free(ptr);
        S->used -= old;
        goto out;
    }
    if (grow > S->cap - S->used) {
        S->refused = REFUSED_CAP;
        goto out;
    }
    if (S->alloc_left != UNMETERED && grow > S->alloc_left) {
        S->refused = REFUSED_BUDGET;
        goto out;
    }
    p = realloc(ptr, nsize);
    if (p == NULL) {
        S->refused = REFUSED_CAP;
        goto out;
    }
    S->used = S->used - old + nsize;
    if (S->alloc_left != UNMETERED)
        S->alloc_left -= grow;
out:
    return p;
}

void ft__spec_format_bytes(size_t n, char *buf, size_t cap)
{
    if (n % ((size_t)1 << 30) == 0)
        snprintf(buf, cap, "%zu GiB", n >> 30);
    else if (n % ((size_t)1 << 20) == 0)
        snprintf(buf, cap, "%zu MiB", n >> 20);
    else if (n % 1024 == 0)
        snprintf(buf, cap, "%zu KiB", n >> 10);
    else
        snprintf(buf, cap, "%zu bytes", n);
}

/* Records an error that ends the current call whatever pcall the spec wraps around it:
 * "path:line: message", or "path: message" when line is not positive. */
static void set_fatal(ft_spec_lua *S, int kind, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_fatal(ft_spec_lua *S, int kind, int line, const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0 && S->src[0] != '\0' && strcmp(S->src, S->path) != 0) /* in a module the spec requires */
        snprintf(S->fatal_msg, sizeof S->fatal_msg, "%s: %s:%d: %s", S->path, S->src, line, msg);
    else if (line > 0)
        snprintf(S->fatal_msg, sizeof S->fatal_msg, "%s:%d: %s", S->path, line, msg);
    else
        snprintf(S->fatal_msg, sizeof S->fatal_msg, "%s: %s", S->path, msg);
    S->fatal = kind;
}

static void set_memory_fatal(ft_spec_lua *S)
{
    char cap[64];

    if (S->refused == REFUSED_BUDGET) {
        ft__spec_format_bytes((size_t)(S->loading ? S->alloc_bytes.load : S->alloc_bytes.call), cap,
                     sizeof cap);
        set_fatal(S, FATAL_MEMORY, S->line,
                  "allocation budget of %s exceeded (all it allocates %s, freed or not)", cap,
                  S->loading ? "while the chunk runs" : "in one call");
        return;
    }
    ft__spec_format_bytes(S->cap, cap, sizeof cap);
    set_fatal(S, FATAL_MEMORY, S->line, "memory cap of %s exceeded", cap);
}

/* Remembers which chunk the code at ar is in (its source, "@file" as the chunk was named),
 * copying the name only when it changes. */
static void note_source(ft_spec_lua *S, const lua_Debug *ar)
{
    if (ar->source == NULL || (const void *)ar->source == S->src_key)
        return;
    S->src_key = ar->source;
    snprintf(S->src, sizeof S->src, "%s", ar->source[0] == '@' ? ar->source + 1 : S->path);
}

/* The line of the innermost Lua function on the stack, or 0 (its chunk noted in S->src). */
static int current_line(lua_State *L)
{
    ft_spec_lua *S = state_of(L);
    lua_Debug ar;
    int level;

    for (level = 0; lua_getstack(L, level, &ar) != 0; level++)
        if (lua_getinfo(L, "Sl", &ar) != 0 && ar.currentline > 0) {
            note_source(S, &ar);
            return ar.currentline;
        }
    return 0;
}

static long long current_budget(const ft_spec_lua *S, const budget_pair *b)
{
    return S->loading ? b->load : b->call;
}

/* ms on this thread's CPU clock. */
static double thread_cpu_ms(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void format_ms(long long ms, char *buf, size_t cap)
{
    if (ms % 1000 == 0)
        snprintf(buf, cap, "%lld s", ms / 1000);
    else
        snprintf(buf, cap, "%lld ms", ms);
}

/* Whether the current call ran past its CPU time limit. The monotonic clock is cheap and
 * comes first; only once it says the limit may be reached is the thread's CPU time read, so
 * that a busy machine (or a stopped process) does not count against the spec. */
static int past_time_limit(const ft_spec_lua *S)
{
    double limit = (double)current_budget(S, &S->cpu_ms);

    if (ft__now_ms() - S->start_ms <= limit)
        return 0;
    return thread_cpu_ms() - S->start_cpu_ms > limit;
}

/* The meter's callback (generator/sandbox.h): a library function spent a budget. */
void ft__spec_meter_exceeded(lua_State *L, ft_meter *m, int what, const char *fn)
{
    ft_spec_lua *S = state_of(L);

    (void)m;
    if (S->fatal == FATAL_NONE && what == FT_METER_MATCH)
        set_fatal(S, FATAL_MATCH, current_line(L),
                  "pattern matching budget of %lld steps exceeded (in %s)",
                  current_budget(S, &S->match_steps), fn);
    else if (S->fatal == FATAL_NONE)
        set_fatal(S, FATAL_BUDGET, current_line(L),
                  "instruction budget of %lld exceeded (in %s, which counts an instruction "
                  "per element)",
                  current_budget(S, &S->instructions), fn);
    lua_pushstring(L, S->fatal_msg);
}

static int is_memory_message(lua_State *L, int idx)
{
    return lua_type(L, idx) == LUA_TSTRING && strcmp(lua_tostring(L, idx), MEMORY_MESSAGE) == 0;
}

/* Count events spend the budget; line events remember where the code is (a memory error
 * reaches no message handler, so this is the only place that knows the line). */
static void sandbox_hook(lua_State *L, lua_Debug *ar)
{
    ft_spec_lua *S = state_of(L);
    int line = 0;

    if (ar->event == LUA_HOOKLINE) {
        S->line = ar->currentline;
        if (lua_getinfo(L, "S", ar) != 0)
            note_source(S, ar);
        return;
    }
    if (ar->event != LUA_HOOKCOUNT)
        return;
    S->meter.instructions -= S->step;
    if (S->meter.instructions > 0 && !past_time_limit(S))
        return;
    if (S->fatal == FATAL_NONE) {
        char limit[32];
        if (lua_getinfo(L, "Sl", ar) != 0 && ar->currentline > 0) {
            line = ar->currentline;
            note_source(S, ar);
        }
        format_ms(current_budget(S, &S->cpu_ms), limit, sizeof limit);
        if (S->meter.instructions > 0)
            set_fatal(S, FATAL_TIME, line, "CPU time limit of %s exceeded", limit);
        else
            set_fatal(S, FATAL_BUDGET, line, "instruction budget of %lld exceeded (endless loop?)",
                      current_budget(S, &S->instructions));
    }
    lua_pushstring(L, S->fatal_msg);
    lua_error(L);
}

/* Leaves the spec's code: what C does for it (building tables, validating) is not metered. */
void ft__spec_end_call(ft_spec_lua *S)
{
    S->alloc_left = UNMETERED;
}

/* Starts running the spec's code (the chunk when loading, else one call of a spec function)
 * with fresh budgets. */
void ft__spec_begin_call(ft_spec_lua *S, int loading)
{
    long long budget;

    S->loading = loading;
    budget = current_budget(S, &S->instructions);
    S->meter.instructions = budget;
    S->meter.match_steps = current_budget(S, &S->match_steps);
    S->alloc_left = (size_t)current_budget(S, &S->alloc_bytes);
    S->start_ms = ft__now_ms();
    S->start_cpu_ms = thread_cpu_ms();
    S->step = budget < HOOK_EVERY ? (int)budget : HOOK_EVERY;
    S->line = 0;
    S->src[0] = '\0';
    S->src_key = NULL;
    S->err_line = 0;
    S->refused = REFUSED_NONE;
    S->fatal = FATAL_NONE;
    /* Setting the hook again also restarts its instruction count. */
    lua_sethook(S->L, sandbox_hook, LUA_MASKCOUNT | LUA_MASKLINE, S->step);
}

/* After a protected call inside the spec failed: whether the error is one of the sandbox's
 * own, which the spec's pcall must pass on. */
static int note_fatal(lua_State *L, int status)
{
    ft_spec_lua *S = state_of(L);

    if (S->fatal == FATAL_NONE &&
        (status == LUA_ERRMEM || (S->refused && is_memory_message(L, -1))))
        set_memory_fatal(S);
    return S->fatal != FATAL_NONE;
}

/* The message handler: notes the line of the innermost Lua function (for messages that
 * lack one, as after error("x", 0)) and turns non-string error objects into text. */
int ft__spec_message_handler(lua_State *L)
{
    ft_spec_lua *S = state_of(L);
    lua_Debug ar;
    int level;
    int t = lua_type(L, 1);

    S->err_line = 0;
    for (level = 1; lua_getstack(L, level, &ar) != 0; level++) {
        if (lua_getinfo(L, "Sl", &ar) != 0 && ar.currentline > 0) {
            S->err_line = ar.currentline;
            break;
        }
    }
    lua_settop(L, 1);
    if (t == LUA_TNUMBER)
        lua_tostring(L, 1); /* converts in place, here where allocating is safe */
    else if (t != LUA_TSTRING)
        lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    return 1;
}

/* pcall and xpcall as in the base library, except that the sandbox's own errors (the
 * instruction budget, the memory cap) go on up: a spec cannot catch them and run on. */
static int sandbox_pcall(lua_State *L)
{
    int status;

    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    status = lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0);
    if (status != LUA_OK) {
        if (note_fatal(L, status))
            return lua_error(L);
        lua_pushboolean(L, 0);
        lua_replace(L, 1);
        return 2;
    }
    return lua_gettop(L);
}

/* xpcall's message handler: the spec's, except for the sandbox's own errors. Lua runs a
 * message handler inside the raising code, and the budgets' errors are raised inside the count
 * hook, where hooks are off: the spec's handler would run unmetered (a handler that loops never
 * ends), so for those it does not run at all. */
static int xpcall_handler(lua_State *L)
{
    ft_spec_lua *S = state_of(L);

    if (S->fatal != FATAL_NONE) {
        lua_pushstring(L, S->fatal_msg);
        return 1;
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int sandbox_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    int status;

    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, xpcall_handler, 1);
    lua_replace(L, 2);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2); /* f, handler, true, f, args... */
    status = lua_pcall(L, n - 2, LUA_MULTRET, 2);
    if (status != LUA_OK) {
        if (note_fatal(L, status))
            return lua_error(L);
        lua_pushboolean(L, 0);
        lua_replace(L, 3);
        return 2;
    }
    return lua_gettop(L) - 2;
}

/* setmetatable without __gc: finalizers run with hooks off (also from lua_close), where no
 * instruction budget could stop them. */
static int sandbox_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);

    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL)
        return luaL_error(L, "cannot change a protected metatable");
    if (t == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "__gc metamethods are not allowed in specs");
        lua_pop(L, 1);
    }
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* Writes len bytes to f as printable text (common/text.h), a piece at a time; a piece never
 * ends inside a UTF-8 sequence, which would read as invalid. */
static void write_printable(FILE *f, const char *s, size_t len)
{
    char out[4 * 256 + 1];

    while (len > 0) {
        size_t n = len < 256 ? len : 256;
        size_t back = 0;
        while (n < len && back < 3 && ((unsigned char)s[n - back] & 0xc0u) == 0x80u)
            back++;
        if (back < n && ((unsigned char)s[n - back] & 0xc0u) != 0x80u)
            n -= back;
        ft__printable(out, sizeof out, s, n);
        fputs(out, f);
        s += n;
        len -= n;
    }
}

/* print, to stderr (stdout carries tables and JSON), with control characters escaped: a spec
 * does not get to drive the terminal. */
static int sandbox_print(lua_State *L)
{
    int n = lua_gettop(L);
    int i;

    for (i = 1; i <= n; i++) {
        size_t len = 0;
        const char *s = luaL_tolstring(L, i, &len);
        if (i > 1)
            fputc('\t', stderr);
        write_printable(stderr, s, len);
        lua_pop(L, 1);
    }
    fputc('\n', stderr);
    return 0;
}

/* ---- require: modules of the spec's folder and the built-in ones ------------------------------ */

#define LOADED_KEY "flashtune.loaded" /* registry: module name -> its value, or false while it loads */
#define MAX_REQUIRE_DEPTH 16

/* The text of module `name`: <the spec's folder>/<name>.lua when the spec is a file and that is
 * a regular file, else the built-in specs/lib/<name>.lua. *text is malloc'd (the caller frees);
 * chunk (cap bytes) gets the name the module's messages go by. 0 when there is none. */
static int module_text(ft_spec_lua *S, const char *name, char **text, size_t *size, char *chunk, size_t cap,
                       char *why, size_t why_cap)
{
    const ft_embedded_file *f;
    char path[1200], want[96];
    ft_err err;

    *text = NULL;
    if (S->dir[0] != '\0') {
        snprintf(path, sizeof path, "%s/%s.lua", S->dir, name);
        if (ft__path_kind(path, NULL) == 1) {
            if (ft__read_file_max(path, FT_SPEC_MAX_BYTES, text, size, &err) != FT_OK) {
                snprintf(why, why_cap, "%s", err.msg);
                return 0;
            }
            snprintf(chunk, cap, "@%s", path);
            return 1;
        }
    }
    snprintf(want, sizeof want, "specs/lib/%s.lua", name);
    for (f = ft__builtin_spec_modules; f->name != NULL; f++) {
        if (strcmp(f->name, want) != 0)
            continue;
        *text = malloc(f->size + 1);
        if (*text == NULL) {
            snprintf(why, why_cap, "out of memory");
            return 0;
        }
        memcpy(*text, f->data, f->size + 1);
        *size = f->size;
        snprintf(chunk, cap, "@%s", want);
        return 1;
    }
    if (S->dir[0] != '\0')
        snprintf(why, why_cap, "no %s/%s.lua and no built-in module of that name", S->dir, name);
    else
        snprintf(why, why_cap, "no built-in module of that name");
    return 0;
}

/* require(name): a module of the spec's own folder, else a built-in one, run once in the
 * sandbox (on the budgets of the code that requires it) and its value kept. Names are
 * identifiers: no path reaches outside the folder, and no C module loads. */
static int sandbox_require(lua_State *L)
{
    ft_spec_lua *S = state_of(L);
    const char *name = luaL_checkstring(L, 1);
    char chunk[1300], why[1200];
    char *text = NULL;
    size_t size = 0, i, n = strlen(name);
    int status;

    for (i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') || name[i] == '_' ||
              (i > 0 && name[i] >= '0' && name[i] <= '9')))
            break;
    if (n == 0 || n > 63 || i < n)
        return luaL_error(L, "require: '%s' is not a module name (letters, digits and '_', not starting "
                             "with a digit: modules come from the spec's own folder and the built-in ones)",
                          n > 63 ? "(a long name)" : name);
    lua_getfield(L, LUA_REGISTRYINDEX, LOADED_KEY);
    lua_getfield(L, -1, name);
    if (lua_toboolean(L, -1))
        return 1;
    if (lua_type(L, -1) == LUA_TBOOLEAN)
        return luaL_error(L, "require: module '%s' requires itself", name);
    lua_pop(L, 1);
    if (S->requiring >= MAX_REQUIRE_DEPTH)
        return luaL_error(L, "require: modules nested deeper than %d", MAX_REQUIRE_DEPTH);
    if (!module_text(S, name, &text, &size, chunk, sizeof chunk, why, sizeof why))
        return luaL_error(L, "require: module '%s' not found: %s", name, why);
    /* Mode "t" as for the spec itself; the text is compiled into the state, then freed. */
    status = luaL_loadbufferx(L, text, size, chunk, "t");
    free(text);
    if (status != LUA_OK)
        return lua_error(L);
    lua_pushboolean(L, 0); /* loading */
    lua_setfield(L, -3, name);
    S->requiring++;
    lua_call(L, 0, 1);
    S->requiring--;
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    return 1;
}

/* Opens base, table, string and math, takes out what a spec must not reach, and puts bounded
 * versions in place of the library functions that can loop in C (generator/sandbox.h). */
void ft__spec_open_sandbox(lua_State *L, ft_spec_lua *S)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},
        {LUA_TABLIBNAME, luaopen_table},
        {LUA_STRLIBNAME, luaopen_string},
        {LUA_MATHLIBNAME, luaopen_math},
        {NULL, NULL},
    };
    static const luaL_Reg replaced[] = {
        {"print", sandbox_print},
        {"pcall", sandbox_pcall},
        {"xpcall", sandbox_xpcall},
        {"setmetatable", sandbox_setmetatable},
        {"require", sandbox_require},
        {NULL, NULL},
    };
    static const char *const removed[] = {"load", "loadfile", "dofile", "collectgarbage", NULL};
    int i;

    for (i = 0; libs[i].name != NULL; i++) {
        luaL_requiref(L, libs[i].name, libs[i].func, 1);
        lua_pop(L, 1);
    }
    for (i = 0; removed[i] != NULL; i++) {
        lua_pushnil(L);
        lua_setglobal(L, removed[i]);
    }
    for (i = 0; replaced[i].name != NULL; i++) {
        lua_pushcfunction(L, replaced[i].func);
        lua_setglobal(L, replaced[i].name);
    }
    lua_getglobal(L, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, LOADED_KEY);
    ft__sandbox_bound_libs(L, &S->meter);
}

/* Lua names the file in messages by its "short source", which cuts long paths to
 * "...tail". Returns where the rest of msg starts when msg begins with such a cut path. */
static const char *after_short_path(const char *path, const char *msg)
{
    size_t plen = strlen(path);
    const char *tail = msg + 3;
    const char *p;

    if (strncmp(msg, "...", 3) != 0)
        return NULL;
    for (p = strchr(tail, ':'); p != NULL; p = strchr(p + 1, ':')) {
        size_t k = (size_t)(p - tail);
        if (k > 0 && k <= plen && memcmp(path + plen - k, tail, k) == 0)
            return p;
    }
    return NULL;
}

/* Turns the Lua error at the top of the stack into err: "path:line: message", or
 * "path: message" where no line is known, followed by context. The message is the spec's
 * text (error("...") says what it likes): control characters come out as visible escapes
 * (common/text.h). Returns the status. */
ft_status ft__spec_lua_failure(ft_spec_lua *S, int status, const char *context, ft_err *err)
{
    lua_State *L = S->L;
    size_t plen = strlen(S->path);
    const char *msg = "(error object is not a string)";
    size_t mlen = strlen(msg);
    const char *body;
    char where[FT_ERR_MSG_MAX / 2];
    char clean[FT_ERR_MSG_MAX];
    char text[FT_ERR_MSG_MAX];

    /* Only strings: converting a number would allocate, outside any protected call. */
    if (lua_type(L, -1) == LUA_TSTRING)
        msg = lua_tolstring(L, -1, &mlen);
    if (S->fatal == FATAL_NONE &&
        (status == LUA_ERRMEM || (S->refused && is_memory_message(L, -1))))
        set_memory_fatal(S);
    body = after_short_path(S->path, msg);
    where[0] = '\0';
    if (S->fatal != FATAL_NONE) {
        msg = S->fatal_msg;
        mlen = strlen(msg);
        body = msg;
    } else if (strncmp(msg, S->path, plen) == 0 && msg[plen] == ':') {
        body = msg;
    } else if (body != NULL) {
        snprintf(where, sizeof where, "%s", S->path); /* in place of Lua's "...tail" */
    } else if (S->err_line > 0) {
        snprintf(where, sizeof where, "%s:%d: ", S->path, S->err_line);
        body = msg;
    } else {
        snprintf(where, sizeof where, "%s: ", S->path);
        body = msg;
    }
    ft__printable(clean, sizeof clean, body, mlen - (size_t)(body - msg));
    snprintf(text, sizeof text, "%s%s", where, clean);
    return ft__fail(err, FT_ERR_SPEC, "%s%s", ft__printable_str(clean, sizeof clean, text),
                    context);
}

