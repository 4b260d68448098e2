/* The HOSTOFF_* option table and its parser. */
#include "options.h"

#include "log.h"
#include "move_cost.h"
#include "units.h"

#include <errno.h>
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

/* In enum order, which is options.def's order of values. */
static const char *const mode_names[] = {"off", "track", "offload"};
static const char *const backend_names[] = {"auto", "vmm", "uvm"};
static const char *const policy_names[] = {"lookahead", "lru", "oracle"};

#define NAME_OF(names, v) ((unsigned)(v) < sizeof names / sizeof names[0] ? names[v] : names[0])

const char *ho_mode_name(enum ho_mode mode) {
    return NAME_OF(mode_names, mode);
}

const char *ho_backend_name(enum ho_backend backend) {
    return NAME_OF(backend_names, backend);
}

const char *ho_policy_name(enum ho_policy_choice policy) {
    return NAME_OF(policy_names, policy);
}

bool ho_parse_size(const char *text, uint64_t *out) {
    return ho_units_size(text, out, NULL);
}

bool ho_parse_amount_why(const char *text, struct ho_amount *out, const char **why) {
    memset(out, 0, sizeof *out);
    if (text != NULL && strcmp(text, "none") == 0) return true;
    size_t n = text != NULL ? strlen(text) : 0;
    if (n > 0 && text[n - 1] == '%') {
        if (!ho_units_percent(text, &out->millionths, why)) return false;
        out->kind = HO_AMOUNT_PERCENT;
        out->percent = (double)out->millionths / HO_PERCENT_ONE;
        return true;
    }
    if (!ho_units_size(text, &out->bytes, why)) return false;
    if (out->bytes == 0) {
        if (why != NULL) *why = "0 bytes leaves nothing (none means no limit)";
        return false;
    }
    out->kind = HO_AMOUNT_BYTES;
    return true;
}

bool ho_parse_amount(const char *text, struct ho_amount *out) {
    return ho_parse_amount_why(text, out, NULL);
}

uint64_t ho_amount_resolve(const struct ho_amount *a, uint64_t total) {
    switch (a->kind) {
    case HO_AMOUNT_NONE:
        return UINT64_MAX;
    case HO_AMOUNT_BYTES:
        return a->bytes;
    case HO_AMOUNT_PERCENT:
        return ho_units_share(total, a->millionths);
    }
    return UINT64_MAX;
}

bool ho_option_check(const struct ho_option_info *o, const char *text, const char **why,
                     const char **expected) {
    uint64_t size;
    struct ho_amount amount;
    const char *w = NULL;
    bool ok = false;
    switch (o->kind) {
    case HO_KIND_ENUM:
        ok = enum_index(o->values, text) >= 0;
        w = "not one of the accepted values";
        *expected = o->values;
        break;
    case HO_KIND_STRING:
        ok = true;
        *expected = "text";
        break;
    case HO_KIND_SIZE:
        ok = ho_units_size(text, &size, &w);
        *expected = "a size such as 4M, 1.5G or 4096";
        break;
    case HO_KIND_SIZE_AUTO:
        ok = strcmp(text, "auto") == 0 || ho_units_size(text, &size, &w);
        *expected = "auto, or a size such as 16M, 1.5G or 4096";
        break;
    case HO_KIND_AMOUNT:
        ok = ho_parse_amount_why(text, &amount, &w);
        *expected = "a size such as 60G or 1.5GiB, a percentage such as 75%, or none";
        break;
    case HO_KIND_LIMIT:
        ok = strcmp(text, "none") == 0;
        if (!ok && text[0] != '\0' && text[strlen(text) - 1] == '%')
            w = "a percentage has no base here";
        else if (!ok)
            ok = ho_parse_amount_why(text, &amount, &w);
        *expected = "a size such as 64G or 1.5GiB, or none";
        break;
    }
    if (why != NULL) *why = ok ? NULL : w;
    return ok;
}

static const char *value_of(const char *(*getenv_fn)(const char *), enum ho_option_id id,
                            int *invalid) {
    const struct ho_option_info *o = &ho_option_table[id];
    const char *v = getenv_fn(o->env);
    if (v == NULL) return o->def;
    const char *why = NULL, *expected = NULL;
    if (!ho_option_check(o, v, &why, &expected)) {
        ho_log(HO_LOG_ERROR, "%s=\"%s\" is not valid (%s): expected %s; using %s", o->env, v, why,
               expected, o->def[0] != '\0' ? o->def : "nothing");
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
    out->mode = (enum ho_mode)enum_index(ho_option_table[HO_OPT_MODE].values, mode);
    ho_parse_amount(value_of(getenv_fn, HO_OPT_BUDGET, &invalid), &out->budget);
    const char *min = value_of(getenv_fn, HO_OPT_MIN_BYTES, &invalid);
    out->min_bytes_auto = strcmp(min, "auto") == 0;
    if (out->min_bytes_auto)
        out->min_bytes = ho_min_bytes_auto();
    else
        ho_parse_size(min, &out->min_bytes);
    ho_parse_amount(value_of(getenv_fn, HO_OPT_HOST_LIMIT, &invalid), &out->host_limit);
    ho_parse_size(value_of(getenv_fn, HO_OPT_EVICT_CHUNK, &invalid), &out->evict_chunk);
    const char *policy = value_of(getenv_fn, HO_OPT_POLICY, &invalid);
    out->policy = (enum ho_policy_choice)enum_index(ho_option_table[HO_OPT_POLICY].values, policy);
    const char *backend = value_of(getenv_fn, HO_OPT_BACKEND, &invalid);
    out->backend = (enum ho_backend)enum_index(ho_option_table[HO_OPT_BACKEND].values, backend);
    const char *report = value_of(getenv_fn, HO_OPT_REPORT, &invalid);
    out->report = report != NULL && *report != '\0' ? report : NULL;
    const char *trace = value_of(getenv_fn, HO_OPT_TRACE, &invalid);
    out->trace = trace != NULL && *trace != '\0' ? trace : NULL;
    const char *lib = value_of(getenv_fn, HO_OPT_LIBCUDA, &invalid);
    out->libcuda = lib != NULL && *lib != '\0' ? lib : NULL;
    const char *plan = value_of(getenv_fn, HO_OPT_ORACLE_PLAN, &invalid);
    out->oracle_plan = plan != NULL && *plan != '\0' ? plan : NULL;
    const char *run_id = value_of(getenv_fn, HO_OPT_RUN_ID, &invalid);
    out->run_id = run_id != NULL && *run_id != '\0' ? run_id : NULL;
    const char *fw = value_of(getenv_fn, HO_OPT_FRAMEWORK_ALLOC, &invalid);
    out->framework_keep = enum_index(ho_option_table[HO_OPT_FRAMEWORK_ALLOC].values, fw) == 1;
    return invalid;
}

static struct ho_options parsed;
static pthread_once_t parsed_once = PTHREAD_ONCE_INIT;

static const char *env_lookup(const char *name) {
    return getenv(name);
}

extern char **environ;

static void parse_once(void) {
    ho_options_parse(env_lookup, &parsed);
    ho_options_check_names(environ);
}

const struct ho_options *ho_options(void) {
    pthread_once(&parsed_once, parse_once);
    return &parsed;
}
