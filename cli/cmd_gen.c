/* flashtune gen: print the generated CUDA source of one variant. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "generator/emit.h"
#include "generator/variant.h"

static const char usage[] =
    "usage: flashtune gen SPEC --variant 'd=128,bm=128,...' [--arch NAME] [-o FILE]\n"
    "\n"
    "Prints the CUDA source flashtune generates for one variant (the variant string is the\n"
    "one 'flashtune plan' prints). The source compiles on its own, e.g.\n"
    "  nvcc -arch=sm_90 -c kernel.cu\n"
    "\n"
    "  --variant STR     every parameter of the spec as name=value, comma-separated\n"
    "  --arch NAME       target whose limits the spec's formulas see (default sm_90)\n"
    "  -o, --output FILE write the source to FILE instead of stdout\n";

int cmd_gen(int argc, char **argv)
{
    static const struct option longopts[] = {{"variant", required_argument, NULL, 'v'},
                                             {"arch", required_argument, NULL, 'a'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *variant = NULL;
    const char *arch_name = "sm_90";
    const char *output = NULL;
    ft_spec *spec = NULL;
    const ft_family *fam;
    ft_kernel_source src;
    ft_variant v;
    ft_arch arch;
    ft_err err;
    char reason[512];
    int keep = 0;
    int status = 1;
    int ch;
    FILE *f;

    memset(&src, 0, sizeof src);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'v': variant = optarg; break;
        case 'a': arch_name = optarg; break;
        case 'o': output = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_usage_error("gen", "bad option");
        }
    }
    if (optind != argc - 1)
        return cli_usage_error("gen", "expected one spec file");
    if (variant == NULL)
        return cli_usage_error("gen", "--variant is required");
    if (ft__arch_builtin(arch_name, &arch, &err) != FT_OK ||
        ft__spec_load_default(argv[optind], &spec, &err) != FT_OK ||
        ft__variant_parse(spec, variant, &v, &err) != FT_OK) {
        status = cli_fail("gen", &err);
        goto out;
    }
    fam = ft__family_find(spec->template_name);
    if (fam == NULL) {
        fprintf(stderr, "flashtune gen: %s: unknown template '%s'\n", spec->path, spec->template_name);
        goto out;
    }
    if (ft__family_check_spec(fam, spec, &err) != FT_OK ||
        ft__spec_check(spec, &v, &arch, &keep, reason, sizeof reason, &err) != FT_OK) {
        status = cli_fail("gen", &err);
        goto out;
    }
    if (!keep)
        fprintf(stderr, "flashtune gen: note: the spec prunes this variant (%s); generating anyway\n",
                reason);
    if (ft__emit(spec, fam, &v, &arch, &src, &err) != FT_OK) {
        status = cli_fail("gen", &err);
        goto out;
    }
    f = output != NULL ? fopen(output, "w") : stdout;
    if (f == NULL) {
        perror(output);
        goto out;
    }
    fputs(src.text, f);
    if (f != stdout && fclose(f) != 0) {
        perror(output);
        goto out;
    }
    status = 0;
out:
    ft__kernel_source_free(&src);
    ft__spec_free(spec);
    return status;
}
