#include "json.h"

void ft__json_string(FILE *f, const char *s)
{
    const unsigned char *p;

    if (s == NULL) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (p = (const unsigned char *)s; *p != '\0'; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}
