/* Writing the trace: the first line (the device) and one JSON object per buffered record, in
 * buffer order, up to the first launch whose duration is not known yet. Lines are formatted into
 * a fixed buffer and written with write(2), under the trace lock. */
#include "trace_internal.h"

#include "real.h"
#include "mode.h"
#include "log.h"
#include "options.h"
#include "json_text.h"
#include "report.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[1 << 16];
static size_t nout;
static bool write_failed;

static void out_drain(void) {
    size_t done = 0;
    while (done < nout && !write_failed) {
        ssize_t w = write(tr.fd, out + done, nout - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            write_failed = true;
            ho_log(HO_LOG_ERROR, "HOSTOFF_TRACE: write failed (%s); the trace stops here",
                   strerror(w < 0 ? errno : EIO));
            atomic_store(&ho_trace_state, HO_TRACE_OFF);
            break;
        }
        done += (size_t)w;
    }
    nout = 0;
}

/* Room for one line's fixed part; use lists and names go through out_str/out_fmt piecewise. */
static void out_reserve(size_t n) {
    if (nout + n > sizeof out) out_drain();
}

__attribute__((format(printf, 1, 2))) static void out_fmt(const char *fmt, ...) {
    out_reserve(256);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + nout, sizeof out - nout, fmt, ap);
    va_end(ap);
    if (n > 0) nout += (size_t)n < sizeof out - nout ? (size_t)n : sizeof out - nout - 1;
}

/* A JSON string, escaped. */
static void out_str(const char *s) {
    out_reserve(2);
    out[nout++] = '"';
    for (; *s != '\0'; s++) {
        out_reserve(HO_JSON_ESCAPED_MAX);
        nout += ho_json_escape(*s, out + nout);
    }
    out_reserve(1);
    out[nout++] = '"';
}

static const char *clock_name(void) {
    /* The same probe as ho_clock_ns(): the simulator's clock when simcuda is the driver. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    bool sim = h != NULL && ho_real_dlsym_fn(h, "simcuda_now_ns") != NULL;
    if (h != NULL) dlclose(h);
    return sim ? "simcuda" : "monotonic";
}

/* The simulator's link rates (simcuda_link_gbps, simcuda.h); false when the driver is not the
 * simulator or has not been initialised. Before, the header read the SIMCUDA_*_GBPS variables
 * itself and missed the cost file's link rows and the per-direction duplex rates: a replay on
 * NVLink-C2C said "duplex":88, PCIe Gen5's default, where the simulator charged 170 + 150. */
static bool sim_link_gbps(double out[4]) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *f = h != NULL ? ho_real_dlsym_fn(h, "simcuda_link_gbps") : NULL;
    int (*fn)(double *) = (int (*)(double *))(uintptr_t)f;
    bool ok = fn != NULL && fn(out) != 0;
    if (h != NULL) dlclose(h);
    return ok;
}

static void write_header(void) {
    char name[256] = "unknown";
    size_t mem = 0;
    CUdevice dev = 0;
    uint64_t t = ho_trace_self_begin();
    if (ho_real.cuCtxGetDevice == NULL || ho_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS) dev = 0;
    if (ho_real.cuDeviceGetName == NULL ||
        ho_real.cuDeviceGetName(name, (int)sizeof name, dev) != CUDA_SUCCESS)
        snprintf(name, sizeof name, "unknown");
    if (ho_real.cuDeviceTotalMem_v2 == NULL || ho_real.cuDeviceTotalMem_v2(&mem, dev) != 0) mem = 0;
    ho_trace_self_end(t);
    out_fmt("{\"hostoff_trace\":1,\"device\":{\"name\":");
    out_str(name);
    const char *clock = clock_name();
    out_fmt(",\"mem_bytes\":%zu,\"ordinal\":%d},\"pid\":%ld,\"rank\":%ld,\"clock\":\"%s\","
            "\"ns\":\"events\"",
            mem, (int)dev, (long)getpid(), ho_rank(), clock);
    if (ho_options()->run_id != NULL) {
        out_fmt(",\"run_id\":");
        out_str(ho_options()->run_id);
    }
    /* For reports: what the engine ran under. */
    bool offload = ho_mode() == HO_MODE_OFFLOAD;
    out_fmt(",\"mode\":\"%s\"", ho_mode_name(offload ? HO_MODE_OFFLOAD : HO_MODE_TRACK));
    uint64_t budget = offload ? ho_amount_resolve(&ho_options()->budget, mem) : UINT64_MAX;
    if (budget != UINT64_MAX) out_fmt(",\"budget_bytes\":%llu", (unsigned long long)budget);
    if (offload) out_fmt(",\"policy\":\"%s\"", ho_policy_name(ho_options()->policy));
    double gbps[4];
    if (strcmp(clock, "simcuda") == 0 && sim_link_gbps(gbps)) {
        /* The simulated link's rates as the simulator charges them (its cost file and SIMCUDA_*
         * variables resolved: simcuda.h), for the link figures; duplex: both directions at once. */
        out_fmt(",\"link_gbps\":{\"h2d\":%g,\"d2h\":%g,\"duplex\":%g}", gbps[0], gbps[1],
                gbps[2] + gbps[3]);
    }
    out_fmt("}\n");
    tr.header_done = true;
}

static const char *const dir_name[] = {"h2d", "d2h", "d2d"};

static void write_uses(const struct trec *r) {
    out_fmt(",\"use\":[");
    for (uint32_t i = 0; i < r->nuse; i++)
        out_fmt("%s%llu", i ? "," : "", (unsigned long long)tr.uses[r->use_at + i]);
    out_fmt("]");
}

static void write_record(const struct trec *r) {
    unsigned long long t = (unsigned long long)(r->t > tr.base ? r->t - tr.base : 0);
    switch (r->kind) {
    case TR_ALLOC:
        out_fmt("{\"e\":\"alloc\",\"t\":%llu,\"id\":%llu,\"bytes\":%llu", t,
                (unsigned long long)r->id, (unsigned long long)r->bytes);
        if (r->flags & TRF_STREAM) out_fmt(",\"s\":%d", r->s);
        if (r->flags & TRF_MANAGED) out_fmt(",\"managed\":true");
        if (r->site != 0) out_fmt(",\"site\":\"%016llx\"", (unsigned long long)r->site);
        break;
    case TR_FREE:
        out_fmt("{\"e\":\"free\",\"t\":%llu,\"id\":%llu", t, (unsigned long long)r->id);
        if (r->flags & TRF_STREAM) out_fmt(",\"s\":%d", r->s);
        break;
    case TR_LAUNCH:
        out_fmt("{\"e\":\"launch\",\"t\":%llu,\"s\":%d,\"k\":", t, r->s);
        out_str(ho_trace_kernel_name_at(r->kname));
        out_fmt(",\"ns\":%llu", (unsigned long long)r->ns);
        write_uses(r);
        break;
    case TR_COPY:
        out_fmt("{\"e\":\"copy\",\"t\":%llu,\"s\":%d,\"dir\":\"%s\",\"bytes\":%llu", t, r->s,
                dir_name[r->dir], (unsigned long long)r->bytes);
        write_uses(r);
        if (r->flags & TRF_SYNC) out_fmt(",\"sync\":true");
        if (r->flags & TRF_MEMSET) out_fmt(",\"memset\":true");
        break;
    case TR_SYNC:
        out_fmt("{\"e\":\"sync\",\"t\":%llu", t);
        if (r->flags & TRF_STREAM) out_fmt(",\"s\":%d", r->s);
        break;
    case TR_WAIT:
        out_fmt("{\"e\":\"wait\",\"t\":%llu,\"s\":%d,\"on\":%d", t, r->s, r->on);
        break;
    case TR_STEP:
        out_fmt("{\"e\":\"step\",\"t\":%llu", t);
        break;
    case TR_MOVE: /* not a call: no "d" */
        out_fmt("{\"e\":\"%s\",\"t\":%llu,\"ns\":%llu,\"id\":%llu,\"bytes\":%llu%s}\n",
                r->dir == HO_MOVE_EVICT     ? "evict"
                : r->dir == HO_MOVE_RESTORE ? "restore"
                                            : "prefetch",
                t, (unsigned long long)r->ns, (unsigned long long)r->id,
                (unsigned long long)r->bytes,
                (r->flags & TRF_CANCELLED) ? ",\"cancelled\":true" : "");
        return;
    case TR_STALL:
        out_fmt("{\"e\":\"stall\",\"t\":%llu,\"ns\":%llu,\"id\":%llu,\"why\":\"%s\"}\n", t,
                (unsigned long long)r->ns, (unsigned long long)r->id,
                r->dir == HO_MOVE_EVICT     ? "room"
                : r->dir == HO_MOVE_RESTORE ? "demand"
                                            : "late");
        return;
    }
    out_fmt(",\"d\":%llu}\n", (unsigned long long)r->d);
}

void ho_trace_flush(bool all) {
    HO_ASSERT_HELD(&tr.lock);
    if (tr.fd < 0 || write_failed) return;
    if (!tr.header_done) write_header();
    size_t k = 0;
    for (; k < tr.nrec; k++) {
        if ((tr.rec[k].flags & TRF_PENDING) && !all) break;
        write_record(&tr.rec[k]);
    }
    out_drain();
    if (k == 0) return;
    /* Keep the rest (from the first pending launch on), and their use lists, at the front. */
    size_t use_from = k < tr.nrec ? tr.rec[k].use_at : tr.nuses;
    memmove(tr.rec, tr.rec + k, (tr.nrec - k) * sizeof *tr.rec);
    tr.nrec -= k;
    /* (no use list yet when the first lines are written at once: nothing to move) */
    if (tr.nuses > use_from)
        memmove(tr.uses, tr.uses + use_from, (tr.nuses - use_from) * sizeof *tr.uses);
    tr.nuses -= use_from;
    for (size_t i = 0; i < tr.nrec; i++)
        tr.rec[i].use_at -= use_from;
}
