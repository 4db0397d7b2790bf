/*
 * Kernel packs as C source (`flashtune export --format c`): the cubins as byte arrays and one
 * ft_kernel_set, every string escaped.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fs.h"
#include "common/json.h"
#include "common/jsonparse.h"
#include "common/sha256.h"
#include "common/strbuf.h"
#include "generator/check.h"
#include "generator/family.h"
#include "tuning_db/pack_internal.h"

/* ---- the C source ------------------------------------------------------------------------- */

/* A string literal: '"', '\\', '?' (no trigraphs), '*' and '/' (no text that looks like a
 * comment) and every byte outside printable ASCII as three-digit octal escapes, which no
 * following character can extend. */
static void c_string(FILE *f, const char *s)
{
    const unsigned char *p;

    fputc('"', f);
    for (p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\' || *p == '?' || *p == '*' || *p == '/' || *p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\%03o", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

/* Text inside a block comment: printable ASCII but '*', '/' (no "*" "/" can close the comment
 * and no "/" "*" open another), '\\' (no line splice) and '?' (no trigraph); those and every
 * other byte as \xHH. */
static void c_comment(FILE *f, const char *s)
{
    const unsigned char *p;

    for (p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p < 0x20 || *p >= 0x7f || *p == '*' || *p == '/' || *p == '\\' || *p == '?')
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

static void c_double(FILE *f, double v)
{
    if (isnan(v) || isinf(v))
        fputs("0.0", f);
    else
        fprintf(f, "%.17g", v);
}

int ft__c_identifier_check(const char *s, char *why, size_t cap)
{
    /* The keywords of C11 and C23 (C23's are macros of C11's headers), and GNU C's asm. */
    static const char *const keywords[] = {
        "alignas", "alignof", "auto", "bool", "break", "case", "char", "const", "constexpr", "continue",
        "default", "do", "double", "else", "enum", "extern", "false", "float", "for", "goto", "if", "inline",
        "int", "long", "nullptr", "register", "restrict", "return", "short", "signed", "sizeof", "static",
        "static_assert", "struct", "switch", "thread_local", "true", "typedef", "typeof", "typeof_unqual",
        "union", "unsigned", "void", "volatile", "while", "asm", NULL};
    /* What <stddef.h> and <stdint.h> (included by flashtune.h) define besides names ending in _t. */
    static const char *const macros[] = {"NULL", "offsetof", "unreachable", NULL};
    static const char *const macro_prefixes[] = {"INT", "UINT", "SIZE_", "PTRDIFF_", "SIG_ATOMIC_", "WCHAR_",
                                                 "WINT_", NULL};
    size_t n, i;

    if (s == NULL || s[0] == '\0')
        return ft__pack_refuse(why, cap, "it is empty");
    n = strlen(s);
    if (n > 63)
        return ft__pack_refuse(why, cap, "it is longer than 63 characters");
    if (!ft__pack_all_of(s, IDENT_, 1))
        return ft__pack_refuse(why, cap, "it holds characters other than letters, digits and '_'");
    if (s[0] >= '0' && s[0] <= '9')
        return ft__pack_refuse(why, cap, "it starts with a digit");
    if (s[0] == '_')
        return ft__pack_refuse(why, cap, "names starting with '_' are reserved for the C implementation");
    for (i = 0; keywords[i] != NULL; i++)
        if (strcmp(s, keywords[i]) == 0)
            return ft__pack_refuse(why, cap, "it is a keyword of C");
    if (strncmp(s, "ft_", 3) == 0 || strncmp(s, "FT_", 3) == 0 || strncmp(s, "FLASHTUNE_", 10) == 0)
        return ft__pack_refuse(why, cap, "names starting with ft_, FT_ or FLASHTUNE_ belong to flashtune.h");
    if (n >= 2 && strcmp(s + n - 2, "_t") == 0)
        return ft__pack_refuse(why, cap, "names ending in _t are reserved for types (those of <stddef.h> and <stdint.h>)");
    for (i = 0; macros[i] != NULL; i++)
        if (strcmp(s, macros[i]) == 0)
            return ft__pack_refuse(why, cap, "it is a macro of <stddef.h>");
    if (strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == n)
        for (i = 0; macro_prefixes[i] != NULL; i++)
            if (strncmp(s, macro_prefixes[i], strlen(macro_prefixes[i])) == 0)
                return ft__pack_refuse(why, cap, "names of capitals starting with %s are macros of <stdint.h>",
                              macro_prefixes[i]);
    return 1;
}

ft_status ft__pack_write_c(const ft_pack *p, const char *path, const char *symbol, ft_err *err)
{
    ft_status rc = FT_ERR_INVALID_ARGUMENT;
    char *text = NULL, why[200];
    size_t size = 0;
    FILE *f = NULL;
    size_t b;
    int i, failed;

    if (p == NULL || path == NULL || symbol == NULL) {
        ft__fail(err, rc, "ft__pack_write_c: NULL argument");
        goto out;
    }
    if (!ft__c_identifier_check(symbol, why, sizeof why)) {
        ft__fail(err, rc, "%s: not written: '%.80s' cannot name the kernel set: %s", path,
                 ft__pack_printable(symbol) ? symbol : "?", why);
        goto out;
    }
    rc = ft__pack_check(p, err);
    if (rc != FT_OK) {
        ft__err_prefix(err, "%s: not written", path);
        goto out;
    }
    f = open_memstream(&text, &size);
    if (f == NULL) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
        goto out;
    }
    fputs("/*\n * Pretuned flashtune kernels for ", f);
    c_comment(f, p->device.name);
    fprintf(f, " (compute capability %d.%d, %d SMs, driver %d, NVRTC ", p->device.cc / 10, p->device.cc % 10,
            p->device.sms, p->device.driver_version);
    c_comment(f, p->device.nvrtc_version);
    fprintf(f, "):\n * %d buckets, %d kernels.\n * Generated by `flashtune export --format c` (flashtune ", p->nwinners,
            p->nkernels);
    c_comment(f, p->flashtune_version);
    fputs(") on ", f);
    c_comment(f, p->created);
    fprintf(f, ". Do not edit.\n"
               " *\n"
               " * Compile this file into the application and hand the set to the runtime:\n"
               " *     extern const ft_kernel_set %s;\n"
               " *     ft_context_options o;\n"
               " *     ft_context_options_init(&o);\n"
               " *     o.kernels = &%s;\n"
               " *     ft_context_create(&o, &ctx);\n"
               " */\n"
               "#include <stddef.h>\n\n#include \"flashtune.h\"\n\n",
            symbol, symbol);
    for (i = 0; i < p->nkernels; i++) {
        const ft_db_kernel *k = &p->kernels[i].k;
        const unsigned char *c = k->cubin;
        fputs("/* ", f);
        c_comment(f, k->variant);
        fprintf(f, " */\nstatic _Alignas(16) const unsigned char %s_cubin_%d[%zu] = {", symbol, i, k->cubin_size);
        for (b = 0; b < k->cubin_size; b++)
            fprintf(f, "%s%u,", b % 24 == 0 ? "\n    " : "", c[b]);
        fprintf(f, "\n};\n\n");
    }
    fprintf(f, "static const ft_kernel_set_entry %s_entries[%d] = {\n", symbol, p->nwinners);
    for (i = 0; i < p->nwinners; i++) {
        const ft_pack_winner *w = &p->winners[i];
        const ft_pack_kernel *pk = &p->kernels[w->kernel];
        fprintf(f, "    {.dtype = %s, .head_dim = %lld, .causal = %lld, .seqlen_bucket = %lld, .bh_bucket = %lld,\n"
                   "     .variant = ", strcmp(w->r.key.dtype, "bf16") == 0 ? "FT_BF16" : "FT_F16",
                ft__key_get(&w->r.key, "d", 0), ft__key_get(&w->r.key, "causal", 0),
                ft__key_get(&w->r.key, "seqlen", 0), ft__key_get(&w->r.key, "bh", 0));
        c_string(f, pk->k.variant);
        fprintf(f, ", .family = ");
        c_string(f, pk->k.family);
        fprintf(f, ",\n     .entry = ");
        c_string(f, pk->k.entry);
        fprintf(f, ",\n     .threads = %d, .rows_per_block = %d, .smem_dynamic = %lld,\n"
                   "     .cubin = %s_cubin_%d, .cubin_size = sizeof %s_cubin_%d, .median_ms = ",
                pk->k.threads, pk->rows_per_block, pk->k.smem_dynamic, symbol, w->kernel, symbol, w->kernel);
        c_double(f, w->r.median_ms);
        fprintf(f, "},\n");
    }
    fprintf(f, "};\n\nstatic const char *const %s_ops[%d] = {", symbol, p->nwinners);
    for (i = 0; i < p->nwinners; i++) {
        fputs(i % 8 == 0 ? "\n    " : " ", f);
        c_string(f, p->winners[i].r.key.op->name);
        fputc(',', f);
    }
    fprintf(f, "\n};\n\nstatic const char *const %s_keys[%d] = {\n", symbol, p->nwinners);
    for (i = 0; i < p->nwinners; i++) {
        char key[FT_KEY_TEXT_MAX];
        ft__key_format(&p->winners[i].r.key, key, sizeof key);
        fputs("    ", f);
        c_string(f, key);
        fputs(",\n", f);
    }
    fprintf(f, "};\n\nextern const ft_kernel_set %s;\nconst ft_kernel_set %s = {\n    .version = %d,\n"
               "    .device_name = ", symbol, symbol, FT_KERNEL_SET_VERSION);
    c_string(f, p->device.name);
    fprintf(f, ",\n    .cc = %d, .sms = %d, .smem_per_block = %lld, .smem_per_sm = %lld, .l2_bytes = %lld,\n"
               "    .driver_version = %d, .nvrtc_version = ", p->device.cc, p->device.sms, p->device.smem_per_block,
            p->device.smem_per_sm, p->device.l2_bytes, p->device.driver_version);
    c_string(f, p->device.nvrtc_version);
    fprintf(f, ",\n    .flashtune_version = ");
    c_string(f, p->flashtune_version);
    fprintf(f, ", .created = ");
    c_string(f, p->created);
    fprintf(f, ",\n    .count = %d, .entries = %s_entries, .ops = %s_ops, .keys = %s_keys,\n};\n", p->nwinners,
            symbol, symbol, symbol);
    failed = ferror(f) != 0;
    if (fclose(f) != 0)
        failed = 1;
    f = NULL;
    if (failed) {
        rc = ft__fail(err, FT_ERR_OUT_OF_MEMORY, "out of memory writing %s", path);
        goto out;
    }
    rc = ft__write_file_atomic(path, text, size, FT_WRITE_DURABLE, err);
out:
    if (f != NULL)
        fclose(f);
    free(text);
    return rc;
}

