/* SHA-256 (FIPS 180-4), used for cache keys, source hashes and pack checksums. */
#ifndef FT_COMMON_SHA256_H
#define FT_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct ft_sha256 {
    uint32_t h[8];
    uint64_t nbytes;
    uint8_t block[64];
    size_t fill;
} ft_sha256;

void ft__sha256_init(ft_sha256 *s);
void ft__sha256_update(ft_sha256 *s, const void *data, size_t n);
void ft__sha256_final(ft_sha256 *s, uint8_t out[32]);

/* One-shot digest. */
void ft__sha256(const void *data, size_t n, uint8_t out[32]);
/* 64 lowercase hex digits and a NUL. */
void ft__sha256_hex(const uint8_t digest[32], char out[65]);

#endif
