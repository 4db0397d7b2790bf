/* What a compiled kernel must be before anyone loads it: the cubin's ELF header and symbol
 * table, the target it was built for, and a variant string's form and what it computes. Pure C
 * over the bytes given: no driver, no database. */
#include "generator/check.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generator/arch.h"
#include "generator/family.h"

/* ---- cubins: the ELF header and the symbol table -------------------------------------------- */

#define EM_CUDA 190
#define ELFOSABI_CUDA 0x33     /* CUDA ELF ABI version 7 (CUDA up to 12.x): e_flags & 0xff is the SM */
#define ELFOSABI_CUDA_V2 0x41  /* ABI version 8 (CUDA 12.8 and later): (e_flags >> 8) & 0xff */
#define SHT_SYMTAB 2
#define STT_FUNC 2

static int fail(char *why, size_t cap, const char *msg)
{
    if (why != NULL && cap > 0)
        snprintf(why, cap, "%s", msg);
    return 0;
}

static uint64_t le(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    int i;

    for (i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Whether [off, off + len) lies inside size bytes (without overflow). */
static int inside(uint64_t off, uint64_t len, size_t size)
{
    return off <= size && len <= size - off;
}

int ft__cubin_sm(const void *cubin, size_t size, char *why, size_t cap)
{
    const unsigned char *e = cubin;
    uint32_t flags;

    if (e == NULL || size < 64 || memcmp(e, "\177ELF", 4) != 0)
        return fail(why, cap, "it is not an ELF image");
    if (e[4] != 2 || e[5] != 1 || le(e + 18, 2) != EM_CUDA)
        return fail(why, cap, "it is not a 64-bit little-endian CUDA ELF image");
    flags = (uint32_t)le(e + 48, 4);
    if (e[7] == ELFOSABI_CUDA && e[8] == 7)
        return (int)(flags & 0xff);
    if (e[7] == ELFOSABI_CUDA_V2 && e[8] == 8)
        return (int)((flags >> 8) & 0xff);
    if (why != NULL && cap > 0)
        snprintf(why, cap, "it is a CUDA ELF image of an unknown ABI (OS/ABI 0x%02x, version %d)", e[7], e[8]);
    return 0;
}

/* Whether the symbol table defines name as a function. */
static int defines(const unsigned char *e, size_t size, const char *name)
{
    uint64_t shoff = le(e + 40, 8), shentsize = le(e + 58, 2), shnum = le(e + 60, 2), i;
    size_t nlen = strlen(name);

    if (shentsize != 64 || !inside(shoff, shnum * 64, size))
        return 0;
    for (i = 0; i < shnum; i++) {
        const unsigned char *sh = e + shoff + i * 64, *str;
        uint64_t off = le(sh + 24, 8), len = le(sh + 32, 8), link = le(sh + 40, 4), sym;
        uint64_t str_off, str_len;
        if (le(sh + 4, 4) != SHT_SYMTAB || le(sh + 56, 8) != 24 || !inside(off, len, size) || link >= shnum)
            continue;
        str_off = le(e + shoff + link * 64 + 24, 8);
        str_len = le(e + shoff + link * 64 + 32, 8);
        if (!inside(str_off, str_len, size))
            continue;
        str = e + str_off;
        for (sym = 0; sym + 24 <= len; sym += 24) {
            const unsigned char *s = e + off + sym;
            uint64_t at = le(s, 4);
            if ((s[4] & 0xf) != STT_FUNC || le(s + 6, 2) == 0 || at >= str_len || str_len - at <= nlen)
                continue;
            if (memcmp(str + at, name, nlen) == 0 && str[at + nlen] == '\0')
                return 1;
        }
    }
    return 0;
}

int ft__cubin_check(const void *cubin, size_t size, int cc, const char *entry, char *why, size_t cap)
{
    char msg[160];
    int sm = ft__cubin_sm(cubin, size, msg, sizeof msg);

    if (sm == 0)
        return fail(why, cap, msg);
    if (sm != cc) {
        snprintf(msg, sizeof msg, "its cubin is for sm_%d, not for compute capability %d.%d (sm_%d)", sm, cc / 10,
                 cc % 10, cc);
        return fail(why, cap, msg);
    }
    if (entry == NULL || !defines(cubin, size, entry)) {
        snprintf(msg, sizeof msg, "its cubin does not define the entry %.100s", entry != NULL ? entry : "(none)");
        return fail(why, cap, msg);
    }
    return 1;
}

int ft__kernel_target_check(const char *family, const char *arch, int cc, char *why, size_t cap)
{
    const ft_family *fam = family != NULL ? ft__family_find(family) : NULL;
    char want[32], msg[256];
    ft_arch a;
    size_t n;

    if (arch == NULL || cc < 10 || cc > 999)
        return fail(why, cap, "no target or compute capability");
    memset(&a, 0, sizeof a);
    snprintf(a.name, sizeof a.name, "sm_%d", cc);
    a.cc = cc;
    if (fam == NULL) { /* a family of another flashtune: its target is at least the device's */
        n = strlen(a.name);
        if (strncmp(arch, a.name, n) != 0 || (arch[n] != '\0' && !(arch[n] >= 'a' && arch[n] <= 'z' && arch[n + 1] == '\0'))) {
            snprintf(msg, sizeof msg, "it is built for %.20s, not for compute capability %d.%d", arch, cc / 10, cc % 10);
            return fail(why, cap, msg);
        }
        return 1;
    }
    if (!ft__family_supports_arch(fam, &a, msg, sizeof msg))
        return fail(why, cap, msg);
    ft__family_target(fam, &a, want, sizeof want);
    if (strcmp(arch, want) != 0) {
        snprintf(msg, sizeof msg, "it is built for %.20s; flashtune builds %s for %s on compute capability %d.%d",
                 arch, fam->name, want, cc / 10, cc % 10);
        return fail(why, cap, msg);
    }
    return 1;
}

/* ---- variant strings ---------------------------------------------------------------------- */

#define VARIANT_MAX 512

static int name_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

static int value_char(char c)
{
    return name_char(c, 0) || c == '.' || c == '-';
}

/* Checks the syntax; with name, copies its value. 1 found, 0 absent, -1 malformed (why). */
static int scan_variant(const char *variant, const char *name, char *out, size_t cap, char *why, size_t wcap)
{
    const char *p = variant, *names[64];
    size_t lens[64];
    int count = 0, found = 0, i;

    if (variant == NULL || variant[0] == '\0' || strlen(variant) >= VARIANT_MAX) {
        fail(why, wcap, "its variant string is empty or too long");
        return -1;
    }
    for (;;) {
        const char *n = p, *v;
        size_t nl, vl;
        while (name_char(*p, p == n))
            p++;
        nl = (size_t)(p - n);
        if (nl == 0 || *p != '=') {
            fail(why, wcap, "its variant string is not name=value pairs separated by commas");
            return -1;
        }
        p++;
        v = p;
        while (value_char(*p))
            p++;
        vl = (size_t)(p - v);
        if (vl == 0 || (*p != ',' && *p != '\0')) {
            fail(why, wcap, "its variant string has an empty value or a character a value may not hold");
            return -1;
        }
        for (i = 0; i < count; i++) {
            if (lens[i] == nl && memcmp(names[i], n, nl) == 0) {
                fail(why, wcap, "its variant string names a parameter twice");
                return -1;
            }
        }
        if (count == (int)(sizeof names / sizeof names[0])) {
            fail(why, wcap, "its variant string has too many parameters");
            return -1;
        }
        names[count] = n;
        lens[count++] = nl;
        if (name != NULL && strlen(name) == nl && memcmp(n, name, nl) == 0) {
            if (vl >= cap) {
                fail(why, wcap, "a value of its variant string is too long");
                return -1;
            }
            memcpy(out, v, vl);
            out[vl] = '\0';
            found = 1;
        }
        if (*p == '\0')
            break;
        p++;
    }
    return found;
}

int ft__variant_text_value(const char *variant, const char *name, char *out, size_t cap)
{
    return scan_variant(variant, name, out, cap, NULL, 0);
}

/* A non-negative decimal integer parameter (no sign, no leading zeros), or -1 (absent: def). */
static long variant_int(const char *variant, const char *name, long def, char *why, size_t cap)
{
    char v[32], msg[96];
    long x = 0;
    size_t i;
    int r = scan_variant(variant, name, v, sizeof v, why, cap);

    if (r < 0)
        return -1;
    if (r == 0)
        return def;
    for (i = 0; v[i] != '\0'; i++) {
        if (v[i] < '0' || v[i] > '9' || (i == 0 && v[i] == '0' && v[1] != '\0') || i >= 9) {
            snprintf(msg, sizeof msg, "its variant's %s=%s is not a plain integer", name, v);
            fail(why, cap, msg);
            return -1;
        }
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

int ft__variant_check(const char *variant, const char *dtype, int head_dim, int causal, int rows_per_block,
                      char *why, size_t cap)
{
    char vt[16], msg[200];
    long d, c, bm;
    int r;

    r = scan_variant(variant, "dtype", vt, sizeof vt, why, cap);
    if (r < 0)
        return 0;
    d = variant_int(variant, "d", -2, why, cap);
    c = variant_int(variant, "causal", -2, why, cap);
    bm = variant_int(variant, "bm", 64, why, cap);
    if (d == -1 || c == -1 || bm == -1)
        return 0;
    if (r == 0 || d == -2 || c == -2)
        return fail(why, cap, "its variant string lacks d, causal or dtype");
    if (d != head_dim || c != (causal != 0) || dtype == NULL || strcmp(vt, dtype) != 0) {
        snprintf(msg, sizeof msg, "its variant computes d=%ld causal=%ld %s, not d=%d causal=%d %s", d, c, vt,
                 head_dim, causal != 0, dtype != NULL ? dtype : "?");
        return fail(why, cap, msg);
    }
    if (rows_per_block > 0 && bm != rows_per_block) {
        snprintf(msg, sizeof msg, "it takes %d rows per block, but its variant has bm=%ld", rows_per_block, bm);
        return fail(why, cap, msg);
    }
    return 1;
}

