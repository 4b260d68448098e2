/* HOSTOFF_* options (src/options.c): defaults, every kind of value read, and a bad value named
 * in its one "hostoff:" line (variable, value, what was expected, the default kept) while the
 * other options still take effect. The names the library writes for enum values are checked
 * against the table (options.def). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "log.h"
#include "move_cost.h"
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The environment a test gives the parser: NULL-terminated name, value pairs. */
static const char *const *fake_env;

static const char *fake_getenv(const char *name) {
    for (const char *const *p = fake_env; p != NULL && p[0] != NULL; p += 2)
        if (strcmp(p[0], name) == 0) return p[1];
    return NULL;
}

/* Parses env with stderr captured into err (what the library wrote); the count of bad values. */
static int parse(const char *const *env, struct ho_options *o, char *err, size_t cap) {
    fflush(stderr);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
    fake_env = env;
    int bad = ho_options_parse(fake_getenv, o);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    size_t n = (size_t)lseek(fileno(tmp), 0, SEEK_CUR);
    rewind(tmp);
    if (n >= cap) n = cap - 1;
    err[fread(err, 1, n, tmp)] = '\0';
    fclose(tmp);
    ho_log_set_level(HO_LOG_WARN); /* the parse set it; the next test starts from the default */
    return bad;
}

static size_t lines(const char *s) {
    size_t n = 0;
    for (; *s != '\0'; s++)
        n += *s == '\n';
    return n;
}

static void defaults_from_an_empty_environment(void **state) {
    (void)state;
    static const char *const env[] = {NULL};
    struct ho_options o;
    char err[1024];
    assert_int_equal(parse(env, &o, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(o.mode, HO_MODE_OFFLOAD);
    assert_int_equal(o.budget.kind, HO_AMOUNT_NONE);
    /* HOSTOFF_MIN_BYTES=auto: the published fixed time of a round trip's remaps (233 us) times
     * the published PCIe Gen5 rate (55 GB/s, bytes per ns). */
    assert_true(o.min_bytes_auto);
    assert_int_equal(o.min_bytes, 12815000u);
    assert_int_equal(o.min_bytes, ho_min_bytes_auto());
    assert_int_equal(o.host_limit.kind, HO_AMOUNT_NONE);
    assert_int_equal(o.evict_chunk, 64u << 20);
    assert_int_equal(o.policy, HO_CHOOSE_LOOKAHEAD);
    assert_int_equal(o.backend, HO_BACKEND_AUTO);
    assert_int_equal(o.log, HO_LOG_WARN);
    assert_null(o.report);
    assert_null(o.trace);
    assert_null(o.libcuda);
    assert_null(o.oracle_plan);
    assert_int_equal(ho_amount_resolve(&o.budget, 1000), UINT64_MAX);
}

static void reads_every_kind_of_value(void **state) {
    (void)state;
    /* clang-format off */
    static const char *const env[] = {
        "HOSTOFF_MODE", "track",           "HOSTOFF_BUDGET", "60G",
        "HOSTOFF_MIN_BYTES", "1M",         "HOSTOFF_HOST_LIMIT", "8G",
        "HOSTOFF_POLICY", "oracle",        "HOSTOFF_BACKEND", "uvm",
        "HOSTOFF_LOG", "error",            "HOSTOFF_REPORT", "/tmp/r-%p.json",
        "HOSTOFF_TRACE", "t.jsonl",        "HOSTOFF_LIBCUDA", "/opt/libcuda.so.1",
        "HOSTOFF_ORACLE_PLAN", "p.bin",    "HOSTOFF_EVICT_CHUNK", "0",
        NULL};
    /* clang-format on */
    struct ho_options o;
    char err[1024];
    assert_int_equal(parse(env, &o, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(o.mode, HO_MODE_TRACK);
    assert_int_equal(o.budget.kind, HO_AMOUNT_BYTES);
    assert_int_equal(o.budget.bytes, 60ull << 30);
    assert_int_equal(o.min_bytes, 1u << 20);
    assert_false(o.min_bytes_auto); /* an explicit value wins */
    assert_int_equal(o.host_limit.kind, HO_AMOUNT_BYTES);
    assert_int_equal(ho_amount_resolve(&o.host_limit, 1000), 8ull << 30);
    assert_int_equal(o.evict_chunk, 0); /* every eviction's copy whole */
    assert_int_equal(o.policy, HO_CHOOSE_ORACLE);
    assert_int_equal(o.backend, HO_BACKEND_UVM);
    assert_int_equal(o.log, HO_LOG_ERROR);
    assert_string_equal(o.report, "/tmp/r-%p.json");
    assert_string_equal(o.trace, "t.jsonl");
    assert_string_equal(o.libcuda, "/opt/libcuda.so.1");
    assert_string_equal(o.oracle_plan, "p.bin");
}

/* HOSTOFF_MIN_BYTES: auto (said or left unset) is derived; any size given wins, 0 included. */
static void min_bytes_auto_or_a_size(void **state) {
    (void)state;
    static const struct {
        const char *text;
        bool is_auto;
        uint64_t bytes;
    } cases[] = {{"auto", true, 12815000u},
                 {"16M", false, 16u << 20},
                 {"4M", false, 4u << 20},
                 {"0", false, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *env[] = {"HOSTOFF_MIN_BYTES", cases[i].text, NULL};
        struct ho_options o;
        char err[1024];
        assert_int_equal(parse(env, &o, err, sizeof err), 0);
        assert_int_equal(o.min_bytes_auto, cases[i].is_auto);
        assert_int_equal(o.min_bytes, cases[i].bytes);
    }
    /* "Auto" is not auto: names are case-sensitive, and the message says what is accepted. */
    const char *env[] = {"HOSTOFF_MIN_BYTES", "Auto", NULL};
    struct ho_options o;
    char err[1024];
    assert_int_equal(parse(env, &o, err, sizeof err), 1);
    assert_non_null(strstr(err, "expected auto, or a size"));
    assert_true(o.min_bytes_auto);
}

static void empty_strings_mean_unset(void **state) {
    (void)state;
    static const char *const env[] = {"HOSTOFF_REPORT", "", "HOSTOFF_TRACE", "", NULL};
    struct ho_options o;
    char err[256];
    assert_int_equal(parse(env, &o, err, sizeof err), 0);
    assert_null(o.report);
    assert_null(o.trace);
}

/* One bad value: one line that names the variable and the value, says it is not valid and what
 * was expected (`expected`, when given: an enum's values), and that the default is used. */
static void bad_value(const char *var, const char *value, const char *expected,
                      struct ho_options *o) {
    const char *const env[] = {var, value, NULL};
    char err[1024], want[512];
    assert_int_equal(parse(env, o, err, sizeof err), 1);
    assert_int_equal(lines(err), 1);
    snprintf(want, sizeof want, "hostoff: %s=\"%s\" is not valid", var, value);
    if (strncmp(err, want, strlen(want)) != 0) fail_msg("got: %s\nwant: %s...", err, want);
    snprintf(want, sizeof want, "expected %s", expected != NULL ? expected : "");
    if (strstr(err, want) == NULL) fail_msg("got: %s\nwant: ...%s...", err, want);
    for (int i = 0; i < HO_OPT_COUNT; i++)
        if (strcmp(ho_option_table[i].env, var) == 0) {
            snprintf(want, sizeof want, "using %s\n", ho_option_table[i].def);
            if (strstr(err, want) == NULL) fail_msg("got: %s\nwant: ...%s", err, want);
        }
}

static void bad_values_are_named_and_the_default_stays(void **state) {
    (void)state;
    struct ho_options o;
    bad_value("HOSTOFF_MODE", "fast", "off|track|offload", &o);
    assert_int_equal(o.mode, HO_MODE_OFFLOAD);
    bad_value("HOSTOFF_BACKEND", "VMM", "auto|vmm|uvm", &o); /* names are case-sensitive */
    assert_int_equal(o.backend, HO_BACKEND_AUTO);
    bad_value("HOSTOFF_POLICY", "", "lookahead|lru|oracle", &o);
    assert_int_equal(o.policy, HO_CHOOSE_LOOKAHEAD);
    static const char *const amounts[] = {"lots", "16Q", "-1G", "0", "150%", "0%", "%", ""};
    for (size_t i = 0; i < sizeof amounts / sizeof *amounts; i++) {
        bad_value("HOSTOFF_BUDGET", amounts[i], NULL, &o);
        assert_int_equal(o.budget.kind, HO_AMOUNT_NONE);
    }
    /* Overflow: 2^24 T is 2^64 bytes. */
    static const char *const sizes[] = {"4X", "-3", " 4M", "16777216T", "4M4", ""};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        bad_value("HOSTOFF_MIN_BYTES", sizes[i], NULL, &o);
        assert_int_equal(o.min_bytes, ho_min_bytes_auto()); /* the default, auto, stays */
        assert_true(o.min_bytes_auto);
    }
    /* A bad log level is reported at the default level (warn), which shows errors. */
    bad_value("HOSTOFF_LOG", "loud", "error|warn|info|debug", &o);
    assert_int_equal(o.log, HO_LOG_WARN);
}

static void good_values_survive_a_bad_neighbour(void **state) {
    (void)state;
    static const char *const env[] = {"HOSTOFF_BUDGET",
                                      "50%",
                                      "HOSTOFF_MODE",
                                      "on",
                                      "HOSTOFF_MIN_BYTES",
                                      "lots",
                                      "HOSTOFF_POLICY",
                                      "lru",
                                      NULL};
    struct ho_options o;
    char err[1024];
    assert_int_equal(parse(env, &o, err, sizeof err), 2);
    assert_int_equal(lines(err), 2);
    assert_non_null(strstr(err, "HOSTOFF_MODE=\"on\""));
    assert_non_null(strstr(err, "HOSTOFF_MIN_BYTES=\"lots\""));
    assert_int_equal(o.mode, HO_MODE_OFFLOAD);
    assert_int_equal(o.min_bytes, ho_min_bytes_auto());
    assert_int_equal(o.budget.kind, HO_AMOUNT_PERCENT);
    assert_int_equal(ho_amount_resolve(&o.budget, 64ull << 30), 32ull << 30);
    assert_int_equal(o.policy, HO_CHOOSE_LRU);
}

static void sizes_and_amounts(void **state) {
    (void)state;
    uint64_t v = 0;
    assert_true(ho_parse_size("4096", &v));
    assert_int_equal(v, 4096);
    assert_true(ho_parse_size("64k", &v));
    assert_int_equal(v, 64 << 10);
    assert_true(ho_parse_size("2GB", &v));
    assert_int_equal(v, 2ull << 30);
    assert_true(ho_parse_size("16777215T", &v)); /* the largest whole T */
    assert_int_equal(v, 16777215ull << 40);
    assert_false(ho_parse_size("2G2", &v));
    assert_false(ho_parse_size(NULL, &v));
    struct ho_amount a;
    assert_true(ho_parse_amount("none", &a));
    assert_int_equal(a.kind, HO_AMOUNT_NONE);
    assert_true(ho_parse_amount("100%", &a));
    assert_int_equal(ho_amount_resolve(&a, 12345), 12345);
    assert_true(ho_parse_amount("12.5%", &a));
    assert_int_equal(ho_amount_resolve(&a, 800), 100);
    assert_false(ho_parse_amount("100.5%", &a));
    assert_false(ho_parse_amount("0", &a));
}

/* name(0) | name(1) | ... as the table lists the values. */
static void names_match_the_table(void **state) {
    (void)state;
    char got[128];
    snprintf(got, sizeof got, "%s|%s|%s", ho_mode_name(HO_MODE_OFF), ho_mode_name(HO_MODE_TRACK),
             ho_mode_name(HO_MODE_OFFLOAD));
    assert_string_equal(got, ho_option_table[HO_OPT_MODE].values);
    snprintf(got, sizeof got, "%s|%s|%s", ho_backend_name(HO_BACKEND_AUTO),
             ho_backend_name(HO_BACKEND_VMM), ho_backend_name(HO_BACKEND_UVM));
    assert_string_equal(got, ho_option_table[HO_OPT_BACKEND].values);
    snprintf(got, sizeof got, "%s|%s|%s", ho_policy_name(HO_CHOOSE_LOOKAHEAD),
             ho_policy_name(HO_CHOOSE_LRU), ho_policy_name(HO_CHOOSE_ORACLE));
    assert_string_equal(got, ho_option_table[HO_OPT_POLICY].values);
    assert_string_equal(ho_mode_name((enum ho_mode)7), "off"); /* out of range: the first */
    /* Every option has a variable, a meaning, and a valid default. */
    for (int i = 0; i < HO_OPT_COUNT; i++) {
        const struct ho_option_info *o = &ho_option_table[i];
        assert_true(strncmp(o->env, "HOSTOFF_", 8) == 0);
        assert_true(strlen(o->doc) > 0);
        const char *const env[] = {o->env, o->def, NULL};
        struct ho_options parsed;
        char err[256];
        assert_int_equal(parse(env, &parsed, err, sizeof err), 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults_from_an_empty_environment),
        cmocka_unit_test(reads_every_kind_of_value),
        cmocka_unit_test(empty_strings_mean_unset),
        cmocka_unit_test(min_bytes_auto_or_a_size),
        cmocka_unit_test(bad_values_are_named_and_the_default_stays),
        cmocka_unit_test(good_values_survive_a_bad_neighbour),
        cmocka_unit_test(sizes_and_amounts),
        cmocka_unit_test(names_match_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
