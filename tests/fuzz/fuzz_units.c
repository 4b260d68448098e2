/* Fuzz target: the one grammar for sizes and percentages (src/units.c) and the HOSTOFF_* option
 * checks built on it (src/options.c). Checks what is accepted against an independent reading:
 * a size is digits, an optional fraction and a unit; its value is exact. */
#include "fuzz_input.h"
#include "options.h"
#include "units.h"

#include <ctype.h>

/* An independent, slower reading of what ho_units_size accepts, in long double (64-bit
 * mantissa), to within a byte or a part in 2^60. */
static void cross_check_size(const char *s, uint64_t v) {
    if (!isdigit((unsigned char)s[0])) abort();
    char *end = NULL;
    long double x = strtold(s, &end);
    unsigned shift = 0;
    switch (*end | 0x20) {
    case 'k':
        shift = 10;
        break;
    case 'm':
        shift = 20;
        break;
    case 'g':
        shift = 30;
        break;
    case 't':
        shift = 40;
        break;
    default:
        break;
    }
    long double want = x * (long double)((uint64_t)1 << shift);
    long double got = (long double)v;
    long double diff = want > got ? want - got : got - want;
    if (diff > 1.0L + want / (1ull << 60)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = fuzz_as_text(data, size);
    const char *why = NULL;
    uint64_t v = 0;
    if (ho_units_size(s, &v, &why)) {
        cross_check_size(s, v);
    } else if (why == NULL) {
        abort(); /* every refusal says why */
    }
    uint32_t m = 0;
    why = NULL;
    if (ho_units_percent(s, &m, &why)) {
        if (m == 0 || m > HO_PERCENT_ALL) abort();
        if (ho_units_share(UINT64_MAX, m) > UINT64_MAX) abort();
        if (ho_units_share(1000000000000ull, m) > 1000000000000ull) abort();
        if (m == HO_PERCENT_ALL && ho_units_share(UINT64_MAX, m) != UINT64_MAX) abort();
    } else if (why == NULL) {
        abort();
    }
    why = NULL;
    if (!ho_units_count(s, &v, &why) && why == NULL) abort();
    struct ho_amount a;
    why = NULL;
    if (ho_parse_amount_why(s, &a, &why)) {
        if (a.kind == HO_AMOUNT_BYTES && a.bytes == 0) abort(); /* never a budget of 0 */
    } else if (why == NULL) {
        abort();
    }
    for (int i = 0; i < HO_OPT_COUNT; i++) {
        const char *expected = NULL;
        why = NULL;
        if (!ho_option_check(&ho_option_table[i], s, &why, &expected) &&
            (why == NULL || expected == NULL))
            abort();
    }
    free(s);
    return 0;
}
