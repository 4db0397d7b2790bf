#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

ft_status ft__fail(ft_err *err, ft_status code, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void ft__err_prefix(ft_err *err, const char *fmt, ...)
{
    char prefix[512];
    size_t plen, mlen;
    va_list ap;

    if (err == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix - 2, fmt, ap);
    va_end(ap);
    strcat(prefix, ": ");
    plen = strlen(prefix);
    mlen = strlen(err->msg);
    if (plen + mlen >= sizeof err->msg) /* keep the prefix, cut the end of the message */
        mlen = sizeof err->msg - 1 - plen;
    memmove(err->msg + plen, err->msg, mlen);
    memcpy(err->msg, prefix, plen);
    err->msg[plen + mlen] = '\0';
}

void ft__err_clear(ft_err *err)
{
    if (err != NULL) {
        err->code = FT_OK;
        err->msg[0] = '\0';
    }
}

const char *ft_status_name(ft_status status)
{
    switch (status) {
    case FT_OK: return "FT_OK";
    case FT_ERR_INVALID_ARGUMENT: return "FT_ERR_INVALID_ARGUMENT";
    case FT_ERR_OUT_OF_MEMORY: return "FT_ERR_OUT_OF_MEMORY";
    case FT_ERR_IO: return "FT_ERR_IO";
    case FT_ERR_SPEC: return "FT_ERR_SPEC";
    case FT_ERR_COMPILE: return "FT_ERR_COMPILE";
    case FT_ERR_NO_DRIVER: return "FT_ERR_NO_DRIVER";
    case FT_ERR_NO_DEVICE: return "FT_ERR_NO_DEVICE";
    case FT_ERR_CUDA: return "FT_ERR_CUDA";
    case FT_ERR_LIMITS: return "FT_ERR_LIMITS";
    case FT_ERR_DATABASE: return "FT_ERR_DATABASE";
    case FT_ERR_NOT_FOUND: return "FT_ERR_NOT_FOUND";
    case FT_ERR_CORRUPT: return "FT_ERR_CORRUPT";
    case FT_ERR_UNSUPPORTED: return "FT_ERR_UNSUPPORTED";
    case FT_ERR_WRONG_RESULT: return "FT_ERR_WRONG_RESULT";
    case FT_ERR_INTERNAL: return "FT_ERR_INTERNAL";
    case FT_ERR_INTERRUPTED: return "FT_ERR_INTERRUPTED";
    }
    return "FT_UNKNOWN_STATUS";
}

const char *ft_version(void)
{
    return FT_VERSION_STRING;
}
