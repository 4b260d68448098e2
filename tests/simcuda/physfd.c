/* The memory behind VMM physical handles: memfds, kept for reuse after their handle is gone.
 *
 * Why: in an offloading run every move creates one handle and releases another of the same size.
 * A fresh memfd's pages are allocated and zeroed at first touch, one page fault each, and freed
 * again when the last descriptor closes; profiles of the simulator (perf, 8 x 64 MiB buffers
 * cycled through a 288 MiB budget) spent most of their time there. A released memfd keeps its
 * pages: the next handle of that size takes it, and mapping it can fill its page tables in one
 * call instead of a fault per page. A new handle's contents are unspecified on the driver too. */
#include "sim.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_READ  22
#define MADV_POPULATE_WRITE 23
#endif

/* At most this many released memfds and bytes are kept (the rest are closed). */
#define PHYSFD_KEEP       32
#define PHYSFD_KEEP_BYTES (1ull << 30)

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf lock */
static struct {
    int fd;
    uint64_t size;
} cache[PHYSFD_KEEP];
static int ncache;
static uint64_t cache_bytes;

int sim_physfd_get(uint64_t size) {
    pthread_mutex_lock(&cache_lock);
    for (int i = ncache - 1; i >= 0; i--) {
        if (cache[i].size != size) continue;
        int fd = cache[i].fd;
        cache[i] = cache[--ncache];
        cache_bytes -= size;
        pthread_mutex_unlock(&cache_lock);
        return fd;
    }
    pthread_mutex_unlock(&cache_lock);
    int fd = memfd_create("simcuda-phys", MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void sim_physfd_put(int fd, uint64_t size) {
    pthread_mutex_lock(&cache_lock);
    if (ncache < PHYSFD_KEEP && cache_bytes + size <= PHYSFD_KEEP_BYTES) {
        cache[ncache].fd = fd;
        cache[ncache].size = size;
        ncache++;
        cache_bytes += size;
        fd = -1;
    }
    pthread_mutex_unlock(&cache_lock);
    if (fd >= 0) close(fd);
}

void sim_physfd_populate(int fd, void *addr, uint64_t size, bool writable) {
    if (sim.cfg.data != SIM_DATA_FULL) return;
    /* Only a memfd whose pages all exist already: populating a fresh one would allocate memory
     * the program may never touch. */
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size) return;
    /* Best effort: an older kernel without MADV_POPULATE_* simply faults later. */
    (void)madvise(addr, size, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
}
