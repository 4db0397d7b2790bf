/* Shared pieces of the flashtune command's subcommands. */
#ifndef FT_CLI_H
#define FT_CLI_H

#include <stdio.h>

#include "common/error.h"

#define EXIT_USAGE 2
#define EXIT_INTERRUPTED 130

int cmd_plan(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_worker(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
/* The devices recorded in the tuning database at db_path (NULL: the default), as lines of text
 * or JSON lines; 1 when the database cannot be opened or read. */
int cli_print_db_devices(const char *db_path, int json);

/* Prints "flashtune <cmd>: <message>" to stderr and returns the exit status for err. */
int cli_fail(const char *cmd, const ft_err *err);
/* Prints a usage error and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Installs SIGINT/SIGTERM handlers that set the returned flag (first signal) and restore the
 * default action (second signal), so long work can stop cleanly. */
volatile int *cli_stop_flag(void);

/* Parses a positive integer option value; returns 0 and prints an error when invalid. */
int cli_parse_int(const char *cmd, const char *opt, const char *text, long min, long max, long *out);

/* The width of a table's variant column for a plan's items: the longest variant string, at
 * least 62 (plan's and verify's tables). */
struct ft_plan;
int cli_variant_width(const struct ft_plan *plan);

/* Whether name contains part, ignoring ASCII case (an empty part is in every name): how
 * --device NAME matches a GPU or a recorded device. */
int cli_name_contains(const char *name, const char *part);

/* A GPU chosen with --device: N (an ordinal), NAME (the first GPU in the driver's order whose
 * name contains NAME, ignoring case, as `flashtune devices` lists them) or, where all_ok, "all"
 * (*out = -1). Returns 1, or 0 after printing why not (a usage error: a bad ordinal, an empty
 * text, "all" where it does not apply; a failure: no driver, no GPU of that name) with *status
 * the exit status to return. */
int cli_parse_device(const char *cmd, const char *text, int all_ok, int *out, int *status);

/* A progress display on stderr: a bar with ETA on a terminal, a plain line every few
 * percent (or 10 s) otherwise; nothing when quiet. */
typedef struct cli_progress {
    const char *label;
    int total;
    int tty;
    int quiet;
    double t0;
    double last_print;
    int last_pct;
} cli_progress;

void cli_progress_start(cli_progress *p, const char *label, int total, int quiet);
void cli_progress_update(cli_progress *p, int done, const char *note);
void cli_progress_finish(cli_progress *p);
/* "1m23s", "4.2s" */
void cli_format_duration(double ms, char *out, size_t cap);

#endif
