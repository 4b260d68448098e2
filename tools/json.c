/* A recursive-descent JSON parser (RFC 8259), strict: no trailing commas, no comments, no NaN. */
#include "json.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

struct parser {
    const char *p, *end;
    char *err;
    size_t errcap;
    bool failed;
};

static void fail(struct parser *ps, const char *what) {
    if (!ps->failed) snprintf(ps->err, ps->errcap, "%s", what);
    ps->failed = true;
}

static void skip_ws(struct parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bool parse_value(struct parser *ps, struct json *v, int depth);

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool parse_hex4(struct parser *ps, unsigned *out) {
    if (ps->end - ps->p < 4) return false;
    unsigned u = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(ps->p[i]);
        if (h < 0) return false;
        u = u * 16 + (unsigned)h;
    }
    ps->p += 4;
    *out = u;
    return true;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string starting at the opening quote; the decoded text is malloc'd. */
static char *parse_string(struct parser *ps) {
    ps->p++; /* the quote */
    /* The decoded text is never longer than the raw text up to the closing quote. */
    const char *q = ps->p;
    while (q < ps->end && *q != '"')
        q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
    char *o = malloc((size_t)(q - ps->p) + 1);
    if (o == NULL) {
        fail(ps, "out of memory");
        return NULL;
    }
    size_t n = 0;
    while (ps->p < ps->end) {
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            o[n] = '\0';
            return o;
        }
        if (c < 0x20) break;
        if (c != '\\') {
            o[n++] = (char)c;
            ps->p++;
            continue;
        }
        if (++ps->p >= ps->end) break;
        char e = *ps->p++;
        switch (e) {
        case '"':
            o[n++] = '"';
            break;
        case '\\':
            o[n++] = '\\';
            break;
        case '/':
            o[n++] = '/';
            break;
        case 'b':
            o[n++] = '\b';
            break;
        case 'f':
            o[n++] = '\f';
            break;
        case 'n':
            o[n++] = '\n';
            break;
        case 'r':
            o[n++] = '\r';
            break;
        case 't':
            o[n++] = '\t';
            break;
        case 'u': {
            unsigned cp;
            if (!parse_hex4(ps, &cp) || cp == 0) goto bad;
            if (cp >= 0xd800 && cp < 0xdc00) {
                unsigned lo;
                if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u') goto bad;
                ps->p += 2;
                if (!parse_hex4(ps, &lo) || lo < 0xdc00 || lo >= 0xe000) goto bad;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                goto bad;
            }
            n += put_utf8(o + n, cp);
            break;
        }
        default:
            goto bad;
        }
    }
bad:
    free(o);
    fail(ps, "malformed string");
    return NULL;
}

static bool parse_number(struct parser *ps, struct json *v) {
    const char *s = ps->p;
    bool neg = false, integer = true;
    if (ps->p < ps->end && *ps->p == '-') {
        neg = true;
        ps->p++;
    }
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') goto bad;
    if (*ps->p == '0' && ps->p + 1 < ps->end && ps->p[1] >= '0' && ps->p[1] <= '9') goto bad;
    uint64_t mag = 0;
    bool overflow = false;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        unsigned d = (unsigned)(*ps->p++ - '0');
        if (mag > (UINT64_MAX - d) / 10) overflow = true;
        mag = mag * 10 + d;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        integer = false;
        ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') goto bad;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        integer = false;
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-')) ps->p++;
        if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9') goto bad;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
            ps->p++;
    }
    /* The whole text goes to strtod (correctly rounded); longer numbers are refused rather than
     * cut (a cut one would lose its exponent), and so is one beyond a double's range: readers
     * downstream take every number as finite. */
    char buf[512];
    size_t len = (size_t)(ps->p - s);
    if (len >= sizeof buf) {
        fail(ps, "number longer than 511 characters");
        return false;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    v->real = strtod(buf, NULL);
    if (!isfinite(v->real)) {
        fail(ps, "number out of range");
        return false;
    }
    if (integer && !overflow) {
        v->type = JSON_INT;
        v->neg = neg && mag != 0;
        v->mag = mag;
    } else {
        v->type = JSON_REAL;
    }
    return true;
bad:
    fail(ps, "malformed number");
    return false;
}

static bool literal(struct parser *ps, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
        fail(ps, "unexpected character");
        return false;
    }
    ps->p += n;
    return true;
}

static bool grow(struct json *v, size_t *cap, bool keys) {
    if (v->n < *cap) return true;
    size_t c = *cap ? *cap * 2 : 8;
    struct json *items = realloc(v->items, c * sizeof *items);
    if (items == NULL) return false;
    v->items = items;
    if (keys) {
        char **k = realloc(v->keys, c * sizeof *k);
        if (k == NULL) return false;
        v->keys = k;
    }
    *cap = c;
    return true;
}

static bool parse_array(struct parser *ps, struct json *v, int depth) {
    v->type = JSON_ARRAY;
    ps->p++;
    size_t cap = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return true;
    }
    for (;;) {
        if (!grow(v, &cap, false)) {
            fail(ps, "out of memory");
            return false;
        }
        struct json *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        v->n++;
        if (!parse_value(ps, item, depth + 1)) return false;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            return true;
        }
        fail(ps, "expected ',' or ']' in an array");
        return false;
    }
}

static bool parse_object(struct parser *ps, struct json *v, int depth) {
    v->type = JSON_OBJECT;
    ps->p++;
    size_t cap = 0;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return true;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"') {
            fail(ps, "expected a key in an object");
            return false;
        }
        if (!grow(v, &cap, true)) {
            fail(ps, "out of memory");
            return false;
        }
        char *key = parse_string(ps);
        if (key == NULL) return false;
        v->keys[v->n] = key;
        struct json *item = &v->items[v->n];
        memset(item, 0, sizeof *item);
        v->n++;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            fail(ps, "expected ':' after a key");
            return false;
        }
        ps->p++;
        if (!parse_value(ps, item, depth + 1)) return false;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            return true;
        }
        fail(ps, "expected ',' or '}' in an object");
        return false;
    }
}

static bool parse_value(struct parser *ps, struct json *v, int depth) {
    if (depth > MAX_DEPTH) {
        fail(ps, "nested too deeply");
        return false;
    }
    skip_ws(ps);
    if (ps->p >= ps->end) {
        fail(ps, "unexpected end");
        return false;
    }
    switch (*ps->p) {
    case '{':
        return parse_object(ps, v, depth);
    case '[':
        return parse_array(ps, v, depth);
    case '"':
        v->type = JSON_STRING;
        v->str = parse_string(ps);
        return v->str != NULL;
    case 't':
        v->type = JSON_BOOL;
        v->b = true;
        return literal(ps, "true");
    case 'f':
        v->type = JSON_BOOL;
        v->b = false;
        return literal(ps, "false");
    case 'n':
        v->type = JSON_NULL;
        return literal(ps, "null");
    default:
        return parse_number(ps, v);
    }
}

static void free_inner(struct json *v) {
    if (v->type == JSON_STRING) free(v->str);
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->n; i++) {
            free_inner(&v->items[i]);
            if (v->keys != NULL) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
}

void json_free(struct json *v) {
    if (v == NULL) return;
    free_inner(v);
    free(v);
}

struct json *json_parse(const char *text, size_t len, char *err, size_t errcap) {
    struct parser ps = {text, text + len, err, errcap, false};
    struct json *v = calloc(1, sizeof *v);
    if (v == NULL) {
        snprintf(err, errcap, "out of memory");
        return NULL;
    }
    if (parse_value(&ps, v, 0)) {
        skip_ws(&ps);
        if (ps.p != ps.end) fail(&ps, "text after the value");
    }
    if (ps.failed) {
        json_free(v);
        return NULL;
    }
    return v;
}

const struct json *json_get(const struct json *obj, const char *key) {
    if (obj == NULL || obj->type != JSON_OBJECT) return NULL;
    for (size_t i = obj->n; i-- > 0;)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

bool json_get_u64(const struct json *obj, const char *key, uint64_t *out) {
    const struct json *v = json_get(obj, key);
    if (v == NULL || v->type != JSON_INT || v->neg) return false;
    *out = v->mag;
    return true;
}
