#include "runtime/kernel_set.h"

#include <errno.h>
#include <stdlib.h>

#include "generator/check.h"
#include "generator/family.h"

/* The integer value of parameter `name` in a variant string, or def (absent, malformed, or not
 * a positive integer). */
static int variant_value(const char *variant, const char *name, int def)
{
    char v[32], *end = NULL;
    long x;

    if (ft__variant_text_value(variant, name, v, sizeof v) != 1)
        return def;
    errno = 0;
    x = strtol(v, &end, 10);
    return errno == 0 && *end == '\0' && x > 0 && x <= 1 << 20 ? (int)x : def;
}

ft_status ft__kernel_set_load(const ft_cuda *cu, const ft_arch *arch, const ft_kernel_set_entry *e, ft_kernel *out,
                              ft_err *err)
{
    const ft_family *fam = ft__family_find(e->family);
    char why[300];
    ft_status rc;

    if (fam == NULL)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s: unknown kernel family '%s'", e->entry, e->family);
    if (!ft__family_supports_arch(fam, arch, why, sizeof why))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s: %s", e->entry, why);
    if (!ft__cubin_check(e->cubin, e->cubin_size, arch->cc, e->entry, why, sizeof why))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s cannot run on %s: %s", e->entry, arch->name, why);
    rc = ft__kernel_load(cu, e->cubin, e->entry, e->threads, e->rows_per_block, e->smem_dynamic, arch, out, err);
    if (rc == FT_OK && fam->uses_tma) /* as ft__session_load: tensor-map boxes from the variant */
        ft__kernel_use_tma(out, variant_value(e->variant, "bn", 64), variant_value(e->variant, "d", e->head_dim),
                           variant_value(e->variant, "causal", e->causal), variant_value(e->variant, "balance", 0));
    return rc;
}

