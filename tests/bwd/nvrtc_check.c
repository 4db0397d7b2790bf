/* Compiles templates/flash_bwd_sm80.cuh through NVRTC the way the runtime compiles kernels
 * (runtime/nvrtc.c: --std=c++17 --ptxas-options=-v --no-cache, no headers), with the prelude the
 * generator writes, for the harness's variants on sm_80 and sm_90, and templates/reference.cuh
 * once per target; prints ptxas's report of each main kernel. No GPU needed.
 *
 *   cc -std=c11 -O2 tests/bwd/nvrtc_check.c -I/usr/local/cuda/include \
 *      -L/usr/local/cuda/lib64 -lnvrtc -o build/nvrtc_check
 *   LD_LIBRARY_PATH=/usr/local/cuda/lib64 build/nvrtc_check [REPO_ROOT]
 *
 * Exit status 0 when everything compiled. */
#include <nvrtc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct variant {
    const char *name;
    int d, bm, bn, warps, split, stages, causal;
    const char *dtype, *gqa;
    int det;
};

/* The variants of tests/bwd/run.sh. */
static const struct variant variants[] = {
    {"v1", 128, 64, 128, 8, 1, 2, 0, "BF16", "LOOP", 0},  {"v2", 128, 64, 128, 8, 1, 2, 1, "F16", "ATOMIC", 0},
    {"v3", 64, 64, 128, 8, 1, 2, 1, "BF16", "LOOP", 0},   {"v4", 64, 32, 128, 4, 1, 1, 0, "F16", "ATOMIC", 0},
    {"v5", 256, 64, 64, 8, 2, 1, 1, "BF16", "LOOP", 0},   {"v6", 128, 64, 64, 4, 1, 1, 1, "BF16", "ATOMIC", 1},
    {"v7", 128, 64, 128, 8, 1, 2, 0, "BF16", "LOOP", 1},  {"v8", 192, 64, 64, 8, 2, 2, 1, "F16", "ATOMIC", 0},
};

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;

    if (f == NULL)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        buf = malloc((size_t)n + 1);
        if (buf != NULL) {
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            } else {
                buf[n] = '\0';
            }
        }
    }
    fclose(f);
    return buf;
}

/* Compiles source for arch; prints the report lines of the kernels whose name is `main_entry`
 * (all kernels when NULL). Returns 0 on success. */
static int compile(const char *label, const char *source, const char *arch, const char *main_entry)
{
    const char *opts[4];
    char arch_opt[64];
    nvrtcProgram prog;
    nvrtcResult r;
    size_t log_size = 0;
    char *log = NULL;
    int rc = 1;

    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    opts[0] = arch_opt;
    opts[1] = "--std=c++17";
    opts[2] = "--ptxas-options=-v";
    opts[3] = "--no-cache";
    if (nvrtcCreateProgram(&prog, source, label, 0, NULL, NULL) != NVRTC_SUCCESS) {
        printf("%s %s: nvrtcCreateProgram failed\n", label, arch);
        return 1;
    }
    r = nvrtcCompileProgram(prog, 4, opts);
    if (nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 0) {
        log = malloc(log_size + 1);
        if (log != NULL && nvrtcGetProgramLog(prog, log) != NVRTC_SUCCESS)
            log[0] = '\0';
    }
    if (r != NVRTC_SUCCESS) {
        printf("%s %s: %s\n%s\n", label, arch, nvrtcGetErrorString(r), log ? log : "");
        goto out;
    }
    printf("%s %s: compiled\n", label, arch);
    if (log != NULL) {
        /* ptxas prints "Compiling entry function 'X' for 'sm_NN'" then the properties. */
        int show = 0;
        char *line = strtok(log, "\n");
        while (line != NULL) {
            char *name = strstr(line, "entry function '");
            if (name != NULL) {
                name += strlen("entry function '");
                show = main_entry == NULL || (strncmp(name, main_entry, strlen(main_entry)) == 0 &&
                                              name[strlen(main_entry)] == '\'');
                if (main_entry == NULL)
                    printf("    %.*s\n", (int)(strchr(name, '\'') ? strchr(name, '\'') - name : 40), name);
            } else if (show && (strstr(line, "Used") || strstr(line, "spill"))) {
                while (*line == ' ')
                    line++;
                printf("    %s\n", line);
            } else if (strstr(line, "warning") || strstr(line, "error")) {
                printf("    %s\n", line);
            }
            line = strtok(NULL, "\n");
        }
    }
    rc = 0;
out:
    free(log);
    nvrtcDestroyProgram(&prog);
    return rc;
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : ".";
    const char *const archs[] = {"sm_80", "sm_90"};
    char path[1024];
    char *tmpl, *ref;
    int failures = 0;
    size_t i, a;

    snprintf(path, sizeof path, "%s/templates/flash_bwd_sm80.cuh", root);
    tmpl = read_file(path);
    snprintf(path, sizeof path, "%s/templates/reference.cuh", root);
    ref = read_file(path);
    if (tmpl == NULL || ref == NULL) {
        fprintf(stderr, "cannot read the templates under %s\n", root);
        return 2;
    }
    for (a = 0; a < 2; a++) {
        failures += compile("reference.cuh", ref, archs[a], NULL) != 0;
        for (i = 0; i < sizeof variants / sizeof variants[0]; i++) {
            const struct variant *v = &variants[i];
            const long long smem = 2LL * v->bn * (v->d + 8) * 2 + 2LL * v->stages * v->bm * (v->d + 8) * 2 +
                                   (long long)v->split * v->bn * (v->bm + 8) * 2 + 2LL * v->stages * v->bm * 4;
            const size_t cap = strlen(tmpl) + 2048;
            char *src = malloc(cap);
            char entry[64], label[64];
            int n;

            if (src == NULL)
                return 2;
            snprintf(entry, sizeof entry, "ft_flash_bwd_sm80_%s", v->name);
            snprintf(label, sizeof label, "%s.cu", v->name);
            n = snprintf(src, cap,
                         "// variant %s\n#define FTP_D %d\n#define FTP_BM %d\n#define FTP_BN %d\n#define FTP_WARPS %d\n"
                         "#define FTP_SPLIT %d\n#define FTP_STAGES %d\n#define FTP_CAUSAL %d\n#define FTP_DTYPE_%s 1\n"
                         "#define FTP_GQA_%s 1\n#define FTP_DET %d\n#define FT_SMEM_BYTES %lld\n\n",
                         v->name, v->d, v->bm, v->bn, v->warps, v->split, v->stages, v->causal, v->dtype, v->gqa,
                         v->det, smem);
            snprintf(src + n, cap - (size_t)n, "%s\nFT_DEFINE_KERNEL(%s)\n", tmpl, entry);
            printf("d=%d,bm=%d,bn=%d,warps=%d,split=%d,stages=%d,causal=%d,dtype=%s,gqa=%s,det=%d\n", v->d, v->bm,
                   v->bn, v->warps, v->split, v->stages, v->causal, v->dtype, v->gqa, v->det);
            failures += compile(label, src, archs[a], entry) != 0;
            free(src);
        }
    }
    printf("%d compile failures\n", failures);
    free(tmpl);
    free(ref);
    return failures == 0 ? 0 : 1;
}
