/* Built only with FT_SANITIZE: makes the finding named by its argument, so that the tests can
 * check that a sanitizer finding ends the process with a crash status under the tests'
 * ASAN_OPTIONS / UBSAN_OPTIONS (a plain exit status 1 would pass for an expected failure). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    volatile int big = INT_MAX;
    int *p;
    int rc = 2;

    if (argc != 2) {
        fprintf(stderr, "usage: sanitize_probe heap-overflow|leak|signed-overflow\n");
        return 2;
    }
    p = malloc(4 * sizeof *p);
    if (p == NULL)
        return 2;
    memset(p, 0, 4 * sizeof *p);
    if (strcmp(argv[1], "heap-overflow") == 0) {
        rc = p[4 + (argc - 2)];
    } else if (strcmp(argv[1], "leak") == 0) {
        p = NULL;
        rc = 1;
    } else if (strcmp(argv[1], "signed-overflow") == 0) {
        rc = big + argc > 0 ? 1 : 0;
    }
    free(p);
    fprintf(stderr, "sanitize_probe: %s: no finding\n", argv[1]);
    return rc;
}
