/*
 * Kernel packs: one device's tuned winners with their cubins and sources in one file, for
 * `flashtune export` / `flashtune import`, ft_context_options.pack, and the C source that
 * `flashtune export --format c` writes (an ft_kernel_set).
 *
 * ---- The file format (version 3; versions 1 and 2 are read too) -------------------------------
 *
 *   FTPACK <version> <index bytes> <blob bytes> <sha256>\n     the header line (ASCII)
 *   <index: JSON, exactly <index bytes> long, ending in \n>
 *   <blobs: <blob bytes> bytes, the cubins and sources one after another>
 *
 * The sha256 (64 lowercase hex digits) covers everything after the header line: the index and
 * the blobs. The file is exactly as long as the header says; anything shorter or longer is
 * corrupt. The index:
 *
 *   { "format": "flashtune-pack", "version": 3, "flashtune": "0.1.0",
 *     "created": "2026-11-30T08:15:02Z",
 *     "device": { "name", "cc", "sms", "smem_per_block", "smem_per_sm", "l2_bytes",
 *                 "driver_version", "nvrtc_version" },        (the database's fingerprint)
 *     "kernels": [ { "family", "variant", "arch", "template_hash", "source_hash", "entry",
 *                    "threads", "rows_per_block", "registers", "spill_stores", "spill_loads",
 *                    "smem_static", "smem_dynamic", "compile_ms",
 *                    "cubin":  { "offset", "size", "sha256" },   (offset: from the first blob byte)
 *                    "source": { "offset", "size", "sha256" } }, ... ],
 *     "winners": [ { "kernel" (an index into kernels), "op" (the operation: "fwd"),
 *                    "key" (its key's fields: {"dtype": "f16", "d": 128, "causal": 1,
 *                           "group": 1, "sq": 4096, "seqlen": 4096, "bh": 64} for the forward),
 *                    "batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k", "median_ms",
 *                    "iqr_ms", "tflops", "max_error", "repetitions", "measured_at" }, ... ] }
 *
 * Version 1 (flashtune 0.1) had no "op" and "key": its winners are the forward's, their key the
 * fields "dtype", "head_dim", "causal", "seqlen_bucket" and "bh_bucket". Version 3 is version 2
 * with the forward's key of "group" and "sq" (a flashtune that reads version 2 only would take
 * such a key for a corrupt one; version 3 tells it the pack is newer). A forward key without
 * "group" and "sq" (version 1's and version 2's) is read with those two of the winner's shape.
 *
 * Numbers that were not measured are null; times are written with 17 significant digits, so
 * an import reproduces the database's values exactly.
 *
 * A reader checks, in order, and refuses the file at the first failure (FT_ERR_CORRUPT naming
 * the file; FT_ERR_UNSUPPORTED for a newer version), before it reads more than the header:
 * the magic, the version, the sizes (the index at most FT_PACK_MAX_INDEX bytes, the file at
 * most FT_PACK_MAX_FILE, exactly as long as the header says); then, having read the file, the
 * sha256 of the whole and the index: strict JSON (common/jsonparse.h: no duplicate key, no
 * \u0000, no key the format does not have), at most FT_PACK_MAX_KERNELS kernels and
 * FT_PACK_MAX_WINNERS winners; the blobs one after another in the order of the kernels, a
 * cubin then its source, without gaps or overlaps, covering the blob bytes exactly, each
 * matching its sha256 (so no two entries share bytes, and nothing is copied twice); and then
 * what ft__pack_check checks of the content.
 */
#ifndef FT_TUNING_DB_PACK_H
#define FT_TUNING_DB_PACK_H

#include <stddef.h>

#include "common/error.h"
#include "tuning_db/db.h"

#define FT_PACK_VERSION 3
#define FT_PACK_MAGIC "FTPACK"

/* The most a pack may hold. A device's full tune has some hundreds of buckets (96 in the
 * reports); a winner takes about 360 bytes of index, a kernel about 600 bytes of index and 70 to
 * 120 KB of blobs (cubin and source): the limits leave room for ten times more, and bound what a
 * reader allocates (the file, one copy of its blobs, the index's values) before it has checked
 * anything but the header. */
#define FT_PACK_MAX_INDEX ((size_t)16 << 20)
#define FT_PACK_MAX_FILE ((size_t)512 << 20)
#define FT_PACK_MAX_KERNELS 4096
#define FT_PACK_MAX_WINNERS 16384

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
    const char **entry_ops, **entry_keys;
    char (*key_texts)[FT_KEY_TEXT_MAX];
} ft_pack;

void ft__pack_free(ft_pack *p); /* frees what the pack holds and zeroes it; NULL is a no-op */

/* Checks what a pack holds, as import and the runtime need it (FT_ERR_INVALID_ARGUMENT with a
 * message naming the kernel or winner; nothing else is looked at):
 *   - one to FT_PACK_MAX_KERNELS kernels and FT_PACK_MAX_WINNERS winners, every kernel used by a
 *     winner, no two kernels with one source hash and target, no two winners of one key;
 *   - the device: a printable name, a compute capability, an NVRTC version of digits and dots;
 *   - each kernel: family, target, entry, hashes and variant well formed; its source_hash the
 *     sha256 of its source; its target the one flashtune builds its family for on the device
 *     (ft__kernel_target_check); its cubin an ELF image for the device's SM that defines its
 *     entry (ft__cubin_check); rows_per_block its variant's bm; threads and shared memory within
 *     the device's limits;
 *   - each winner: an operation of this build, dtype, head dim and causality in range, its key
 *     the one its operation gives its shape (the buckets powers of two), a positive median time, non-negative measurements (or none), a measured_at of the
 *     database's form, and its kernel's variant computing its bucket (ft__variant_check).
 * Every string of a pack is UTF-8 without control characters: what reaches a terminal or
 * generated C is text, never a control sequence. */
ft_status ft__pack_check(const ft_pack *p, ft_err *err);

/* What ft__pack_from_db left out. */
typedef struct ft_pack_skipped {
    int no_cubin;            /* winners whose kernel has no stored cubin or source */
    int refused;             /* winners ft__pack_check would refuse (import would) */
    char first[600];         /* why the first of those was refused */
} ft_pack_skipped;

/* The winners of one device of a database, with their kernels' cubins and sources: what
 * import accepts. Winners whose kernel has no stored cubin, and winners the checks of
 * ft__pack_check refuse, are left out and counted in *skipped (may be NULL); a device they
 * refuse fails the export. */
ft_status ft__pack_from_db(ft_db *db, long long device_id, ft_pack *out, ft_pack_skipped *skipped, ft_err *err);

/* Writes the pack atomically (temporary file and rename); *bytes (may be NULL) gets its size.
 * Fills p->sha256. A pack ft__pack_check refuses, or one larger than a reader accepts, is not
 * written (FT_ERR_INVALID_ARGUMENT): what is written always imports. */
ft_status ft__pack_write(ft_pack *p, const char *path, size_t *bytes, ft_err *err);

/* Reads and checks a pack (see above). On failure *out is empty. name is used in messages.
 * ft__pack_read reads the header first and nothing more of a file whose header is wrong or
 * whose size is not the header's (or too large); ft__pack_parse checks a pack held in memory
 * (any bytes: it reads only data[0, size)). */
ft_status ft__pack_read(const char *path, ft_pack *out, ft_err *err);
ft_status ft__pack_parse(const void *data, size_t size, const char *name, ft_pack *out, ft_err *err);

/* Whether s may name the ft_kernel_set of a C export: a C identifier of at most 63
 * characters that is no keyword of C11 or C23, not reserved (a leading underscore, a name
 * ending in _t, the macros of <stddef.h> and <stdint.h>, which flashtune.h includes) and not of
 * flashtune.h's own names (ft_, FT_, FLASHTUNE_). Returns 1, or 0 with the reason in why. */
int ft__c_identifier_check(const char *s, char *why, size_t cap);

/* Writes the C source of `flashtune export --format c`: the cubins as byte arrays and
 * `const ft_kernel_set <symbol>`. symbol must pass ft__c_identifier_check and the pack
 * ft__pack_check (else FT_ERR_INVALID_ARGUMENT, nothing written). Every string of the pack is
 * written escaped: in string literals as octal escapes, in comments with every byte outside
 * printable ASCII and every '*', '/', '\\' and '?' as \xHH, so that no text closes a comment. */
ft_status ft__pack_write_c(const ft_pack *p, const char *path, const char *symbol, ft_err *err);

/* The pack as an ft_kernel_set (p->set, valid while p lives). */
ft_status ft__pack_kernel_set(ft_pack *p, const ft_kernel_set **out, ft_err *err);

/* Checks a kernel set handed in by an application: version, at most FT_PACK_MAX_WINNERS
 * entries, no two for one bucket, and every entry's fields as ft__pack_check checks a winner
 * and its kernel: its variant computes its bucket and has its rows per block, its cubin is an
 * ELF image for the set's SM defining its entry (an entry of a kernel family this build lacks
 * is not an error here: loading it fails, and the context falls back). */
ft_status ft__kernel_set_check(const ft_kernel_set *s, ft_err *err);

/* The operation and key of entry i of a kernel set: from the set's ops and keys (version 2), or
 * the forward's key from the entry's bucket fields (version 1). FT_ERR_CORRUPT when an entry's
 * key cannot be read, FT_ERR_UNSUPPORTED for an operation this build does not have. */
ft_status ft__kernel_set_key(const ft_kernel_set *s, int i, ft_key *out, ft_err *err);

/* Query rows per block of a variant string of a family, as the family launches it (0 for a family
 * this build does not have). */
int ft__pack_rows_per_block(const char *family, const char *variant);
/* One line per winner of a pack's set (ft__pack_kernel_set: ops and keys filled), sorted by
 * operation and key text: "op key variant entry threads rows smem
 * cubin_bytes cubin_sha256", the key its canonical text (what `flashtune import --dry-run`
 * prints; tests compare it with tests/pack_table_main.c's listing of the exported C set).
 * FT_ERR_OUT_OF_MEMORY when it cannot sort them (nothing is printed then). */
typedef void (*ft_pack_line_fn)(void *ud, const char *line);
ft_status ft__pack_list(const ft_kernel_set *s, ft_pack_line_fn fn, void *ud, ft_err *err);

/* Merges the pack's winners into a writable database, in one transaction: the kernels (with
 * cubin and source) and their results, recorded for device `as` (the pack's own device when
 * NULL; it must have the pack's compute capability). *winning (may be NULL) gets how many of
 * them are now their bucket's winner. The pack must pass ft__pack_check, and a kernel of the
 * database with the source hash and target of one of the pack's must be the same kernel
 * (family, variant, template hash, entry, and where stored its source, cubin and resources):
 * a pack never replaces a kernel of the database (FT_ERR_CORRUPT naming both; nothing is
 * written). */
ft_status ft__pack_import(ft_db *db, const ft_pack *p, const ft_db_device *as, int *winning, ft_err *err);

#endif
