/*
 * Kernel families: the CUDA templates flashtune can expand, what each needs from a spec and
 * from the target. A spec names its family in its `template` field.
 */
#ifndef FT_GENERATOR_FAMILY_H
#define FT_GENERATOR_FAMILY_H

#include <stddef.h>

#include "common/error.h"
#include "common/strbuf.h"
#include "generator/arch.h"
#include "generator/spec.h"
#include "ops/op.h"

extern const ft_embedded_file ft__embedded_templates[]; /* ends with a NULL name */

/* The text of an embedded template file, or NULL. */
const ft_embedded_file *ft__template_file(const char *name);

typedef struct ft_family ft_family;

struct ft_family {
    const char *name;          /* "flash_fwd_sm80": what a spec's `template` names */
    const ft_op *op;           /* the operation its kernels compute */
    const char *file;          /* "flash_fwd_sm80.cuh" */
    const char *summary;
    int min_cc;                /* lowest compute capability it runs on */
    int exact_cc;              /* non-zero: runs only on this capability (sm_90a code) */
    const char *const *int_params;    /* integer parameters the template reads, NULL-ended */
    const char *const *string_params; /* string parameters and their allowed values: */
    const char *const *const *string_values; /*   string_values[i] is NULL-ended */
    const char *target_suffix; /* appended to the device's target: "a" builds sm_90a code */
    int uses_tma;              /* the kernel takes tensor maps of Q, K and V (runtime/kernel.c) */
    /* Threads per block of a variant. */
    int (*threads)(const ft_spec *spec, const ft_variant *v);
    /* Code the template needs before it, generated per variant (NULL: none). */
    void (*prelude)(ft_strbuf *sb, const ft_spec *spec, const ft_variant *v);
    /* Checks the values the prelude writes code from (NULL: none). */
    ft_status (*check_values)(const ft_family *fam, const ft_spec *spec, ft_err *err);
    /* How a variant is launched, from its variant string (what packs and database rows keep):
     * rows per block, tensor maps, the grid's kind. threads and shared memory come from the
     * variant's compilation and are filled by ft__family_launch. */
    void (*launch)(const char *variant, ft_launch_facts *out);
    /* The kernels a variant's source defines, as suffixes of its entry name, NULL-ended, in the
     * order the operation's launch plan numbers them (0: the main one, the entry itself; a
     * plan's step names its kernel by that index). NULL: the main one only. */
    const char *const *entries;
    /* Made for forward calls of few queries (ops/op.h FT_FWD_SHORT_QUERY): the runtime's built-in
     * defaults of the family serve those calls only, before any other family's. */
    int short_query;
};

const ft_family *ft__family_find(const char *name);

/* The family a spec's `template` names, or NULL with FT_ERR_SPEC naming the spec, the template
 * and the families this build has. */
const ft_family *ft__spec_family(const ft_spec *spec, ft_err *err);

/* FT_OK when the family of spec computes operation op; else FT_ERR_UNSUPPORTED (FT_ERR_SPEC for
 * an unknown family) naming the spec, its family and operation, and what (the command or part
 * that cannot take it: "run, verify and tune measure"). */
ft_status ft__spec_check_op(const ft_spec *spec, const ft_op *op, const char *what, ft_err *err);

/* The families' names, comma-separated, into out (cap bytes): for messages. */
void ft__family_names(char *out, size_t cap);

/* A kernel's entry name, NUL included (ft_kernel_source.entry). */
#define FT_ENTRY_MAX 256

/* The number of kernels a variant's source defines (1 or more), and the name of the i-th:
 * the entry followed by its suffix (out: cap bytes; 0 when i is out of range or it does not
 * fit). */
int ft__family_nentries(const ft_family *fam);
int ft__family_entry_name(const ft_family *fam, const char *entry, int i, char *out, size_t cap);

/* Checks that a spec gives every parameter its family needs, with suitable values, and that
 * every variant's entry name fits FT_ENTRY_MAX. */
ft_status ft__family_check_spec(const ft_family *fam, const ft_spec *spec, ft_err *err);

/* Threads per block of a variant. */
int ft__family_threads(const ft_family *fam, const ft_spec *spec, const ft_variant *v);

/* The launch facts of a variant of the family (its string, "d=128,bm=128,..."), with the
 * threads and dynamic shared memory its compilation gives: what runtime/kernel.c loads and
 * launches a kernel with, the same for a variant just compiled, a database's winner, a pack's
 * or a kernel set's entry and a tuner's measurement. max_resident is left 0 (the loader sets
 * it). */
void ft__family_launch(const ft_family *fam, const char *variant, int threads, long long smem_dynamic,
                       ft_launch_facts *out);

/* The NVRTC target for the family on arch: arch's name plus the family's suffix ("sm_90a"). */
void ft__family_target(const ft_family *fam, const ft_arch *arch, char *out, size_t cap);

/* Whether code of this family can be built for and run on the target. Fills reason when not. */
int ft__family_supports_arch(const ft_family *fam, const ft_arch *arch, char *reason, size_t cap);

#endif
