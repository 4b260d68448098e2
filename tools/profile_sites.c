/* Allocation sites named by function and file:line (profile.h, prof_resolve_sites): the
 * report's "at" gives each frame's module, return address and the module's load base; binutils'
 * addr2line, asked once per module, turns them into "function (file:line)" where the module has
 * debug information. Done here, at report time, so the library only ever calls dladdr. Without
 * addr2line, or for frames it cannot place, the frames stay as the library wrote them. */
#include "profile.h"

#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FRAMES 8 /* the library's HO_SITE_FRAMES */

struct frame {
    size_t site, k;
    const char *module;
    uint64_t addr;  /* as addr2line wants it: from the module's start (PIE, libraries) */
    char text[256]; /* resolved, or "" */
    char orig[256];
};

/* addr2line on PATH, or false. */
static bool find_addr2line(char *out, size_t cap) {
    const char *path = getenv("PATH");
    if (path == NULL) path = "/usr/bin:/bin";
    while (*path != '\0') {
        size_t len = strcspn(path, ":");
        snprintf(out, cap, "%.*s/addr2line", (int)len, path);
        if (len > 0 && access(out, X_OK) == 0) return true;
        path += len;
        if (*path == ':') path++;
    }
    return false;
}

/* Whether the ELF file is an executable linked at a fixed address (ET_EXEC): its addresses are
 * absolute; a PIE or a library (ET_DYN) counts them from its load base. */
static bool fixed_address(const char *module) {
    FILE *f = fopen(module, "rb");
    if (f == NULL) return false;
    unsigned char h[18];
    bool exec = fread(h, 1, sizeof h, f) == sizeof h && memcmp(h, "\177ELF", 4) == 0 &&
                (h[5] == 1 ? h[16] | h[17] << 8 : h[17] | h[16] << 8) == 2;
    fclose(f);
    return exec;
}

static const char *base_name(const char *p) {
    const char *s = strrchr(p, '/');
    return s != NULL ? s + 1 : p;
}

/* Resolves every frame of one module with one addr2line. */
static void resolve_module(const char *tool, struct frame *fr, size_t n, const char *module) {
    char **args = calloc(n + 6, sizeof *args);
    char(*hex)[24] = calloc(n, sizeof *hex);
    size_t *which = calloc(n, sizeof *which);
    if (args == NULL || hex == NULL || which == NULL) goto out;
    size_t na = 0, nw = 0;
    args[na++] = "addr2line";
    args[na++] = "-f";
    args[na++] = "-C";
    args[na++] = "-e";
    args[na++] = (char *)module;
    for (size_t i = 0; i < n; i++) {
        if (fr[i].module == NULL || strcmp(fr[i].module, module) != 0 || fr[i].text[0] != '\0')
            continue;
        snprintf(hex[nw], sizeof hex[nw], "0x%llx", (unsigned long long)fr[i].addr);
        args[na++] = hex[nw];
        which[nw++] = i;
    }
    args[na] = NULL;
    char *out = NULL;
    if (nw == 0 || cli_run_child("report", tool, args, NULL, &out) != 0 || out == NULL) goto out;
    /* Two lines per address: the function, then file:line ("??" and "??:0" when unknown). */
    char *save = NULL, *line = strtok_r(out, "\n", &save);
    for (size_t w = 0; w < nw && line != NULL; w++) {
        char *fn = line, *loc = strtok_r(NULL, "\n", &save);
        line = strtok_r(NULL, "\n", &save);
        if (loc == NULL) break;
        char *colon = strrchr(loc, ':');
        bool known = loc[0] != '?' && colon != NULL && colon[1] != '?' && colon[1] != '0';
        if (!known) continue;
        char *disc = strstr(colon, " (discriminator");
        if (disc != NULL) *disc = '\0';
        snprintf(fr[which[w]].text, sizeof fr[which[w]].text, "%s (%s)",
                 strcmp(fn, "??") != 0 ? fn : "?", base_name(loc));
    }
    free(out);
out:
    free(args);
    free(hex);
    free(which);
}

void prof_resolve_sites(struct profile *p, const struct json *sites) {
    if (p->nsites == 0 || sites == NULL || sites->type != JSON_OBJECT) return;
    char tool[PATH_MAX];
    if (!find_addr2line(tool, sizeof tool)) return;
    struct frame *fr = calloc(p->nsites * MAX_FRAMES, sizeof *fr);
    if (fr == NULL) return;
    size_t n = 0;
    for (size_t s = 0; s < p->nsites; s++) {
        const struct json *site = json_get(sites, p->sites[s].key);
        const struct json *at = site != NULL ? json_get(site, "at") : NULL;
        const struct json *names = site != NULL ? json_get(site, "frames") : NULL;
        for (size_t k = 0; at != NULL && at->type == JSON_ARRAY && k < at->n && k < MAX_FRAMES;
             k++) {
            const struct json *a = &at->items[k];
            if (a->type != JSON_ARRAY || a->n != 3 || a->items[0].type != JSON_STRING ||
                a->items[1].type != JSON_STRING || a->items[2].type != JSON_STRING ||
                a->items[0].str[0] == '\0')
                continue;
            uint64_t pc = strtoull(a->items[1].str, NULL, 16);
            uint64_t base = strtoull(a->items[2].str, NULL, 16);
            struct frame *f = &fr[n++];
            f->site = s;
            f->k = k;
            f->module = a->items[0].str;
            /* A return address: the call is the byte before it. */
            f->addr = (fixed_address(f->module) ? pc : pc - base) - 1;
            if (names != NULL && names->type == JSON_ARRAY && k < names->n &&
                names->items[k].type == JSON_STRING)
                snprintf(f->orig, sizeof f->orig, "%s", names->items[k].str);
        }
    }
    for (size_t i = 0; i < n; i++) {
        bool first = true;
        for (size_t j = 0; j < i && first; j++)
            first = strcmp(fr[j].module, fr[i].module) != 0;
        if (first) resolve_module(tool, fr, n, fr[i].module);
    }
    /* Rewrite the frames of every site that has a resolved one. */
    for (size_t s = 0; s < p->nsites; s++) {
        bool any = false;
        for (size_t i = 0; i < n; i++)
            any |= fr[i].site == s && fr[i].text[0] != '\0';
        if (!any) continue;
        struct prof_site *ps = &p->sites[s];
        size_t at = 0;
        ps->frames[0] = '\0';
        for (size_t i = 0; i < n; i++) {
            if (fr[i].site != s) continue;
            const char *t = fr[i].text[0] != '\0' ? fr[i].text : fr[i].orig;
            int w = snprintf(ps->frames + at, sizeof ps->frames - at, "%s%s", at ? " < " : "", t);
            if (w < 0 || (size_t)w >= sizeof ps->frames - at) break;
            at += (size_t)w;
        }
    }
    free(fr);
}
