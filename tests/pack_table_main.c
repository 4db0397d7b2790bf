/*
 * An application that compiles in the C source of `flashtune export --format c` (tests/pack.sh
 * builds it with the generated file as KERNELS_C and the set's name as KERNEL_SET):
 *   pack_table list      prints the table, one line per entry as `flashtune import --dry-run`
 *                        prints a pack, to compare the two
 *   pack_table context   hands the set to ft_context_create; prints the status's name
 * Only the public header is used (and common/sha256.c for the cubins' digests).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flashtune.h"
#include "common/sha256.h"

#ifndef KERNEL_SET
#error "define KERNEL_SET as the name of the exported ft_kernel_set"
#endif

extern const ft_kernel_set KERNEL_SET;

/* An entry with its operation and key, ordered by them, as the import's listing orders them. */
typedef struct listed {
    const char *op, *key;
    const ft_kernel_set_entry *e;
} listed;

static int cmp_listed(const void *a, const void *b)
{
    const listed *x = a, *y = b;
    const int c = strcmp(x->op, y->op);

    return c != 0 ? c : strcmp(x->key, y->key);
}

/* Checks what the table must hold whatever the pack: ELF cubins that contain their entry. */
static int check_entry(const ft_kernel_set_entry *e)
{
    size_t n = strlen(e->entry), i;

    if (e->family == NULL || strcmp(e->family, "flash_fwd_sm80") != 0) {
        fprintf(stderr, "pack_table: %s: the family is %s, not flash_fwd_sm80\n", e->variant,
                e->family != NULL ? e->family : "missing");
        return 0;
    }
    if (e->cubin_size < 64 || memcmp(e->cubin, "\177ELF", 4) != 0) {
        fprintf(stderr, "pack_table: %s: the cubin is not an ELF image\n", e->variant);
        return 0;
    }
    for (i = 0; i + n <= e->cubin_size; i++)
        if (memcmp(e->cubin + i, e->entry, n) == 0)
            return 1;
    fprintf(stderr, "pack_table: %s: the cubin does not hold the entry %s\n", e->variant, e->entry);
    return 0;
}

static int list(void)
{
    const ft_kernel_set *s = &KERNEL_SET;
    listed *order;
    int i, ok = 1;

    if (s->version != FT_KERNEL_SET_VERSION || s->count <= 0 || s->entries == NULL) {
        fprintf(stderr, "pack_table: a malformed set (version %d, %d entries)\n", s->version, s->count);
        return 1;
    }
    order = malloc((size_t)s->count * sizeof *order);
    if (order == NULL)
        return 1;
    for (i = 0; i < s->count; i++) {
        order[i].op = s->ops[i];
        order[i].key = s->keys[i];
        order[i].e = &s->entries[i];
    }
    qsort(order, (size_t)s->count, sizeof *order, cmp_listed);
    printf("device %s cc %d sms %d driver %d nvrtc %s\n", s->device_name, s->cc, s->sms, s->driver_version,
           s->nvrtc_version);
    for (i = 0; i < s->count; i++) {
        const ft_kernel_set_entry *e = order[i].e;
        uint8_t d[32];
        char hex[65];
        ok &= check_entry(e);
        ft__sha256(e->cubin, e->cubin_size, d);
        ft__sha256_hex(d, hex);
        printf("%s %s %s %s %d %d %lld %zu %s\n", order[i].op, order[i].key, e->variant, e->entry, e->threads,
               e->rows_per_block, e->smem_dynamic, e->cubin_size, hex);
    }
    free(order);
    return ok ? 0 : 1;
}

static int context(void)
{
    ft_context_options o;
    ft_context *ctx = NULL;
    ft_status rc;

    ft_context_options_init(&o);
    o.kernels = &KERNEL_SET;
    o.cache_dir = "";
    rc = ft_context_create(&o, &ctx);
    printf("%s%s%s\n", ft_status_name(rc), rc != FT_OK ? ": " : "", rc != FT_OK ? ft_last_error(NULL) : "");
    ft_context_destroy(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "list") == 0)
        return list();
    if (argc == 2 && strcmp(argv[1], "context") == 0)
        return context();
    fprintf(stderr, "usage: pack_table list|context\n");
    return 2;
}
