/* libFuzzer target: the pack reader (ft__pack_parse) on arbitrary bytes.
 *
 * Each input is parsed twice: as it is (the header, the lengths and the checksum are checked
 * first, so almost every mutation stops there), and with its header line rewritten to match
 * the rest (the index length from the input where it fits, the blob length and the sha256 of
 * what follows), which takes a mutated index or blob past the checksum into the JSON parser
 * and the blob checks. A parsed pack is walked (every kernel's source and cubin, every winner's
 * kernel) and freed. Build and run: scripts/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "tuning_db/pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Touches what a parsed pack holds, so that a length or offset that does not match its
 * allocation shows up under ASan. */
static void walk(const ft_pack *p)
{
    volatile size_t sum = 0;
    int i;

    for (i = 0; i < p->nkernels; i++) {
        const ft_db_kernel *k = &p->kernels[i].k;
        const unsigned char *cubin = k->cubin;
        size_t j;
        if (k->source != NULL)
            sum += strlen(k->source);
        for (j = 0; cubin != NULL && j < k->cubin_size; j += 61)
            sum += cubin[j];
        if (cubin != NULL && k->cubin_size > 0)
            sum += cubin[k->cubin_size - 1];
        sum += strlen(k->variant) + strlen(k->entry);
    }
    for (i = 0; i < p->nwinners; i++) {
        if (p->winners[i].kernel < 0 || p->winners[i].kernel >= p->nkernels)
            abort(); /* a winner naming no kernel must have been refused */
        sum += strlen(p->winners[i].measured_at);
    }
    (void)sum;
}

static void parse(const uint8_t *data, size_t size)
{
    ft_pack pack;
    ft_err err;

    memset(&pack, 0, sizeof pack);
    memset(&err, 0, sizeof err);
    if (ft__pack_parse(data, size, "fuzz.ftpack", &pack, &err) == FT_OK)
        walk(&pack);
    else if (err.msg[0] == '\0')
        abort(); /* a failure must say why */
    ft__pack_free(&pack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    char header[256], version[32] = "1";
    uint8_t digest[32];
    char hex[65];
    unsigned long long index_bytes = 0;
    size_t body, hlen;
    uint8_t *fixed;

    parse(data, size);
    if (nl == NULL || size < 7 || memcmp(data, FT_PACK_MAGIC " ", 7) != 0)
        return 0;
    body = size - (size_t)(nl + 1 - data);
    {
        char line[256];
        size_t n = (size_t)(nl - data) < sizeof line - 1 ? (size_t)(nl - data) : sizeof line - 1;
        memcpy(line, data, n);
        line[n] = '\0';
        if (sscanf(line, FT_PACK_MAGIC " %31s %llu", version, &index_bytes) < 1)
            return 0;
    }
    if (index_bytes > body)
        index_bytes = body;
    ft__sha256(nl + 1, body, digest);
    ft__sha256_hex(digest, hex);
    snprintf(header, sizeof header, FT_PACK_MAGIC " %s %llu %llu %s\n", version, index_bytes,
             (unsigned long long)(body - index_bytes), hex);
    hlen = strlen(header);
    fixed = malloc(hlen + body);
    if (fixed == NULL)
        return 0;
    memcpy(fixed, header, hlen);
    memcpy(fixed + hlen, nl + 1, body);
    parse(fixed, hlen + body);
    free(fixed);
    return 0;
}
