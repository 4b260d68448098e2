/* Trace reading and checking: each line's syntax, the schema's keys and types, and the buffers'
 * lifetimes (an id is allocated before it is used or freed, and not allocated twice while live),
 * which is what a replay needs to be able to run the trace at all. */
#include "trace_read.h"

#include "u64map.h"
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
    const char *path;
    long line;
    char *err;
    size_t errcap;
    struct trace *t;
    size_t capev, capuses;
    struct u64map live; /* id -> bytes */
    uint64_t live_bytes;
    struct u64map strmap; /* string hash -> index in t->strs */
    size_t capstrs, capmoves, capstalls;
    uint64_t *step_lines; /* the header's "recorder" "step_lines", until mapped to events */
    size_t nstep_lines;
};

__attribute__((format(printf, 2, 3))) static int bad(struct reader *r, const char *fmt, ...) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->err, r->errcap, "%s:%ld: %s", r->path, r->line, what);
    return -1;
}

/* A required (or, with `optional`, possibly absent) non-negative integer member. */
static int get_uint(struct reader *r, const struct json *o, const char *key, bool optional,
                    uint64_t *out, bool *present) {
    const struct json *v = json_get(o, key);
    if (present != NULL) *present = v != NULL;
    if (v == NULL) {
        if (optional) return 0;
        return bad(r, "missing \"%s\"", key);
    }
    if (v->type != JSON_INT || v->neg) return bad(r, "\"%s\" must be a non-negative integer", key);
    *out = v->mag;
    return 0;
}

static int get_stream(struct reader *r, const struct json *o, const char *key, bool optional,
                      uint32_t *out, bool *present) {
    uint64_t v = 0;
    if (get_uint(r, o, key, optional, &v, present) != 0) return -1;
    if (v > 65535)
        return bad(r, "\"%s\" %llu: stream numbers go up to 65535", key, (unsigned long long)v);
    *out = (uint32_t)v;
    if (v + 1 > r->t->nstreams) r->t->nstreams = (uint32_t)v + 1;
    return 0;
}

static int get_bool(struct reader *r, const struct json *o, const char *key, bool *out) {
    const struct json *v = json_get(o, key);
    *out = false;
    if (v == NULL) return 0;
    if (v->type != JSON_BOOL) return bad(r, "\"%s\" must be true or false", key);
    *out = v->b;
    return 0;
}

/* "recorder": {"step_lines": [L1, L2, ...]}: the line where each step of a recording without
 * markers begins (line 1 is the header; contrib/pytorch/hostoff_views.py writes it). Kept only
 * when every entry is an integer of at least 2 and each is larger than the one before; anything
 * else is ignored like the other descriptive keys: the trace replays the same, without per-step
 * figures. */
static int header_step_lines(struct reader *r, const struct json *o) {
    const struct json *a = json_get(json_get(o, "recorder"), "step_lines");
    if (a == NULL || a->type != JSON_ARRAY || a->n == 0) return 0;
    uint64_t prev = 1;
    for (size_t i = 0; i < a->n; i++) {
        const struct json *v = &a->items[i];
        if (v->type != JSON_INT || v->neg || v->mag <= prev) return 0;
        prev = v->mag;
    }
    r->step_lines = malloc(a->n * sizeof *r->step_lines);
    if (r->step_lines == NULL) return bad(r, "out of memory");
    for (size_t i = 0; i < a->n; i++)
        r->step_lines[i] = a->items[i].mag;
    r->nstep_lines = a->n;
    return 0;
}

/* Each recorded step's first event: the first event read on or after its line (blank lines,
 * unknown events and the engine's timeline are lines but not events). A line the reader never
 * reached (past the end of the file, or at or after a last line cut short) began no step of
 * this trace: it and the lines after it are dropped. */
static int map_step_lines(struct reader *r) {
    struct trace *t = r->t;
    if (r->nstep_lines == 0) return 0;
    long last = t->cut_at != 0 ? t->cut_at - 1 : t->lines;
    t->step_at = malloc(r->nstep_lines * sizeof *t->step_at);
    if (t->step_at == NULL) return bad(r, "out of memory");
    size_t j = 0;
    for (size_t k = 0; k < r->nstep_lines && r->step_lines[k] <= (uint64_t)last; k++) {
        while (j < t->n && (uint64_t)t->ev[j].line < r->step_lines[k])
            j++;
        t->step_at[t->nstep_at++] = j;
    }
    return 0;
}

/* The first line's optional keys: who wrote it and what the engine ran under. Wrong types are
 * ignored (these keys describe, they are not needed to replay). */
static int header_extras(struct reader *r, const struct json *o) {
    struct trace *t = r->t;
    uint64_t v;
    if (json_get_u64(o, "rank", &v)) t->has_rank = true, t->rank = (long)v;
    if (json_get_u64(o, "pid", &v)) t->has_pid = true, t->pid = (long)v;
    if (json_get_u64(o, "budget_bytes", &v)) t->has_budget = true, t->budget_bytes = v;
    t->generated = json_get(o, "generator") != NULL;
    const struct json *s = json_get(o, "clock");
    if (s != NULL && s->type == JSON_STRING) snprintf(t->clock, sizeof t->clock, "%s", s->str);
    s = json_get(o, "mode");
    if (s != NULL && s->type == JSON_STRING) snprintf(t->mode, sizeof t->mode, "%s", s->str);
    s = json_get(o, "policy");
    if (s != NULL && s->type == JSON_STRING) snprintf(t->policy, sizeof t->policy, "%s", s->str);
    const struct json *link = json_get(o, "link_gbps");
    static const char *const keys[] = {"h2d", "d2h", "duplex"};
    double *dst[] = {&t->link_h2d, &t->link_d2h, &t->link_duplex};
    for (int i = 0; i < 3 && link != NULL && link->type == JSON_OBJECT; i++) {
        const struct json *x = json_get(link, keys[i]);
        /* A rate outside (0, 10^6] GB/s is no link (the command's --link takes the same range):
         * ignored like a wrong type, so that no figure divides by or scales with it. */
        if (x != NULL && (x->type == JSON_INT || x->type == JSON_REAL) && x->real > 0 &&
            x->real <= 1e6)
            *dst[i] = x->real;
    }
    return header_step_lines(r, o);
}

/* The index of string s in t->strs, added once (kernel names repeat on every launch). */
static int intern(struct reader *r, const char *s, uint32_t *out) {
    struct trace *t = r->t;
    uint64_t h = 1469598103934665603ull;
    for (const char *p = s; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    uint64_t idx;
    if (u64map_get(&r->strmap, h, &idx) && strcmp(t->strs[idx], s) == 0) {
        *out = (uint32_t)idx;
        return 0;
    }
    if (t->nstrs + 1 >= r->capstrs) {
        size_t cap = r->capstrs ? r->capstrs * 2 : 64;
        char **p = realloc(t->strs, cap * sizeof *p);
        if (p == NULL) return bad(r, "out of memory");
        t->strs = p;
        r->capstrs = cap;
    }
    if (t->nstrs == 0) {
        t->strs[0] = strdup("");
        if (t->strs[0] == NULL) return bad(r, "out of memory");
        t->nstrs = 1;
    }
    char *copy = strdup(s);
    if (copy == NULL) return bad(r, "out of memory");
    idx = t->nstrs;
    t->strs[t->nstrs++] = copy;
    if (!u64map_put(&r->strmap, h, idx)) return bad(r, "out of memory");
    *out = (uint32_t)idx;
    return 0;
}

#define GROW(r, arr, n, cap)                                                                       \
    do {                                                                                           \
        if ((n) == (cap)) {                                                                        \
            size_t c2 = (cap) ? (cap)*2 : 1024;                                                    \
            void *p2 = realloc((arr), c2 * sizeof *(arr));                                         \
            if (p2 == NULL) return bad((r), "out of memory");                                      \
            (arr) = p2;                                                                            \
            (cap) = c2;                                                                            \
        }                                                                                          \
    } while (0)

/* The engine's timeline: moves and stalls, checked like every other line. */
static int engine_line(struct reader *r, const struct json *o, int k) {
    struct trace *t = r->t;
    if (k < 3) {
        struct tmove m = {.kind = (uint8_t)k, .line = r->line};
        if (get_uint(r, o, "t", false, &m.t, NULL) != 0 ||
            get_uint(r, o, "ns", false, &m.ns, NULL) != 0 ||
            get_uint(r, o, "id", false, &m.id, NULL) != 0 ||
            get_uint(r, o, "bytes", false, &m.bytes, NULL) != 0 ||
            get_bool(r, o, "cancelled", &m.cancelled) != 0)
            return -1;
        GROW(r, t->moves, t->nmoves, r->capmoves);
        t->moves[t->nmoves++] = m;
        return 0;
    }
    struct tstall st = {.line = r->line};
    if (get_uint(r, o, "t", false, &st.t, NULL) != 0 ||
        get_uint(r, o, "ns", false, &st.ns, NULL) != 0 ||
        get_uint(r, o, "id", false, &st.id, NULL) != 0)
        return -1;
    const struct json *why = json_get(o, "why");
    static const char *const whys[] = {"demand", "late", "room"};
    int w = -1;
    for (int i = 0; why != NULL && why->type == JSON_STRING && i < 3; i++)
        if (strcmp(why->str, whys[i]) == 0) w = i;
    if (w < 0) return bad(r, "a stall needs \"why\": \"demand\", \"late\" or \"room\"");
    st.why = (uint8_t)w;
    GROW(r, t->stalls, t->nstalls, r->capstalls);
    t->stalls[t->nstalls++] = st;
    return 0;
}

static int header(struct reader *r, const struct json *o) {
    uint64_t version = 0;
    if (o->type != JSON_OBJECT || json_get(o, "hostoff_trace") == NULL)
        return bad(r, "not a hostoff trace: the first line must be {\"hostoff_trace\":1,...}");
    if (get_uint(r, o, "hostoff_trace", false, &version, NULL) != 0) return -1;
    if (version != 1)
        return bad(r, "trace schema version %llu: this reader knows version 1",
                   (unsigned long long)version);
    const struct json *dev = json_get(o, "device");
    if (dev == NULL || dev->type != JSON_OBJECT) return bad(r, "missing \"device\" object");
    const struct json *name = json_get(dev, "name");
    if (name == NULL || name->type != JSON_STRING) return bad(r, "\"device\" needs a \"name\"");
    snprintf(r->t->device_name, sizeof r->t->device_name, "%s", name->str);
    if (get_uint(r, dev, "mem_bytes", false, &r->t->mem_bytes, NULL) != 0) return -1;
    return header_extras(r, o);
}

static int uses(struct reader *r, const struct json *o, struct tev *e) {
    const struct json *u = json_get(o, "use");
    if (u == NULL) return bad(r, "missing \"use\"");
    if (u->type != JSON_ARRAY) return bad(r, "\"use\" must be an array of buffer ids");
    struct trace *t = r->t;
    if (t->nuses + u->n > r->capuses) {
        size_t cap = r->capuses ? r->capuses * 2 : 4096;
        while (cap < t->nuses + u->n)
            cap *= 2;
        uint64_t *p = realloc(t->uses, cap * sizeof *p);
        if (p == NULL) return bad(r, "out of memory");
        t->uses = p;
        r->capuses = cap;
    }
    e->use_at = t->nuses;
    for (size_t i = 0; i < u->n; i++) {
        const struct json *v = &u->items[i];
        uint64_t bytes;
        if (v->type != JSON_INT || v->neg) return bad(r, "\"use\" must hold buffer ids");
        if (!u64map_get(&r->live, v->mag, &bytes))
            return bad(r, "buffer %llu is used but not allocated (or already freed)",
                       (unsigned long long)v->mag);
        t->uses[t->nuses++] = v->mag;
    }
    e->nuse = (uint32_t)u->n;
    if (e->nuse > t->max_uses) t->max_uses = e->nuse;
    return 0;
}

static int event(struct reader *r, const struct json *o, struct tev *e, bool *known) {
    if (o->type != JSON_OBJECT) return bad(r, "a line must be a JSON object");
    const struct json *kind = json_get(o, "e");
    if (kind == NULL || kind->type != JSON_STRING) return bad(r, "missing \"e\" (the event)");
    static const char *const names[] = {"alloc", "free", "launch", "copy", "sync", "wait", "step"};
    static const char *const engine[] = {"evict", "restore", "prefetch", "stall"};
    int k = -1;
    for (int i = 0; i < 7; i++)
        if (strcmp(kind->str, names[i]) == 0) k = i;
    *known = k >= 0;
    for (int i = 0; k < 0 && i < 4; i++)
        if (strcmp(kind->str, engine[i]) == 0) return engine_line(r, o, i);
    if (k < 0) return 0; /* readers ignore events they do not know */
    memset(e, 0, sizeof *e);
    e->kind = (uint8_t)k;
    e->line = r->line;
    if (get_uint(r, o, "t", false, &e->t, NULL) != 0) return -1;
    if (get_uint(r, o, "d", true, &e->d, NULL) != 0) return -1;
    uint64_t bytes;
    switch (k) {
    case TEV_ALLOC:
        if (get_uint(r, o, "id", false, &e->id, NULL) != 0 ||
            get_uint(r, o, "bytes", false, &e->bytes, NULL) != 0 ||
            get_stream(r, o, "s", true, &e->s, &e->has_s) != 0 ||
            get_bool(r, o, "managed", &e->managed) != 0)
            return -1;
        const struct json *site = json_get(o, "site");
        if (site != NULL && site->type != JSON_STRING) return bad(r, "\"site\" must be a string");
        if (site != NULL && intern(r, site->str, &e->str) != 0) return -1;
        if (e->bytes == 0) return bad(r, "an allocation of 0 bytes");
        if (u64map_get(&r->live, e->id, &bytes))
            return bad(r, "buffer %llu is allocated again while live", (unsigned long long)e->id);
        if (!u64map_put(&r->live, e->id, e->bytes)) return bad(r, "out of memory");
        r->live_bytes += e->bytes;
        if (r->live_bytes > r->t->peak_bytes) r->t->peak_bytes = r->live_bytes;
        return 0;
    case TEV_FREE:
        if (get_uint(r, o, "id", false, &e->id, NULL) != 0 ||
            get_stream(r, o, "s", true, &e->s, &e->has_s) != 0)
            return -1;
        if (!u64map_get(&r->live, e->id, &bytes))
            return bad(r, "buffer %llu is freed but not live", (unsigned long long)e->id);
        u64map_del(&r->live, e->id);
        r->live_bytes -= bytes;
        return 0;
    case TEV_LAUNCH: {
        const struct json *name = json_get(o, "k");
        if (name == NULL || name->type != JSON_STRING)
            return bad(r, "a launch needs \"k\" (the kernel's name)");
        if (get_stream(r, o, "s", false, &e->s, &e->has_s) != 0 ||
            get_uint(r, o, "ns", false, &e->ns, NULL) != 0 || uses(r, o, e) != 0 ||
            intern(r, name->str, &e->str) != 0)
            return -1;
        r->t->launches++;
        return 0;
    }
    case TEV_COPY: {
        const struct json *dir = json_get(o, "dir");
        if (dir == NULL || dir->type != JSON_STRING) return bad(r, "a copy needs \"dir\"");
        if (strcmp(dir->str, "h2d") == 0)
            e->dir = TEV_H2D;
        else if (strcmp(dir->str, "d2h") == 0)
            e->dir = TEV_D2H;
        else if (strcmp(dir->str, "d2d") == 0)
            e->dir = TEV_D2D;
        else
            return bad(r, "\"dir\" must be \"h2d\", \"d2h\" or \"d2d\"");
        if (get_stream(r, o, "s", false, &e->s, &e->has_s) != 0 ||
            get_uint(r, o, "bytes", false, &e->bytes, NULL) != 0 || uses(r, o, e) != 0 ||
            get_bool(r, o, "sync", &e->sync) != 0 || get_bool(r, o, "memset", &e->memset) != 0)
            return -1;
        if (e->nuse == 0) return bad(r, "a copy names no device buffer in \"use\"");
        if (e->dir != TEV_D2D && e->bytes > r->t->max_copy_host) r->t->max_copy_host = e->bytes;
        return 0;
    }
    case TEV_SYNC:
        return get_stream(r, o, "s", true, &e->s, &e->has_s);
    case TEV_WAIT:
        if (get_stream(r, o, "s", false, &e->s, &e->has_s) != 0 ||
            get_stream(r, o, "on", false, &e->on, NULL) != 0)
            return -1;
        return 0;
    case TEV_STEP:
        r->t->steps++;
        return 0;
    }
    return 0;
}

static int push(struct reader *r, const struct tev *e) {
    struct trace *t = r->t;
    if (t->n == r->capev) {
        size_t cap = r->capev ? r->capev * 2 : 4096;
        struct tev *p = realloc(t->ev, cap * sizeof *p);
        if (p == NULL) return bad(r, "out of memory");
        t->ev = p;
        r->capev = cap;
    }
    t->ev[t->n++] = *e;
    return 0;
}

int trace_read(const char *path, struct trace *out, char *err, size_t errcap) {
    memset(out, 0, sizeof *out);
    struct reader r = {.path = path, .err = err, .errcap = errcap, .t = out};
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errcap, "%s: cannot open the trace", path);
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    bool have_header = false;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        r.line++;
        if (r.line == 1 && len >= 2 && (unsigned char)line[0] == 0x1f &&
            (unsigned char)line[1] == 0x8b) {
            /* The workloads ship gzip-compressed (tests/workloads); the reader takes text. */
            rc = bad(&r, "gzip-compressed: decompress it first (zcat %s > trace.jsonl)", path);
            break;
        }
        /* A last line without its newline was cut short (the process was killed while writing
         * it, or the file copied early): everything before it is whole, and is the trace. */
        if (len > 0 && line[len - 1] != '\n' && have_header) {
            out->cut_at = r.line;
            break;
        }
        if (len > 0 && line[len - 1] != '\n' && !have_header) {
            rc = bad(&r, "the first line was cut short: the process ended, or was killed, "
                         "while writing it");
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        size_t blank = 0;
        while (blank < (size_t)len && (line[blank] == ' ' || line[blank] == '\t'))
            blank++;
        if (blank == (size_t)len) continue; /* blank lines carry nothing */
        if (memchr(line, '\0', (size_t)len) != NULL) {
            rc = bad(&r, "a NUL byte in the line");
            break;
        }
        char why[128];
        struct json *o = json_parse(line, (size_t)len, why, sizeof why);
        if (o == NULL) {
            rc = bad(&r, "not valid JSON: %s", why);
            break;
        }
        if (!have_header) {
            rc = header(&r, o);
            have_header = true;
        } else {
            struct tev e;
            bool known = false;
            rc = event(&r, o, &e, &known);
            if (rc == 0 && known) rc = push(&r, &e);
        }
        json_free(o);
    }
    if (rc == 0 && ferror(f)) rc = bad(&r, "read error");
    if (rc == 0 && !have_header) {
        r.line = 1;
        rc = bad(&r, "empty: the process wrote no whole line (it ended, or was killed, before "
                     "its first CUDA call was written); a trace starts with "
                     "{\"hostoff_trace\":1,...}");
    }
    free(line);
    fclose(f);
    out->lines = r.line;
    if (rc == 0) rc = map_step_lines(&r);
    free(r.step_lines);
    u64map_free(&r.live);
    u64map_free(&r.strmap);
    if (rc != 0) trace_free(out);
    return rc;
}

void trace_free(struct trace *t) {
    free(t->ev);
    free(t->uses);
    free(t->moves);
    free(t->stalls);
    free(t->step_at);
    for (size_t i = 0; i < t->nstrs; i++)
        free(t->strs[i]);
    free(t->strs);
    t->ev = NULL;
    t->uses = NULL;
    t->moves = NULL;
    t->stalls = NULL;
    t->strs = NULL;
    t->step_at = NULL;
    t->nstep_at = 0;
    t->n = t->nuses = t->nmoves = t->nstalls = t->nstrs = 0;
}
