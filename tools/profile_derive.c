/* Profiles for `hostoff report`, the deriving half: from a trace, the memory timeline, the
 * link's transfers, the stalls and who waited, and each buffer's costs; from a report, the
 * figures it already holds (see profile.h). */
#include "profile.h"

#include "u64map.h"

#include <stdlib.h>
#include <string.h>

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

static struct prof_buf *buf_of(struct profile *p, struct u64map *ix, uint64_t id, size_t *capbufs) {
    uint64_t at;
    if (u64map_get(ix, id, &at)) return &p->bufs[at];
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
    if (!u64map_put(ix, id, p->nbufs)) return NULL;
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
    struct u64map ix = {0};
    size_t capbufs = p->nbufs;
    for (size_t i = 0; i < p->nbufs; i++)
        if (!u64map_put(&ix, p->bufs[i].id, i)) goto oom;
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
            if (u64map_get(&ix, w[i].id, &at)) {
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
    u64map_free(&ix);
    if (p->nbufs > 1) qsort(p->bufs, p->nbufs, sizeof *p->bufs, cmp_moved);
    return true;
oom:
    u64map_free(&ix);
    return false;
}

bool prof_derive(struct profile *p, const struct prof_link *link) {
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
            if (m->cancelled) {
                p->cancelled_moves++;
                if (m->kind == TMOVE_EVICT)
                    p->cancelled_to_host = sat_add(p->cancelled_to_host, m->bytes);
                else
                    p->cancelled_to_device = sat_add(p->cancelled_to_device, m->bytes);
                continue;
            }
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
        p->cancelled_moves = p->r_cancelled_moves;
        p->cancelled_to_host = p->r_cancelled_to_host;
        p->cancelled_to_device = p->r_cancelled_to_device;
        if (!p->has_trace) p->device_peak = p->r_peak_device;
    }
    if (p->mode[0] == '\0' && p->has_trace) snprintf(p->mode, sizeof p->mode, "%s", t->mode);
    return per_buffer(p);
}
