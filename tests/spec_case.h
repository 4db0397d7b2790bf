/* One case of a spec's pruning, as the spec tests state them: a variant and the constraint's
 * words that prune it (or none: kept). Include after ft_test.h and the generator's headers. */
#ifndef FT_SPEC_CASE_H
#define FT_SPEC_CASE_H

/* Adds the values of `variant` that the spec's open parameters lack, parses it into *v and checks
 * it for arch. Returns 1 when it is kept, 0 when it is pruned with exactly `reason`, and -1,
 * having said why on stderr, when that is not what the case wants (reason NULL: kept) or a step
 * fails. */
static int ft_test_spec_case(ft_spec *spec, const ft_arch *arch, const char *variant, const char *reason,
                             ft_variant *v)
{
    char why[256];
    int keep;
    ft_err err;

    if (ft__spec_add_values(spec, variant, &err) != FT_OK || ft__variant_parse(spec, variant, v, &err) != FT_OK ||
        ft__spec_check(spec, v, arch, &keep, why, sizeof why, &err) != FT_OK) {
        fprintf(stderr, "%s: %s\n", variant, err.msg);
        return -1;
    }
    if (reason == NULL ? !keep : keep || strcmp(why, reason) != 0) {
        fprintf(stderr, "%s: %s, want %s\n", variant, keep ? "kept" : why, reason ? reason : "kept");
        return -1;
    }
    return keep;
}

#endif
