/*
 * The inside of kernel packs, shared by their files (not an interface of flashtune):
 *   pack_check.c   what a pack's strings may hold, the checks of its content
 *   pack_file.c    export from a database, writing, reading (header and index)
 *   pack_set.c     the ft_kernel_set view, the checks of a set handed in, the listing
 *   pack_c.c       the C source export
 *   pack_import.c  the merge into a database
 */
#ifndef FT_TUNING_DB_PACK_INTERNAL_H
#define FT_TUNING_DB_PACK_INTERNAL_H

#include "tuning_db/pack.h"

/* Character sets of ft__pack_all_of. */
#define LOWER_DIGITS_ "abcdefghijklmnopqrstuvwxyz0123456789_"
#define IDENT_ "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"

/* The current UTC time as "2026-11-30T08:15:02Z". */
void ft__pack_utc_now(char *out, size_t cap);
/* Whether v is a power of two. */
int ft__pack_pow2(long long v);
/* sha256 of data as 64 lowercase hex digits. */
void ft__pack_sha256_hex(const void *data, size_t size, char hex[65]);
/* UTF-8 without control characters (C0, DEL, C1): text that is safe on a terminal. */
int ft__pack_printable(const char *s);
/* Whether s has at least min_len characters, all of them in set. */
int ft__pack_all_of(const char *s, const char *set, size_t min_len);
/* A C identifier (the kernel's function name in its cubin). */
int ft__pack_identifier(const char *s);
/* Writes a reason into why (cap bytes) and returns 0, for `return ft__pack_refuse(...)`. */
int ft__pack_refuse(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The checks of ft__pack_check for one device, one kernel for device d, and one winner with its
 * kernel: 1, or 0 with the reason in why. */
int ft__pack_check_device(const ft_db_device *d, char *why, size_t cap);
int ft__pack_check_kernel(const ft_pack_kernel *pk, const ft_db_device *d, char *why, size_t cap);
int ft__pack_check_winner(const ft_pack_winner *w, const ft_pack_kernel *pk, char *why, size_t cap);

#endif
