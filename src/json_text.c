#include "json_text.h"

size_t ho_json_escape(char c, char out[HO_JSON_ESCAPED_MAX]) {
    static const char hex[] = "0123456789abcdef";
    unsigned char u = (unsigned char)c;
    size_t n = 0;
    if (u == '"' || u == '\\') {
        out[n++] = '\\';
        out[n++] = (char)u;
    } else if (u < 0x20) {
        out[n++] = '\\';
        out[n++] = 'u';
        out[n++] = '0';
        out[n++] = '0';
        out[n++] = hex[u >> 4];
        out[n++] = hex[u & 15];
    } else {
        out[n++] = (char)u;
    }
    out[n] = '\0';
    return n;
}

void ho_json_write_text(FILE *f, const char *s) {
    char buf[HO_JSON_ESCAPED_MAX];
    for (; *s != '\0'; s++) {
        size_t n = ho_json_escape(*s, buf);
        if (n == 1)
            fputc(buf[0], f);
        else
            fwrite(buf, 1, n, f);
    }
}
