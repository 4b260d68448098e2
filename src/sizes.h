/* The simulator's sizes (SIMCUDA_*): "4096", "64K", "2M", "141G", "1T" (powers of 1024; a
 * trailing B is allowed: "2GB" reads as 2 GiB), whole numbers only. Header-only: the simulator is
 * a separate library and shares no object code with hostoff. hostoff itself (HOSTOFF_* and the
 * command's options) reads sizes with src/units.h, a superset of this grammar (decimals, iB). */
#ifndef HOSTOFF_SIZES_H
#define HOSTOFF_SIZES_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Parses a whole number with an optional K/M/G/T suffix (when `suffixes`); false on anything
 * else, including a sign or leading blanks (strtoull would take " -1" as a huge number). */
static inline bool ho_parse_size_text(const char *text, bool suffixes, uint64_t *out) {
    if (text == NULL || text[0] < '0' || text[0] > '9') return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0) return false;
    unsigned shift = 0;
    if (suffixes) {
        static const char units[] = "kmgt";
        for (unsigned i = 0; i < 4; i++) {
            if ((*end | 0x20) == units[i]) {
                shift = 10 * (i + 1);
                end++;
                break;
            }
        }
        if (*end == 'B' || *end == 'b') end++;
    }
    if (*end != '\0' || (shift != 0 && v > (UINT64_MAX >> shift))) return false;
    *out = (uint64_t)v << shift;
    return true;
}

#endif
