/*
 * Lua specs: a description of a space of kernel variants.
 *
 * A spec is a Lua chunk that returns a table:
 *
 *   return {
 *     name        = "flash_fwd",                 -- string, required
 *     template    = "flash_fwd_sm80",            -- kernel family (generator/family.h), required
 *     description = "...",                       -- string, optional
 *     params = {                                 -- list, required, in variant-string order
 *       { name = "d", values = { 64, 128 }, doc = "head dimension",
 *         open = true },                     -- optional: values it does not list may be
 *                                            --   asked for (ft__spec_add_value); the
 *                                            --   constraints say which are kept
 *       { name = "dtype", values = { "f16", "bf16" } },
 *     },
 *     constraints = {                            -- list, optional; evaluated in order
 *       { "each warp owns 16 or 32 query rows",
 *         function(v, arch) return v.bm % (16 * v.warps) == 0 end },
 *     },
 *     smem = function(v, arch) return bytes end,          -- required: dynamic shared memory
 *     registers = function(v, arch) return estimate end,  -- optional: registers per thread
 *     workloads = {                              -- list, optional: shapes the tuner measures
 *       { b = 4, hq = 16, hkv = 16, sq = 4096, sk = 4096, d = 128 },
 *     },
 *     spills = "reject",                         -- optional, "allow" (default) or "reject":
 *   }                                            --   whether variants that spill stay candidates
 *
 * `v` is a table of the variant's parameters ({ d = 128, dtype = "f16", ... }); `arch` holds
 * the target's limits (fields named as in push_arch in spec_call.c: name, cc, sms, smem_per_block,
 * smem_per_sm, regs_per_sm, regs_per_thread, threads_per_block, threads_per_sm).
 * A constraint function returns true to keep the variant, or false (optionally followed by a
 * reason string) to prune it.
 *
 * The chunk runs in a sandbox: only the base, table, string and math libraries, without
 * load, loadfile, dofile, collectgarbage, string.dump, io, os, package or debug; `require`
 * loads only modules of the spec's own folder (name.lua) and the built-in ones (specs/lib/),
 * by identifier, each in the same sandbox (spec_lua.c);
 * memory is capped, and running the chunk and every call of its functions have budgets
 * (ft_sandbox_limits): Lua instructions, steps of pattern matching, bytes allocated, CPU time.
 * The library functions that could loop in C without end count their work against them
 * (generator/sandbox.h). Errors read "path:line: message" when Lua knows the line and
 * "path: message" otherwise.
 */
#ifndef FT_GENERATOR_SPEC_H
#define FT_GENERATOR_SPEC_H

#include <stddef.h>

#include "common/error.h"
#include "generator/arch.h"

#define FT_MAX_PARAMS 24
#define FT_MAX_VALUES 64
/* The most variants a spec may describe, with the values open parameters take later: planning
 * costs about 0.3 µs a variant for a tune, which keeps the variants pruning keeps only, and 3 µs
 * for a plan that keeps them all (each spec function runs once per set of values it reads; the
 * sm_90a forward's 774144, 2 cores, 2026-12-05), and the sm_90a forward (3096576 since `pack`,
 * 442368 a head dim) takes eight head dims more (6.6 million) for a tune of recorded misses. */
#define FT_MAX_VARIANTS 8000000
#define FT_VARIANT_STR_MAX 512 /* a variant string's buffer, NUL included: "d=128,bm=64,..." */

typedef enum ft_param_kind { FT_PARAM_INT = 0, FT_PARAM_STRING = 1 } ft_param_kind;

/* Text a spec gives that is shown to users (its name, description, docs, constraint texts and
 * reasons, its error messages) is kept with control characters as visible escapes
 * (common/text.h). Names and values reach the generated source as macros (generator/emit.h):
 * a spec whose names would give two parameters or values one macro (differing only in case:
 * 'd' and 'D') is refused, and so are negative integers (the value is part of the kernel's
 * name). */
typedef struct ft_param {
    char *name;          /* an identifier: [A-Za-z_][A-Za-z0-9_]* */
    char *doc;           /* NULL when the spec gives none */
    ft_param_kind kind;  /* all values of a parameter have one kind */
    int nvalues;         /* 1 .. FT_MAX_VALUES, all distinct */
    long long *ints;     /* kind FT_PARAM_INT: nvalues non-negative integers, room for
                          * FT_MAX_VALUES (the array does not move when an open one grows) */
    int nlisted;         /* how many of the values the spec lists (the rest were added) */
    int open;            /* `open = true` (integer parameters only): a value the list lacks
                          * joins it when a variant or filter asks for it; the list is what
                          * plan and tune cover when nobody asks for more */
    char **strings;      /* kind FT_PARAM_STRING: nvalues identifiers */
    int dflt;            /* `default = v`: the index of v among the listed values, the value a
                          * partial variant of the runtime's built-in defaults takes when it
                          * names the parameter not; -1 when the spec gives none */
} ft_param;

/* One problem shape the tuner measures: batch, Q heads, K/V heads, seqlen_q, seqlen_k,
 * head dim. The tuner crosses it with the spec's dtype and causal values. */
typedef struct ft_workload {
    int b, hq, hkv, sq, sk, d;
} ft_workload;

typedef struct ft_spec_lua ft_spec_lua; /* private to spec_lua.c, spec_load.c, spec_call.c */

typedef struct ft_spec {
    char *path;           /* as given to ft__spec_load */
    char *name;
    char *template_name;
    char *description;    /* NULL when absent */
    int nparams;
    ft_param params[FT_MAX_PARAMS];
    int nconstraints;
    char **constraint_names; /* the first element of each constraint entry */
    int has_registers;       /* the spec has a registers function */
    int reject_spills;       /* spills = "reject": a variant that spills is over the limits */
    int nworkloads;
    ft_workload *workloads;
    long long nvariants;     /* product of the parameters' value counts */
    ft_spec_lua *lua;        /* the sandboxed state that holds the functions */
} ft_spec;

/* The sandbox's limits. Every field left 0 takes its default. Each budget is given twice:
 * for running the chunk ("load") and for each call of a spec function ("call"). A spec that
 * exceeds one fails with an error that names the file, the line where known, and the limit;
 * pcall inside the spec cannot catch it. */
typedef struct ft_sandbox_limits {
    size_t memory_bytes;         /* what the Lua heap may hold at once (64 MiB) */
    long long load_instructions; /* Lua instructions (50 million; a call: 1 million); the */
    long long call_instructions; /*   library functions that loop over elements count one each */
    /* The following fields were added later; positional initializers of the first three
     * leave them 0. */
    long long load_match_steps;  /* steps of string.find/match/gmatch/gsub (50 million; */
    long long call_match_steps;  /*   a call: 1 million) */
    size_t load_alloc_bytes;     /* all that is allocated, freed or not (1 GiB; */
    size_t call_alloc_bytes;     /*   a call: 256 MiB) */
    long long load_cpu_ms;       /* CPU time of the thread (5 s; a call: 1 s): for what the */
    long long call_cpu_ms;       /*   budgets above cannot see, as comparing long strings */
} ft_sandbox_limits;

/* A variant: for each parameter of its spec, the index of its value. */
typedef struct ft_variant {
    int idx[FT_MAX_PARAMS];
} ft_variant;

/* The largest spec file ft__spec_load reads. */
#define FT_SPEC_MAX_BYTES ((size_t)16 << 20)

/* Loads and validates a spec. limits may be NULL (defaults). On success *out is a new spec
 * (free with ft__spec_free); on failure *out is NULL and err says what and where. The file is
 * read with ft__read_file_max (a FIFO or a device is refused without blocking, a file larger
 * than FT_SPEC_MAX_BYTES before it is read: FT_ERR_IO, "cannot open ..."); a first line that
 * starts with '#' is skipped, as lua.c does. */
ft_status ft__spec_load(const char *path, const ft_sandbox_limits *limits, ft_spec **out,
                        ft_err *err);
/* The same from size bytes in memory, any bytes (NULs included; a precompiled chunk is
 * refused, "attempt to load a binary chunk"); name stands for the path in messages. Meant
 * also for a fuzz target: with small limits every input ends quickly with FT_OK or
 * FT_ERR_SPEC (FT_ERR_OUT_OF_MEMORY only when malloc itself fails). */
ft_status ft__spec_load_buffer(const char *name, const void *data, size_t size,
                               const ft_sandbox_limits *limits, ft_spec **out, ft_err *err);
/* ft__spec_load_buffer of a NUL-terminated text (an embedded spec). */
ft_status ft__spec_load_text(const char *name, const char *text, const ft_sandbox_limits *limits,
                             ft_spec **out, ft_err *err);
void ft__spec_free(ft_spec *spec); /* NULL is a no-op */

/* A file embedded into the binary at build time (cmake/embed.cmake). */
typedef struct ft_embedded_file {
    const char *name; /* "flash_fwd_sm80.cuh", "specs/flash_fwd.lua" */
    const char *data; /* NUL-terminated */
    size_t size;      /* bytes, without the NUL */
} ft_embedded_file;

/* The built-in specs, in order of preference: specs/flash_fwd.lua (mma.sync, every GPU from
 * sm_80 on) and specs/flash_fwd_sm90.lua (wgmma and TMA, sm_90a only). Ends with a NULL name. */
extern const ft_embedded_file ft__builtin_specs[];
/* The built-in modules specs may require (specs/lib/<name>.lua, named so). Ends with a NULL
 * name. */
extern const ft_embedded_file ft__builtin_spec_modules[];
#define FT_DEFAULT_SPEC_NAME "specs/flash_fwd.lua"

/* Loads path. NULL loads the default spec (specs/flash_fwd.lua); a path that is no file but
 * names a built-in spec ("flash_fwd_sm90" or "specs/flash_fwd_sm90.lua") loads that one. */
ft_status ft__spec_load_default(const char *path, ft_spec **out, ft_err *err);

/* Loads built-in spec i (0-based); FT_ERR_NOT_FOUND past the last. */
ft_status ft__spec_load_builtin(int i, ft_spec **out, ft_err *err);

/* Index of a parameter by name, or -1. */
int ft__spec_param_index(const ft_spec *spec, const char *name);

/* Whether integer parameter p has value among its values (0 for a string parameter). */
int ft__param_has_int(const ft_param *p, long long value);

/* Adds value to the values of open parameter pi, last, unless it has it already. A variant
 * made before keeps its meaning (the indices of the values it has do not change); the space
 * grows (nvariants). FT_ERR_INVALID_ARGUMENT, with the spec unchanged, when the parameter is
 * not open (the load refuses `open` on a string parameter), the value is negative, the parameter has
 * FT_MAX_VALUES values, or the space would pass FT_MAX_VARIANTS variants or its longest
 * variant string FT_VARIANT_STR_MAX. Not thread-safe per spec: callers that share a spec
 * hold their lock. */
ft_status ft__spec_add_value(ft_spec *spec, int pi, long long value, ft_err *err);

/* ft__spec_add_value for every name=value item of text (a variant string or a filter, as
 * --only takes) that names an open parameter with an integer value it lacks. The rest of the
 * text is left to ft__variant_parse and ft__variant_filter_parse, which report what is
 * wrong with it. */
ft_status ft__spec_add_values(ft_spec *spec, const char *text, ft_err *err);

/* The length of a parameter's longest value as a variant string writes it. */
size_t ft__param_longest_value(const ft_param *p);

/* Runs the constraints in order on v. *keep = 1 when all pass; otherwise *keep = 0 and
 * reason receives the failing constraint's text (or the reason it returned). A constraint
 * that raises an error makes the call fail with FT_ERR_SPEC. Not thread-safe per spec. */
ft_status ft__spec_check(ft_spec *spec, const ft_variant *v, const ft_arch *arch, int *keep,
                         char *reason, size_t reason_cap, ft_err *err);

/* spec.smem(v, arch): the variant's dynamic shared memory in bytes (a non-negative
 * integer, else FT_ERR_SPEC). */
ft_status ft__spec_smem(ft_spec *spec, const ft_variant *v, const ft_arch *arch, long long *bytes,
                        ft_err *err);

/* spec.registers(v, arch) when the spec has it (check has_registers first). */
ft_status ft__spec_registers(ft_spec *spec, const ft_variant *v, const ft_arch *arch,
                             long long *regs, ft_err *err);

#endif
