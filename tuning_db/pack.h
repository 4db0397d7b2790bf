/*
 * Kernel packs: one device's tuned winners with their cubins and sources in one file, for
 * `flashtune export` / `flashtune import`, ft_context_options.pack, and the C source that
 * `flashtune export --format c` writes (an ft_kernel_set).
 *
 * ---- The file format (version 1) ------------------------------------------------------------
 *
 *   FTPACK <version> <index bytes> <blob bytes> <sha256>\n     the header line (ASCII)
 *   <index: JSON, exactly <index bytes> long, ending in \n>
 *   <blobs: <blob bytes> bytes, the cubins and sources one after another>
 *
 * The sha256 (64 lowercase hex digits) covers everything after the header line: the index and
 * the blobs. The file is exactly as long as the header says; anything shorter or longer is
 * corrupt. The index:
 *
 *   { "format": "flashtune-pack", "version": 1, "flashtune": "0.1.0",
 *     "created": "2026-11-30T08:15:02Z",
 *     "device": { "name", "cc", "sms", "smem_per_block", "smem_per_sm", "l2_bytes",
 *                 "driver_version", "nvrtc_version" },        (the database's fingerprint)
 *     "kernels": [ { "family", "variant", "arch", "template_hash", "source_hash", "entry",
 *                    "threads", "rows_per_block", "registers", "spill_stores", "spill_loads",
 *                    "smem_static", "smem_dynamic", "compile_ms",
 *                    "cubin":  { "offset", "size", "sha256" },   (offset: from the first blob byte)
 *                    "source": { "offset", "size", "sha256" } }, ... ],
 *     "winners": [ { "kernel" (an index into kernels), "dtype", "head_dim", "causal",
 *                    "seqlen_bucket", "bh_bucket", "batch", "heads_q", "heads_kv", "seqlen_q",
 *                    "seqlen_k", "median_ms", "iqr_ms", "tflops", "max_error", "repetitions",
 *                    "measured_at" }, ... ] }
 *
 * Numbers that were not measured are null; times are written with 17 significant digits, so
 * an import reproduces the database's values exactly. A reader checks, in order: the magic, the
 * version (a newer one is FT_ERR_UNSUPPORTED), the length, the sha256 of the whole, the index,
 * then every blob's range and sha256; any failure is FT_ERR_CORRUPT naming the file.
 */
#ifndef FT_TUNING_DB_PACK_H
#define FT_TUNING_DB_PACK_H

#include <stddef.h>

#include "common/error.h"
#include "runtime/driver.h"
#include "runtime/kernel.h"
#include "tuning_db/db.h"

#define FT_PACK_VERSION 1
#define FT_PACK_MAGIC "FTPACK"

typedef struct ft_pack_kernel {
    ft_db_kernel k;          /* k.source (NUL-terminated) and k.cubin belong to the pack */
    int rows_per_block;      /* the variant's bm */
} ft_pack_kernel;

typedef struct ft_pack_winner {
    int kernel;              /* index into kernels */
    ft_db_result r;          /* device_id and kernel_id are not used */
    char measured_at[32];    /* UTC, "2026-11-30 08:15:02" as the database writes it */
} ft_pack_winner;

typedef struct ft_pack {
    char flashtune_version[32];
    char created[32];
    ft_db_device device;
    ft_pack_kernel *kernels;
    int nkernels;
    ft_pack_winner *winners;
    int nwinners;
    char sha256[65];         /* of everything after the header line (set by read and write) */
    /* The ft_kernel_set view (ft__pack_kernel_set), pointing into the pack. */
    ft_kernel_set set;
    ft_kernel_set_entry *entries;
} ft_pack;

void ft__pack_free(ft_pack *p); /* frees what the pack holds and zeroes it; NULL is a no-op */

/* The winners of one device of a database, with their kernels' cubins and sources. Winners
 * whose kernel has no stored cubin are left out and counted in *left_out (may be NULL). */
ft_status ft__pack_from_db(ft_db *db, long long device_id, ft_pack *out, int *left_out, ft_err *err);

/* Writes the pack atomically (temporary file and rename); *bytes (may be NULL) gets its size.
 * Fills p->sha256. */
ft_status ft__pack_write(ft_pack *p, const char *path, size_t *bytes, ft_err *err);

/* Reads and checks a pack (see above). On failure *out is empty. name is used in messages. */
ft_status ft__pack_read(const char *path, ft_pack *out, ft_err *err);
ft_status ft__pack_parse(const void *data, size_t size, const char *name, ft_pack *out, ft_err *err);

/* Writes the C source of `flashtune export --format c`: the cubins as byte arrays and
 * `const ft_kernel_set <symbol>`. symbol must be a C identifier. */
ft_status ft__pack_write_c(const ft_pack *p, const char *path, const char *symbol, ft_err *err);

/* The pack as an ft_kernel_set (p->set, valid while p lives). */
ft_status ft__pack_kernel_set(ft_pack *p, const ft_kernel_set **out, ft_err *err);

/* Checks a kernel set handed in by an application: version, and every entry's fields (an entry
 * of a kernel family this build lacks is not an error here: loading it fails, and the context
 * falls back). */
ft_status ft__kernel_set_check(const ft_kernel_set *s, ft_err *err);

/* Loads a kernel-set entry's cubin into the current context for device `arch`, with its
 * family's launch convention (as ft__session_load does for a compiled variant). */
ft_status ft__kernel_set_load(const ft_cuda *cu, const ft_arch *arch, const ft_kernel_set_entry *e, ft_kernel *out,
                              ft_err *err);

/* The bucket of a kernel-set entry. */
void ft__kernel_set_bucket(const ft_kernel_set_entry *e, ft_db_bucket *out);

/* Query rows per block of a variant string: its bm (64 when it has none, as the loader does). */
int ft__pack_rows_per_block(const char *variant);

/* One line per winner, sorted by bucket: "dtype d causal seqlen bh variant entry threads rows
 * smem cubin_bytes cubin_sha256" (what `flashtune import --dry-run` prints; tests compare it). */
typedef void (*ft_pack_line_fn)(void *ud, const char *line);
void ft__pack_list(const ft_kernel_set *s, ft_pack_line_fn fn, void *ud);

/* Merges the pack's winners into a writable database, in one transaction: the kernels (with
 * cubin and source) and their results, recorded for device `as` (the pack's own device when
 * NULL). *winning (may be NULL) gets how many of them are now their bucket's winner. */
ft_status ft__pack_import(ft_db *db, const ft_pack *p, const ft_db_device *as, int *winning, ft_err *err);

#endif
