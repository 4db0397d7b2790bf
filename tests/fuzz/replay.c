/* Runs a fuzz target's LLVMFuzzerTestOneInput on files, without libFuzzer, so that the
 * harnesses build and run with any compiler: ctest fuzz_replay_pack and fuzz_replay_spec pass
 * the seed corpus through them in every build (under ASan and UBSan in a sanitized one), and a
 * reproducer from tests/fuzz/crashes/ can be replayed under a debugger.
 *
 *   fuzz_replay_pack FILE|DIR...     a directory: its files, in name order */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays one file; returns 0, or 1 when it cannot be read. */
static int replay_file(const char *path)
{
    ft_err err;
    char *data = NULL;
    size_t size = 0;

    if (ft__read_file(path, &data, &size, &err) != FT_OK) {
        fprintf(stderr, "fuzz_replay: %s\n", err.msg);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)data, size);
    free(data);
    return 0;
}

/* Replays every file of a directory in name order; *count gets how many. */
static int replay_dir(const char *path, int *count)
{
    DIR *d = opendir(path);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0, i;
    int failed = 0;

    if (d == NULL) {
        fprintf(stderr, "fuzz_replay: cannot open directory %s\n", path);
        return 1;
    }
    while ((e = readdir(d)) != NULL) {
        char full[4096];
        ft_err err;
        if (e->d_name[0] == '.')
            continue;
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (ft__path_kind(full, &err) != 1)
            continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            char **p = realloc(names, ncap * sizeof *p);
            if (p == NULL) {
                failed = 1;
                break;
            }
            names = p;
            cap = ncap;
        }
        names[n] = strdup(full);
        if (names[n] == NULL) {
            failed = 1;
            break;
        }
        n++;
    }
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof *names, by_name);
    for (i = 0; i < n; i++) {
        if (!failed)
            failed = replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    *count += (int)n;
    return failed;
}

int main(int argc, char **argv)
{
    int i, count = 0, failed = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    for (i = 1; i < argc && !failed; i++) {
        ft_err err;
        int kind = ft__path_kind(argv[i], &err);
        if (kind == 1) {
            failed = replay_file(argv[i]);
            count++;
        } else if (kind == 0) {
            fprintf(stderr, "fuzz_replay: %s does not exist\n", argv[i]);
            failed = 1;
        } else {
            failed = replay_dir(argv[i], &count);
        }
    }
    if (!failed && count == 0) {
        fprintf(stderr, "fuzz_replay: no input in %s\n", argv[1]);
        failed = 1;
    }
    if (!failed)
        printf("fuzz_replay: %d inputs, no finding\n", count);
    return failed;
}
