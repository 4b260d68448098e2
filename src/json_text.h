/* Text inside a JSON string (RFC 8259): the one escaper the report, the trace and the tools'
 * Perfetto writer share. '"' and '\\' are escaped, control characters written as \u00XX, every
 * other byte as it is (UTF-8 passes through unchanged). */
#ifndef HOSTOFF_JSON_TEXT_H
#define HOSTOFF_JSON_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* The most bytes one character becomes (\u001f), and a NUL. */
#define HO_JSON_ESCAPED_MAX 7

/* c as it stands inside a JSON string, into out (NUL-terminated); its length. */
size_t ho_json_escape(char c, char out[HO_JSON_ESCAPED_MAX]);
/* s escaped, without the quotes, to f. */
void ho_json_write_text(FILE *f, const char *s);

#endif
