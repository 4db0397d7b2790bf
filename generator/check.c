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

int ft__family_cubin_check(const char *family, const void *cubin, size_t size, int cc, const char *entry, char *why,
                           size_t cap)
{
    const ft_family *fam = family != NULL ? ft__family_find(family) : NULL;
    char name[FT_ENTRY_MAX], msg[FT_ENTRY_MAX + 64];
    int i, n;

    if (!ft__cubin_check(cubin, size, cc, entry, why, cap))
        return 0;
    n = fam != NULL ? ft__family_nentries(fam) : 1;
    for (i = 1; i < n; i++) {
        if (!ft__family_entry_name(fam, entry, i, name, sizeof name))
            return fail(why, cap, "an entry name too long");
        if (!defines(cubin, size, name)) {
            snprintf(msg, sizeof msg, "its cubin does not define the entry %.100s", name);
            return fail(why, cap, msg);
        }
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

