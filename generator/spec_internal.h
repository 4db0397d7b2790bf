/*
 * The inside of Lua specs, shared by their files (not an interface of flashtune):
 *   spec_lua.c   the sandbox: the state, its budgets, libraries and require, and errors
 *   spec_load.c  loading a spec and validating the table it returns
 *   spec_call.c  calling its functions on variants; the built-in specs
 */
#ifndef FT_GENERATOR_SPEC_INTERNAL_H
#define FT_GENERATOR_SPEC_INTERNAL_H

#include <lua.h>

#include "generator/sandbox.h"
#include "generator/spec.h"

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
    /* Memos of the spec's functions (spec_call.c): the constraints', then smem's and
     * registers' (nconstraints + 2 roots), for the target memo_arch; off: a function whose
     * reads were not the same on the same values (not a function of the variant alone). */
    struct memo_node **memo;
    unsigned char *memo_off;
    int nmemo;
    ft_arch memo_arch;
};

/* The parameters one call of a spec function read, in the order it first read them. */
typedef struct read_log {
    const ft_spec *spec;
    int n;
    int order[FT_MAX_PARAMS];
    unsigned seen; /* bit i: parameter i read */
} read_log;

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
    int only;    /* CALL_CHECK: the constraint to run */
    read_log *log; /* non-NULL: the variant is a view that records the reads here */
    int current; /* the constraint being evaluated; -1 before the first */
    int keep;
    char *reason;
    size_t reason_cap;
    char *raw_reason;      /* with a log, a failing constraint's returned reason as it returned it
                              (malloc'd, raw_len bytes), NULL where it gave none */
    size_t raw_len;
    long long number;
    ft_err *err;
    ft_status rc;
} call_ctx;


/* Lua's allocator: malloc with a cap on what it holds and a budget for what the spec's code allocates. */
void *ft__spec_sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize);

/* "64 MiB", "1 GiB", "100 bytes". */
void ft__spec_format_bytes(size_t n, char *buf, size_t cap);

/* The meter's callback (generator/sandbox.h): a library function spent a budget. */
void ft__spec_meter_exceeded(lua_State *L, ft_meter *m, int what, const char *fn);

/* Leaves the spec's code: what C does for it is not metered. */
void ft__spec_end_call(ft_spec_lua *S);

/* Starts running the spec's code (the chunk when loading, else one call) with fresh budgets. */
void ft__spec_begin_call(ft_spec_lua *S, int loading);

/* The message handler of the protected calls into the spec. */
int ft__spec_message_handler(lua_State *L);

/* Opens the sandbox's libraries in L: base, table, string, math, trimmed and bounded; require. */
void ft__spec_open_sandbox(lua_State *L, ft_spec_lua *S);

/* Turns the Lua error at the top of the stack into err: "path:line: message" and context. */
ft_status ft__spec_lua_failure(ft_spec_lua *S, int status, const char *context, ft_err *err);

/* Frees the memos of the spec's functions (spec_call.c). */
void ft__spec_memo_free(ft_spec_lua *S);

/* How a value reads in a message: "nil", "a boolean", "64.5", "the string 'x'". */
const char *ft__spec_describe(lua_State *L, int idx, char *buf, size_t cap);

#endif
