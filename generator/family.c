#include "family.h"

#include <stdio.h>
#include <string.h>

#include "generator/variant.h"

static const char *const fwd_sm80_ints[] = {"d", "bm", "bn", "warps", "stages", "causal", "qreg",
                                            "overlap", NULL};
static const char *const fwd_sm80_strings[] = {"dtype", NULL};
static const char *const dtype_values[] = {"f16", "bf16", NULL};
static const char *const *const fwd_sm80_string_values[] = {dtype_values};

static const ft_family families[] = {
    {"flash_fwd_sm80", "flash_fwd_sm80.cuh",
     "FlashAttention-2 forward: mma.sync m16n8k16, ldmatrix, cp.async K/V ring", 80, 0,
     fwd_sm80_ints, fwd_sm80_strings, fwd_sm80_string_values},
};

const ft_embedded_file *ft__template_file(const char *name)
{
    const ft_embedded_file *f;

    for (f = ft__embedded_templates; f->name != NULL; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

const ft_family *ft__family_find(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof families / sizeof families[0]; i++)
        if (strcmp(families[i].name, name) == 0)
            return &families[i];
    return NULL;
}

ft_status ft__family_check_spec(const ft_family *fam, const ft_spec *spec, ft_err *err)
{
    int i;

    for (i = 0; fam->int_params[i] != NULL; i++) {
        int pi = ft__spec_param_index(spec, fam->int_params[i]);
        if (pi < 0)
            return ft__fail(err, FT_ERR_SPEC, "%s: template %s needs parameter '%s'", spec->path,
                            fam->name, fam->int_params[i]);
        if (spec->params[pi].kind != FT_PARAM_INT)
            return ft__fail(err, FT_ERR_SPEC, "%s: parameter '%s' of template %s takes integers",
                            spec->path, fam->int_params[i], fam->name);
    }
    for (i = 0; fam->string_params[i] != NULL; i++) {
        int pi = ft__spec_param_index(spec, fam->string_params[i]);
        const ft_param *p;
        int k;

        if (pi < 0)
            return ft__fail(err, FT_ERR_SPEC, "%s: template %s needs parameter '%s'", spec->path,
                            fam->name, fam->string_params[i]);
        p = &spec->params[pi];
        if (p->kind != FT_PARAM_STRING)
            return ft__fail(err, FT_ERR_SPEC, "%s: parameter '%s' of template %s takes names",
                            spec->path, p->name, fam->name);
        for (k = 0; k < p->nvalues; k++) {
            const char *const *allowed = fam->string_values[i];
            int ok = 0;
            int a;
            for (a = 0; allowed[a] != NULL; a++)
                ok |= strcmp(allowed[a], p->strings[k]) == 0;
            if (!ok)
                return ft__fail(err, FT_ERR_SPEC,
                                "%s: template %s has no %s '%s' (it supports f16 and bf16)",
                                spec->path, fam->name, p->name, p->strings[k]);
        }
    }
    return FT_OK;
}

int ft__family_threads(const ft_family *fam, const ft_spec *spec, const ft_variant *v)
{
    (void)fam;
    return (int)ft__variant_int(spec, v, "warps", 4) * 32;
}

int ft__family_supports_arch(const ft_family *fam, const ft_arch *arch, char *reason, size_t cap)
{
    if (arch->cc < fam->min_cc) {
        snprintf(reason, cap, "%s needs compute capability %d.%d or newer", fam->name,
                 fam->min_cc / 10, fam->min_cc % 10);
        return 0;
    }
    if (fam->exact_cc != 0 && arch->cc != fam->exact_cc) {
        snprintf(reason, cap, "%s runs only on compute capability %d.%d", fam->name,
                 fam->exact_cc / 10, fam->exact_cc % 10);
        return 0;
    }
    return 1;
}
