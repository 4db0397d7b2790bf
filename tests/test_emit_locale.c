/* The generated source under a locale whose toupper('i') is not 'I' (tr_TR.ISO-8859-9, set up
 * by tests/emit_locale.sh): the macro names must still be ASCII, FTP_PINGPONG and not a name the
 * template does not know. An application may call setlocale before ft_context_create. */
#include <ctype.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "ft_test.h"
#include "generator/arch.h"
#include "generator/emit.h"
#include "generator/family.h"
#include "generator/spec.h"
#include "generator/variant.h"

static void test_macro_names_are_ascii(void)
{
    const char *name = getenv("FT_TEST_LOCALE");
    ft_spec *spec = NULL;
    ft_kernel_source src;
    ft_variant v;
    ft_arch a;
    ft_err err;

    ASSERT_TRUE(name != NULL && setlocale(LC_ALL, name) != NULL);
    ASSERT_NE(toupper('i'), 'I'); /* the locale is one that would break it */
    ASSERT_OK(ft__spec_load_builtin(1, &spec, &err), &err); /* flash_fwd_sm90: "pingpong" */
    ASSERT_OK(ft__arch_builtin("sm_90a", &a, &err), &err);
    ASSERT_OK(ft__variant_parse(spec, "d=64,bm=128,bn=128,stages=2,causal=1,dtype=f16,pingpong=1,"
                                      "overlap=1,balance=1,psmem=0,pexp=0,skip_rescale=0,ostore=0,early_rescale=0,ctas=1", &v, &err), &err);
    ASSERT_OK(ft__emit(spec, ft__family_find(spec->template_name), &v, &a, &src, &err), &err);
    ASSERT_CONTAINS(src.text, "#define FTP_PINGPONG 1\n");
    ASSERT_CONTAINS(src.text, "#define FTP_BALANCE 1\n");
    ASSERT_TRUE(strchr(src.text, '\xdd') == NULL); /* the locale's upper-case 'i' */
    ft__kernel_source_free(&src);
    ft__spec_free(spec);
    setlocale(LC_ALL, "C");
}

FT_TEST_MAIN(FT_CASE(test_macro_names_are_ascii))
