/* flashtune gen: print the generated CUDA source of one variant. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common/fs.h"
#include "generator/emit.h"
#include "generator/variant.h"
#include "runtime/compile.h"

static const char usage[] =
    "usage: flashtune gen [SPEC] --variant 'd=128,bm=128,...' [--arch NAME] [-o FILE] [--cubin FILE]\n"
    "       (default SPEC: the built-in flash_fwd)\n"
    "\n"
    "Prints the CUDA source flashtune generates for one variant (the variant string is the\n"
    "one 'flashtune plan' prints). The source compiles on its own, e.g.\n"
    "  nvcc -arch=sm_90 -c kernel.cu\n"
    "\n"
    "  --variant STR     every parameter of the spec as name=value, comma-separated\n"
    "  --arch NAME       target whose limits the spec's formulas see (default sm_90)\n"
    "  -o, --output FILE write the source to FILE instead of stdout\n"
    "  --cubin FILE      also compile it as the tuner does (NVRTC, the family's target, e.g.\n"
    "                    sm_90a; no cache), write the cubin to FILE and NVRTC's log (the\n"
    "                    ptxas report) to stderr\n";

/* Compiles the source through the runtime's own NVRTC path and writes the cubin; the log
 * goes to stderr. */
static int write_cubin(const ft_family *fam, const ft_arch *arch, const ft_kernel_source *src, const char *path)
{
    ft_compiled c;
    ft_err err;
    char target[32], name[300];
    int rc = 1;

    memset(&c, 0, sizeof c);
    ft__family_target(fam, arch, target, sizeof target);
    snprintf(name, sizeof name, "%s.cu", src->entry);
    if (ft__compile(src->text, name, target, NULL, &c, &err) != FT_OK) {
        if (c.log != NULL)
            fputs(c.log, stderr);
        rc = cli_fail("gen", &err);
    } else if (ft__write_file_atomic(path, c.cubin, c.cubin_size, 0, &err) != FT_OK) {
        rc = cli_fail("gen", &err);
    } else {
        fputs(c.log, stderr);
        rc = 0;
    }
    ft__compiled_free(&c);
    return rc;
}

/* Writes the source: to stdout (path NULL), to a file (atomically: the whole source or the
 * file as it was), or to a device or FIFO (/dev/null, a pipe) as a stream. Every write and
 * the close are checked. */
static ft_status write_source(const char *path, const char *text, ft_err *err)
{
    ft_status rc = FT_ERR_IO;
    size_t n = strlen(text);
    struct stat st;
    FILE *f = NULL;

    if (path == NULL) {
        if (fwrite(text, 1, n, stdout) != n || fflush(stdout) != 0)
            return ft__fail(err, FT_ERR_IO, "writing the source to stdout failed: %s", strerror(errno));
        return FT_OK;
    }
    if (stat(path, &st) != 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
        return ft__write_file_atomic(path, text, n, 0, err);
    f = fopen(path, "w");
    if (f == NULL) {
        ft__fail(err, FT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        goto out;
    }
    if (fwrite(text, 1, n, f) != n || fflush(f) != 0) {
        ft__fail(err, FT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    rc = FT_OK;
out:
    if (f != NULL && fclose(f) != 0 && rc == FT_OK)
        rc = ft__fail(err, FT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return rc;
}

int cmd_gen(int argc, char **argv)
{
    static const struct option longopts[] = {{"variant", required_argument, NULL, 'v'},
                                             {"arch", required_argument, NULL, 'a'},
                                             {"output", required_argument, NULL, 'o'},
                                             {"cubin", required_argument, NULL, 'c'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    const char *variant = NULL;
    const char *arch_name = "sm_90";
    const char *output = NULL;
    const char *cubin = NULL;
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

    memset(&src, 0, sizeof src);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'v': variant = optarg; break;
        case 'a': arch_name = optarg; break;
        case 'o': output = optarg; break;
        case 'c': cubin = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_usage_error("gen", "bad option");
        }
    }
    if (optind < argc - 1)
        return cli_usage_error("gen", "expected at most one spec, got '%s' and '%s'", argv[optind], argv[optind + 1]);
    if (variant == NULL)
        return cli_usage_error("gen", "--variant is required");
    if (ft__arch_builtin(arch_name, &arch, &err) != FT_OK ||
        ft__spec_load_default(optind < argc ? argv[optind] : NULL, &spec, &err) != FT_OK ||
        ft__spec_add_values(spec, variant, &err) != FT_OK || ft__variant_parse(spec, variant, &v, &err) != FT_OK) {
        status = cli_fail("gen", &err);
        goto out;
    }
    if ((fam = ft__spec_family(spec, &err)) == NULL || ft__family_check_spec(fam, spec, &err) != FT_OK ||
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
    if (write_source(output, src.text, &err) != FT_OK) {
        status = cli_fail("gen", &err);
        goto out;
    }
    if (cubin != NULL && write_cubin(fam, &arch, &src, cubin) != 0)
        goto out;
    status = 0;
out:
    ft__kernel_source_free(&src);
    ft__spec_free(spec);
    return status;
}
