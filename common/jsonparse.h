/*
 * Reading JSON text (RFC 8259), strictly: what a kernel pack's index is read with.
 *
 * Why a parser of our own rather than SQLite's JSON functions, which flashtune links anyway:
 * SQLite accepts what a pack must not hold and cannot say where text goes wrong. Its json_valid
 * and json_extract (3.40 here) accept duplicate keys (json_extract then takes the first, jq the
 * last: two readers, two packs), numbers that overflow to infinity (1e999), \u0000 (the value is
 * then cut at the NUL) and lone surrogates; since 3.42 they also accept JSON5 (comments, hex
 * numbers, trailing commas, unquoted keys), only json_valid's strict flag (3.45) refusing it; and
 * the runtime library, which reads packs in the application's process, would depend on whichever
 * SQLite the application loads. This parser refuses all of that, bounds depth and the number of
 * values before it allocates for them, and runs on any buffer without a database connection.
 *
 * Refused: duplicate keys in an object; nesting deeper than the limit; more values than the
 * limit; numbers outside RFC 8259's grammar (leading zeros, '+', '.5', hex), of more than 64
 * characters, or too large for a double; control characters, invalid UTF-8 (overlong forms,
 * surrogates, beyond U+10FFFF), \u0000, unpaired surrogate escapes and unknown escapes in strings;
 * anything but whitespace after the value.
 */
#ifndef FT_COMMON_JSONPARSE_H
#define FT_COMMON_JSONPARSE_H

#include <stddef.h>

typedef enum ft_json_type {
    FT_JSON_NULL,
    FT_JSON_BOOL,
    FT_JSON_NUMBER,
    FT_JSON_STRING,
    FT_JSON_ARRAY,
    FT_JSON_OBJECT
} ft_json_type;

typedef struct ft_json ft_json;

struct ft_json {
    ft_json_type type;
    int n;              /* ARRAY, OBJECT: how many members */
    ft_json *kids;      /* ARRAY, OBJECT: the members, in the order of the text */
    const char *key;    /* a member of an OBJECT: its key (decoded, NUL-terminated) */
    const char *str;    /* STRING: decoded UTF-8, NUL-terminated, no NUL inside */
    size_t len;         /* STRING: its bytes */
    double num;         /* NUMBER; BOOL: 0 or 1 */
    int is_int;         /* NUMBER written as an integer (no fraction, no exponent) that fits */
    long long ival;     /*   a long long: its exact value */
    size_t at;          /* where the value starts: a byte offset into the text */
};

typedef struct ft_json_doc {
    ft_json root;
    char *strings;      /* the decoded keys and strings (one block, at most the text's size) */
    size_t nodes;       /* how many values */
} ft_json_doc;

typedef struct ft_json_limits {
    int max_depth;      /* nested arrays and objects (the root is depth 1) */
    size_t max_nodes;   /* values in all */
} ft_json_limits;

/* Where and why a text was refused. */
typedef struct ft_json_error {
    size_t at;          /* byte offset into the text */
    char why[160];
} ft_json_error;

/* Parses text[0, len) as one JSON value, with whitespace around it and nothing else. Returns 1
 * and fills *doc (freed with ft__json_free); on failure returns 0 with *e filled and *doc empty. */
int ft__json_parse(const char *text, size_t len, const ft_json_limits *limits, ft_json_doc *doc,
                   ft_json_error *e);

void ft__json_free(ft_json_doc *doc); /* NULL and an empty document are no-ops */

/* The member of an object with this key, or NULL (also when obj is not an object). */
const ft_json *ft__json_member(const ft_json *obj, const char *key);

#endif
