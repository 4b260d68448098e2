/* Profiles for `hostoff report`, the reading half: reports and traces told apart by their first
 * line, paired by process (rank and pid), kernel names carried over from the replayed trace, and
 * the profiles ordered and named; profile_derive.c computes what each one shows (see profile.h). */
#include "profile.h"

#include "cli.h"
#include "sim_costs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *prof_str(const struct profile *p, uint32_t idx) {
    if (!p->has_trace || idx == 0 || idx >= p->tr.nstrs) return "";
    return p->tr.strs[idx];
}

bool prof_parse_link(const char *text, struct prof_link *out) {
    struct cli_link l; /* the presets' one table (sim_costs.c) */
    if (!cli_link_parse(text, &l)) return false;
    out->given = true;
    out->h2d = l.h2d;
    out->d2h = l.d2h;
    out->duplex = l.h2d_duplex + l.d2h_duplex;
    return true;
}

static void profile_name(struct profile *p, const char *path) {
    const char *slash = strrchr(path, '/');
    snprintf(p->name, sizeof p->name, "%s", slash != NULL ? slash + 1 : path);
}

static uint64_t member(const struct json *o, const char *group, const char *key) {
    const struct json *g = group != NULL ? json_get(o, group) : o;
    uint64_t v = 0;
    if (g != NULL) json_get_u64(g, key, &v);
    return v;
}

static void copy_str(const struct json *o, const char *key, char *dst, size_t cap) {
    const struct json *v = json_get(o, key);
    if (v != NULL && v->type == JSON_STRING) snprintf(dst, cap, "%s", v->str);
}

static struct profile *find_or_add(struct profile **ps, size_t *n, size_t *cap, bool has_rank,
                                   long rank, bool has_pid, long pid, bool report) {
    /* The same process: same rank and pid, and the kind of file it does not have yet. */
    for (size_t i = 0; has_rank && has_pid && i < *n; i++) {
        struct profile *p = &(*ps)[i];
        if (p->has_rank && p->has_pid && p->rank == rank && p->pid == pid &&
            (report ? !p->has_report : !p->has_trace))
            return p;
    }
    if (*n == *cap) {
        size_t c2 = *cap ? *cap * 2 : 8;
        struct profile *q = realloc(*ps, c2 * sizeof *q);
        if (q == NULL) return NULL;
        *ps = q;
        *cap = c2;
    }
    struct profile *p = &(*ps)[(*n)++];
    memset(p, 0, sizeof *p);
    p->has_rank = has_rank;
    p->rank = rank;
    p->has_pid = has_pid;
    p->pid = pid;
    return p;
}

static int load_report(const char *path, const char *text, size_t len, struct profile **ps,
                       size_t *n, size_t *cap) {
    char err[256];
    struct json *o = json_parse(text, len, err, sizeof err);
    uint64_t version = 0;
    if (o == NULL || o->type != JSON_OBJECT || !json_get_u64(o, "hostoff_report", &version) ||
        version != 1) {
        cli_error("report: %s: not a hostoff report (version 1)%s%s", path, o == NULL ? ": " : "",
                  o == NULL ? err : "");
        json_free(o);
        return -1;
    }
    uint64_t rank = 0, pid = 0;
    bool has_rank = json_get_u64(o, "rank", &rank), has_pid = json_get_u64(o, "pid", &pid);
    struct profile *p = find_or_add(ps, n, cap, has_rank, (long)rank, has_pid, (long)pid, true);
    if (p == NULL) {
        json_free(o);
        cli_error("report: out of memory");
        return -1;
    }
    p->has_report = true;
    p->report_path = path;
    copy_str(o, "mode", p->mode, sizeof p->mode);
    copy_str(o, "backend", p->backend, sizeof p->backend);
    p->r_allocs = member(o, "counts", "allocs");
    p->r_launches = member(o, "counts", "launches");
    p->r_evictions = member(o, "counts", "evictions");
    p->r_restores = member(o, "counts", "restores");
    p->r_demand = member(o, "counts", "demand_restores");
    p->r_prefetches = member(o, "counts", "prefetches");
    p->r_cancelled_moves =
        member(o, "counts", "cancelled_evictions") + member(o, "counts", "cancelled_restores");
    p->r_cancelled_to_host = member(o, "bytes", "cancelled_to_host");
    p->r_cancelled_to_device = member(o, "bytes", "cancelled_to_device");
    p->r_to_host = member(o, "bytes", "to_host");
    p->r_to_device = member(o, "bytes", "to_device");
    p->r_peak_device = member(o, "bytes", "peak_device");
    p->r_peak_host = member(o, "bytes", "peak_host");
    p->r_allocated = member(o, "bytes", "allocated");
    p->r_stall_ns = member(o, "time_ns", "stall");
    const struct json *sites = json_get(o, "sites");
    if (sites != NULL && sites->type == JSON_OBJECT && sites->n > 0) {
        p->sites = calloc(sites->n, sizeof *p->sites);
        for (size_t i = 0; p->sites != NULL && i < sites->n; i++) {
            struct prof_site *s = &p->sites[p->nsites];
            const struct json *fr = json_get(&sites->items[i], "frames");
            snprintf(s->key, sizeof s->key, "%s", sites->keys[i]);
            size_t at = 0;
            for (size_t k = 0; fr != NULL && fr->type == JSON_ARRAY && k < fr->n; k++) {
                if (fr->items[k].type != JSON_STRING) continue;
                int w = snprintf(s->frames + at, sizeof s->frames - at, "%s%s", k ? " < " : "",
                                 fr->items[k].str);
                if (w < 0 || (size_t)w >= sizeof s->frames - at) break;
                at += (size_t)w;
            }
            p->nsites++;
        }
        prof_resolve_sites(p, sites);
    }
    const struct json *bufs = json_get(o, "buffers");
    if (bufs != NULL && bufs->type == JSON_ARRAY && bufs->n > 0) {
        p->bufs = calloc(bufs->n, sizeof *p->bufs);
        if (p->bufs == NULL) {
            json_free(o);
            cli_error("report: out of memory");
            return -1;
        }
        static const char *const kinds[] = {"device", "async",      "managed",
                                            "host",   "registered", "vmm"};
        for (size_t i = 0; i < bufs->n; i++) {
            const struct json *b = &bufs->items[i];
            struct prof_buf *pb = &p->bufs[p->nbufs];
            if (!json_get_u64(b, "id", &pb->id)) continue;
            json_get_u64(b, "bytes", &pb->bytes);
            json_get_u64(b, "uses", &pb->uses);
            const struct json *k = json_get(b, "kind");
            for (size_t j = 0; k != NULL && k->type == JSON_STRING && j < 6; j++)
                if (strcmp(k->str, kinds[j]) == 0) pb->kind = kinds[j];
            p->nbufs++;
        }
    }
    json_free(o);
    return 0;
}

static int load_trace(const char *path, struct profile **ps, size_t *n, size_t *cap) {
    struct trace t;
    char err[1024];
    if (trace_read(path, &t, err, sizeof err) != 0) {
        cli_error("report: %s", err);
        return -1;
    }
    struct profile *p = find_or_add(ps, n, cap, t.has_rank, t.rank, t.has_pid, t.pid, false);
    if (p == NULL) {
        trace_free(&t);
        cli_error("report: out of memory");
        return -1;
    }
    p->has_trace = true;
    p->trace_path = path;
    p->tr = t;
    if (t.cut_at > 0)
        cli_error("report: %s: line %ld was cut short (the process was killed while writing "
                  "it?); shown up to line %ld, the last whole one",
                  path, t.cut_at, t.cut_at - 1);
    return 0;
}

static int cmp_profile(const void *a, const void *b) {
    const struct profile *x = a, *y = b;
    if (x->has_rank != y->has_rank) return x->has_rank ? -1 : 1;
    if (x->has_rank && x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->has_pid && y->has_pid && x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    return 0;
}

/* The replayed trace's kernel names on the replay's launches, in order (the replayer issues
 * one launch per launch line). */
static int rename_kernels(struct profile *ps, size_t n, const char *names_from) {
    struct trace nt;
    char err[1024];
    if (trace_read(names_from, &nt, err, sizeof err) != 0) {
        cli_error("report: %s", err);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct trace *t = &ps[i].tr;
        if (!ps[i].has_trace || nt.nstrs == 0) continue;
        if (t->launches != nt.launches) {
            cli_error("report: %s has %zu launches, %s %zu: not the trace that was replayed; "
                      "kernel names kept",
                      names_from, nt.launches, ps[i].trace_path, t->launches);
            continue;
        }
        size_t base = t->nstrs;
        char **strs = realloc(t->strs, (base + nt.nstrs) * sizeof *strs);
        if (strs == NULL) {
            rc = -1;
            break;
        }
        t->strs = strs;
        for (size_t k = 0; k < nt.nstrs; k++) {
            t->strs[base + k] = strdup(nt.strs[k]);
            if (t->strs[base + k] == NULL)
                rc = -1;
            else
                t->nstrs++;
        }
        if (rc != 0) break;
        size_t j = 0;
        for (size_t k = 0; k < t->n; k++) {
            if (t->ev[k].kind != TEV_LAUNCH) continue;
            while (j < nt.n && nt.ev[j].kind != TEV_LAUNCH)
                j++;
            if (j < nt.n) t->ev[k].str = (uint32_t)(base + nt.ev[j++].str);
        }
    }
    trace_free(&nt);
    if (rc != 0) cli_error("report: out of memory");
    return rc;
}

int prof_load(char *const *paths, size_t npaths, const struct prof_link *link,
              const char *names_from, struct profile **out, size_t *nout) {
    struct profile *ps = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (size_t i = 0; i < npaths && rc == 0; i++) {
        FILE *f = fopen(paths[i], "rb");
        int open_errno = errno;
        char head[512] = "";
        size_t got = f != NULL ? fread(head, 1, sizeof head - 1, f) : 0;
        if (f != NULL) fclose(f);
        head[got] = '\0';
        if (f == NULL) {
            cli_error("report: cannot open %s: %s", paths[i], strerror(open_errno));
            rc = -1;
        } else if (got == 0) {
            cli_error("report: %s is empty: the process wrote nothing to it (it ended, or was "
                      "killed, before its first line was written)",
                      paths[i]);
            rc = -1;
        } else if (strstr(head, "\"hostoff_report\"") != NULL) {
            size_t len = 0;
            char *text = cli_read_file(paths[i], &len);
            rc = text != NULL ? load_report(paths[i], text, len, &ps, &n, &cap) : -1;
            if (text == NULL) cli_error("report: cannot read %s", paths[i]);
            free(text);
        } else if (strstr(head, "\"hostoff_trace\"") != NULL) {
            rc = load_trace(paths[i], &ps, &n, &cap);
        } else {
            cli_error("report: %s is neither a hostoff report (HOSTOFF_REPORT) nor a trace "
                      "(HOSTOFF_TRACE)",
                      paths[i]);
            rc = -1;
        }
        if (rc == 0 && n > 0 && ps[n - 1].name[0] == '\0') profile_name(&ps[n - 1], paths[i]);
    }
    if (rc == 0 && names_from != NULL) rc = rename_kernels(ps, n, names_from);
    if (rc == 0) {
        /* Stable order: ranks, then pids; insertion sort keeps the inputs' order otherwise. */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && cmp_profile(&ps[j - 1], &ps[j]) > 0; j--) {
                struct profile tmp = ps[j];
                ps[j] = ps[j - 1];
                ps[j - 1] = tmp;
            }
        for (size_t i = 0; i < n; i++) {
            struct profile *p = &ps[i];
            bool same_rank = false;
            for (size_t j = 0; j < n; j++)
                same_rank |= j != i && ps[j].has_rank && p->has_rank && ps[j].rank == p->rank;
            if (p->has_rank && (p->has_report || p->tr.has_rank)) {
                if (same_rank && p->has_pid)
                    snprintf(p->name, sizeof p->name, "rank %ld (pid %ld)", p->rank, p->pid);
                else
                    snprintf(p->name, sizeof p->name, "rank %ld", p->rank);
            }
            if (!prof_derive(p, link)) {
                cli_error("report: out of memory");
                rc = -1;
                break;
            }
        }
    }
    if (rc != 0) {
        prof_free(ps, n);
        return -1;
    }
    *out = ps;
    *nout = n;
    return 0;
}

const struct prof_site *prof_site_of(const struct profile *p, const char *key) {
    for (size_t i = 0; key != NULL && i < p->nsites; i++)
        if (strcmp(p->sites[i].key, key) == 0) return &p->sites[i];
    return NULL;
}

void prof_free(struct profile *ps, size_t n) {
    for (size_t i = 0; i < n; i++) {
        struct profile *p = &ps[i];
        if (p->has_trace) trace_free(&p->tr);
        free(p->pts);
        free(p->xf);
        free(p->st);
        free(p->bufs);
        free(p->sites);
    }
    free(ps);
}
