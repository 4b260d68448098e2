/* The HOSTOFF_* option table and its parser. */
#include "options.h"

#include "log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HO_OPTION(id, env, kind, def, values, doc) [HO_OPT_##id] = {env, kind, def, values, doc},
const struct ho_option_info ho_option_table[HO_OPT_COUNT] = {
#include "options.def"
};
#undef HO_OPTION

/* Index of `text` among the '|'-separated `values`, or -1. */
static int enum_index(const char *values, const char *text) {
    int idx = 0;
    size_t n = strlen(text);
    for (const char *p = values; *p != '\0'; idx++) {
        const char *bar = strchr(p, '|');
        size_t len = bar != NULL ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, text, n) == 0) return idx;
        if (bar == NULL) break;
        p = bar + 1;
    }
    return -1;
}

static const char *value_of(const char *(*getenv_fn)(const char *), enum ho_option_id id,
                            int *invalid) {
    const struct ho_option_info *o = &ho_option_table[id];
    const char *v = getenv_fn(o->env);
    if (v == NULL) return o->def;
    if (o->kind == HO_OPT_ENUM && enum_index(o->values, v) < 0) {
        ho_log(HO_LOG_ERROR, "%s=\"%s\" is not valid: expected one of %s; using %s", o->env, v,
               o->values, o->def);
        (*invalid)++;
        return o->def;
    }
    return v;
}

int ho_options_parse(const char *(*getenv_fn)(const char *), struct ho_options *out) {
    int invalid = 0;
    memset(out, 0, sizeof *out);
    /* The log level first, so the other options' complaints honour it. */
    const char *log = value_of(getenv_fn, HO_OPT_LOG, &invalid);
    out->log = (enum ho_log_level)enum_index(ho_option_table[HO_OPT_LOG].values, log);
    ho_log_set_level(out->log);
    const char *mode = value_of(getenv_fn, HO_OPT_MODE, &invalid);
    out->mode = enum_index(ho_option_table[HO_OPT_MODE].values, mode) == 0 ? HO_MODE_OFF
                                                                           : HO_MODE_TRACK;
    const char *report = value_of(getenv_fn, HO_OPT_REPORT, &invalid);
    out->report = report != NULL && *report != '\0' ? report : NULL;
    const char *lib = value_of(getenv_fn, HO_OPT_LIBCUDA, &invalid);
    out->libcuda = lib != NULL && *lib != '\0' ? lib : NULL;
    return invalid;
}

static struct ho_options parsed;
static pthread_once_t parsed_once = PTHREAD_ONCE_INIT;

static const char *env_lookup(const char *name) {
    return getenv(name);
}

static void parse_once(void) {
    ho_options_parse(env_lookup, &parsed);
}

const struct ho_options *ho_options(void) {
    pthread_once(&parsed_once, parse_once);
    return &parsed;
}
