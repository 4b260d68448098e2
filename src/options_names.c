/* Unknown HOSTOFF_* names (options.h, ho_options_check_names): a misspelt variable is ignored
 * like any other, but never silently: one warning names the nearest valid name and what that
 * option is in effect. */
#include "options.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

/* Variables other parts of hostoff read (the hostoff command, the PyTorch recipe, the Slurm
 * recipe, the tests): valid here, though the library itself does not use them. */
static const char *const OTHERS[] = {
    "HOSTOFF_LIB",
    "HOSTOFF_SIMCUDA_DIR",
    "HOSTOFF_REPLAYER",
    "HOSTOFF_REPLAYER_PROGRESS",
    "HOSTOFF_TORCH_ALLOCATOR",
    "HOSTOFF_BUDGET_FOR_JOB",
    "HOSTOFF_FACTS_DIR",
    "HOSTOFF_TEST_MARK",
};
#define NOTHERS (sizeof OTHERS / sizeof OTHERS[0])

/* Edit distance (insertions, deletions, substitutions, and swaps of neighbours: BUDGTE is one
 * swap from BUDGET), for names up to 63 characters. */
static unsigned distance(const char *a, size_t n, const char *b) {
    size_t m = strlen(b);
    if (n > 63 || m > 63) return 99;
    unsigned d[64][64];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (unsigned)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (unsigned)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            unsigned best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m];
}

static bool known(const char *name, size_t n) {
    for (int i = 0; i < HO_OPT_COUNT; i++)
        if (strlen(ho_option_table[i].env) == n && strncmp(ho_option_table[i].env, name, n) == 0)
            return true;
    for (size_t i = 0; i < NOTHERS; i++)
        if (strlen(OTHERS[i]) == n && strncmp(OTHERS[i], name, n) == 0) return true;
    return false;
}

int ho_options_check_names(char *const *envp) {
    int unknown = 0;
    for (char *const *e = envp; e != NULL && *e != NULL; e++) {
        if (strncmp(*e, "HOSTOFF_", 8) != 0) continue;
        const char *eq = strchr(*e, '=');
        size_t n = eq != NULL ? (size_t)(eq - *e) : strlen(*e);
        if (known(*e, n)) continue;
        unknown++;
        int best = -1;
        unsigned best_d = 99;
        for (int i = 0; i < HO_OPT_COUNT; i++) {
            unsigned d = distance(*e, n, ho_option_table[i].env);
            if (d < best_d) {
                best_d = d;
                best = i;
            }
        }
        if (best >= 0 && best_d <= 3) {
            const struct ho_option_info *o = &ho_option_table[best];
            const char *now = getenv(o->env);
            ho_log(HO_LOG_WARN,
                   "%.*s is not a hostoff variable and is ignored; did you mean %s? "
                   "(%s is %s)",
                   (int)n, *e, o->env, o->env,
                   now != NULL         ? now
                   : o->def[0] != '\0' ? o->def
                                       : "unset");
        } else {
            ho_log(HO_LOG_WARN,
                   "%.*s is not a hostoff variable and is ignored (hostoff run --help "
                   "lists them)",
                   (int)n, *e);
        }
    }
    return unknown;
}
