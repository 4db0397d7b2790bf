/* flashtune: the command-line tool. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"plan", cmd_plan, "expand, prune and compile a spec's variants for a target (no GPU needed)"},
    {"gen", cmd_gen, "print the generated CUDA source of one variant"},
    {"devices", cmd_devices, "list the GPUs here and the devices in the tuning database"},
    {"run", cmd_run, "verify and time one variant on one shape (GPU)"},
    {"verify", cmd_verify, "check every variant of a spec against the reference (GPU)"},
    {"tune", cmd_tune, "measure every variant on every bucket and record the winners (GPU)"},
    {"query", cmd_query, "print the winners (or every measurement) of the tuning database"},
    {"export", cmd_export, "write one device's winners with their cubins to a pack (or a C source)"},
    {"import", cmd_import, "check a pack and merge its winners into the tuning database"},
};

static void usage(FILE *f)
{
    size_t i;

    fprintf(f, "usage: flashtune COMMAND [options]   (flashtune COMMAND --help for more)\n\n");
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-8s %s\n", "version", "print the version");
    fprintf(f, "\nexit status: 0 done, 1 failed (the reason on stderr), 2 usage error, 130 interrupted\n"
               "(Ctrl-C or SIGTERM)\n");
}

/* What a command printed must have reached its output: a full disk or an I/O error turns a
 * success into a failure, even where a command did not check each printf (a command that
 * failed has said why already). The message goes to stderr whatever became of stdout; a
 * failure to write stderr itself can only change the exit status. */
static int finish(int status)
{
    int flushed, saved;

    if (status != 0)
        return status;
    errno = 0;
    flushed = fflush(stdout) == 0;
    saved = errno;
    if (!flushed || ferror(stdout)) {
        /* glibc keeps what it could not write and fails again here with the reason; output
         * dropped earlier (a large block written past the buffer) leaves none */
        if (!flushed && saved != 0)
            fprintf(stderr, "flashtune: writing the output failed: %s\n", strerror(saved));
        else
            fprintf(stderr, "flashtune: writing the output failed\n");
        status = 1;
    }
    if (fflush(stderr) != 0 || ferror(stderr))
        status = 1;
    return status;
}

static int run(int argc, char **argv)
{
    size_t i;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        printf("flashtune %s\n", ft_version());
        return 0;
    }
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "flashtune: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    /* The worker speaks to its tuner over stdout and flushes every message itself. */
    if (argc >= 2 && strcmp(argv[1], "worker") == 0) /* started by tune, not listed */
        return cmd_worker(argc - 1, argv + 1);
    return finish(run(argc, argv));
}
