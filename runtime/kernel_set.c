#include "runtime/kernel_set.h"

#include <errno.h>
#include <stdlib.h>

#include "generator/check.h"
#include "generator/variant.h"
#include "generator/family.h"


ft_status ft__kernel_set_load(const ft_cuda *cu, const ft_arch *arch, const ft_kernel_set_entry *e, ft_kernel *out,
                              ft_err *err)
{
    const ft_family *fam = ft__family_find(e->family);
    char why[300];
    ft_launch_facts facts;

    if (fam == NULL)
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s: unknown kernel family '%s'", e->entry, e->family);
    if (!ft__family_supports_arch(fam, arch, why, sizeof why))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s: %s", e->entry, why);
    if (!ft__family_cubin_check(e->family, e->cubin, e->cubin_size, arch->cc, e->entry, why, sizeof why))
        return ft__fail(err, FT_ERR_UNSUPPORTED, "%s cannot run on %s: %s", e->entry, arch->name, why);
    ft__family_launch(fam, e->variant, e->threads, e->smem_dynamic, &facts);
    facts.rows_per_block = e->rows_per_block; /* the set's own record (checked against the variant's bm) */
    return ft__kernel_load_family(cu, fam, e->cubin, e->entry, &facts, arch, out, err);
}

