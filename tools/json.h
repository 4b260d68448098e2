/* A small JSON reader for the hostoff command: one value per call (a trace line, a report), into
 * a tree the caller frees. Integers without fraction or exponent keep their exact value. */
#ifndef HOSTOFF_TOOLS_JSON_H
#define HOSTOFF_TOOLS_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_INT, JSON_REAL, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
    enum json_type type;
    bool b;             /* JSON_BOOL */
    bool neg;           /* JSON_INT: negative (the value is -mag) */
    uint64_t mag;       /* JSON_INT: magnitude */
    double real;        /* JSON_INT and JSON_REAL */
    char *str;          /* JSON_STRING, decoded, NUL-terminated (a NUL inside is rejected) */
    size_t n;           /* JSON_ARRAY, JSON_OBJECT: element count */
    struct json *items; /* elements, or an object's values */
    char **keys;        /* JSON_OBJECT: the keys */
};

/* Parses exactly one value (surrounding white space allowed) from text[0, len); NULL on error,
 * with a message in err. */
struct json *json_parse(const char *text, size_t len, char *err, size_t errcap);
void json_free(struct json *v);

/* An object's member (the last one of that name), or NULL. */
const struct json *json_get(const struct json *obj, const char *key);
/* A member that is a non-negative integer: true and *out, else false. */
bool json_get_u64(const struct json *obj, const char *key, uint64_t *out);

#endif
