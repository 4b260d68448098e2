/* Profiles for `hostoff report`: reading reports and traces, pairing them by process, and deriving
 * the timeline, transfers, stalls, per-buffer costs and the verdict (see profile.h). */
#include "profile.h"

#include "cli.h"
#include "idmap.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------ formatting */

void prof_bytes(uint64_t bytes, char *buf, size_t cap) {
    cli_format_bytes(bytes, buf, cap);
}

void prof_time(uint64_t ns, char *buf, size_t cap) {
    double v = (double)ns;
    if (v >= 1e9)
        snprintf(buf, cap, "%.3f s", v / 1e9);
    else if (v >= 1e6)
        snprintf(buf, cap, "%.1f ms", v / 1e6);
    else if (v >= 1e3)
        snprintf(buf, cap, "%.0f us", v / 1e3);
    else
        snprintf(buf, cap, "%.0f ns", v);
}

const char *prof_str(const struct profile *p, uint32_t idx) {
    if (!p->has_trace || idx == 0 || idx >= p->tr.nstrs) return "";
    return p->tr.strs[idx];
}

bool prof_parse_link(const char *text, struct prof_link *out) {
    uint64_t gbps = 0;
    out->given = true;
    if (strcmp(text, "pcie5") == 0) {
        out->h2d = out->d2h = 55;
        out->duplex = 88;
    } else if (strcmp(text, "c2c") == 0) {
        out->h2d = out->d2h = 345;
        out->duplex = 690;
    } else if (cli_parse_uint(text, false, &gbps) && gbps > 0 && gbps < 1000000) {
        out->h2d = out->d2h = (double)gbps;
        out->duplex = 1.6 * (double)gbps;
    } else {
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------------- reading */

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
    return 0;
}

/* ------------------------------------------------------------------------------ deriving */

enum { ST_NONE, ST_RES, ST_INF_OUT, ST_INF_IN, ST_HOST, ST_GONE };
enum { CH_ALLOC, CH_FREE, CH_START, CH_END };

struct change {
    uint64_t id, t, seq, bytes;
    uint8_t what, kind; /* CH_*, and a move's tmove_kind */
};

/* Byte counts change in modular (unsigned) arithmetic: a buffer of 2^63 bytes or more must not
 * overflow a signed sum. Every total at a point in time is a sum of live buffers, so it is exact
 * whenever it fits in 64 bits. */
struct delta {
    uint64_t t, seq;
    uint64_t res, inf, host;
};

/* a + b, at most UINT64_MAX: times and totals from a trace are the trace's to choose. */
static uint64_t sat_add(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int cmp_change(const void *a, const void *b) {
    const struct change *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_delta(const void *a, const void *b) {
    const struct delta *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void add_to(struct delta *d, int state, uint64_t bytes) {
    switch (state) {
    case ST_RES:
        d->res += bytes;
        break;
    case ST_INF_OUT:
    case ST_INF_IN:
        d->inf += bytes;
        break;
    case ST_HOST:
        d->host += bytes;
        break;
    default:
        break;
    }
}

/* Bytes resident, in flight and on the host over time: each buffer's states from its allocation,
 * moves (cancelled ones change nothing) and free, summed. */
static bool timeline(struct profile *p) {
    const struct trace *t = &p->tr;
    size_t cap = 0;
    for (size_t i = 0; i < t->n; i++)
        cap += t->ev[i].kind == TEV_ALLOC || t->ev[i].kind == TEV_FREE;
    cap += 2 * t->nmoves;
    struct change *ch = calloc(cap + 1, sizeof *ch);
    struct delta *dl = calloc(cap + 1, sizeof *dl);
    if (ch == NULL || dl == NULL) {
        free(ch);
        free(dl);
        return false;
    }
    size_t nch = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        /* An allocation holds memory from when the call returned (it may have waited for
         * evictions to make room first); a free lets it go when called. */
        if (e->kind == TEV_ALLOC)
            ch[nch++] = (struct change){
                e->id, sat_add(e->t, e->d), 2 * (uint64_t)e->line, e->bytes, CH_ALLOC, 0};
        else if (e->kind == TEV_FREE)
            ch[nch++] = (struct change){e->id, e->t, 2 * (uint64_t)e->line, 0, CH_FREE, 0};
    }
    for (size_t i = 0; i < t->nmoves; i++) {
        const struct tmove *m = &t->moves[i];
        if (m->cancelled) continue;
        ch[nch++] = (struct change){m->id, m->t, 2 * (uint64_t)m->line, 0, CH_START, m->kind};
        ch[nch++] = (struct change){
            m->id, sat_add(m->t, m->ns), 2 * (uint64_t)m->line + 1, 0, CH_END, m->kind};
    }
    qsort(ch, nch, sizeof *ch, cmp_change);
    size_t ndl = 0;
    for (size_t i = 0; i < nch;) {
        uint64_t id = ch[i].id, bytes = 0;
        int state = ST_NONE;
        for (; i < nch && ch[i].id == id; i++) {
            const struct change *c = &ch[i];
            int next = state;
            switch (c->what) {
            case CH_ALLOC:
                if (state == ST_NONE || state == ST_GONE) {
                    next = ST_RES;
                    bytes = c->bytes;
                }
                break;
            case CH_FREE:
                if (state != ST_NONE && state != ST_GONE) next = ST_GONE;
                break;
            case CH_START:
                if (c->kind == TMOVE_EVICT && state == ST_RES) next = ST_INF_OUT;
                if (c->kind != TMOVE_EVICT && state == ST_HOST) next = ST_INF_IN;
                break;
            case CH_END:
                if (c->kind == TMOVE_EVICT && state == ST_INF_OUT) next = ST_HOST;
                if (c->kind != TMOVE_EVICT && state == ST_INF_IN) next = ST_RES;
                break;
            }
            if (next == state) continue;
            struct delta *d = &dl[ndl++];
            *d = (struct delta){.t = c->t, .seq = c->seq};
            add_to(d, state, 0 - bytes); /* modular: adding it takes bytes away */
            add_to(d, next, bytes);
            state = next;
        }
    }
    free(ch);
    qsort(dl, ndl, sizeof *dl, cmp_delta);
    p->pts = calloc(ndl + 1, sizeof *p->pts);
    if (p->pts == NULL) {
        free(dl);
        return false;
    }
    uint64_t res = 0, inf = 0, host = 0;
    for (size_t i = 0; i < ndl; i++) {
        res += dl[i].res;
        inf += dl[i].inf;
        host += dl[i].host;
        if (i + 1 < ndl && dl[i + 1].t == dl[i].t) continue;
        struct prof_point *pt = &p->pts[p->npts++];
        pt->t = dl[i].t;
        pt->resident = res;
        pt->inflight = inf;
        pt->host = host;
        uint64_t dev = sat_add(pt->resident, pt->inflight), all = sat_add(dev, pt->host);
        if (dev > p->device_peak) p->device_peak = dev;
        if (all > p->live_peak) p->live_peak = all;
        if (pt->host > p->host_peak) p->host_peak = pt->host;
    }
    free(dl);
    return true;
}

static int cmp_xfer(const void *a, const void *b) {
    const struct prof_xfer *x = a, *y = b;
    bool xo = x->kind == TMOVE_EVICT, yo = y->kind == TMOVE_EVICT;
    if (xo != yo) return xo ? -1 : 1;
    if (x->seen != y->seen) return x->seen < y->seen ? -1 : 1;
    return x->submit < y->submit ? -1 : x->submit > y->submit;
}

/* Copies over the link. A move's line gives when it was submitted and when its completion was
 * seen, which can be well after the copy finished (completion is noticed at the next call into
 * the library). Copies of one direction run one after another on the engine's copy stream, so
 * each is placed as early as its submission and the copy before it allow, at the link's peak
 * rate, and never after its completion was seen. */
static bool transfers(struct profile *p) {
    const struct trace *t = &p->tr;
    p->xf = calloc(t->nmoves + 1, sizeof *p->xf);
    if (p->xf == NULL) return false;
    for (size_t i = 0; i < t->nmoves; i++) {
        const struct tmove *m = &t->moves[i];
        p->xf[p->nxf++] = (struct prof_xfer){.submit = m->t,
                                             .seen = sat_add(m->t, m->ns),
                                             .bytes = m->bytes,
                                             .id = m->id,
                                             .kind = m->kind,
                                             .cancelled = m->cancelled};
    }
    qsort(p->xf, p->nxf, sizeof *p->xf, cmp_xfer);
    uint64_t prev_end[2] = {0, 0};
    for (size_t i = 0; i < p->nxf; i++) {
        struct prof_xfer *x = &p->xf[i];
        int dir = x->kind == TMOVE_EVICT ? 0 : 1;
        double gbps = dir == 0 ? p->d2h_gbps : p->h2d_gbps;
        double q = gbps > 0 ? (double)x->bytes / gbps : 0; /* rates are finite, above 0 */
        uint64_t ns = q < 1.8e19 ? (uint64_t)q : UINT64_MAX;
        x->start = x->submit > prev_end[dir] ? x->submit : prev_end[dir];
        if (x->start > x->seen) x->start = x->seen;
        uint64_t end = sat_add(x->start, ns);
        x->end = end < x->seen ? end : x->seen;
        prev_end[dir] = x->end;
    }
    return true;
}

static bool uses_id(const struct trace *t, const struct tev *e, uint64_t id) {
    for (uint32_t k = 0; k < e->nuse; k++)
        if (t->uses[e->use_at + k] == id) return true;
    return false;
}

/* Stalls, and who waited: the stall's line is written while the waiting call is being prepared,
 * so the waiter is the next launch (or copy) that uses the buffer, for a restore; else the next
 * launch, copy or allocation (an allocation or restore that needed room). */
static bool stalls(struct profile *p) {
    const struct trace *t = &p->tr;
    p->st = calloc(t->nstalls + 1, sizeof *p->st);
    if (p->st == NULL) return false;
    for (size_t i = 0; i < t->nstalls; i++) {
        const struct tstall *s = &t->stalls[i];
        struct prof_stall *o = &p->st[p->nst++];
        *o = (struct prof_stall){
            .t = s->t, .ns = s->ns, .id = s->id, .why = s->why, .what = "unknown"};
        size_t lo = 0, hi = t->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (t->ev[mid].line < s->line)
                lo = mid + 1;
            else
                hi = mid;
        }
        const struct tev *first = NULL, *match = NULL;
        for (size_t k = lo; k < t->n && k < lo + 512 && match == NULL; k++) {
            const struct tev *e = &t->ev[k];
            bool call = e->kind == TEV_LAUNCH || e->kind == TEV_COPY || e->kind == TEV_ALLOC;
            if (call && first == NULL) first = e;
            if (s->why == TSTALL_ROOM) {
                if (first != NULL) break;
            } else if ((e->kind == TEV_LAUNCH || e->kind == TEV_COPY) && uses_id(t, e, s->id)) {
                match = e;
            }
        }
        const struct tev *w = match != NULL ? match : first;
        if (w == NULL) continue;
        o->s = w->has_s ? w->s : 0;
        o->what = w->kind == TEV_LAUNCH ? "kernel" : w->kind == TEV_COPY ? "copy" : "allocation";
        if (w->kind == TEV_LAUNCH) o->who = w->str;
    }
    return true;
}

static struct prof_buf *buf_of(struct profile *p, struct idmap *ix, uint64_t id, size_t *capbufs) {
    uint64_t at;
    if (idmap_get(ix, id, &at)) return &p->bufs[at];
    if (p->nbufs == *capbufs) {
        size_t c2 = *capbufs ? *capbufs * 2 : 256;
        struct prof_buf *q = realloc(p->bufs, c2 * sizeof *q);
        if (q == NULL) return NULL;
        p->bufs = q;
        *capbufs = c2;
    }
    struct prof_buf *b = &p->bufs[p->nbufs];
    memset(b, 0, sizeof *b);
    b->id = id;
    if (!idmap_put(ix, id, p->nbufs)) return NULL;
    p->nbufs++;
    return b;
}

struct waiter {
    uint64_t id;
    uint32_t who;
};

static int cmp_waiter(const void *a, const void *b) {
    const struct waiter *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x->who < y->who ? -1 : x->who > y->who;
}

static int cmp_moved(const void *a, const void *b) {
    const struct prof_buf *x = a, *y = b;
    uint64_t mx = x->to_host + x->to_device, my = y->to_host + y->to_device;
    if (mx != my) return mx > my ? -1 : 1;
    if (x->stall_ns != y->stall_ns) return x->stall_ns > y->stall_ns ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Each buffer's moves, stalls, site and the kernels that waited for it. */
static bool per_buffer(struct profile *p) {
    struct idmap ix = {0};
    size_t capbufs = p->nbufs;
    for (size_t i = 0; i < p->nbufs; i++)
        if (!idmap_put(&ix, p->bufs[i].id, i)) goto oom;
    if (p->has_trace) {
        const struct trace *t = &p->tr;
        for (size_t i = 0; i < t->n; i++) {
            const struct tev *e = &t->ev[i];
            if (e->kind != TEV_ALLOC) continue;
            struct prof_buf *b = buf_of(p, &ix, e->id, &capbufs);
            if (b == NULL) goto oom;
            if (b->bytes == 0) b->bytes = e->bytes;
            if (e->str != 0) b->site = e->str;
        }
        for (size_t i = 0; i < t->nmoves; i++) {
            const struct tmove *m = &t->moves[i];
            struct prof_buf *b = buf_of(p, &ix, m->id, &capbufs);
            if (b == NULL) goto oom;
            if (m->kind == TMOVE_EVICT)
                b->to_host = sat_add(b->to_host, m->bytes);
            else
                b->to_device = sat_add(b->to_device, m->bytes);
            if (m->cancelled) continue;
            if (m->kind == TMOVE_EVICT)
                b->evictions++;
            else if (m->kind == TMOVE_RESTORE)
                b->restores++;
            else
                b->prefetches++;
        }
        struct waiter *w = calloc(p->nst + 1, sizeof *w);
        if (w == NULL) goto oom;
        size_t nw = 0;
        for (size_t i = 0; i < p->nst; i++) {
            const struct prof_stall *s = &p->st[i];
            struct prof_buf *b = buf_of(p, &ix, s->id, &capbufs);
            if (b == NULL) {
                free(w);
                goto oom;
            }
            b->stall_ns = sat_add(b->stall_ns, s->ns);
            if (s->why == TSTALL_LATE) b->late++;
            if (s->who != 0) w[nw++] = (struct waiter){s->id, s->who};
        }
        qsort(w, nw, sizeof *w, cmp_waiter);
        for (size_t i = 0; i < nw;) {
            size_t j = i;
            while (j < nw && w[j].id == w[i].id && w[j].who == w[i].who)
                j++;
            uint64_t at;
            if (idmap_get(&ix, w[i].id, &at)) {
                struct prof_buf *b = &p->bufs[at];
                uint32_t count = (uint32_t)(j - i);
                for (int k = 0; k < 3; k++) {
                    if (count <= b->nwaits[k]) continue;
                    for (int m = 2; m > k; m--) {
                        b->waiter[m] = b->waiter[m - 1];
                        b->nwaits[m] = b->nwaits[m - 1];
                    }
                    b->waiter[k] = w[i].who;
                    b->nwaits[k] = count;
                    break;
                }
            }
            i = j;
        }
        free(w);
    }
    idmap_free(&ix);
    if (p->nbufs > 1) qsort(p->bufs, p->nbufs, sizeof *p->bufs, cmp_moved);
    return true;
oom:
    idmap_free(&ix);
    return false;
}

static bool derive(struct profile *p, const struct prof_link *link) {
    const struct trace *t = &p->tr;
    p->h2d_gbps = 55;
    p->d2h_gbps = 55;
    p->duplex_gbps = 88;
    if (p->has_trace) {
        snprintf(p->device, sizeof p->device, "%s", t->device_name);
        snprintf(p->policy, sizeof p->policy, "%s", t->policy);
        if (t->has_budget) {
            p->has_budget = true;
            p->budget = t->budget_bytes;
        }
        if (t->link_h2d > 0) p->h2d_gbps = t->link_h2d;
        if (t->link_d2h > 0) p->d2h_gbps = t->link_d2h;
        if (t->link_duplex > 0) p->duplex_gbps = t->link_duplex;
    }
    if (link != NULL && link->given) {
        p->h2d_gbps = link->h2d;
        p->d2h_gbps = link->d2h;
        p->duplex_gbps = link->duplex;
    }
    if (p->has_trace) {
        if (!timeline(p) || !transfers(p) || !stalls(p)) return false;
        for (size_t i = 0; i < t->n; i++) {
            const struct tev *e = &t->ev[i];
            /* A call ends after its duration (an allocation may wait), a kernel after its own. */
            uint64_t end = sat_add(e->t, e->d);
            if (e->kind == TEV_LAUNCH && sat_add(e->t, e->ns) > end) end = sat_add(e->t, e->ns);
            if (end > p->t_end) p->t_end = end;
            if (e->kind == TEV_LAUNCH) p->kernel_ns = sat_add(p->kernel_ns, e->ns);
        }
        for (size_t i = 0; i < t->nmoves; i++)
            if (sat_add(t->moves[i].t, t->moves[i].ns) > p->t_end)
                p->t_end = sat_add(t->moves[i].t, t->moves[i].ns);
        for (size_t i = 0; i < t->nstalls; i++) {
            const struct tstall *s = &t->stalls[i];
            if (sat_add(s->t, s->ns) > p->t_end) p->t_end = sat_add(s->t, s->ns);
            p->stall_why[s->why] = sat_add(p->stall_why[s->why], s->ns);
            p->stall_ns = sat_add(p->stall_ns, s->ns);
            if (s->why == TSTALL_LATE) p->late++;
        }
        if (t->peak_bytes > p->live_peak) p->live_peak = t->peak_bytes;
        for (size_t i = 0; i < t->nmoves; i++) {
            const struct tmove *m = &t->moves[i];
            if (m->cancelled) continue;
            if (m->kind == TMOVE_EVICT) {
                p->moved_to_host = sat_add(p->moved_to_host, m->bytes);
                p->evictions++;
            } else {
                p->moved_to_device = sat_add(p->moved_to_device, m->bytes);
                if (m->kind == TMOVE_RESTORE)
                    p->demand++;
                else
                    p->prefetches++;
            }
        }
    }
    if (p->has_report) {
        p->moved_to_host = p->r_to_host;
        p->moved_to_device = p->r_to_device;
        p->stall_ns = p->r_stall_ns;
        p->demand = p->r_demand;
        p->prefetches = p->r_prefetches;
        p->evictions = p->r_evictions;
        if (!p->has_trace) p->device_peak = p->r_peak_device;
    }
    if (p->mode[0] == '\0' && p->has_trace) snprintf(p->mode, sizeof p->mode, "%s", t->mode);
    return per_buffer(p);
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
        char head[512] = "";
        size_t got = f != NULL ? fread(head, 1, sizeof head - 1, f) : 0;
        if (f != NULL) fclose(f);
        head[got] = '\0';
        if (f == NULL) {
            cli_error("report: cannot open %s", paths[i]);
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
            if (!derive(p, link)) {
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

/* ------------------------------------------------------------------------------- verdict */

struct sb {
    char *buf;
    size_t cap, n;
};

__attribute__((format(printf, 2, 3))) static void sb_add(struct sb *s, const char *fmt, ...) {
    if (s->n >= s->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(s->buf + s->n, s->cap - s->n, fmt, ap);
    va_end(ap);
    if (k > 0) s->n += (size_t)k < s->cap - s->n ? (size_t)k : s->cap - s->n - 1;
}

static double pct(uint64_t part, uint64_t whole) {
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0;
}

/* How busy the link was: bytes moved against what the link could have moved in the run. */
static double link_busy(const struct profile *p) {
    if (!p->has_trace || p->t_end == 0) return 0;
    double cap_out = p->d2h_gbps * (double)p->t_end, cap_in = p->h2d_gbps * (double)p->t_end;
    double a = cap_out > 0 ? (double)p->moved_to_host / cap_out : 0;
    double b = cap_in > 0 ? (double)p->moved_to_device / cap_in : 0;
    return 100.0 * (a > b ? a : b);
}

void prof_verdict(const struct profile *p, char *buf, size_t cap) {
    struct sb s = {buf, cap, 0};
    buf[0] = '\0';
    char a[32], b[32], c[32], d[32];
    /* "Rank 0 ran", from the name "rank 0". */
    if (p->has_rank && strncmp(p->name, "rank ", 5) == 0)
        sb_add(&s, "Rank %s ran", p->name + 5);
    else
        sb_add(&s, "The job ran");
    if (p->has_trace) {
        prof_time(p->t_end, a, sizeof a);
        sb_add(&s, " %s%s on %s", a,
               strcmp(p->tr.clock, "simcuda") == 0 ? " of simulated time" : "", p->device);
    }
    if (p->has_budget) {
        prof_bytes(p->budget, b, sizeof b);
        sb_add(&s, " under a budget of %s", b);
    } else if (p->has_trace && strcmp(p->mode, "offload") == 0) {
        sb_add(&s, " with no budget");
    } else if (p->mode[0] != '\0') {
        sb_add(&s, " in %s mode", p->mode);
    }
    if (p->policy[0] != '\0') sb_add(&s, " (policy %s)", p->policy);
    sb_add(&s, ". ");
    if (p->has_trace && p->live_peak > 0) {
        prof_bytes(p->live_peak, a, sizeof a);
        prof_bytes(p->device_peak, b, sizeof b);
        uint64_t saved = p->live_peak > p->device_peak ? p->live_peak - p->device_peak : 0;
        prof_bytes(saved, c, sizeof c);
        sb_add(&s,
               "Without offload its buffers would have needed %s of device memory at peak; the "
               "device held at most %s: %s (%.0f%%) saved. ",
               a, b, c, pct(saved, p->live_peak));
    } else if (p->has_report) {
        prof_bytes(p->r_peak_device, a, sizeof a);
        prof_bytes(p->r_peak_host, b, sizeof b);
        sb_add(&s, "The device held at most %s; up to %s of buffers were in host memory at once. ",
               a, b);
    }
    if (p->moved_to_host + p->moved_to_device == 0) {
        sb_add(&s, "Nothing moved between the device and host memory.");
        return;
    }
    prof_bytes(p->moved_to_host, a, sizeof a);
    prof_bytes(p->moved_to_device, b, sizeof b);
    sb_add(&s,
           "The engine moved %s to host memory and %s back (%llu evictions; %llu restores on "
           "demand, %llu prefetches)",
           a, b, (unsigned long long)p->evictions, (unsigned long long)p->demand,
           (unsigned long long)p->prefetches);
    if (p->has_trace) sb_add(&s, ", using the link %.0f%% of the time", link_busy(p));
    sb_add(&s, ". ");
    prof_time(p->stall_ns, a, sizeof a);
    if (p->has_trace && p->t_end > 0) {
        sb_add(&s, "The application waited %s for moves, %.0f%% of the run", a,
               pct(p->stall_ns, p->t_end));
        prof_time(p->stall_why[TSTALL_DEMAND], b, sizeof b);
        prof_time(p->stall_why[TSTALL_LATE], c, sizeof c);
        prof_time(p->stall_why[TSTALL_ROOM], d, sizeof d);
        sb_add(&s, ": %s for restores on demand, ", b);
        if (p->prefetches > 0)
            sb_add(&s, "%s for %llu prefetches (of %llu) that landed late, ", c,
                   (unsigned long long)p->late, (unsigned long long)p->prefetches);
        sb_add(&s, "%s for evictions to make room.", d);
    } else {
        sb_add(&s, "The application waited %s for moves.", a);
    }
}

size_t prof_suggest(const struct profile *p, char out[][512], size_t cap) {
    size_t n = 0;
#define SUGGEST(...)                                                                               \
    do {                                                                                           \
        if (n < cap) snprintf(out[n++], 512, __VA_ARGS__);                                         \
    } while (0)
    char a[32], b[32];
    uint64_t moved = p->moved_to_host + p->moved_to_device;
    if (strcmp(p->mode, "track") == 0 || strcmp(p->mode, "off") == 0) {
        SUGGEST("HOSTOFF_MODE=%s moves nothing: run with --mode offload (the default) and a "
                "budget to offload.",
                p->mode);
    } else if (moved == 0) {
        prof_bytes(p->live_peak > 0 ? p->live_peak : p->device_peak, a, sizeof a);
        SUGGEST("Nothing moved: set a budget below the peak (%s), e.g. hostoff run --budget 80%% "
                "(HOSTOFF_BUDGET), to keep the device's use under it.",
                a);
    }
    if (!p->has_trace) {
        SUGGEST("Record a trace too (hostoff run --trace PATH, HOSTOFF_TRACE) to see the "
                "timeline, the stalls and which kernels waited.");
        return n;
    }
    if (moved == 0) return n;
    double stall_share = pct(p->stall_ns, p->t_end), busy = link_busy(p);
    uint64_t st = p->stall_ns > 0 ? p->stall_ns : 1;
    if (stall_share > 20 && busy > 50) {
        SUGGEST(
            "The link is busy %.0f%% of the run: the bytes to move, not when they move, limit "
            "the job. A larger budget (nearer the %s peak) moves less; a faster link (NVLink-C2C) "
            "moves it sooner.",
            busy, (prof_bytes(p->live_peak, a, sizeof a), a));
    }
    if (pct(p->stall_why[TSTALL_DEMAND], st) > 40) {
        if (strcmp(p->policy, "lookahead") == 0 && p->tr.steps == 0)
            SUGGEST("Most waiting is for restores on demand: the lookahead policy learns the step "
                    "from the launches alone here. Mark steps with hostoff_mark_step() "
                    "(hostoff.h) so it knows the step at once.");
        else if (strcmp(p->policy, "lookahead") == 0)
            SUGGEST(
                "Most waiting is for restores on demand: the lookahead policy runs as lru until "
                "two steps alike and one timed step have shown it the step, so a short run is "
                "mostly those; past them, more budget leaves it room to fetch earlier.");
        else
            SUGGEST("Most waiting is for restores on demand: HOSTOFF_POLICY=lookahead (--policy "
                    "lookahead) learns the step and prefetches ahead of use.");
    }
    if (p->prefetches > 0 && pct(p->late, p->prefetches) > 25) {
        SUGGEST("%llu of %llu prefetches landed late: their lead was shorter than the link needed. "
                "More budget leaves the policy room to fetch earlier.",
                (unsigned long long)p->late, (unsigned long long)p->prefetches);
    }
    if (pct(p->stall_why[TSTALL_ROOM], st) > 30) {
        prof_time(p->stall_why[TSTALL_ROOM], a, sizeof a);
        SUGGEST("Allocations and restores waited %s for evictions to make room: the budget is "
                "tight for what one kernel needs at once. Raise it, or lower the micro-batch.",
                a);
    }
    if (stall_share < 5) {
        prof_bytes(p->device_peak, b, sizeof b);
        SUGGEST("Waiting costs %.1f%% of the run: a lower budget than the %s the device held "
                "would save more memory.",
                stall_share, b);
    }
#undef SUGGEST
    return n;
}
