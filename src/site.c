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
#include <execinfo.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define TABLE 4096                 /* a power of two */
#define WALK  (HO_SITE_FRAMES + 8) /* frames walked: the library's own come first */

struct site {
    uint64_t hash; /* 0: empty */
    uintptr_t pc[HO_SITE_FRAMES];
    size_t n;
};

static struct site table[TABLE];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* This library's base address, to skip its own frames. */
static void *self;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static const char self_anchor; /* any object of this library locates it */

/* libunwind's unw_backtrace (the same signature as glibc's backtrace), or NULL. */
static int (*walker)(void **buffer, int size);

static void find_self(void) {
    Dl_info info;
    self = dladdr(&self_anchor, &info) != 0 ? info.dli_fbase : NULL;
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

uint64_t ho_site_capture(void) {
    pthread_once(&self_once, find_self);
    void *walk[WALK];
    int n = walker != NULL ? walker(walk, WALK) : backtrace(walk, WALK);
    if (n <= 0) return 0;
    /* The hash is of each frame's module name and offset in it, not of its address: the same
     * site gets the same name in every run, whatever address-space randomisation did, so what
     * depends on it (the lookahead policy's roles, hence its plan) is reproducible. */
    uintptr_t pc[HO_SITE_FRAMES];
    size_t k = 0;
    bool outside = false;
    uint64_t h = 0;
    for (int i = 0; i < n && k < HO_SITE_FRAMES; i++) {
        Dl_info info;
        bool known = dladdr(walk[i], &info) != 0;
        if (!outside && known && info.dli_fbase == self) continue;
        outside = true;
        pc[k++] = (uintptr_t)walk[i];
        if (known && info.dli_fname != NULL) {
            const char *base = strrchr(info.dli_fname, '/');
            for (const char *c = base != NULL ? base + 1 : info.dli_fname; *c != '\0'; c++)
                h = mix(h, (unsigned char)*c);
            h = mix(h, (uintptr_t)walk[i] - (uintptr_t)info.dli_fbase);
        } else {
            h = mix(h,
                    (uintptr_t)walk[i]); /* anonymous code (a JIT): its address is all there is */
        }
    }
    if (k == 0) return 0;
    if (h == 0) h = 1;
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0, s = h & (TABLE - 1); i < TABLE; i++, s = (s + 1) & (TABLE - 1)) {
        if (table[s].hash == h) break;
        if (table[s].hash == 0) {
            table[s].hash = h;
            memcpy(table[s].pc, pc, k * sizeof *pc);
            table[s].n = k;
            break;
        }
    }
    pthread_mutex_unlock(&table_lock);
    return h;
}

size_t ho_site_frames(uint64_t site, uintptr_t *out, size_t cap) {
    size_t n = 0;
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0, s = site & (TABLE - 1); site != 0 && i < TABLE;
         i++, s = (s + 1) & (TABLE - 1)) {
        if (table[s].hash == 0) break;
        if (table[s].hash != site) continue;
        n = table[s].n < cap ? table[s].n : cap;
        memcpy(out, table[s].pc, n * sizeof *out);
        break;
    }
    pthread_mutex_unlock(&table_lock);
    return n;
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
