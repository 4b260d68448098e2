/* The one JSON string escaper (src/json_text.h) that the report, the trace and the Perfetto
 * writer share: each character class, and every byte a file or kernel name can hold read back
 * unchanged by the tools' strict JSON reader (tools/json.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "json.h"
#include "json_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void escapes_each_class(void **state) {
    (void)state;
    char out[HO_JSON_ESCAPED_MAX];
    assert_int_equal(ho_json_escape('a', out), 1);
    assert_string_equal(out, "a");
    assert_int_equal(ho_json_escape('"', out), 2);
    assert_string_equal(out, "\\\"");
    assert_int_equal(ho_json_escape('\\', out), 2);
    assert_string_equal(out, "\\\\");
    assert_int_equal(ho_json_escape('\n', out), 6);
    assert_string_equal(out, "\\u000a");
    assert_int_equal(ho_json_escape(0x1f, out), 6);
    assert_string_equal(out, "\\u001f");
    assert_int_equal(ho_json_escape('/', out), 1); /* '/' may stay as it is */
    assert_int_equal(ho_json_escape(0x7f, out), 1);
    assert_int_equal(ho_json_escape((char)0xc3, out), 1); /* UTF-8 bytes pass through */
    assert_int_equal((unsigned char)out[0], 0xc3);
}

/* s written between quotes by ho_json_write_text, as one string. */
static char *written(const char *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    fputc('"', f);
    ho_json_write_text(f, s);
    fputc('"', f);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void writes_what_a_reader_reads_back(void **state) {
    (void)state;
    char all[128 + 8];
    size_t n = 0;
    for (int c = 1; c < 128; c++) /* every ASCII byte but NUL */
        all[n++] = (char)c;
    memcpy(all + n, "\xc3\xa9\xe2\x86\x92", 5); /* "é→" */
    n += 5;
    all[n] = '\0';
    char *text = written(all);
    char err[128] = "";
    struct json *v = json_parse(text, strlen(text), err, sizeof err);
    assert_non_null(v);
    assert_int_equal(v->type, JSON_STRING);
    assert_string_equal(v->str, all);
    json_free(v);
    free(text);
}

static void writes_names_as_they_are(void **state) {
    (void)state;
    char *text = written("at /src/a \"b\".c:12\tfn\\x");
    assert_string_equal(text, "\"at /src/a \\\"b\\\".c:12\\u0009fn\\\\x\"");
    free(text);
    text = written("");
    assert_string_equal(text, "\"\"");
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes_each_class),
        cmocka_unit_test(writes_what_a_reader_reads_back),
        cmocka_unit_test(writes_names_as_they_are),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
