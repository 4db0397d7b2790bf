/*
 * Lua specs: the sandbox (allocator with a cap, instruction budget, trimmed libraries), the
 * validation of the table a spec returns, and the calls of its functions on variants.
 *
 * Every use of the Lua API that can raise an error (allocating, calling Lua code) happens
 * inside lua_pcall: a state made with lua_newstate has no panic function, and an error
 * outside a protected call would abort the process.
 */
#include "generator/spec.h"

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

#define DEFAULT_MEMORY_BYTES ((size_t)64 << 20)
#define DEFAULT_LOAD_INSTRUCTIONS 50000000LL
#define DEFAULT_CALL_INSTRUCTIONS 1000000LL
#define DEFAULT_LOAD_MATCH_STEPS 50000000LL
#define DEFAULT_CALL_MATCH_STEPS 1000000LL
#define DEFAULT_LOAD_ALLOC_BYTES ((size_t)1 << 30)
#define DEFAULT_CALL_ALLOC_BYTES ((size_t)256 << 20)
#define DEFAULT_LOAD_CPU_MS 5000LL
#define DEFAULT_CALL_CPU_MS 1000LL
#define HOOK_EVERY 1000 /* instructions between two count hooks */
#define MAX_IDENT 63    /* longest parameter name or string value */
#define MEMORY_MESSAGE "not enough memory" /* what Lua says when an allocation fails */
#define UNMETERED ((size_t)-1) /* alloc_left outside the spec's own code */

enum { FATAL_NONE = 0, FATAL_BUDGET, FATAL_MEMORY, FATAL_MATCH, FATAL_TIME };
enum { REFUSED_NONE = 0, REFUSED_CAP, REFUSED_BUDGET };
enum { CALL_CHECK = 0, CALL_SMEM, CALL_REGISTERS };

/* One kind of budget: for running the chunk, and for each call of a spec function. */
typedef struct budget_pair {
    long long load;
    long long call;
} budget_pair;

struct ft_spec_lua {
    lua_State *L;
    const char *path;      /* the spec's path (owned by the spec) */
    size_t used;           /* bytes the Lua heap holds */
    size_t cap;            /* the most it may hold */
    int refused;           /* REFUSED_*: why the allocator last refused a request */
    budget_pair instructions;
    budget_pair match_steps;
    budget_pair alloc_bytes;
    budget_pair cpu_ms;
    int loading;           /* the current budgets are those of the load */
    ft_meter meter;        /* instructions and pattern-matching steps left to the current call */
    size_t alloc_left;     /* bytes the current call may still allocate; UNMETERED outside */
    double start_ms;       /* when the current call began, on the monotonic clock */
    double start_cpu_ms;   /* and on this thread's CPU clock */
    int step;              /* instructions between two count hooks */
    int line;              /* the last line the line hook saw; 0: none yet */
    char src[512];         /* the chunk that line is in: the spec, or a module it requires */
    const void *src_key;   /* Lua's source string src was copied from */
    char dir[1024];        /* the spec's folder, where require looks first; "" for a spec
                              that is no file (a built-in one) */
    int requiring;         /* modules being loaded, nested */
    int err_line;          /* innermost Lua line when the message handler ran; 0: none */
    int fatal;             /* FATAL_*: an error that pcall inside the spec cannot swallow */
    char fatal_msg[512];
    int smem_ref;
    int smem_line; /* line where the function is defined; <= 0 unknown */
    int registers_ref;
    int registers_line;
    int *constraint_refs;
    int *constraint_lines;
    int arch_ref;  /* the read-only arch table last built, LUA_NOREF before the first */
    ft_arch arch;  /* the target it was built for */
};

typedef struct load_ctx {
    ft_spec *spec;
    ft_err *err;
    ft_status rc;
    const char *text; /* the chunk */
    size_t size;      /* its bytes (it may hold NULs) */
} load_ctx;

typedef struct call_ctx {
    ft_spec *spec;
    const ft_variant *v;
    const ft_arch *arch;
    int what;    /* CALL_* */
    int current; /* the constraint being evaluated; -1 before the first */
    int keep;
    char *reason;
    size_t reason_cap;
    long long number;
    ft_err *err;
    ft_status rc;
} call_ctx;

static const char *const top_fields[] = {"name",        "template", "description",
                                         "params",      "constraints", "smem",
                                         "registers",   "workloads",   "spills", NULL};
static const char *const param_fields[] = {"name", "values", "doc", NULL};
static const char *const workload_fields[] = {"b", "hq", "hkv", "sq", "sk", "d", NULL};

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
static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
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

static void format_bytes(size_t n, char *buf, size_t cap)
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
        format_bytes((size_t)(S->loading ? S->alloc_bytes.load : S->alloc_bytes.call), cap,
                     sizeof cap);
        set_fatal(S, FATAL_MEMORY, S->line,
                  "allocation budget of %s exceeded (all it allocates %s, freed or not)", cap,
                  S->loading ? "while the chunk runs" : "in one call");
        return;
    }
    format_bytes(S->cap, cap, sizeof cap);
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
static void meter_exceeded(lua_State *L, ft_meter *m, int what, const char *fn)
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
static void end_call(ft_spec_lua *S)
{
    S->alloc_left = UNMETERED;
}

/* Starts running the spec's code (the chunk when loading, else one call of a spec function)
 * with fresh budgets. */
static void begin_call(ft_spec_lua *S, int loading)
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
static int message_handler(lua_State *L)
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

static int sandbox_xpcall(lua_State *L)
{
    int n = lua_gettop(L);
    int status;

    luaL_checktype(L, 2, LUA_TFUNCTION);
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

/* Opens base, table, string and math, takes out what a spec must not reach, and puts bounded
 * versions in place of the library functions that can loop in C (generator/sandbox.h). */
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

static void open_sandbox(lua_State *L, ft_spec_lua *S)
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
static ft_status lua_failure(ft_spec_lua *S, int status, const char *context, ft_err *err)
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
static const char *describe(lua_State *L, int idx, char *buf, size_t cap)
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
        spec_error(c, "%s must be a string, not %s", label, describe(L, -1, buf, sizeof buf));
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
                          describe(L, idx, buf, sizeof buf), rule);
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
    if (p->kind == FT_PARAM_INT)
        p->ints = calloc((size_t)n, sizeof *p->ints);
    else
        p->strings = calloc((size_t)n, sizeof *p->strings);
    if (p->ints == NULL && p->strings == NULL) {
        rc = out_of_memory(c);
        goto out;
    }
    p->nvalues = (int)n;
    for (j = 1; j <= n; j++) {
        int type = lua_rawgeti(L, t, j);
        int i = (int)j - 1;
        snprintf(label, sizeof label, "params[%d].values[%lld]", pi + 1, (long long)j);
        if (type == LUA_TNUMBER) {
            int isint = 0;
            lua_Integer x = lua_tointegerx(L, -1, &isint);
            if (!isint) {
                spec_error(c, "%s is %s; %s", label, describe(L, -1, buf, sizeof buf), what);
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
            spec_error(c, "%s is %s; %s", label, describe(L, -1, buf, sizeof buf), what);
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
                   describe(L, t, buf, sizeof buf));
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
        spec_error(c, "%s must be a string, not %s", label, describe(L, -1, buf, sizeof buf));
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
                   describe(L, -1, buf, sizeof buf));
        goto out;
    }
    rc = load_values(c, L, lua_gettop(L), pi);
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
    char buf[96];
    int type = raw_field(L, t, "params");

    if (type == LUA_TNIL) {
        spec_error(c, "field 'params' is missing");
        goto out;
    }
    if (type != LUA_TTABLE) {
        spec_error(c, "field 'params' must be a list of parameters, not %s",
                   describe(L, -1, buf, sizeof buf));
        goto out;
    }
    rc = check_list(c, L, top + 1, "params", &n);
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

/* The longest variant string must fit the buffers that hold one (FT_VARIANT_STR_MAX), or
 * two variants could be cut to the same text. */
static ft_status check_variant_length(load_ctx *c)
{
    const ft_spec *spec = c->spec;
    size_t len = 0;
    int pi;
    int vi;

    for (pi = 0; pi < spec->nparams; pi++) {
        const ft_param *p = &spec->params[pi];
        size_t longest = 0;
        for (vi = 0; vi < p->nvalues; vi++) {
            char buf[32];
            size_t l = p->kind == FT_PARAM_INT
                           ? (size_t)snprintf(buf, sizeof buf, "%lld", p->ints[vi])
                           : strlen(p->strings[vi]);
            if (l > longest)
                longest = l;
        }
        len += (pi > 0 ? 1 : 0) + strlen(p->name) + 1 + longest;
    }
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
        spec_error(c, "%s %s, not %s", where, shape, describe(L, t, buf, sizeof buf));
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
                   describe(L, -1, buf, sizeof buf));
        goto out;
    }
    if (lua_rawgeti(L, t, 2) != LUA_TFUNCTION) {
        spec_error(c, "%s %s; its second element is %s", where, shape,
                   describe(L, -1, buf, sizeof buf));
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
    char buf[96];
    int type = raw_field(L, t, "constraints");

    if (type == LUA_TNIL) {
        rc = FT_OK;
        goto out;
    }
    if (type != LUA_TTABLE) {
        spec_error(c, "field 'constraints' must be a list of { \"text\", function }, not %s",
                   describe(L, -1, buf, sizeof buf));
        goto out;
    }
    rc = check_list(c, L, top + 1, "constraints", &n);
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
                   describe(L, -1, buf, sizeof buf));
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
                   where, describe(L, t, buf, sizeof buf));
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
                       describe(L, -1, buf, sizeof buf));
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
    char buf[96];
    int type = raw_field(L, t, "workloads");

    if (type == LUA_TNIL) {
        rc = FT_OK;
        goto out;
    }
    if (type != LUA_TTABLE) {
        spec_error(c, "field 'workloads' must be a list of workloads, not %s",
                   describe(L, -1, buf, sizeof buf));
        goto out;
    }
    rc = check_list(c, L, top + 1, "workloads", &n);
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
                   describe(L, t, buf, sizeof buf));
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

    open_sandbox(L, S);
    begin_call(S, 1);
    snprintf(chunkname, sizeof chunkname, "@%s", c->spec->path);
    /* Mode "t": a precompiled chunk is refused ("attempt to load a binary chunk"). */
    status = luaL_loadbufferx(L, c->text, c->size, chunkname, "t");
    if (status != LUA_OK) {
        end_call(S);
        c->rc = lua_failure(S, status, "", c->err);
        return 0;
    }
    lua_call(L, 0, 1);
    end_call(S);
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
    S->meter.exceeded = meter_exceeded;
    S->smem_ref = LUA_NOREF;
    S->registers_ref = LUA_NOREF;
    S->arch_ref = LUA_NOREF;
    S->L = lua_newstate(sandbox_alloc, S);
    if (S->L == NULL && S->refused) {
        format_bytes(S->cap, cap, sizeof cap);
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
    lua_pushcfunction(S->L, message_handler);
    lua_pushcfunction(S->L, load_driver);
    lua_pushlightuserdata(S->L, &c);
    status = lua_pcall(S->L, 1, 0, 1);
    end_call(S);
    if (status != LUA_OK)
        rc = lua_failure(S, status, "", err);
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

/* ---- calls of the spec's functions ------------------------------------------------------- */

static void push_variant(lua_State *L, const ft_spec *spec, const ft_variant *v)
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

/* Evaluates the constraints in order on the variant table (2) and arch table (3). */
static void run_constraints(lua_State *L, call_ctx *c)
{
    ft_spec_lua *S = c->spec->lua;
    char where[FT_ERR_MSG_MAX / 2];
    char variant[512];
    char buf[96];
    int i;

    c->keep = 1;
    for (i = 0; i < c->spec->nconstraints; i++) {
        const char *name = c->spec->constraint_names[i];
        int t;
        c->current = i;
        lua_rawgeti(L, LUA_REGISTRYINDEX, S->constraint_refs[i]);
        lua_pushvalue(L, 2);
        lua_pushvalue(L, 3);
        begin_call(S, 0);
        lua_call(L, 2, 2);
        end_call(S);
        t = lua_type(L, -2);
        if (t == LUA_TBOOLEAN && lua_toboolean(L, -2)) {
            lua_pop(L, 2);
            continue;
        }
        if (t != LUA_TNIL && t != LUA_TBOOLEAN) {
            function_where(c->spec, S->constraint_lines[i], where, sizeof where);
            ft__variant_format(c->spec, c->v, variant, sizeof variant);
            c->rc = ft__fail(c->err, FT_ERR_SPEC,
                             "%sconstraint '%s' returned %s for variant %s; it must return true, "
                             "or false and an optional reason",
                             where, name, describe(L, -2, buf, sizeof buf), variant);
            return;
        }
        c->keep = 0;
        if (c->reason != NULL && c->reason_cap > 0 && lua_type(L, -1) == LUA_TSTRING &&
            lua_rawlen(L, -1) > 0)
            ft__printable(c->reason, c->reason_cap, lua_tostring(L, -1), lua_rawlen(L, -1));
        else if (c->reason != NULL && c->reason_cap > 0)
            snprintf(c->reason, c->reason_cap, "%s", name); /* printable since the load */
        return;
    }
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
    begin_call(S, 0);
    lua_call(L, 2, 1);
    end_call(S);
    x = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
    if (!isint || x < 0) {
        function_where(c->spec, line, where, sizeof where);
        ft__variant_format(c->spec, c->v, variant, sizeof variant);
        c->rc = ft__fail(c->err, FT_ERR_SPEC,
                         "%s%s returned %s for variant %s; it must return a non-negative integer",
                         where, name, describe(L, -1, buf, sizeof buf), variant);
        return;
    }
    c->number = (long long)x;
}

/* Runs in lua_pcall: builds v and arch, calls the function(s). */
static int call_driver(lua_State *L)
{
    call_ctx *c = lua_touserdata(L, 1);

    push_variant(L, c->spec, c->v);
    push_arch(L, c->spec->lua, c->arch);
    if (c->what == CALL_CHECK)
        run_constraints(L, c);
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
    end_call(S); /* nothing of the last call's budgets or errors is left */
    S->fatal = FATAL_NONE;
    S->refused = REFUSED_NONE;
    lua_settop(L, 0);
    lua_pushcfunction(L, message_handler);
    lua_pushcfunction(L, call_driver);
    lua_pushlightuserdata(L, c);
    status = lua_pcall(L, 1, 0, 1);
    end_call(S);
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
        c->rc = lua_failure(S, status, context, c->err);
    }
    lua_settop(L, 0);
    return c->rc;
}

ft_status ft__spec_check(ft_spec *spec, const ft_variant *v, const ft_arch *arch, int *keep,
                         char *reason, size_t reason_cap, ft_err *err)
{
    ft_status rc;
    call_ctx c;

    if (keep != NULL)
        *keep = 0;
    if (reason != NULL && reason_cap > 0)
        reason[0] = '\0';
    rc = check_args(spec, v, arch, keep, err);
    if (rc != FT_OK)
        goto out;
    memset(&c, 0, sizeof c);
    c.spec = spec;
    c.v = v;
    c.arch = arch;
    c.what = CALL_CHECK;
    c.reason = reason;
    c.reason_cap = reason_cap;
    c.err = err;
    rc = call_spec(&c);
    if (rc == FT_OK)
        *keep = c.keep;
    else if (reason != NULL && reason_cap > 0)
        reason[0] = '\0';
out:
    return rc;
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
    memset(&c, 0, sizeof c);
    c.spec = spec;
    c.v = v;
    c.arch = arch;
    c.what = CALL_SMEM;
    c.err = err;
    rc = call_spec(&c);
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
    memset(&c, 0, sizeof c);
    c.spec = spec;
    c.v = v;
    c.arch = arch;
    c.what = CALL_REGISTERS;
    c.err = err;
    rc = call_spec(&c);
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

ft_status ft__spec_load_default(const char *path, ft_spec **out, ft_err *err)
{
    const ft_embedded_file *f = builtin_spec(path != NULL ? path : FT_DEFAULT_SPEC_NAME);

    if (path != NULL && (f == NULL || access(path, F_OK) == 0))
        return ft__spec_load(path, NULL, out, err);
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
