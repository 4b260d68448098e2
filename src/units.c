/* Sizes and percentages (units.h): read digit by digit in integers, so that what is accepted is
 * exact and what would overflow is refused. */
#include "units.h"

#include <stddef.h>

/* The longest fraction read: more decimals than a byte count or a millionth of a percent can
 * use are a typing error, not precision. */
#define MAX_DECIMALS 30

struct number {
    uint64_t whole;   /* the digits before the point */
    const char *frac; /* the digits after it (nfrac of them) */
    unsigned nfrac;
    const char *end; /* the first character after the number */
};

static bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

static bool fail(const char **why, const char *what) {
    if (why != NULL) *why = what;
    return false;
}

/* NUMBER := DIGITS ["." DIGITS]. */
static bool read_number(const char *text, struct number *n, const char **why) {
    if (text == NULL || *text == '\0') return fail(why, "the value is empty");
    if (*text == ' ' || *text == '\t') return fail(why, "blanks are not allowed");
    if (*text == '+' || *text == '-') return fail(why, "a sign is not allowed");
    if (!is_digit(*text)) return fail(why, "it must start with a digit");
    const char *p = text;
    n->whole = 0;
    for (; is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (n->whole > (UINT64_MAX - d) / 10) return fail(why, "the number is too large");
        n->whole = n->whole * 10 + d;
    }
    n->frac = p;
    n->nfrac = 0;
    if (*p == '.') {
        p++;
        n->frac = p;
        if (!is_digit(*p)) return fail(why, "a decimal point must be followed by digits");
        for (; is_digit(*p); p++)
            if (++n->nfrac > MAX_DECIMALS) return fail(why, "too many decimals");
    }
    /* Only "0x..." is hexadecimal; an x after any other number ("1.5X") is an unknown suffix,
     * which the caller names with the valid ones. */
    if ((*p == 'x' || *p == 'X') && p == text + 1 && text[0] == '0')
        return fail(why, "hexadecimal is not allowed");
    n->end = p;
    return true;
}

/* floor(0.FRAC * unit): Horner from the last digit; each step stays below 10 * unit. */
static uint64_t frac_times(const struct number *n, uint64_t unit) {
    uint64_t acc = 0;
    for (unsigned i = n->nfrac; i > 0; i--)
        acc = ((uint64_t)(n->frac[i - 1] - '0') * unit + acc) / 10;
    return acc;
}

static bool frac_is_zero(const struct number *n) {
    for (unsigned i = 0; i < n->nfrac; i++)
        if (n->frac[i] != '0') return false;
    return true;
}

static char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

bool ho_units_size(const char *text, uint64_t *bytes, const char **why) {
    struct number n;
    if (!read_number(text, &n, why)) return false;
    const char *u = n.end;
    unsigned shift = 0;
    static const char letters[] = "kmgt";
    for (unsigned i = 0; i < 4 && *u != '\0'; i++) {
        if (lower(*u) == letters[i]) {
            shift = 10 * (i + 1);
            u++;
            break;
        }
    }
    if (shift != 0) {
        if (u[0] == 'i' && (u[1] == 'B' || u[1] == 'b'))
            u += 2;
        else if (*u == 'B' || *u == 'b')
            u++;
    } else if (*u == 'B' || *u == 'b') {
        u++;
    }
    if (*u != '\0') {
        if (*u == 'e' || *u == 'E') return fail(why, "an exponent is not allowed");
        if (*u == ' ' || *u == '\t') return fail(why, "blanks are not allowed");
        if (*u == '%') return fail(why, "a percentage is not a size here");
        return fail(why, "unknown unit suffix (valid: K, M, G or T, each optionally followed by "
                         "B or iB, or B alone)");
    }
    if (shift == 0 && !frac_is_zero(&n)) return fail(why, "a number of bytes must be whole");
    uint64_t unit = (uint64_t)1 << shift;
    if (n.whole > (UINT64_MAX >> shift)) return fail(why, "the size is too large");
    uint64_t v = n.whole << shift, f = shift != 0 ? frac_times(&n, unit) : 0;
    if (v > UINT64_MAX - f) return fail(why, "the size is too large");
    *bytes = v + f;
    return true;
}

bool ho_units_percent(const char *text, uint32_t *millionths, const char **why) {
    struct number n;
    if (!read_number(text, &n, why)) return false;
    if (n.end[0] != '%' || n.end[1] != '\0') {
        if (n.end[0] == 'e' || n.end[0] == 'E') return fail(why, "an exponent is not allowed");
        return fail(why, "a percentage is a number followed by %");
    }
    if (n.whole > 100) return fail(why, "a percentage must be at most 100%");
    for (unsigned i = 6; i < n.nfrac; i++)
        if (n.frac[i] != '0') return fail(why, "a percentage has at most 6 decimals");
    uint64_t v = n.whole * HO_PERCENT_ONE;
    uint64_t scale = HO_PERCENT_ONE / 10;
    for (unsigned i = 0; i < n.nfrac && i < 6; i++, scale /= 10)
        v += (uint64_t)(n.frac[i] - '0') * scale;
    if (v > HO_PERCENT_ALL) return fail(why, "a percentage must be at most 100%");
    if (v == 0) return fail(why, "a percentage must be above 0%");
    *millionths = (uint32_t)v;
    return true;
}

bool ho_units_count(const char *text, uint64_t *out, const char **why) {
    struct number n;
    if (!read_number(text, &n, why)) return false;
    if (n.nfrac != 0 || *n.end == '.') return fail(why, "a whole number is expected");
    if (*n.end != '\0') return fail(why, "a whole number is expected, without unit");
    *out = n.whole;
    return true;
}

uint64_t ho_units_share(uint64_t total, uint32_t millionths) {
    /* total = q * ALL + r: q * m fits (q < 2^64 / 10^8, m <= 10^8), r * m < 10^16. */
    uint64_t q = total / HO_PERCENT_ALL, r = total % HO_PERCENT_ALL;
    return q * millionths + r * millionths / HO_PERCENT_ALL;
}
