/* Fuzz target: the hostoff command's JSON reader (tools/json.c). Whatever the input, it returns
 * a tree or an error message, never reads out of bounds, and numbers it accepts are finite. */
#include "fuzz_input.h"
#include "json.h"

#include <math.h>

static void check(const struct json *v, int depth) {
    if (depth > 10000) abort();
    switch (v->type) {
    case JSON_INT:
    case JSON_REAL:
        if (!isfinite(v->real)) abort(); /* refused, never infinite */
        break;
    case JSON_STRING:
        if (v->str == NULL) abort();
        break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        for (size_t i = 0; i < v->n; i++) {
            check(&v->items[i], depth + 1);
            if (v->type == JSON_OBJECT && v->keys[i] == NULL) abort();
        }
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256];
    struct json *v = json_parse((const char *)data, size, err, sizeof err);
    if (v != NULL) {
        check(v, 0);
        uint64_t x;
        (void)json_get_u64(v, "hostoff_trace", &x);
        json_free(v);
    } else if (err[0] == '\0') {
        abort(); /* a refusal always says why */
    }
    return 0;
}
