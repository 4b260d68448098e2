#include "report.h"
#include "site.h"

#include "log.h"
#include "outfile.h"
#include "registry.h"
#include "stats.h"
#include "track.h"
#include "engine.h"
#include "json_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ho_stats ho_stats;

void ho_stats_reset(void) {
#define HO_ZERO(group, key) atomic_store(&ho_stats.group##_##key, 0);
    HO_COUNTERS(HO_ZERO)
#undef HO_ZERO
    atomic_store(&ho_stats.proc_lookups, 0);
}

long ho_rank(void) {
    static const char *const vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v == NULL || *v == '\0') continue;
        char *end = NULL;
        long r = strtol(v, &end, 10);
        if (*end == '\0' && r >= 0) return r;
    }
    return 0;
}

int ho_expand_path(const char *pattern, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        char piece[32];
        const char *add = piece;
        if (p[0] == '%' && p[1] == 'p') {
            snprintf(piece, sizeof piece, "%ld", (long)getpid());
            p++;
        } else if (p[0] == '%' && p[1] == 'r') {
            snprintf(piece, sizeof piece, "%ld", ho_rank());
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            add = "%";
            p++;
        } else {
            piece[0] = *p;
            piece[1] = '\0';
        }
        size_t len = strlen(add);
        if (n + len + 1 > cap) return -1;
        memcpy(out + n, add, len);
        n += len;
    }
    out[n] = '\0';
    return 0;
}

/* The allocation sites the listed buffers name, with their totals (at most MAX_SITES; more are
 * only named on their buffers). */
#define MAX_SITES 256
struct site_total {
    uint64_t site, buffers, bytes;
};

struct buffers_ctx {
    FILE *f;
    bool first;
    struct site_total sites[MAX_SITES];
    size_t nsites;
};

static void count_site(struct buffers_ctx *c, const struct ho_buffer *b) {
    size_t i = 0;
    while (i < c->nsites && c->sites[i].site != b->site)
        i++;
    if (i == c->nsites) {
        if (c->nsites == MAX_SITES) return;
        c->sites[c->nsites++] = (struct site_total){b->site, 0, 0};
    }
    c->sites[i].buffers++;
    c->sites[i].bytes += b->size;
}

static void write_buffer(const struct ho_buffer *b, void *arg) {
    struct buffers_ctx *c = arg;
    fprintf(c->f,
            "%s\n    {\"id\": %llu, \"kind\": \"%s\", \"bytes\": %llu, \"device\": %d, "
            "\"uses\": %llu, \"live\": %s, \"pinned\": %s",
            c->first ? "" : ",", (unsigned long long)b->id, ho_buffer_kind_name(b->kind),
            (unsigned long long)b->size, b->device, (unsigned long long)ho_track_uses(b),
            b->live ? "true" : "false", b->pinned ? "true" : "false");
    if (b->site != 0) {
        fprintf(c->f, ", \"site\": \"%016llx\"", (unsigned long long)b->site);
        count_site(c, b);
    }
    fprintf(c->f, "}");
    c->first = false;
}

static void write_sites(FILE *f, const struct buffers_ctx *c) {
    fprintf(f, ",\n  \"sites\": {");
    for (size_t i = 0; i < c->nsites; i++) {
        uintptr_t pc[HO_SITE_FRAMES];
        size_t n = ho_site_frames(c->sites[i].site, pc, HO_SITE_FRAMES);
        fprintf(f, "%s\n    \"%016llx\": {\"buffers\": %llu, \"bytes\": %llu, \"frames\": [",
                i ? "," : "", (unsigned long long)c->sites[i].site,
                (unsigned long long)c->sites[i].buffers, (unsigned long long)c->sites[i].bytes);
        for (size_t k = 0; k < n; k++) {
            char text[512];
            ho_site_describe(pc[k], text, sizeof text);
            fprintf(f, "%s\"", k ? ", " : "");
            ho_json_write_text(f, text); /* file and symbol names */
            fprintf(f, "\"");
        }
        /* Each frame's module and addresses, for hostoff report to resolve to file:line. */
        fprintf(f, "], \"at\": [");
        for (size_t k = 0; k < n; k++) {
            char mod[1024];
            uintptr_t base = 0;
            if (!ho_site_locate(pc[k], mod, sizeof mod, &base)) mod[0] = '\0';
            fprintf(f, "%s[\"", k ? ", " : "");
            ho_json_write_text(f, mod);
            fprintf(f, "\", \"0x%llx\", \"0x%llx\"]", (unsigned long long)pc[k],
                    (unsigned long long)base);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "%s}", c->nsites ? "\n  " : "");
}

static void write_group(FILE *f, const char *group, bool *first_group) {
    fprintf(f, "%s\n  \"%s\": {", *first_group ? "" : ",", group);
    bool first = true;
#define HO_EMIT(g, key)                                                                            \
    if (strcmp(#g, group) == 0) {                                                                  \
        fprintf(f, "%s\"%s\": %llu", first ? "" : ", ", #key,                                      \
                (unsigned long long)atomic_load(&ho_stats.g##_##key));                             \
        first = false;                                                                             \
    }
    HO_COUNTERS(HO_EMIT)
#undef HO_EMIT
    fprintf(f, "}");
    *first_group = false;
}

int ho_report_write(const char *pattern, const char *mode, const struct ho_report_interpose *ip) {
    char path[HO_OUTFILE_PATH];
    if (ho_expand_path(pattern, path, sizeof path) != 0) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_REPORT=%s: path too long; no report written", pattern);
        return -1;
    }
    /* Large: not on the stack of an exiting thread. One report at a time (exit, or a test). */
    static struct ho_outfile out;
    const char *why = NULL;
    FILE *f = NULL;
    if (ho_outfile_open(&out, path, &why) != 0 || (f = fdopen(out.fd, "w")) == NULL) {
        if (why == NULL) why = "cannot be written";
        ho_log(HO_LOG_ERROR, "HOSTOFF_REPORT=%s: %s %s%s%s; no report written", pattern, path, why,
               out.err ? ": " : "", out.err ? strerror(out.err) : "");
        ho_outfile_abort(&out);
        return -1;
    }
    fprintf(f,
            "{\n  \"hostoff_report\": 1,\n  \"mode\": \"%s\",\n  \"backend\": \"%s\",\n"
            "  \"pid\": %ld,\n  \"rank\": %ld,",
            mode, ho_engine_backend_name(), (long)getpid(), ho_rank());
    /* The smallest buffer the engine takes, and where that figure came from. */
    fprintf(f, "\n  \"min_bytes\": %llu,\n  \"min_bytes_from\": \"%s\",",
            (unsigned long long)ho_options()->min_bytes,
            ho_options()->min_bytes_auto ? "auto" : "HOSTOFF_MIN_BYTES");
    if (ho_options()->run_id != NULL) {
        fprintf(f, "\n  \"run_id\": \"");
        ho_json_write_text(f, ho_options()->run_id);
        fprintf(f, "\",");
    }
    bool first_group = true;
    fprintf(f, "%s", "");
    write_group(f, "counts", &first_group);
    first_group = false;
    write_group(f, "bytes", &first_group);
    write_group(f, "time_ns", &first_group);
    fprintf(f, ",\n  \"interpose\": {\"proc_lookups\": %llu, \"hooked\": [",
            (unsigned long long)ip->proc_lookups);
    for (size_t i = 0; i < ip->nhooked; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", ip->hooked[i]);
    fprintf(f, "]},\n  \"buffers\": [");
    static struct buffers_ctx c; /* large: not on the stack of an exiting thread */
    c.f = f;
    c.first = true;
    c.nsites = 0;
    ho_registry_foreach(write_buffer, &c);
    fprintf(f, "\n  ]");
    write_sites(f, &c);
    fprintf(f, "\n}\n");
    bool written = fflush(f) == 0 && !ferror(f);
    int err = errno;
    out.fd = -1; /* fclose closes it */
    if (fclose(f) != 0 && written) {
        written = false;
        err = errno;
    }
    if (!written) {
        ho_outfile_abort(&out);
        ho_log(HO_LOG_ERROR, "HOSTOFF_REPORT=%s: cannot write %s: %s", pattern, path,
               strerror(err));
        return -1;
    }
    if (ho_outfile_commit(&out, &why) != 0) {
        ho_log(HO_LOG_ERROR, "HOSTOFF_REPORT=%s: %s %s%s%s", pattern, path, why,
               out.err ? ": " : "", out.err ? strerror(out.err) : "");
        return -1;
    }
    return 0;
}
