/* Allocation sites (see site.h). The table of sites seen is a fixed open-addressing array under
 * a mutex: a process has a few hundred allocation sites, and a full table only stops naming new
 * sites (their hash still identifies them).
 *
 * libunwind is opened at run time (dlopen "libunwind.so.8", then "libunwind.so"), not linked:
 * the library must load into any training job, and a machine without libunwind still gets sites
 * from glibc's backtrace() (libgcc's unwinder), only slower to walk. ThreadSanitizer builds use
 * backtrace() too: unw_backtrace keeps a per-thread cache whose destructor runs at thread exit
 * after TSan has torn the thread's state down, and crashes there. */
#include "site.h"
#include "log.h"

#include <dlfcn.h>
#include <link.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define TABLE 4096                 /* a power of two */
#define WALK  (HO_SITE_FRAMES + 8) /* frames walked: the library's own come first */

struct site {
    uint64_t raw;  /* hash of the addresses (this process's name for the stack); 0: empty */
    uint64_t hash; /* hash of module names and offsets (the same in every run) */
    uintptr_t pc[HO_SITE_FRAMES];
    size_t n;
};

static struct site table[TABLE];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* This library's code, to skip its own frames: the extent of its loaded segments. */
static uintptr_t self_lo, self_hi;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static const char self_anchor; /* any object of this library locates it */

/* libunwind's unw_backtrace (the same signature as glibc's backtrace), or NULL. */
static int (*walker)(void **buffer, int size);

static int find_segments(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    (void)arg;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_LOAD) continue;
        uintptr_t a = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
        if (a < lo) lo = a;
        if (a + info->dlpi_phdr[i].p_memsz > hi) hi = a + info->dlpi_phdr[i].p_memsz;
    }
    if ((uintptr_t)&self_anchor < lo || (uintptr_t)&self_anchor >= hi) return 0;
    self_lo = lo;
    self_hi = hi;
    return 1;
}

static void find_self(void) {
    dl_iterate_phdr(find_segments, NULL);
#if defined(__SANITIZE_THREAD__)
    return;
#endif
    static const char *const names[] = {"libunwind.so.8", "libunwind.so"};
    for (size_t i = 0; i < sizeof names / sizeof names[0] && walker == NULL; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h == NULL) continue;
        *(void **)&walker = dlsym(h, "unw_backtrace");
        if (walker == NULL) dlclose(h);
    }
    if (walker == NULL)
        ho_log(HO_LOG_INFO, "libunwind not found: allocation sites come from glibc's backtrace()");
}

static uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
}

/* The stable name of a stack: each frame's module name and offset in it, not its address, so
 * the same site gets the same name in every run whatever address-space randomisation did, and
 * what depends on it (the lookahead policy's roles, hence its plan) is reproducible. dladdr per
 * frame is the slow part: it runs once per distinct stack (the table remembers). */
static uint64_t stable_hash(const uintptr_t *pc, size_t n) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) {
        Dl_info info;
        if (dladdr((void *)pc[i], &info) != 0 && info.dli_fname != NULL) {
            const char *base = strrchr(info.dli_fname, '/');
            for (const char *c = base != NULL ? base + 1 : info.dli_fname; *c != '\0'; c++)
                h = mix(h, (unsigned char)*c);
            h = mix(h, pc[i] - (uintptr_t)info.dli_fbase);
        } else {
            h = mix(h, pc[i]); /* anonymous code (a JIT): its address is all there is */
        }
    }
    return h != 0 ? h : 1;
}

uint64_t ho_site_capture(void) {
    pthread_once(&self_once, find_self);
    void *walk[WALK];
    int n = walker != NULL ? walker(walk, WALK) : backtrace(walk, WALK);
    if (n <= 0) return 0;
    uintptr_t pc[HO_SITE_FRAMES];
    size_t k = 0;
    uint64_t raw = 0;
    for (int i = 0; i < n && k < HO_SITE_FRAMES; i++) {
        uintptr_t a = (uintptr_t)walk[i];
        if (k == 0 && a >= self_lo && a < self_hi) continue; /* the library's own frames */
        pc[k++] = a;
        raw = mix(raw, a);
    }
    if (k == 0) return 0;
    if (raw == 0) raw = 1;
    pthread_mutex_lock(&table_lock);
    size_t s = raw & (TABLE - 1), i = 0;
    for (; i < TABLE && table[s].raw != 0 && table[s].raw != raw; i++)
        s = (s + 1) & (TABLE - 1);
    uint64_t h = i < TABLE && table[s].raw == raw ? table[s].hash : 0;
    pthread_mutex_unlock(&table_lock);
    if (h != 0) return h;
    h = stable_hash(pc, k); /* outside the lock: dladdr takes the loader's */
    pthread_mutex_lock(&table_lock);
    for (i = 0, s = raw & (TABLE - 1); i < TABLE; i++, s = (s + 1) & (TABLE - 1)) {
        if (table[s].raw == raw) break;
        if (table[s].raw == 0) {
            table[s] = (struct site){raw, h, {0}, k};
            memcpy(table[s].pc, pc, k * sizeof *pc);
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return h;
}

size_t ho_site_frames(uint64_t site, uintptr_t *out, size_t cap) {
    /* The table is keyed by the addresses' hash: a report's few hundred lookups scan it. */
    size_t n = 0;
    pthread_mutex_lock(&table_lock);
    for (size_t s = 0; site != 0 && s < TABLE; s++) {
        if (table[s].raw == 0 || table[s].hash != site) continue;
        n = table[s].n < cap ? table[s].n : cap;
        memcpy(out, table[s].pc, n * sizeof *out);
        break;
    }
    pthread_mutex_unlock(&table_lock);
    return n;
}

bool ho_site_locate(uintptr_t pc, char *path, size_t cap, uintptr_t *base) {
    Dl_info info;
    if (dladdr((void *)pc, &info) == 0 || info.dli_fname == NULL || info.dli_fname[0] == '\0')
        return false;
    /* The main program is named as it was run ("./prog"): made absolute from the current
     * directory (right unless the program changed it), so the report reads from anywhere. */
    char abs[PATH_MAX];
    if (info.dli_fname[0] != '/' && realpath(info.dli_fname, abs) != NULL)
        snprintf(path, cap, "%s", abs);
    else
        snprintf(path, cap, "%s", info.dli_fname);
    *base = (uintptr_t)info.dli_fbase;
    return true;
}

void ho_site_describe(uintptr_t pc, char *buf, size_t cap) {
    Dl_info info;
    if (dladdr((void *)pc, &info) == 0 || info.dli_fname == NULL) {
        snprintf(buf, cap, "0x%llx", (unsigned long long)pc);
        return;
    }
    const char *mod = strrchr(info.dli_fname, '/');
    mod = mod != NULL ? mod + 1 : info.dli_fname;
    if (info.dli_sname != NULL)
        snprintf(buf, cap, "%s!%s+0x%llx", mod, info.dli_sname,
                 (unsigned long long)(pc - (uintptr_t)info.dli_saddr));
    else
        snprintf(buf, cap, "%s+0x%llx", mod, (unsigned long long)(pc - (uintptr_t)info.dli_fbase));
}
