/* The one grammar for sizes and percentages (src/units.h), and the HOSTOFF_* options built on it
 * (src/options.c): tables of what is accepted, with its exact value, and of what is refused, with
 * the reason given. */
#include "options.h"
#include "units.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static const uint64_t K = 1024, M = 1024 * 1024, G = 1024ull * 1024 * 1024, T = G * 1024;

struct accept {
    const char *text;
    uint64_t value;
};

struct refuse {
    const char *text;
    const char *why; /* a piece of the reason */
};

static void test_sizes_accepted(void **state) {
    (void)state;
    const struct accept table[] = {
        {"0", 0},
        {"4096", 4096},
        {"007", 7},
        {"4096B", 4096},
        {"64K", 64 * K},
        {"64k", 64 * K},
        {"64KB", 64 * K},
        {"64KiB", 64 * K},
        {"512M", 512 * M},
        {"512MiB", 512 * M},
        {"1G", G},
        {"1GiB", G},
        {"1gib", G},
        {"2GB", 2 * G},
        {"1.5G", G + G / 2},
        {"1.5GiB", G + G / 2},
        {"0.5M", M / 2},
        {"1.0", 1},
        {"0.3K", 307}, /* 307.2: rounded down to a whole byte */
        {"141G", 141 * G},
        {"1T", T},
        {"16383.999999T", 16383 * T + (T / 1000000) * 999999 + (T % 1000000) * 999999 / 1000000},
        {"18446744073709551615", UINT64_MAX},
        {"15.999999999999999999T", 16 * T - 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        uint64_t v = 12345;
        const char *why = NULL;
        if (!ho_units_size(table[i].text, &v, &why))
            fail_msg("\"%s\" refused: %s", table[i].text, why);
        if (v != table[i].value)
            fail_msg("\"%s\" read as %llu, expected %llu", table[i].text, (unsigned long long)v,
                     (unsigned long long)table[i].value);
    }
}

static void test_sizes_refused(void **state) {
    (void)state;
    const struct refuse table[] = {
        {"", "empty"},
        {" 50M", "blank"},
        {"50M ", "blank"},
        {"+50M", "sign"},
        {"-1", "sign"},
        {"0x32", "hexadecimal"},
        {"0X32", "hexadecimal"},
        {"1.5X", "unknown unit suffix (valid: K, M, G or T"}, /* not "hexadecimal" */
        {"12x", "unknown unit suffix"},
        {"0.5x", "unknown unit suffix"},
        {"1e9", "exponent"},
        {"1.5", "whole"},
        {"1.5B", "whole"},
        {"1.", "decimal point"},
        {".5G", "digit"},
        {"1,5G", "unit"},
        {"1P", "unit"},
        {"1KK", "unit"},
        {"1Ki", "unit"},
        {"50%", "percentage"},
        {"18446744073709551616", "too large"},
        {"16777216T", "too large"},
        {"1.0000000000000000000000000000001K", "decimals"},
        {"inf", "digit"},
        {"nan", "digit"},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        uint64_t v = 0;
        const char *why = NULL;
        if (ho_units_size(table[i].text, &v, &why))
            fail_msg("\"%s\" accepted as %llu", table[i].text, (unsigned long long)v);
        if (why == NULL || strstr(why, table[i].why) == NULL)
            fail_msg("\"%s\": reason \"%s\" does not say \"%s\"", table[i].text,
                     why ? why : "(none)", table[i].why);
    }
    /* 16777216T is exactly 2^64: one past the largest size. */
    uint64_t v;
    assert_false(ho_units_size("16777216T", &v, NULL));
    assert_true(ho_units_size("16777215.999999999999T", &v, NULL));
    assert_int_equal(v, UINT64_MAX - 1); /* 2^40 * (1 - 1e-12) is 2^40 - 1.1: rounded down */
}

static void test_percentages(void **state) {
    (void)state;
    const struct accept ok[] = {
        {"50%", 50 * HO_PERCENT_ONE},
        {"100%", HO_PERCENT_ALL},
        {"100.000%", HO_PERCENT_ALL},
        {"12.5%", 12500000},
        {"0.000001%", 1},
        {"70%", 70000000},
        {"33.3333330%", 33333333},
        {"007%", 7 * HO_PERCENT_ONE},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint32_t m = 0;
        const char *why = NULL;
        if (!ho_units_percent(ok[i].text, &m, &why))
            fail_msg("\"%s\" refused: %s", ok[i].text, why);
        assert_int_equal(m, ok[i].value);
    }
    const struct refuse bad[] = {
        {"0x32%", "hexadecimal"},
        {" 50%", "blank"},
        {"+50%", "sign"},
        {"-5%", "sign"},
        {"1e-300%", "exponent"},
        {"0%", "above 0"},
        {"0.0000001%", "decimals"},
        {"0.000000%", "above 0"},
        {"100.000001%", "at most 100"},
        {"200%", "at most 100"},
        {"50", "followed by %"},
        {"50%%", "followed by %"},
        {"50 %", "followed by %"},
        {"%", "digit"},
        {"nan%", "digit"},
        {"inf%", "digit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t m = 0;
        const char *why = NULL;
        if (ho_units_percent(bad[i].text, &m, &why))
            fail_msg("\"%s\" accepted as %u", bad[i].text, m);
        if (why == NULL || strstr(why, bad[i].why) == NULL)
            fail_msg("\"%s\": reason \"%s\" does not say \"%s\"", bad[i].text, why ? why : "(none)",
                     bad[i].why);
    }
}

static void test_share_is_exact(void **state) {
    (void)state;
    assert_int_equal(ho_units_share(141 * G, 50 * HO_PERCENT_ONE), 141 * G / 2);
    assert_int_equal(ho_units_share(UINT64_MAX, HO_PERCENT_ALL), UINT64_MAX);
    assert_int_equal(ho_units_share(UINT64_MAX, 50 * HO_PERCENT_ONE), UINT64_MAX / 2);
    assert_int_equal(ho_units_share(1000, 1), 0);
    assert_int_equal(ho_units_share(100, 33333333), 33);
}

static void test_counts(void **state) {
    (void)state;
    uint64_t v;
    const char *why;
    assert_true(ho_units_count("55", &v, &why));
    assert_int_equal(v, 55);
    assert_false(ho_units_count("55.5", &v, &why));
    assert_false(ho_units_count("55G", &v, &why));
    assert_false(ho_units_count("1e999", &v, &why));
    assert_false(ho_units_count("99999999999999999999999", &v, &why));
}

/* ---------------------------------------------------------------- the options built on it */

static const char *const *fake_env;

static const char *fake_getenv(const char *name) {
    size_t n = strlen(name);
    for (const char *const *e = fake_env; *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
    return NULL;
}

static int parse(const char *const *env, struct ho_options *o) {
    fake_env = env;
    return ho_options_parse(fake_getenv, o);
}

static void test_budget_option(void **state) {
    (void)state;
    struct ho_options o;
    const char *const good[] = {"HOSTOFF_BUDGET=1.5G", "HOSTOFF_HOST_LIMIT=1GiB",
                                "HOSTOFF_MIN_BYTES=0.5M", NULL};
    assert_int_equal(parse(good, &o), 0);
    assert_int_equal(o.budget.kind, HO_AMOUNT_BYTES);
    assert_int_equal(o.budget.bytes, G + G / 2);
    assert_int_equal(ho_amount_resolve(&o.host_limit, 0), G);
    assert_int_equal(o.min_bytes, M / 2);
    const char *const pct[] = {"HOSTOFF_BUDGET=12.5%", NULL};
    assert_int_equal(parse(pct, &o), 0);
    assert_int_equal(ho_amount_resolve(&o.budget, 8 * G), G);
    /* Each refused: the default stays (none: no budget, never a budget of 0). */
    const char *const refused[] = {"0x32%", " 50%", "+50%", "1e-300%", "0",  "0%",
                                   "200%",  "-1G",  "1.5",  "1 G",     "1e9"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char var[64];
        snprintf(var, sizeof var, "HOSTOFF_BUDGET=%s", refused[i]);
        const char *const env[] = {var, "HOSTOFF_LOG=error", NULL};
        if (parse(env, &o) != 1) fail_msg("%s accepted", var);
        assert_int_equal(o.budget.kind, HO_AMOUNT_NONE);
        assert_int_equal(ho_amount_resolve(&o.budget, 80 * G), UINT64_MAX);
    }
    /* The host limit has no base a percentage could be taken of. */
    const char *const host_pct[] = {"HOSTOFF_HOST_LIMIT=50%", NULL};
    assert_int_equal(parse(host_pct, &o), 1);
    assert_int_equal(o.host_limit.kind, HO_AMOUNT_NONE);
}

/* The reason named in the one line. */
static void test_option_check_reasons(void **state) {
    (void)state;
    const struct ho_option_info *b = &ho_option_table[HO_OPT_BUDGET];
    const char *why = NULL, *expected = NULL;
    assert_false(ho_option_check(b, "0x32%", &why, &expected));
    assert_non_null(strstr(why, "hexadecimal"));
    assert_non_null(strstr(expected, "percentage"));
    assert_false(ho_option_check(b, "1e-300%", &why, &expected));
    assert_non_null(strstr(why, "exponent"));
    assert_true(ho_option_check(b, "none", &why, &expected));
    assert_null(why);
    const struct ho_option_info *h = &ho_option_table[HO_OPT_HOST_LIMIT];
    assert_false(ho_option_check(h, "50%", &why, &expected));
    assert_non_null(strstr(why, "no base"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_accepted),
        cmocka_unit_test(test_sizes_refused),
        cmocka_unit_test(test_percentages),
        cmocka_unit_test(test_share_is_exact),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_budget_option),
        cmocka_unit_test(test_option_check_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
