/* HOSTOFF_* options: one table (options.def) declares every option once; this header, the
 * parser, `hostoff --help`, the README's table and the man page are generated or checked from it.
 *
 * Options are read lazily, once, on first use; an invalid value gives one "hostoff:" line naming
 * the variable and what was expected, and the default stays (the job keeps running). */
#ifndef HOSTOFF_OPTIONS_H
#define HOSTOFF_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

enum ho_mode { HO_MODE_OFF, HO_MODE_TRACK, HO_MODE_OFFLOAD };
enum ho_log_level { HO_LOG_ERROR, HO_LOG_WARN, HO_LOG_INFO, HO_LOG_DEBUG };

enum ho_option_kind {
    HO_KIND_ENUM,      /* one of `values` */
    HO_KIND_STRING,    /* any text; empty means unset */
    HO_KIND_SIZE,      /* a size (units.h: K, M, G, T are powers of 1024, decimals allowed) */
    HO_KIND_SIZE_AUTO, /* a size, or "auto": the engine derives it (HOSTOFF_MIN_BYTES) */
    HO_KIND_AMOUNT,    /* a size above 0, a percentage (of the device's memory), or "none" */
    HO_KIND_LIMIT,     /* a size above 0, or "none" (no base a percentage could be taken of) */
};

enum ho_backend { HO_BACKEND_AUTO, HO_BACKEND_VMM, HO_BACKEND_UVM };
/* In the order of options.def's values. */
enum ho_policy_choice { HO_CHOOSE_LOOKAHEAD, HO_CHOOSE_LRU, HO_CHOOSE_ORACLE };

/* A size or a share of something the engine learns later (the device's memory). */
struct ho_amount {
    enum { HO_AMOUNT_NONE, HO_AMOUNT_BYTES, HO_AMOUNT_PERCENT } kind;
    uint64_t bytes;
    double percent;      /* for display; millionths is the exact value */
    uint32_t millionths; /* of a percent (units.h) */
};

/* Resolves an amount against a total, exactly: UINT64_MAX for none. */
uint64_t ho_amount_resolve(const struct ho_amount *a, uint64_t total);
/* The one spelling of each enum option's values, as options.def lists them (reports, traces,
 * logs and the hostoff command use these; a unit test checks them against the table). An
 * out-of-range value gives the first name. */
const char *ho_mode_name(enum ho_mode mode);
const char *ho_backend_name(enum ho_backend backend);
const char *ho_policy_name(enum ho_policy_choice policy);

/* The grammar of units.h; false on anything it does not define, with what was wrong in *why
 * (why may be NULL). A size of 0 is a size; an amount is never 0 ("none", or above 0). */
bool ho_parse_size(const char *text, uint64_t *out);
bool ho_parse_amount(const char *text, struct ho_amount *out);
bool ho_parse_amount_why(const char *text, struct ho_amount *out, const char **why);

#define HO_OPTION(id, env, kind, def, values, doc) HO_OPT_##id,
enum ho_option_id {
#include "options.def"
    HO_OPT_COUNT
};
#undef HO_OPTION

struct ho_option_info {
    const char *env; /* variable name */
    enum ho_option_kind kind;
    const char *def;    /* default, as text ("" for none) */
    const char *values; /* accepted values, '|'-separated, for enums */
    const char *doc;    /* one-line meaning */
};

extern const struct ho_option_info ho_option_table[HO_OPT_COUNT];

/* Whether text is a valid value of option o; when not, *why says what was wrong and *expected
 * what the option takes, for one line naming the variable or option. */
bool ho_option_check(const struct ho_option_info *o, const char *text, const char **why,
                     const char **expected);

struct ho_options {
    enum ho_mode mode;
    struct ho_amount budget;
    uint64_t min_bytes;  /* in force: the size given, or auto's (ho_min_bytes_auto) */
    bool min_bytes_auto; /* HOSTOFF_MIN_BYTES=auto (the default) */
    struct ho_amount host_limit;
    uint64_t evict_chunk; /* HOSTOFF_EVICT_CHUNK (0: copies whole) */
    enum ho_backend backend;
    enum ho_policy_choice policy;
    enum ho_log_level log;
    const char *report;      /* NULL: no report */
    const char *trace;       /* NULL: no trace */
    const char *libcuda;     /* NULL: dlopen("libcuda.so.1") */
    const char *oracle_plan; /* NULL: none */
    const char *run_id;      /* NULL: none */
    bool framework_keep;     /* HOSTOFF_FRAMEWORK_ALLOC=keep (interpose/framework_env.c) */
};

/* Parses the environment once (thread-safe) and returns the result. */
const struct ho_options *ho_options(void);
/* Parses an environment lookup function's view (tests); returns the number of invalid values. */
int ho_options_parse(const char *(*getenv_fn)(const char *), struct ho_options *out);
/* Warns once for each HOSTOFF_* name in envp that no part of hostoff reads, naming the nearest
 * valid one and its value in effect (options_names.c). Returns how many. */
int ho_options_check_names(char *const *envp);

#endif
