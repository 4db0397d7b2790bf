/*
 * A minimal application of an installed flashtune (tests/install_test.sh builds it against
 * the installed header and libraries): the version, a status name, and a context, which on
 * a machine without a GPU must fail cleanly with FT_ERR_NO_DRIVER or FT_ERR_NO_DEVICE.
 * Exit status 0 when everything behaves.
 */
#include <stdio.h>
#include <string.h>

#include <flashtune.h>

int main(void)
{
    ft_context_options o;
    ft_context *ctx = (ft_context *)&o; /* must be reset to NULL on failure */
    ft_status st;

    if (strcmp(ft_version(), FT_VERSION_STRING) != 0) {
        fprintf(stderr, "install_app: library %s, header %s\n", ft_version(), FT_VERSION_STRING);
        return 1;
    }
    if (strcmp(ft_status_name(FT_ERR_NO_DRIVER), "FT_ERR_NO_DRIVER") != 0) {
        fprintf(stderr, "install_app: ft_status_name(FT_ERR_NO_DRIVER) is %s\n", ft_status_name(FT_ERR_NO_DRIVER));
        return 1;
    }
    ft_context_options_init(&o);
    o.database = ""; /* no tuning database: built-in defaults */
    st = ft_context_create(&o, &ctx);
    if (st == FT_OK) {
        printf("install_app: flashtune %s: context created\n", ft_version());
        ft_context_destroy(ctx);
        return 0;
    }
    if (ctx != NULL) {
        fprintf(stderr, "install_app: a failed ft_context_create left ctx set\n");
        return 1;
    }
    printf("install_app: flashtune %s: %s: %s\n", ft_version(), ft_status_name(st), ft_last_error(NULL));
    return st == FT_ERR_NO_DRIVER || st == FT_ERR_NO_DEVICE ? 0 : 1;
}
