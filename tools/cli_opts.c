/* Option tables: hostoff run's, made from src/options.def, and the --help layout every table
 * shares (cli_opts.h). */
#include "cli_opts.h"

#include "options.h"

#include <ctype.h>
#include <string.h>

size_t run_opts(const struct cli_opt **out) {
    static struct cli_opt opts[HO_OPT_COUNT];
    static char names[HO_OPT_COUNT][32];
    static bool made;
    if (!made) {
        for (int i = 0; i < HO_OPT_COUNT; i++) {
            const struct ho_option_info *o = &ho_option_table[i];
            /* HOSTOFF_MIN_BYTES -> min-bytes */
            const char *src = o->env + strlen("HOSTOFF_");
            size_t k = 0;
            for (; src[k] != '\0' && k + 1 < sizeof names[i]; k++)
                names[i][k] = src[k] == '_' ? '-' : (char)tolower((unsigned char)src[k]);
            names[i][k] = '\0';
            const char *arg = "TEXT";
            switch (o->kind) {
            case HO_KIND_ENUM:
                arg = o->values;
                break;
            case HO_KIND_SIZE:
                arg = "BYTES";
                break;
            case HO_KIND_SIZE_AUTO:
                arg = "BYTES|auto";
                break;
            case HO_KIND_AMOUNT:
                arg = "BYTES|PCT%|none";
                break;
            case HO_KIND_LIMIT:
                arg = "BYTES|none";
                break;
            case HO_KIND_STRING:
                arg = "PATH";
                break;
            }
            opts[i] = (struct cli_opt){names[i], arg, o->def[0] != '\0' ? o->def : "unset", o->doc,
                                       o->env};
        }
        made = true;
    }
    *out = opts;
    return HO_OPT_COUNT;
}

/* Words of text, wrapped at `width` columns after `indent` spaces. */
static void wrap(FILE *f, const char *text, int indent, int width) {
    int col = 0;
    const char *p = text;
    while (*p != '\0') {
        while (*p == ' ')
            p++;
        const char *end = p;
        while (*end != '\0' && *end != ' ')
            end++;
        int len = (int)(end - p);
        if (len == 0) break;
        if (col == 0) {
            col = fprintf(f, "%*s", indent, "");
        } else if (col + 1 + len > width) {
            fprintf(f, "\n");
            col = fprintf(f, "%*s", indent, "");
        } else {
            col += fprintf(f, " ");
        }
        col += fprintf(f, "%.*s", len, p);
        p = end;
    }
    fprintf(f, "\n");
}

void cli_opts_help(FILE *f, const struct cli_opt *o, size_t n) {
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "  %s%s%s%s\n", strlen(o[i].name) == 1 ? "-" : "--", o[i].name,
                o[i].arg[0] != '\0' ? " " : "", o[i].arg);
        char text[1024];
        int k = snprintf(text, sizeof text, "%s", o[i].help);
        if (o[i].env != NULL && k > 0 && (size_t)k < sizeof text)
            k += snprintf(text + k, sizeof text - (size_t)k, " [%s, default %s]", o[i].env,
                          o[i].def);
        else if (o[i].def[0] != '\0' && k > 0 && (size_t)k < sizeof text)
            snprintf(text + k, sizeof text - (size_t)k, " [default %s]", o[i].def);
        wrap(f, text, 8, 100);
    }
}
