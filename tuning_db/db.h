/*
 * The tuning database (SQLite): devices, kernels, and every measurement the tuner makes.
 *
 * A result belongs to a device (its fingerprint), a kernel (a compiled variant), an
 * operation and one of its keys (ops/op.h: for the forward, dtype, head dim, causal, the
 * group, query-length, sequence-length and batch·heads buckets).
 * Every measured variant is kept, not only the winner, with its status. A result measured
 * under another driver, NVRTC or template version than the current ones is stale: it is
 * kept and shown, but never chosen as a winner until re-measured.
 *
 * Concurrency: WAL journal, a busy timeout, every write in one BEGIN IMMEDIATE
 * transaction; several processes may write to one file at once. A handle is used by one
 * thread at a time.
 */
#ifndef FT_TUNING_DB_H
#define FT_TUNING_DB_H

#include <stddef.h>

#include "common/error.h"
#include "ops/op.h"

#define FT_DB_SCHEMA_VERSION 5
/* The oldest schema a read-only handle reads without migrating (its tables of results are
 * those of the current one). */
#define FT_DB_SCHEMA_OLDEST_READABLE 1

typedef struct ft_db ft_db;

/* What identifies a GPU for tuning purposes; results never cross fingerprints. */
typedef struct ft_db_device {
    char name[128];          /* "NVIDIA H200" */
    int cc;                  /* 90 */
    int sms;                 /* 132 */
    long long smem_per_block; /* opt-in bytes */
    long long smem_per_sm;
    long long l2_bytes;
    int driver_version;      /* cuDriverGetVersion: 13000 */
    char nvrtc_version[16];  /* "13.0" */
} ft_db_device;

/* A compiled variant. Identified by (source_hash, arch); the cubin may be NULL when the
 * variant did not compile. */
typedef struct ft_db_kernel {
    char family[64];         /* "flash_fwd_sm80" */
    char variant[512];       /* "d=128,bm=128,..." */
    char arch[16];           /* "sm_90" */
    char template_hash[65];  /* template text + generator version (ft__family_hash) */
    char source_hash[65];    /* sha256 of the generated source */
    char entry[256];         /* kernel function name */
    const char *source;      /* the generated source; may be NULL */
    const void *cubin;       /* may be NULL */
    size_t cubin_size;
    int registers;
    long long spill_stores, spill_loads, smem_static, smem_dynamic;
    int threads;
    double compile_ms;
} ft_db_kernel;

/* Whether two fingerprints are the same GPU model (name, compute capability, multiprocessors,
 * shared memory, L2), and the same driver and NVRTC. */
int ft__db_device_same_model(const ft_db_device *a, const ft_db_device *b);
int ft__db_device_same_driver(const ft_db_device *a, const ft_db_device *b);

typedef enum ft_result_status {
    FT_RESULT_OK = 0,
    FT_RESULT_WRONG_RESULT,
    FT_RESULT_COMPILE_ERROR,
    FT_RESULT_OVER_LIMITS,
    FT_RESULT_LAUNCH_FAILURE,
    FT_RESULT_FAULT,
    FT_RESULT_TIMEOUT
} ft_result_status;

/* "ok", "wrong_result", "compile_error", "over_limits", "launch_failure", "fault", "timeout" */
const char *ft__result_status_name(ft_result_status s);
int ft__result_status_parse(const char *name, ft_result_status *out); /* 1 on success */

typedef struct ft_db_result {
    long long device_id;
    long long kernel_id;
    ft_key key;              /* the operation and its key. Read from a file: key.op is NULL for an
                                operation this build does not know (a newer flashtune's), whose
                                rows are listed but never chosen */
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k; /* the shape measured */
    ft_result_status status;
    char reason[512];        /* "" when ok */
    double median_ms;        /* NAN when not measured */
    double iqr_ms;           /* interquartile range of the repetitions */
    double tflops;
    double max_error;        /* verification error; NAN when not verified */
    int repetitions;
} ft_db_result;

/* One row of a query: a result joined with its device and kernel. */
typedef struct ft_db_row {
    ft_db_result result;
    ft_db_device device;
    char family[64];
    char variant[512];
    char arch[16];
    char template_hash[65];
    char measured_at[32];    /* UTC, "2026-11-30 08:15:02" */
    int preferred;           /* the tuner decided on it among results within each other's noise */
    int stale;               /* measured under another driver / NVRTC / template version */
    int winner;              /* of the non-stale ok results of its (device, operation, key): the
                                preferred one, else the fastest */
} ft_db_row;

/* Opens or creates a database. path NULL: $FLASHTUNE_DB (empty counts as unset), else
 * $XDG_DATA_HOME/flashtune/tuning.db, else ~/.local/share/flashtune/tuning.db (directories are
 * created). A name SQLite would read as something other than a file ("", which it opens as a
 * temporary database, ":memory:", a "file:" URI) is FT_ERR_INVALID_ARGUMENT, from path or from
 * $FLASHTUNE_DB. Before SQLite opens anything the path must be a regular file (or absent, in
 * an existing directory, when not read_only), and so must its journal, WAL and shared-memory
 * files where they exist; a writable handle needs write access to the file and its directory.
 * A file that is not an SQLite database, an SQLite database that is not a flashtune one, one
 * with flashtune's id but no schema version, or one of a newer schema, is FT_ERR_DATABASE with
 * a message naming the file, and the file is not touched. Older schemas are migrated in one
 * transaction before the switch to WAL, so a failed migration leaves the file as it was. A
 * lock held by another process past the busy timeout (10 s) fails with a message that says so.
 * read_only opens without creating or migrating; a WAL database in a directory this process
 * cannot write (so SQLite cannot create its -shm index) is then read as an immutable file,
 * with no lock and nothing written beside it, when its WAL holds nothing (else an error that
 * names the WAL): such a handle does not see what another process writes into the file while
 * it is open. */
ft_status ft__db_open(const char *path, int read_only, ft_db **out, ft_err *err);
void ft__db_close(ft_db *db); /* NULL is a no-op */

/* The default database path, as ft__db_open resolves it; with create_dirs, its directory is
 * created. */
ft_status ft__db_default_path(char *out, size_t cap, int create_dirs, ft_err *err);
const char *ft__db_path(const ft_db *db);

/* Finds or inserts; returns the row id. A kernel found again is updated to the given
 * description, but a NULL cubin or source keeps the stored one. On a read-only handle they
 * only find: FT_ERR_NOT_FOUND when absent. */
ft_status ft__db_device_id(ft_db *db, const ft_db_device *dev, long long *id, ft_err *err);
ft_status ft__db_kernel_id(ft_db *db, const ft_db_kernel *k, long long *id, ft_err *err);

/* The current versions against which staleness is judged (set once after opening; rows whose
 * device driver/NVRTC version or kernel template hash differ are stale). A handle starts from
 * the versions stored in the file by the last writer's call; empty/zero fields keep those
 * (and are not compared when none is stored). A writable handle stores the given ones in the
 * file for the sqlite3 shell's views; a read-only one keeps them to itself. */
ft_status ft__db_set_current(ft_db *db, int driver_version, const char *nvrtc_version,
                             const char *family, const char *template_hash, ft_err *err);

/* Records a result, replacing an earlier one for the same (device, kernel, operation, key);
 * r->key.op must be an operation (FT_ERR_INVALID_ARGUMENT otherwise). */
ft_status ft__db_record(ft_db *db, const ft_db_result *r, ft_err *err);

/* Whether a non-stale result exists for (device, kernel, key): the tuner skips those
 * when it resumes. */
ft_status ft__db_has_result(ft_db *db, long long device_id, long long kernel_id,
                            const ft_key *key, int *has, ft_err *err);

/* Query filters; NULL / -1 fields match everything. */
typedef struct ft_db_filter {
    const char *device_name; /* substring match */
    const ft_op *op;         /* NULL: every operation */
    const char *dtype;
    int head_dim;            /* -1: any */
    int causal;              /* -1: any */
    int winners_only;        /* 1: one row per (device, operation, key), the winner */
} ft_db_filter;

void ft__db_filter_init(ft_db_filter *f);

/* Calls fn for each matching row, ordered by device, dtype, head dim, causal, group bucket,
 * sq bucket, seqlen bucket, bh bucket (the key's fields), then median time (unmeasured last). fn returning
 * non-zero stops. */
ft_status ft__db_query(ft_db *db, const ft_db_filter *f,
                       int (*fn)(void *ud, const ft_db_row *row), void *ud, ft_err *err);

/* Decides the winner of (device, key): the kernel's ok result is preferred to faster ones (the
 * tuner's race's winner, whose figure is of a sustained clock, over figures measured otherwise),
 * any other decision for the key is cleared; kernel_id 0 only clears. Measuring the key again
 * (ft__db_record, by any writer) clears the decision too. Needs a writable handle. */
ft_status ft__db_decide(ft_db *db, long long device_id, const ft_key *key, long long kernel_id, ft_err *err);

/* The winner of (device, key), with its kernel's cubin (malloc'd into *cubin, caller
 * frees) when cubin is not NULL. *found = 0 when there is none. */
ft_status ft__db_winner(ft_db *db, long long device_id, const ft_key *key, ft_db_row *row,
                        void **cubin, size_t *cubin_size, int *found, ft_err *err);

/* Devices in the database, with result counts. */
ft_status ft__db_devices(ft_db *db, int (*fn)(void *ud, long long id, const ft_db_device *dev,
                                              long long results, long long winners),
                         void *ud, ft_err *err);

/* ---- misses: the kinds of call the runtime had no tuned winner for ------------------------- */

typedef struct ft_db_miss {
    long long device_id;
    ft_db_device device;     /* listing only */
    ft_key key;              /* key.op NULL: an operation this build does not know */
    int batch, heads_q, heads_kv, seqlen_q, seqlen_k; /* the first call that missed */
    char fallback[16];       /* what ran instead: "nearest", "default" (or why nothing did) */
    long long count;         /* listing: how many times it was recorded */
    char first_seen[32];     /* listing: UTC, "2026-11-30 08:15:02" */
    char last_seen[32];
    int tuned;               /* listing: the key has a winner for the device now */
} ft_db_miss;

/* Records a miss of (device_id, key): a new row with count 1, or count + 1 and last_seen
 * now for a known one (its shape stays that of the first). Needs a writable handle. */
ft_status ft__db_record_miss(ft_db *db, const ft_db_miss *m, ft_err *err);

/* Calls fn for every recorded miss, ordered by device name, device, dtype, head dim, causal,
 * group, sq, seqlen and bh buckets; device_name (substring, case-insensitive) and device_id (-1:
 * any) filter. fn returning non-zero stops. A file of an older schema has none. */
ft_status ft__db_misses(ft_db *db, const char *device_name, long long device_id,
                        int (*fn)(void *ud, const ft_db_miss *m), void *ud, ft_err *err);

/* One transaction around many calls (importing a pack: all or nothing). Between begin and
 * end every write joins it; ft__db_batch_end commits when rc is FT_OK, else rolls back, and
 * returns rc or the commit's failure. */
ft_status ft__db_batch_begin(ft_db *db, ft_err *err);
ft_status ft__db_batch_end(ft_db *db, ft_status rc, ft_err *err);

/* A kernel row by id, with its source and cubin copied (malloc'd, NULL when not stored; the
 * caller frees k->source and k->cubin). FT_ERR_NOT_FOUND when there is no such row. */
ft_status ft__db_kernel_get(ft_db *db, long long id, ft_db_kernel *k, ft_err *err);

/* Sets when a recorded result was measured ("2026-11-30 08:15:02", UTC): an imported result
 * keeps the time it was measured at. */
ft_status ft__db_set_measured_at(ft_db *db, const ft_db_result *r, const char *measured_at, ft_err *err);

#endif
