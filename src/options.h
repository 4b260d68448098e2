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

enum ho_option_kind { HO_OPT_ENUM, HO_OPT_STRING };

#define HO_OPTION(id, env, kind, def, values, doc) HO_OPT_##id,
enum ho_option_id {
#include "options.def"
    HO_OPT_COUNT
};
#undef HO_OPTION

struct ho_option_info {
    const char *env;         /* variable name */
    enum ho_option_kind kind;
    const char *def;         /* default, as text ("" for none) */
    const char *values;      /* accepted values, '|'-separated, for enums */
    const char *doc;         /* one-line meaning */
};

extern const struct ho_option_info ho_option_table[HO_OPT_COUNT];

struct ho_options {
    enum ho_mode mode;
    enum ho_log_level log;
    const char *report;      /* NULL: no report */
    const char *libcuda;     /* NULL: dlopen("libcuda.so.1") */
};

/* Parses the environment once (thread-safe) and returns the result. */
const struct ho_options *ho_options(void);
/* Parses an environment lookup function's view (tests); returns the number of invalid values. */
int ho_options_parse(const char *(*getenv_fn)(const char *), struct ho_options *out);

#endif
