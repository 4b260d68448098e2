/* The Chrome/Perfetto trace of `hostoff report` (the JSON "Trace Event Format" that
 * ui.perfetto.dev and chrome://tracing open): per process (pid = rank), counter tracks for the
 * bytes on the device, in flight and in host memory (and the budget), one async slice per copy
 * over the link, each stall as a slice on the stream that waited, each kernel as a slice on its
 * stream's kernel track (with the buffers it used), and each training step as a slice on a track
 * of its own, so copies can be seen overlapping compute as in Nsight Systems. Timestamps in
 * microseconds, from the trace's clock. */
#include "profile.h"

#include "json_text.h"

#include <stdlib.h>
#include <string.h>

/* Thread ids of a process's tracks: the two copy directions, then streams (1000 + number). */
#define TID_D2H    1
#define TID_H2D    2
#define TID_STEPS  3
#define TID_STREAM 1000
#define TID_KERNEL 2000 /* + stream number: the kernels queued on it */

/* The buffers a kernel's slice lists (its arguments); the count is always given. */
#define KERNEL_BUFFERS_MAX 16

static void jstr(FILE *f, const char *s) {
    fputc('"', f);
    ho_json_write_text(f, s);
    fputc('"', f);
}

struct out {
    FILE *f;
    bool first;
};

static void ev_begin(struct out *o) {
    fputs(o->first ? "\n" : ",\n", o->f);
    o->first = false;
}

static void meta(struct out *o, long pid, long tid, const char *what, const char *name) {
    ev_begin(o);
    fprintf(o->f,
            "{\"ph\":\"M\",\"pid\":%ld,\"tid\":%ld,\"ts\":0,\"name\":\"%s\",\"args\":{\"name\":",
            pid, tid, what);
    jstr(o->f, name);
    fputs("}}", o->f);
}

static void counter(struct out *o, long pid, const char *name, uint64_t t, uint64_t v) {
    ev_begin(o);
    fprintf(o->f,
            "{\"ph\":\"C\",\"pid\":%ld,\"tid\":0,\"ts\":%.3f,\"name\":\"%s\",\"args\":{\"bytes\":"
            "%llu}}",
            pid, (double)t / 1e3, name, (unsigned long long)v);
}

static const char *const MOVE_NAME[] = {"evict", "restore (on demand)", "prefetch"};
static const char *const WHY_NAME[] = {"stall: restore on demand", "stall: late prefetch",
                                       "stall: room"};

/* Kernels on their streams. The trace has each launch's submission and device duration, not its
 * start: a kernel is placed at its submission or when the previous kernel of its stream ends,
 * whichever is later (streams run in order; waits on other streams and on copies are not
 * seen, so a kernel may show earlier than it ran). */
static void kernels(struct out *o, const struct profile *p, long pid) {
    const struct trace *t = &p->tr;
    uint64_t *free_at = calloc(t->nstreams + 1, sizeof *free_at);
    if (free_at == NULL) return;
    for (uint32_t s = 0; s < t->nstreams; s++) {
        bool used = false;
        for (size_t i = 0; i < t->n && !used; i++)
            used = t->ev[i].kind == TEV_LAUNCH && t->ev[i].s == s;
        if (!used) continue;
        char sn[48];
        snprintf(sn, sizeof sn, "stream %u: kernels", s);
        meta(o, pid, TID_KERNEL + (long)s, "thread_name", sn);
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        if (e->kind != TEV_LAUNCH || e->s >= t->nstreams) continue;
        uint64_t start = e->t > free_at[e->s] ? e->t : free_at[e->s];
        free_at[e->s] = start + e->ns;
        ev_begin(o);
        fprintf(o->f,
                "{\"ph\":\"X\",\"cat\":\"kernel\",\"pid\":%ld,\"tid\":%ld,\"ts\":%.3f,"
                "\"dur\":%.3f,\"name\":",
                pid, TID_KERNEL + (long)e->s, (double)start / 1e3, (double)e->ns / 1e3);
        const char *k = prof_str(p, e->str);
        jstr(o->f, k[0] != '\0' ? k : "kernel");
        fprintf(o->f, ",\"args\":{\"submitted_us\":%.3f,\"nbuffers\":%u,\"buffers\":[",
                (double)e->t / 1e3, e->nuse);
        for (uint32_t u = 0; u < e->nuse && u < KERNEL_BUFFERS_MAX; u++)
            fprintf(o->f, "%s%llu", u ? "," : "", (unsigned long long)t->uses[e->use_at + u]);
        fputs("]}}", o->f);
    }
    free(free_at);
}

/* Training steps, each a slice from its mark to the next (the last to the end of the run). */
static void steps(struct out *o, const struct profile *p, long pid) {
    const struct trace *t = &p->tr;
    if (t->steps == 0) return;
    meta(o, pid, TID_STEPS, "thread_name", "steps");
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->ev[i].kind != TEV_STEP) continue;
        uint64_t end = p->t_end;
        for (size_t j = i + 1; j < t->n; j++)
            if (t->ev[j].kind == TEV_STEP) {
                end = t->ev[j].t;
                break;
            }
        ev_begin(o);
        fprintf(o->f,
                "{\"ph\":\"X\",\"cat\":\"step\",\"pid\":%ld,\"tid\":%d,\"ts\":%.3f,"
                "\"dur\":%.3f,\"name\":\"step %zu\"}",
                pid, TID_STEPS, (double)t->ev[i].t / 1e3,
                (double)(end > t->ev[i].t ? end - t->ev[i].t : 0) / 1e3, k++);
    }
}

static void process(struct out *o, const struct profile *p, long pid, uint64_t *next_id) {
    FILE *f = o->f;
    char name[sizeof p->name + sizeof p->device + 4];
    snprintf(name, sizeof name, "%s%s%s", p->name, p->device[0] ? " - " : "", p->device);
    meta(o, pid, 0, "process_name", name);
    meta(o, pid, TID_D2H, "thread_name", "copies to host");
    meta(o, pid, TID_H2D, "thread_name", "copies to device");
    /* Counters: one sample per change, the budget at the ends. */
    for (size_t i = 0; i < p->npts; i++) {
        const struct prof_point *pt = &p->pts[i];
        const struct prof_point *prev = i > 0 ? &p->pts[i - 1] : NULL;
        if (prev == NULL || prev->resident != pt->resident)
            counter(o, pid, "device resident", pt->t, pt->resident);
        if (prev == NULL || prev->inflight != pt->inflight)
            counter(o, pid, "in flight", pt->t, pt->inflight);
        if (prev == NULL || prev->host != pt->host)
            counter(o, pid, "host resident", pt->t, pt->host);
    }
    if (p->has_budget) {
        counter(o, pid, "budget", 0, p->budget);
        counter(o, pid, "budget", p->t_end, p->budget);
    }
    /* Copies: async slices, one id each. */
    for (size_t i = 0; i < p->nxf; i++) {
        const struct prof_xfer *x = &p->xf[i];
        uint64_t id = (*next_id)++;
        int tid = x->kind == TMOVE_EVICT ? TID_D2H : TID_H2D;
        const char *nm = MOVE_NAME[x->kind < 3 ? x->kind : 0];
        ev_begin(o);
        fprintf(f,
                "{\"ph\":\"b\",\"cat\":\"copy\",\"id\":%llu,\"pid\":%ld,\"tid\":%d,\"ts\":%.3f,"
                "\"name\":\"%s\",\"args\":{\"buffer\":%llu,\"bytes\":%llu,\"submitted_us\":%.3f,"
                "\"completion_seen_us\":%.3f,\"cancelled\":%s}}",
                (unsigned long long)id, pid, tid, (double)x->start / 1e3, nm,
                (unsigned long long)x->id, (unsigned long long)x->bytes, (double)x->submit / 1e3,
                (double)x->seen / 1e3, x->cancelled ? "true" : "false");
        ev_begin(o);
        fprintf(f,
                "{\"ph\":\"e\",\"cat\":\"copy\",\"id\":%llu,\"pid\":%ld,\"tid\":%d,\"ts\":%.3f,"
                "\"name\":\"%s\"}",
                (unsigned long long)id, pid, tid, (double)x->end / 1e3, nm);
    }
    /* Stalls on the stream that waited; name each stream track once. */
    uint32_t named[64];
    size_t nnamed = 0;
    for (size_t i = 0; i < p->nst; i++) {
        const struct prof_stall *s = &p->st[i];
        bool seen = false;
        for (size_t k = 0; k < nnamed; k++)
            seen |= named[k] == s->s;
        if (!seen) {
            char sn[32];
            snprintf(sn, sizeof sn, "stream %u", s->s);
            meta(o, pid, TID_STREAM + (long)s->s, "thread_name", sn);
            if (nnamed < 64) named[nnamed++] = s->s;
        }
        ev_begin(o);
        fprintf(f,
                "{\"ph\":\"X\",\"cat\":\"stall\",\"pid\":%ld,\"tid\":%ld,\"ts\":%.3f,\"dur\":%.3f,"
                "\"name\":\"%s\",\"args\":{\"buffer\":%llu,\"waiter\":",
                pid, TID_STREAM + (long)s->s, (double)s->t / 1e3, (double)s->ns / 1e3,
                WHY_NAME[s->why < 3 ? s->why : 0], (unsigned long long)s->id);
        jstr(f, s->who != 0 ? prof_str(p, s->who) : s->what);
        fputs("}}", f);
    }
    kernels(o, p, pid);
    steps(o, p, pid);
}

int prof_write_perfetto(FILE *f, const struct profile *ps, size_t n) {
    struct out o = {f, true};
    uint64_t next_id = 1;
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", f);
    for (size_t i = 0; i < n; i++) {
        if (!ps[i].has_trace) continue;
        /* pid: the rank (+1: some viewers treat pid 0 as the idle process), else the order. */
        long pid = ps[i].has_rank ? ps[i].rank + 1 : (long)(i + 1);
        for (size_t j = 0; j < i; j++)
            if (ps[j].has_trace && ps[j].has_rank && ps[i].has_rank && ps[j].rank == ps[i].rank)
                pid = 100000 + (long)i; /* two processes of one rank: keep them apart */
        process(&o, &ps[i], pid, &next_id);
    }
    fputs("\n]}\n", f);
    return ferror(f) ? -1 : 0;
}
