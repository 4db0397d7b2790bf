/*
 * Template text as it goes into generated sources: a template file with the shared device
 * headers it includes written in place of their #include lines.
 *
 * Templates and their headers are embedded into the binary (cmake/embed.cmake). A line
 * `#include "NAME"` of a template names an embedded header; the expansion writes that header's
 * text there (its own includes expanded the same way), each header once per source, so a
 * generated kernel is one translation unit that NVRTC or nvcc compiles with no include path
 * and that a person can read whole.
 */
#ifndef FT_GENERATOR_TEMPLATE_H
#define FT_GENERATOR_TEMPLATE_H

#include "common/error.h"
#include "common/strbuf.h"

/* Appends the expanded text of the embedded file `name` to sb. An include of a file that is
 * not embedded, or nesting deeper than 8, is FT_ERR_INTERNAL naming both files. */
ft_status ft__template_expand(const char *name, ft_strbuf *sb, ft_err *err);

/* sha256 (64 hex digits) of the generator version and the expanded text of `name`: what a
 * family's template hash covers, its headers included. An unknown name hashes the version
 * alone. */
void ft__template_hash(const char *name, char out[65]);

#endif
