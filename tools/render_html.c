/* The HTML page of `hostoff report`: one self-contained file (inline CSS and SVG, no script, no
 * network) with, per process (rank), the verdict, what to tune next, three figures (bytes on the
 * device, in flight and on the host against the budget; the link's throughput each way against
 * its peak; the stalls) and the buffers that moved most. Several ranks: a table with a row per
 * rank first, then a section per rank on one time axis. */
#include "profile.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Figure geometry (SVG user units; the figure scales to its column). */
#define FW    640
#define FH    300
#define ML    64
#define MR    18
#define MT    34
#define MB    42
#define PW    (FW - ML - MR)
#define PH    (FH - MT - MB)
#define NBINS 160 /* bins of the link and stall figures */

static const char *const COLOR_RESIDENT = "#2f6db5";
static const char *const COLOR_INFLIGHT = "#f39c33";
static const char *const COLOR_HOST = "#3aa37a";
static const char *const COLOR_BUDGET = "#c0392b";
static const char *const COLOR_D2H = "#8e44ad";
static const char *const COLOR_H2D = "#16a085";
static const char *const COLOR_PEAK = "#7f8c8d";
static const char *const COLOR_WHY[3] = {"#c0392b", "#e67e22", "#6c5ce7"};
static const char *const WHY_NAME[3] = {"restore on demand", "late prefetch", "room (evictions)"};

static void esc(FILE *f, const char *s) {
    for (; *s != '\0'; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

/* ------------------------------------------------------------------------------- axes */

/* The bin (or column) holding value v of a range cut into n bins of width w, clamped to
 * [0, n): values from a trace can be anywhere, and a double too large for an int must never
 * become an index. */
static int bin_of(double v, double w, int n) {
    double b = w > 0 ? v / w : 0;
    if (!(b >= 0)) return 0; /* negative or NaN */
    return b < n ? (int)b : n - 1;
}

/* An axis' extent: finite and above 0 (a trace's numbers are finite, but a rate times a time
 * can still overflow a double). */
static double axis_max(double v) {
    if (!(v > 0)) return 1;
    return isfinite(v) ? v : DBL_MAX / 16;
}

/* The most ticks an axis draws: the loops below are bounded by this, not by floating-point
 * steps that could be too small to advance. */
#define MAX_TICKS 16

/* A "nice" tick step for [0, max] with about n ticks: 1, 2 or 5 times a power of ten. */
static double nice_step(double max, int n) {
    if (!(max > 0) || !isfinite(max)) return 1;
    double raw = max / n, mag = pow(10, floor(log10(raw)));
    double r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * mag;
}

struct axes {
    double tmax; /* ns */
    double ymax; /* in the y unit */
    double tdiv; /* ns per time unit */
    const char *tunit;
};

static double xpos(const struct axes *a, double t) {
    return ML + (a->tmax > 0 ? t / a->tmax : 0) * PW;
}

static double ypos(const struct axes *a, double v) {
    return MT + PH - (a->ymax > 0 ? v / a->ymax : 0) * PH;
}

static void time_unit(struct axes *a) {
    if (a->tmax >= 2e9) {
        a->tdiv = 1e9;
        a->tunit = "s";
    } else if (a->tmax >= 2e6) {
        a->tdiv = 1e6;
        a->tunit = "ms";
    } else {
        a->tdiv = 1e3;
        a->tunit = "us";
    }
}

static void svg_open(FILE *f, const char *title) {
    fprintf(f,
            "<svg class=\"chart\" viewBox=\"0 0 %d %d\" role=\"img\" "
            "xmlns=\"http://www.w3.org/2000/svg\"><title>",
            FW, FH);
    esc(f, title);
    fprintf(f, "</title><rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>", FW,
            FH);
}

/* Grid, ticks and labels; `ylabel` names the y unit. */
static void svg_axes(FILE *f, const struct axes *a, const char *ylabel, double ydiv, bool percent) {
    double ystep = nice_step(a->ymax, 5);
    for (int i = 0; i <= MAX_TICKS; i++) {
        double v = i * ystep;
        if (!(v <= a->ymax * 1.0001)) break;
        double y = ypos(a, v);
        fprintf(f,
                "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                "<text x=\"%d\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%g%s</text>",
                ML, y, ML + PW, y, ML - 6, y + 4, v / ydiv, percent ? "%" : "");
    }
    double tstep = nice_step(a->tmax / a->tdiv, 6) * a->tdiv;
    for (int i = 0; i <= MAX_TICKS && tstep > 0; i++) {
        double t = i * tstep;
        if (!(t <= a->tmax * 1.0001)) break;
        double x = xpos(a, t);
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e4e4e4\"/>"
                "<text x=\"%.1f\" y=\"%d\" class=\"tick\" text-anchor=\"middle\">%g</text>",
                x, MT, x, MT + PH, x, MT + PH + 16, t / a->tdiv);
    }
    fprintf(f,
            "<rect class=\"plot\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#999\"/>"
            "<text x=\"%d\" y=\"%d\" class=\"label\" text-anchor=\"middle\">time (%s)</text>"
            "<text x=\"14\" y=\"%d\" class=\"label\" text-anchor=\"middle\" "
            "transform=\"rotate(-90 14 %d)\">",
            ML, MT, PW, PH, ML + PW / 2, FH - 6, a->tunit, MT + PH / 2, MT + PH / 2);
    esc(f, ylabel);
    fputs("</text>", f);
}

/* A legend entry at slot k of the top row: a swatch (dashed: a line) and a name. */
static void legend(FILE *f, int k, const char *color, bool dashed, const char *name) {
    int x = ML + k * 150;
    if (dashed)
        fprintf(f,
                "<line x1=\"%d\" y1=\"14\" x2=\"%d\" y2=\"14\" stroke=\"%s\" stroke-width=\"2\" "
                "stroke-dasharray=\"5 3\"/>",
                x, x + 16, color);
    else
        fprintf(f, "<rect x=\"%d\" y=\"8\" width=\"16\" height=\"12\" fill=\"%s\"/>", x, color);
    fprintf(f, "<text x=\"%d\" y=\"18\" class=\"legend\">", x + 21);
    esc(f, name);
    fputs("</text>", f);
}

static void note(FILE *f, const char *text) {
    fprintf(f, "<text x=\"%d\" y=\"%d\" class=\"note\" text-anchor=\"middle\">", ML + PW / 2,
            MT + PH / 2);
    esc(f, text);
    fputs("</text>", f);
}

/* A filled step area under level[0..n) (one value per column of the plot). */
static void area(FILE *f, const struct axes *a, const double *level, int n, const char *color) {
    double base = ypos(a, 0);
    fprintf(f, "<path fill=\"%s\" d=\"M%d %.1f", color, ML, base);
    for (int c = 0; c < n; c++) {
        double x0 = ML + (double)c * PW / n, x1 = ML + (double)(c + 1) * PW / n;
        double y = ypos(a, level[c]);
        fprintf(f, "L%.1f %.1fL%.1f %.1f", x0, y, x1, y);
    }
    fprintf(f, "L%d %.1fZ\"/>", ML + PW, base);
}

/* A step line through value[0..n). */
static void steps(FILE *f, const struct axes *a, const double *value, int n, const char *color) {
    fprintf(f, "<path fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" d=\"", color);
    for (int c = 0; c < n; c++) {
        double x0 = ML + (double)c * PW / n, x1 = ML + (double)(c + 1) * PW / n;
        double y = ypos(a, value[c]);
        fprintf(f, "%c%.1f %.1fL%.1f %.1f", c == 0 ? 'M' : 'L', x0, y, x1, y);
    }
    fputs("\"/>", f);
}

static void hline(FILE *f, const struct axes *a, double v, const char *color) {
    double y = ypos(a, v);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\" "
            "stroke-dasharray=\"6 4\"/>",
            ML, y, ML + PW, y, color);
}

/* ------------------------------------------------------------------------------ figures */

static void figure_open(FILE *f, const char *id, const char *title) {
    fprintf(f, "<figure class=\"fig\" data-fig=\"%s\">", id);
    svg_open(f, title);
}

static void figure_close(FILE *f, const char *caption) {
    fputs("</svg><figcaption>", f);
    esc(f, caption);
    fputs("</figcaption></figure>\n", f);
}

/* Bytes on the device (resident, in flight) and on the host over time, stacked, with the budget.
 * Each column shows the most each level reached in its time span. */
static void fig_memory(FILE *f, const struct profile *p, double tmax) {
    figure_open(f, "memory", "Device-resident, in-flight and host-resident bytes");
    enum { NC = PW };
    static double l1[NC], l2[NC], l3[NC];
    memset(l1, 0, sizeof l1);
    memset(l2, 0, sizeof l2);
    memset(l3, 0, sizeof l3);
    double dt = tmax / NC;
    for (size_t i = 0; i < p->npts && dt > 0; i++) {
        const struct prof_point *pt = &p->pts[i];
        double t0 = (double)pt->t,
               t1 = i + 1 < p->npts ? (double)p->pts[i + 1].t : (double)p->t_end;
        int c0 = bin_of(t0, dt, NC), c1 = t1 > t0 ? bin_of(t1 - 1, dt, NC) : c0;
        double v1 = (double)pt->resident, v2 = v1 + (double)pt->inflight,
               v3 = v2 + (double)pt->host;
        for (int c = c0; c <= c1; c++) {
            if (v1 > l1[c]) l1[c] = v1;
            if (v2 > l2[c]) l2[c] = v2;
            if (v3 > l3[c]) l3[c] = v3;
        }
    }
    double top = (double)p->live_peak;
    if (p->has_budget && (double)p->budget > top) top = (double)p->budget;
    struct axes a = {.tmax = axis_max(tmax), .ymax = axis_max(top * 1.08)};
    time_unit(&a);
    double ydiv = a.ymax >= 2e9 ? 1e9 : 1e6;
    char ylabel[32];
    snprintf(ylabel, sizeof ylabel, "bytes (%s)", ydiv == 1e9 ? "GB" : "MB");
    svg_axes(f, &a, ylabel, ydiv, false);
    if (p->npts > 0) {
        area(f, &a, l3, NC, COLOR_HOST);
        area(f, &a, l2, NC, COLOR_INFLIGHT);
        area(f, &a, l1, NC, COLOR_RESIDENT);
    } else {
        note(f, "no allocations in the trace");
    }
    legend(f, 0, COLOR_RESIDENT, false, "on the device");
    legend(f, 1, COLOR_INFLIGHT, false, "in flight");
    legend(f, 2, COLOR_HOST, false, "in host memory");
    if (p->has_budget) {
        hline(f, &a, (double)p->budget, COLOR_BUDGET);
        legend(f, 3, COLOR_BUDGET, true, "budget");
    }
    figure_close(f, "Bytes of the job's buffers: on the device (resident; in flight, holding "
                    "device memory while copied), and in pinned host memory. Stacked, each column "
                    "at its highest; the dashed line is the budget.");
}

/* Link throughput each way, in GB/s, against the link's peak. */
static void fig_link(FILE *f, const struct profile *p, double tmax) {
    figure_open(f, "link", "Link throughput per direction");
    static double out[NBINS], in[NBINS];
    memset(out, 0, sizeof out);
    memset(in, 0, sizeof in);
    double bin = tmax / NBINS;
    double maxrate = 0;
    for (size_t i = 0; i < p->nxf && bin > 0; i++) {
        const struct prof_xfer *x = &p->xf[i];
        double *acc = x->kind == TMOVE_EVICT ? out : in;
        double s = (double)x->start, e = (double)x->end;
        if (e <= s) {
            acc[bin_of(e, bin, NBINS)] += (double)x->bytes;
            continue;
        }
        for (int b = bin_of(s, bin, NBINS); b < NBINS && b * bin < e; b++) {
            double lo = b * bin > s ? b * bin : s, hi = (b + 1) * bin < e ? (b + 1) * bin : e;
            if (hi > lo) acc[b] += (double)x->bytes * (hi - lo) / (e - s);
        }
    }
    for (int b = 0; b < NBINS && bin > 0; b++) {
        out[b] /= bin; /* bytes per ns = GB/s */
        in[b] /= bin;
        if (out[b] > maxrate) maxrate = out[b];
        if (in[b] > maxrate) maxrate = in[b];
    }
    double peak = p->h2d_gbps > p->d2h_gbps ? p->h2d_gbps : p->d2h_gbps;
    struct axes a = {.tmax = axis_max(tmax),
                     .ymax = axis_max((maxrate > peak ? maxrate : peak) * 1.12)};
    time_unit(&a);
    svg_axes(f, &a, "GB/s", 1, false);
    if (p->nxf > 0) {
        steps(f, &a, out, NBINS, COLOR_D2H);
        steps(f, &a, in, NBINS, COLOR_H2D);
    } else {
        note(f, p->has_trace ? "nothing moved" : "no trace");
    }
    hline(f, &a, p->h2d_gbps, COLOR_PEAK);
    if (p->d2h_gbps != p->h2d_gbps) hline(f, &a, p->d2h_gbps, COLOR_PEAK);
    legend(f, 0, COLOR_D2H, false, "to host");
    legend(f, 1, COLOR_H2D, false, "to device");
    char peak_name[64];
    if (p->d2h_gbps == p->h2d_gbps)
        snprintf(peak_name, sizeof peak_name, "peak %g GB/s each way", p->h2d_gbps);
    else
        snprintf(peak_name, sizeof peak_name, "peaks %g / %g GB/s", p->d2h_gbps, p->h2d_gbps);
    legend(f, 2, COLOR_PEAK, true, peak_name);
    char cap[512];
    snprintf(cap, sizeof cap,
             "The engine's copies each way, averaged over %d bins, against the link's peak "
             "(%g GB/s both ways together). Each copy is placed at the peak rate as early as its "
             "submission and the copy before it allow (the trace has when each was submitted and "
             "when its completion was seen): the curve shows when the link was busy.",
             NBINS, p->duplex_gbps);
    figure_close(f, cap);
}

/* Time the application waited, per bin, as a share of the bin, by reason. */
static void fig_stalls(FILE *f, const struct profile *p, double tmax) {
    figure_open(f, "stalls", "Stalls over time");
    static double why[3][NBINS];
    memset(why, 0, sizeof why);
    double bin = tmax / NBINS;
    for (size_t i = 0; i < p->nst && bin > 0; i++) {
        const struct prof_stall *s = &p->st[i];
        double t0 = (double)s->t, t1 = (double)s->t + (double)s->ns;
        for (int b = bin_of(t0, bin, NBINS); b < NBINS && b * bin < t1; b++) {
            double lo = b * bin > t0 ? b * bin : t0, hi = (b + 1) * bin < t1 ? (b + 1) * bin : t1;
            if (hi > lo) why[s->why][b] += hi - lo;
        }
    }
    struct axes a = {.tmax = axis_max(tmax), .ymax = 100};
    time_unit(&a);
    svg_axes(f, &a, "time stalled (%)", 1, true);
    double w = (double)PW / NBINS;
    for (int b = 0; b < NBINS && bin > 0; b++) {
        double acc = 0;
        for (int k = 0; k < 3; k++) {
            double v = 100 * why[k][b] / bin;
            if (v <= 0) continue;
            if (acc + v > 100) v = 100 - acc;
            double y1 = ypos(&a, acc + v), y0 = ypos(&a, acc);
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>",
                    ML + b * w, y1, w, y0 - y1, COLOR_WHY[k]);
            acc += v;
        }
    }
    if (p->nst == 0) note(f, p->has_trace ? "no stalls" : "no trace");
    for (int k = 0; k < 3; k++)
        legend(f, k, COLOR_WHY[k], false, WHY_NAME[k]);
    figure_close(f, "Share of each bin the application spent waiting for the engine: for a "
                    "restore it needed now, for a prefetch still on its way, or for evictions to "
                    "make room.");
}

/* ------------------------------------------------------------------------------- tables */

static void td_bytes(FILE *f, uint64_t v) {
    char b[32];
    prof_bytes(v, b, sizeof b);
    fprintf(f, "<td class=\"num\">%s</td>", b);
}

static void td_time(FILE *f, uint64_t v) {
    char b[32];
    prof_time(v, b, sizeof b);
    fprintf(f, "<td class=\"num\">%s</td>", b);
}

static uint64_t saved_bytes(const struct profile *p) {
    return p->has_trace && p->live_peak > p->device_peak ? p->live_peak - p->device_peak : 0;
}

static void rank_table(FILE *f, const struct profile *ps, size_t n) {
    fputs("<table class=\"ranks\"><thead><tr><th>process</th><th>device</th><th>peak without "
          "offload</th><th>device peak</th><th>saved</th><th>to host</th><th>to device</th>"
          "<th>stalled</th><th>share of run</th><th>late prefetches</th></tr></thead><tbody>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const struct profile *p = &ps[i];
        fprintf(f, "<tr class=\"rank-summary\"><td><a href=\"#p%zu\">", i);
        esc(f, p->name);
        fputs("</a></td><td>", f);
        esc(f, p->device[0] != '\0' ? p->device : "-");
        fputs("</td>", f);
        if (p->has_trace)
            td_bytes(f, p->live_peak);
        else
            fputs("<td class=\"num\">-</td>", f);
        td_bytes(f, p->device_peak);
        if (p->has_trace)
            td_bytes(f, saved_bytes(p));
        else
            fputs("<td class=\"num\">-</td>", f);
        td_bytes(f, p->moved_to_host);
        td_bytes(f, p->moved_to_device);
        td_time(f, p->stall_ns);
        if (p->has_trace && p->t_end > 0)
            fprintf(f, "<td class=\"num\">%.1f%%</td>",
                    100.0 * (double)p->stall_ns / (double)p->t_end);
        else
            fputs("<td class=\"num\">-</td>", f);
        if (p->has_trace)
            fprintf(f, "<td class=\"num\">%llu of %llu</td>", (unsigned long long)p->late,
                    (unsigned long long)p->prefetches);
        else
            fputs("<td class=\"num\">-</td>", f);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

/* The report alone: its buffers by size (it has no per-buffer moves; a trace has). */
static void report_buffers(FILE *f, const struct profile *p) {
    fputs("<h3>Largest buffers</h3>\n<table class=\"buffers\"><thead><tr><th>buffer</th>"
          "<th>size</th><th>kind</th><th>uses</th></tr></thead><tbody>\n",
          f);
    /* The ten largest, by a selection over the list (it can hold 100,000 records). */
    size_t shown[10], ns = 0;
    for (; ns < 10; ns++) {
        size_t best = p->nbufs;
        for (size_t i = 0; i < p->nbufs; i++) {
            bool taken = false;
            for (size_t k = 0; k < ns; k++)
                taken |= shown[k] == i;
            if (!taken && (best == p->nbufs || p->bufs[i].bytes > p->bufs[best].bytes)) best = i;
        }
        if (best == p->nbufs) break;
        shown[ns] = best;
        const struct prof_buf *b = &p->bufs[best];
        fprintf(f, "<tr><td class=\"num\">%llu</td>", (unsigned long long)b->id);
        td_bytes(f, b->bytes);
        fprintf(f, "<td>%s</td><td class=\"num\">%llu</td></tr>\n", b->kind != NULL ? b->kind : "-",
                (unsigned long long)b->uses);
    }
    if (ns == 0) fputs("<tr><td colspan=\"4\">no buffers in the report</td></tr>\n", f);
    fputs("</tbody></table>\n<p class=\"small\">The report counts moves per process; which "
          "buffers moved, when, and who waited for them come from a trace.</p>\n",
          f);
}

static void buffer_table(FILE *f, const struct profile *p) {
    bool sites = false;
    size_t shown = 0;
    for (size_t i = 0; i < p->nbufs; i++)
        sites |= p->bufs[i].site != 0;
    fputs("<h3>Buffers that moved most</h3>\n<table class=\"buffers\"><thead><tr><th>buffer</th>"
          "<th>size</th><th>to host</th><th>to device</th><th>moves (out / on demand / "
          "prefetched)</th><th>stalled</th><th>kernels that waited for it</th>",
          f);
    if (sites) fputs("<th>allocated at</th>", f);
    fputs("</tr></thead><tbody>\n", f);
    for (size_t i = 0; i < p->nbufs && shown < 10; i++) {
        const struct prof_buf *b = &p->bufs[i];
        if (b->to_host + b->to_device + b->stall_ns == 0) break;
        shown++;
        fprintf(f, "<tr><td class=\"num\">%llu</td>", (unsigned long long)b->id);
        td_bytes(f, b->bytes);
        td_bytes(f, b->to_host);
        td_bytes(f, b->to_device);
        fprintf(f, "<td class=\"num\">%u / %u / %u</td>", b->evictions, b->restores, b->prefetches);
        td_time(f, b->stall_ns);
        fputs("<td class=\"kernels\">", f);
        for (int k = 0; k < 3 && b->nwaits[k] > 0; k++) {
            fputs(k ? ", " : "", f);
            fputs("<code>", f);
            esc(f, prof_str(p, b->waiter[k]));
            fprintf(f, "</code>&nbsp;&times;%u", b->nwaits[k]);
        }
        if (b->nwaits[0] == 0) fputs(b->stall_ns > 0 ? "(allocations)" : "-", f);
        fputs("</td>", f);
        if (sites) {
            /* The report resolves a site's hash into frames: show the innermost, all on hover. */
            const char *key = b->site != 0 ? prof_str(p, b->site) : NULL;
            const struct prof_site *s = prof_site_of(p, key);
            if (s != NULL && s->frames[0] != '\0') {
                fputs("<td><code title=\"", f);
                esc(f, s->frames);
                fputs("\">", f);
                size_t first = strcspn(s->frames, " ");
                char inner[512];
                snprintf(inner, sizeof inner, "%.*s", (int)(first < 511 ? first : 511), s->frames);
                esc(f, inner);
            } else {
                fputs("<td><code>", f);
                esc(f, key != NULL ? key : "-");
            }
            fputs("</code></td>", f);
        }
        fputs("</tr>\n", f);
    }
    if (shown == 0) fprintf(f, "<tr><td colspan=\"%d\">no buffer moved</td></tr>\n", 7 + sites);
    fputs("</tbody></table>\n", f);
    if (!sites)
        fputs("<p class=\"small\">Allocation sites appear here when the trace's allocations carry "
              "them (<code>\"site\"</code>).</p>\n",
              f);
}

/* A suggestion: options (--policy lru) and variables (HOSTOFF_BUDGET) as unbroken code. */
static void tip(FILE *f, const char *text) {
    char word[512];
    for (const char *p = text; *p != '\0';) {
        size_t n = strcspn(p, " ");
        snprintf(word, sizeof word, "%.*s", (int)(n < sizeof word ? n : sizeof word - 1), p);
        bool code = strncmp(word, "--", 2) == 0 || strncmp(word, "HOSTOFF_", 8) == 0;
        if (code && strncmp(word, "--", 2) == 0 && p[n] == ' ' && p[n + 1] != '\0' &&
            strchr("abcdefghijklmnopqrstuvwxyz0123456789", p[n + 1]) != NULL) {
            /* "--policy lru": the option and its value together */
            size_t m = strcspn(p + n + 1, " ");
            snprintf(word, sizeof word, "%.*s", (int)(n + 1 + m < sizeof word ? n + 1 + m : 0), p);
            n += 1 + m;
        }
        size_t len = strlen(word);
        char tail = len > 0 && strchr(",.;:)", word[len - 1]) != NULL ? word[len - 1] : '\0';
        if (code && tail != '\0') word[len - 1] = '\0';
        if (code) fputs("<code class=\"nb\">", f);
        esc(f, word);
        if (code) fputs("</code>", f);
        if (code && tail != '\0') fputc(tail, f);
        p += n;
        while (*p == ' ') {
            fputc(' ', f);
            p++;
        }
    }
}

static void section(FILE *f, const struct profile *p, size_t i, double tmax) {
    fprintf(f, "<section class=\"rank-row\" id=\"p%zu\"><h2>", i);
    esc(f, p->name);
    if (p->device[0] != '\0') {
        fputs(" <span class=\"dim\">", f);
        esc(f, p->device);
        fputs("</span>", f);
    }
    fputs("</h2>\n<p class=\"files\">", f);
    if (p->report_path != NULL) {
        fputs("report <code>", f);
        esc(f, p->report_path);
        fputs("</code> ", f);
    }
    if (p->trace_path != NULL) {
        fputs("trace <code>", f);
        esc(f, p->trace_path);
        fputs("</code>", f);
    }
    fputs("</p>\n<p class=\"verdict\">", f);
    char verdict[2048];
    prof_verdict(p, verdict, sizeof verdict);
    esc(f, verdict);
    fputs("</p>\n", f);
    char tips[6][512];
    size_t nt = prof_suggest(p, tips, 6);
    if (nt > 0) {
        fputs("<p class=\"tune-head\">What to tune next:</p><ul class=\"tune\">", f);
        for (size_t k = 0; k < nt; k++) {
            fputs("<li>", f);
            tip(f, tips[k]);
            fputs("</li>", f);
        }
        fputs("</ul>\n", f);
    }
    if (p->has_trace) {
        fputs("<div class=\"figs\">\n", f);
        fig_memory(f, p, tmax);
        fig_link(f, p, tmax);
        fig_stalls(f, p, tmax);
        fputs("</div>\n", f);
    } else {
        fputs("<p class=\"small\">No trace for this process: the figures need one "
              "(<code>HOSTOFF_TRACE</code>, <code>hostoff run --trace</code>).</p>\n",
              f);
    }
    if (p->has_trace)
        buffer_table(f, p);
    else
        report_buffers(f, p);
    fputs("</section>\n", f);
}

static const char *const STYLE =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;"
    "margin:24px;color:#222;background:#fff;max-width:2000px}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-top:1px solid "
    "#ddd;padding-top:14px}h3{font-size:15px;margin:14px 0 6px}"
    ".dim,.files,.small{color:#666;font-size:13px}code{font-size:12px}"
    ".verdict{max-width:1100px;line-height:1.45}.tune-head{margin:6px 0 2px;font-weight:600}"
    ".tune{margin:0 0 10px;max-width:1100px}"
    ".figs{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:14px}"
    "@media (max-width:1100px){.figs{grid-template-columns:1fr}}"
    ".fig{margin:0;border:1px solid #ddd;padding:6px;background:#fff}"
    ".chart{width:100%;height:auto;display:block}"
    ".fig figcaption{font-size:12px;color:#555;margin-top:4px}"
    ".tick{font-size:11px;fill:#555}.label{font-size:12px;fill:#333}"
    ".legend{font-size:12px;fill:#333}.note{font-size:14px;fill:#888}"
    "table{border-collapse:collapse;font-size:13px;margin:4px 0 8px}"
    "th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}"
    "th{background:#f4f4f4}td.num{text-align:right;white-space:nowrap}"
    ".kernels{max-width:420px}code.nb{white-space:nowrap}";

int prof_write_html(FILE *f, const struct profile *ps, size_t n, char *const *inputs,
                    size_t ninputs) {
    double tmax = 1;
    for (size_t i = 0; i < n; i++)
        if ((double)ps[i].t_end > tmax) tmax = (double)ps[i].t_end;
    fprintf(f,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            "<title>hostoff report</title><style>%s</style></head><body>\n",
            STYLE);
    fputs("<h1>hostoff report</h1>\n<p class=\"files\">from ", f);
    for (size_t i = 0; i < ninputs; i++) {
        fputs(i ? ", <code>" : "<code>", f);
        esc(f, inputs[i]);
        fputs("</code>", f);
    }
    fprintf(f, " &middot; %zu process%s</p>\n", n, n == 1 ? "" : "es");
    if (n > 1) rank_table(f, ps, n);
    for (size_t i = 0; i < n; i++)
        section(f, &ps[i], i, tmax);
    fputs("<p class=\"small\">Written by <code>hostoff report</code>. Times are the trace's clock "
          "(the simulator's virtual clock for replays). docs/report-format.md and "
          "docs/trace-format.md describe the inputs.</p>\n</body></html>\n",
          f);
    return ferror(f) ? -1 : 0;
}
