/* Tests of template expansion (generator/template.c): the shared device headers are written
 * into every generated source once, in place of their #include lines, and a family's template
 * hash covers them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "common/strbuf.h"
#include "ft_test.h"
#include "generator/emit.h"
#include "generator/family.h"
#include "generator/template.h"

static void test_expansion_writes_each_header_once(void)
{
    static const char *const families[] = {"flash_fwd_sm80", "flash_fwd_sm90"};
    size_t i;
    ft_err err;

    for (i = 0; i < sizeof families / sizeof families[0]; i++) {
        const ft_family *fam = ft__family_find(families[i]);
        ft_strbuf sb = FT_STRBUF_INIT;
        ASSERT_TRUE(fam != NULL);
        ASSERT_OK(ft__template_expand(fam->file, &sb, &err), &err);
        ASSERT_TRUE(sb.data != NULL);
        /* No include of an embedded header is left for the compiler to resolve. */
        ASSERT_EQ(ft_test_count(sb.data, "#include \""), 0);
        /* Every family takes the shared helpers, each exactly once. */
        ASSERT_EQ(ft_test_count(sb.data, "// ---- ft_device.cuh ----"), 1);
        ASSERT_EQ(ft_test_count(sb.data, "// ---- ft_params.cuh ----"), 1);
        ASSERT_EQ(ft_test_count(sb.data, "// ---- ft_softmax.cuh ----"), 1);
        ASSERT_EQ(ft_test_count(sb.data, "struct FwdParams {"), 1);
        ASSERT_EQ(ft_test_count(sb.data, "__device__ __forceinline__ u32 pack2("), 1);
        ft__sb_free(&sb);
    }
}

static void test_family_hash_covers_headers(void)
{
    const ft_family *fam = ft__family_find("flash_fwd_sm80");
    const ft_embedded_file *f;
    char with_headers[65], raw_hex[65];
    uint8_t raw[32];
    ft_sha256 s;
    char version[32];

    ASSERT_TRUE(fam != NULL);
    f = ft__template_file(fam->file);
    ASSERT_TRUE(f != NULL);
    ft__family_hash(fam, with_headers);
    /* The hash of the template's own text alone (what it was before headers existed) differs:
     * a change in a header changes the family's hash. */
    snprintf(version, sizeof version, "generator %d\n", FT_GENERATOR_VERSION);
    ft__sha256_init(&s);
    ft__sha256_update(&s, version, strlen(version));
    ft__sha256_update(&s, f->data, f->size);
    ft__sha256_final(&s, raw);
    ft__sha256_hex(raw, raw_hex);
    ASSERT_TRUE(strcmp(with_headers, raw_hex) != 0);
    /* And it is the hash of exactly the expanded text. */
    {
        ft_strbuf sb = FT_STRBUF_INIT;
        ft_err err;
        ASSERT_OK(ft__template_expand(fam->file, &sb, &err), &err);
        ft__sha256_init(&s);
        ft__sha256_update(&s, version, strlen(version));
        ft__sha256_update(&s, sb.data, sb.len);
        ft__sha256_final(&s, raw);
        ft__sha256_hex(raw, raw_hex);
        ASSERT_STREQ(with_headers, raw_hex);
        ft__sb_free(&sb);
    }
}

static void test_unknown_file_is_an_error(void)
{
    ft_strbuf sb = FT_STRBUF_INIT;
    ft_err err;

    ASSERT_EQ(ft__template_expand("no_such_template.cuh", &sb, &err), FT_ERR_INTERNAL);
    ASSERT_CONTAINS(err.msg, "no_such_template.cuh is not an embedded template file");
    ft__sb_free(&sb);
}

FT_TEST_MAIN(FT_CASE(test_expansion_writes_each_header_once), FT_CASE(test_family_hash_covers_headers),
             FT_CASE(test_unknown_file_is_an_error))
