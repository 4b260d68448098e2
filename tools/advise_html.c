/* hostoff advise's page: the step time against the budget as one self-contained SVG figure (the
 * replays, the physical limit, rematerialisation's estimate, the 5% and 20% lines, a tooltip on
 * every point) and the table beside it. */
#include "advise.h"

#include "cli.h"
#include "outfile.h"
#include "profile.h"

#include <stdio.h>
#include <string.h>

/* The palette: the page's blue for the replays, the budget red for the limit. */
static const char *const C_STEP = "#2f6db5";
static const char *const C_LIMIT = "#c0392b";
static const char *const C_REMAT = "#7f8c8d";

enum { W = 900, H = 420, L = 80, R = 30, T = 30, B = 60 };

static void esc(FILE *f, const char *s) {
    for (; *s != '\0'; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

struct frame {
    double xmax, ymax;
};

static double px(const struct frame *fr, double gb) {
    return L + (W - L - R) * (gb / fr->xmax);
}

static double py(const struct frame *fr, double x) {
    /* From 0.9x (a little under the unconstrained step) to ymax. */
    return T + (H - T - B) * (1 - (x - 0.9) / (fr->ymax - 0.9));
}

static double ratio(const struct advice *a, uint64_t ns) {
    return a->t_ns > 0 ? (double)ns / (double)a->t_ns : 0;
}

/* One series as a polyline with a dot (and its tooltip) at each budget. */
static void series(FILE *f, const struct frame *fr, const struct advice *a, int which,
                   const char *color, bool dashed, const char *name) {
    fprintf(f,
            "<polyline class=\"series-%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"3\"%s "
            "points=\"",
            name, color, dashed ? " stroke-dasharray=\"8 5\"" : "");
    for (size_t i = 0; i < a->n; i++) {
        const struct advice_row *r = &a->row[i];
        uint64_t ns = which == 0 ? r->step_ns : which == 1 ? r->limit_ns : r->remat_ns;
        if (which == 2 && !r->remat_ok) continue;
        double y = ratio(a, ns) < fr->ymax ? ratio(a, ns) : fr->ymax;
        fprintf(f, "%.1f,%.1f ", px(fr, (double)r->budget / 1e9), py(fr, y));
    }
    fputs("\"/>\n", f);
    for (size_t i = 0; i < a->n; i++) {
        const struct advice_row *r = &a->row[i];
        uint64_t ns = which == 0 ? r->step_ns : which == 1 ? r->limit_ns : r->remat_ns;
        if (which == 2 && !r->remat_ok) continue;
        double y = ratio(a, ns) < fr->ymax ? ratio(a, ns) : fr->ymax;
        char b[32], s[32];
        prof_bytes(r->budget, b, sizeof b);
        prof_time(ns, s, sizeof s);
        fprintf(f,
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"%s\"><title>%s at %s (%g%% of "
                "the peak): %s a step, %.2fx the unconstrained step</title></circle>\n",
                px(fr, (double)r->budget / 1e9), py(fr, y), color, name, b, a->pct[i], s,
                ratio(a, ns));
    }
}

static void figure(FILE *f, const struct advice *a) {
    struct frame fr = {(double)a->peak / 1e9 * 1.05, 1.5};
    for (size_t i = 0; i < a->n; i++) {
        double r = ratio(a, a->row[i].step_ns);
        if (r * 1.1 > fr.ymax) fr.ymax = r * 1.1;
    }
    bool clipped = fr.ymax > 6;
    if (clipped) fr.ymax = 6; /* beyond, points sit on the top edge (tooltips say) */
    if (!(fr.xmax > 0)) fr.xmax = 1;
    fputs("<figure class=\"fig\" data-fig=\"advice\"><figcaption>Step time against the budget "
          "(each dot a replay; hover for figures)</figcaption>\n",
          f);
    fprintf(f,
            "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
            "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"15\">\n",
            W, H, W, H);
    fprintf(f,
            "<rect class=\"plot\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" "
            "stroke=\"#999\"/>\n",
            L, T, W - L - R, H - T - B);
    /* Axes: x in GB (round ticks: 1, 2 or 5 times a power of ten), y in multiples of T. */
    double raw = fr.xmax / 5, mag = 1;
    while (mag * 10 <= raw)
        mag *= 10;
    while (mag > raw && mag > 1e-3)
        mag /= 10;
    double step = raw <= mag ? mag : raw <= 2 * mag ? 2 * mag : raw <= 5 * mag ? 5 * mag : 10 * mag;
    for (double gb = 0; gb <= fr.xmax + 1e-9; gb += step)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px(&fr, gb),
                H - B + 20, gb);
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">budget (GB; the trace's peak is "
            "%.1f GB)</text>\n",
            (W + L - R) / 2, H - 12, (double)a->peak / 1e9);
    for (double y = 1; y <= fr.ymax + 1e-9; y += fr.ymax > 3 ? 1 : 0.25) {
        fprintf(f,
                "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.2fx</text>\n",
                L, W - R, py(&fr, y), py(&fr, y), L - 6, py(&fr, y) + 5, y);
    }
    static const double marks[2] = {1.05, 1.20};
    for (int k = 0; k < 2; k++)
        fprintf(f,
                "<line class=\"within\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#555\" stroke-dasharray=\"2 4\"><title>%.0f%% over the unconstrained "
                "step</title></line><text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" "
                "font-size=\"12\" fill=\"#555\">+%.0f%%</text>\n",
                L, W - R, py(&fr, marks[k]), py(&fr, marks[k]), (marks[k] - 1) * 100, W - R - 4,
                py(&fr, marks[k]) - 3, (marks[k] - 1) * 100);
    series(f, &fr, a, 2, C_REMAT, true, "rematerialisation");
    series(f, &fr, a, 1, C_LIMIT, true, "physical limit");
    series(f, &fr, a, 0, C_STEP, false, "replay");
    fputs("</svg>\n<p class=\"legend\">", f);
    fprintf(f, "<span style=\"color:%s\">&#9632; replay (policy ", C_STEP);
    esc(f, a->policy);
    fprintf(f,
            ")</span> <span style=\"color:%s\">&#9632; physical limit max(T, E/d2h, E/h2d, "
            "2E/duplex)</span> <span style=\"color:%s\">&#9632; rematerialisation's "
            "estimate</span>%s</p></figure>\n",
            C_LIMIT, C_REMAT,
            clipped ? " (points above the top edge are drawn on it; hover for their figures)" : "");
}

static bool write_page(FILE *f, const struct advice *a) {
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>hostoff advise</title>"
          "<style>body{font-family:sans-serif;margin:20px;font-size:16px}"
          "td,th{padding:3px 10px;text-align:right}table{border-collapse:collapse}"
          "tr.pick td{font-weight:700}</style></head><body>\n<h1>hostoff advise: ",
          f);
    esc(f, a->trace);
    fputs("</h1>\n", f);
    char t[32], p[32];
    prof_time(a->t_ns, t, sizeof t);
    prof_bytes(a->peak, p, sizeof p);
    fprintf(f,
            "<p class=\"summary\" data-unconstrained-ns=\"%llu\">Unconstrained step %s; peak %s; "
            "link ",
            (unsigned long long)a->t_ns, t, p);
    esc(f, a->link);
    fputs(".", f);
    const int picks[2] = {a->within5, a->within20};
    const char *const names[2] = {"5%", "20%"};
    for (int k = 0; k < 2; k++) {
        if (picks[k] < 0) {
            fprintf(f, " No budget replayed is within %s.", names[k]);
            continue;
        }
        char b[32];
        prof_bytes(a->row[picks[k]].budget, b, sizeof b);
        fprintf(f, " The smallest budget within %s: <b>%s</b> (%g%% of the peak).", names[k], b,
                a->pct[picks[k]]);
    }
    fputs("</p>\n", f);
    figure(f, a);
    fputs("<table><tr><th>budget</th><th>bytes</th><th>step</th><th>&times; T</th><th>limit</th>"
          "<th>remat</th></tr>\n",
          f);
    for (size_t i = 0; i < a->n; i++) {
        const struct advice_row *r = &a->row[i];
        char b[32], s[32], l[32], m[32] = "-";
        prof_bytes(r->budget, b, sizeof b);
        prof_time(r->step_ns, s, sizeof s);
        prof_time(r->limit_ns, l, sizeof l);
        if (r->remat_ok) prof_time(r->remat_ns, m, sizeof m);
        fprintf(f,
                "<tr%s><td>%g%%</td><td>%s</td><td>%s</td><td>%.2f</td><td>%s</td><td>%s</td>"
                "</tr>\n",
                (int)i == a->within5 || (int)i == a->within20 ? " class=\"pick\"" : "", a->pct[i],
                b, s, ratio(a, r->step_ns), l, m);
    }
    fputs("</table>\n</body></html>\n", f);
    return !ferror(f);
}

bool advise_write_html(const char *path, const struct advice *a) {
    /* Created the way every output file is (src/outfile.h). */
    struct ho_outfile out;
    FILE *f = cli_create(&out, path, "advise");
    if (f == NULL) return false;
    return cli_finish(&out, f, write_page(f, a), "advise");
}
