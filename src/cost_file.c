/* The cost file's one reader (cost_file.h). */
#include "cost_file.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const ho_cost_entries[] = {
    "default",
    "cuMemCreate",
    "cuMemMap",
    "cuMemSetAccess",
    "cuMemUnmap",
    "cuMemRelease",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemHostRegister",
    "cuMemHostUnregister",
    "cuMemAlloc",
    "cuMemFree",
    "cuMemAllocAsync",
    "cuMemFreeAsync",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuLaunchKernel",
    "cuGraphLaunch",
    "cuMemcpy",
    "cuMemcpyAsync",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuStreamWaitEvent",
    "cuStreamSynchronize",
    "cuStreamQuery",
    "cuCtxSynchronize",
};
const size_t ho_cost_nentries = sizeof ho_cost_entries / sizeof ho_cost_entries[0];

const char *const ho_cost_link_fields[] = {"h2d",        "d2h",      "h2d_duplex",
                                           "d2h_duplex", "zerocopy", "hbm"};
const size_t ho_cost_nlink_fields = sizeof ho_cost_link_fields / sizeof ho_cost_link_fields[0];

/* A finite, non-negative decimal number: digits, one point, an exponent; nothing else (no sign,
 * no hex, no inf or nan). */
static bool parse_number(const char *tok, double *out) {
    if (tok == NULL || !(isdigit((unsigned char)tok[0]) || tok[0] == '.')) return false;
    for (const char *p = tok; *p != '\0'; p++)
        if (!isdigit((unsigned char)*p) && *p != '.' && *p != 'e' && *p != 'E' && *p != '+' &&
            *p != '-')
            return false;
    errno = 0;
    char *end = NULL;
    double v = strtod(tok, &end);
    if (errno != 0 || end == tok || *end != '\0' || !isfinite(v) || v < 0) return false;
    *out = v;
    return true;
}

static const char *find(const char *const *names, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return names[i];
    return NULL;
}

/* The expected-name part of the message for an unknown row: every name the file may use. */
static void expected_names(char *buf, size_t cap) {
    size_t n =
        (size_t)snprintf(buf, cap, "expected call.<entry>[.device|.host] with <entry> one of");
    for (size_t i = 0; i < ho_cost_nentries && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, " %s", ho_cost_entries[i]);
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, ", or link.<field> with <field> one of");
    for (size_t i = 0; i < ho_cost_nlink_fields && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, " %s", ho_cost_link_fields[i]);
}

/* One line (comment already cut) into *r: true when it is a row (*blank false) or blank. */
static bool read_line(char *line, struct ho_cost_row *r, bool *blank, char *msg, size_t cap) {
    char *save = NULL;
    char *name = strtok_r(line, " \t\r\n", &save);
    *blank = name == NULL;
    if (name == NULL) return true;
    char *v1 = strtok_r(NULL, " \t\r\n", &save);
    char *v2 = strtok_r(NULL, " \t\r\n", &save);
    char *extra = strtok_r(NULL, " \t\r\n", &save);
    if (strncmp(name, "link.", 5) == 0) {
        r->link = true;
        r->name = find(ho_cost_link_fields, ho_cost_nlink_fields, name + 5);
        if (r->name != NULL) {
            if (v1 == NULL || v2 != NULL || !parse_number(v1, &r->gbps) || r->gbps <= 0) {
                snprintf(msg, cap, "%s: expected one positive rate in GB/s", name);
                return false;
            }
            return true;
        }
    } else if (strncmp(name, "call.", 5) == 0) {
        char entry[128];
        snprintf(entry, sizeof entry, "%s", name + 5);
        r->link = false;
        r->where = HO_COST_BOTH;
        char *dot = strchr(entry, '.');
        bool where_ok = true;
        if (dot != NULL) {
            *dot = '\0';
            if (strcmp(dot + 1, "device") == 0)
                r->where = HO_COST_DEVICE;
            else if (strcmp(dot + 1, "host") == 0)
                r->where = HO_COST_HOST;
            else
                where_ok = false;
        }
        r->name = where_ok ? find(ho_cost_entries, ho_cost_nentries, entry) : NULL;
        if (r->name != NULL) {
            r->per_mib_ns = 0;
            if (v1 == NULL || extra != NULL || !parse_number(v1, &r->fixed_ns) ||
                (v2 != NULL && !parse_number(v2, &r->per_mib_ns))) {
                snprintf(msg, cap,
                         "%s: expected <fixed_ns> [<ns_per_MiB>], finite non-negative numbers",
                         name);
                return false;
            }
            return true;
        }
    }
    char names[900];
    expected_names(names, sizeof names);
    snprintf(msg, cap, "unknown row \"%s\": %s", name, names);
    return false;
}

bool ho_cost_file_read(const char *path, void (*fn)(void *ctx, const struct ho_cost_row *row),
                       void *ctx, char *err, size_t cap) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, cap, "%s: cannot read the file (%s)", path, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t linecap = 0;
    int lineno = 0;
    bool ok = true;
    while (ok && getline(&line, &linecap, f) >= 0) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash != NULL) *hash = '\0';
        struct ho_cost_row r = {.line = lineno};
        bool blank = false;
        char msg[1024];
        ok = read_line(line, &r, &blank, msg, sizeof msg);
        if (!ok)
            snprintf(err, cap, "%s line %d: %s", path, lineno, msg);
        else if (!blank)
            fn(ctx, &r);
    }
    if (ok && ferror(f)) {
        snprintf(err, cap, "%s: cannot read the file (%s)", path, strerror(errno));
        ok = false;
    }
    free(line);
    fclose(f);
    return ok;
}
