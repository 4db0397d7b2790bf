/* libFuzzer target: the spec loader (ft__spec_load_text) on arbitrary text, in a small
 * sandbox (8 MiB of Lua heap, 2 million instructions to load, 200 thousand per call). A spec
 * that loads is used as the planner uses it: its first variants are formatted, parsed back,
 * checked against sm_90's limits and their shared memory (and registers) evaluated. Build and
 * run: scripts/fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "generator/arch.h"
#include "generator/spec.h"
#include "generator/variant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void use(ft_spec *spec)
{
    ft_arch arch;
    ft_err err;
    long long n;

    if (ft__arch_builtin("sm_90", &arch, &err) != FT_OK)
        abort();
    for (n = 0; n < spec->nvariants && n < 8; n++) {
        ft_variant v, back;
        char text[1024], reason[256];
        long long bytes = 0, regs = 0;
        int keep = 0;

        ft__variant_nth(spec, n, &v);
        ft__variant_format(spec, &v, text, sizeof text);
        if (strlen(text) < sizeof text - 1 && ft__variant_parse(spec, text, &back, &err) == FT_OK &&
            memcmp(back.idx, v.idx, sizeof v.idx[0] * (size_t)spec->nparams) != 0)
            abort(); /* a variant string must name its variant */
        if (ft__spec_check(spec, &v, &arch, &keep, reason, sizeof reason, &err) != FT_OK || !keep)
            continue;
        if (ft__spec_smem(spec, &v, &arch, &bytes, &err) != FT_OK)
            continue;
        if (bytes < 0)
            abort(); /* documented as non-negative */
        if (spec->has_registers)
            (void)ft__spec_registers(spec, &v, &arch, &regs, &err);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ft_sandbox_limits limits = {8u << 20, 2000000, 200000, 2000000, 200000, 64u << 20, 16u << 20, 2000, 500};
    ft_spec *spec = NULL;
    ft_err err;
    char *text;

    memset(&err, 0, sizeof err);
    if (size > (1u << 20))
        return 0;
    text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    if (ft__spec_load_text("fuzz.lua", text, &limits, &spec, &err) == FT_OK)
        use(spec);
    else if (spec != NULL || err.msg[0] == '\0')
        abort(); /* a failure leaves *out NULL and says why */
    ft__spec_free(spec);
    free(text);
    return 0;
}
