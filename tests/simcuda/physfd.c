/* The memory behind VMM physical handles: a memfd per handle, with a "home" mapping of the whole
 * of it that carries its page tables from one mapping to the next, and a store of released
 * memfds for reuse.
 *
 * Why: in an offloading run every move maps a handle at an address, unmaps another, creates one
 * handle and releases another of the same size. Done plainly, each mapping refaults every page
 * (one fault per 4 KiB), each new memfd allocates and zeroes its pages again and each release
 * frees them: profiles of the simulator (perf, 8 x 64 MiB buffers cycled through a 288 MiB
 * budget) spent nearly all their time in those page faults and page-table teardowns. Instead:
 * - a handle mapped whole at one address takes its home mapping there with mremap, which moves
 *   the page tables instead of faulting them in again, and gives it back (to a fresh parking
 *   address, PROT_NONE) when unmapped; a second, simultaneous mapping of the same handle, or a
 *   partial one, is a plain mmap of the memfd (it shares the bytes, as before);
 * - a released memfd is kept, with its home and pages, for the next handle of that size (a new
 *   handle's contents are unspecified on the driver too); at most PHYSFD_KEEP of them and
 *   PHYSFD_KEEP_BYTES in all. */
#include "sim.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_READ  22
#define MADV_POPULATE_WRITE 23
#endif

#define PHYSFD_KEEP       32
#define PHYSFD_KEEP_BYTES (1ull << 30)

static pthread_mutex_t store_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf lock */
static struct sim_physmem store[PHYSFD_KEEP];
static int nstore;
static uint64_t store_bytes;

/* A PROT_NONE range of `size` at a 2 MiB boundary (so that mremap moves whole page tables),
 * private to this file. */
static void *parking(uint64_t size) {
    uint64_t align = SIM_GRANULE, span = size + align;
    void *raw = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t base = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    if (base > (uintptr_t)raw) munmap(raw, base - (uintptr_t)raw);
    uintptr_t end = (uintptr_t)raw + span;
    if (end > base + size) munmap((void *)(base + size), end - (base + size));
    return (void *)base;
}

/* A home mapping of the whole memfd at a parking address. */
static void *new_home(int fd, uint64_t size) {
    void *at = parking(size);
    if (at == NULL) return NULL;
    if (mmap(at, size, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
        munmap(at, size);
        return NULL;
    }
    return at;
}

bool sim_physmem_open(struct sim_physmem *pm, uint64_t size) {
    pthread_mutex_lock(&store_lock);
    for (int i = nstore - 1; i >= 0; i--) {
        if (store[i].size != size) continue;
        *pm = store[i];
        store[i] = store[--nstore];
        store_bytes -= size;
        pthread_mutex_unlock(&store_lock);
        return true;
    }
    pthread_mutex_unlock(&store_lock);
    pm->size = size;
    pm->populated = false;
    pm->fd = memfd_create("simcuda-phys", MFD_CLOEXEC);
    if (pm->fd < 0) return false;
    if (ftruncate(pm->fd, (off_t)size) != 0 || (pm->home = new_home(pm->fd, size)) == NULL) {
        close(pm->fd);
        return false;
    }
    return true;
}

void sim_physmem_close(struct sim_physmem *pm) {
    pthread_mutex_lock(&store_lock);
    bool kept = false;
    if (pm->home != NULL && nstore < PHYSFD_KEEP && store_bytes + pm->size <= PHYSFD_KEEP_BYTES) {
        store[nstore++] = *pm;
        store_bytes += pm->size;
        kept = true;
    }
    pthread_mutex_unlock(&store_lock);
    if (kept) return;
    if (pm->home != NULL) munmap(pm->home, pm->size);
    close(pm->fd);
}

bool sim_physmem_map(struct sim_physmem *pm, void *at, uint64_t size, uint64_t offset,
                     bool *holds_home) {
    *holds_home = false;
    if (offset == 0 && size == pm->size && pm->home != NULL) {
        if (mremap(pm->home, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, at) != MAP_FAILED) {
            pm->home = NULL;
            *holds_home = true;
            return true;
        }
    }
    return mmap(at, size, PROT_NONE, MAP_SHARED | MAP_FIXED, pm->fd, (off_t)offset) != MAP_FAILED;
}

void sim_physmem_unmap(struct sim_physmem *pm, void *at, uint64_t size, bool holds_home) {
    if (holds_home) {
        void *park = parking(size);
        mprotect(at, size, PROT_NONE);
        if (park != NULL &&
            mremap(at, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, park) != MAP_FAILED) {
            pm->home = park;
        } else {
            /* Could not move it: a fresh home without page tables. */
            if (park != NULL) munmap(park, size);
            pm->home = new_home(pm->fd, size);
            pm->populated = false;
        }
    }
    /* The address stays reserved, PROT_NONE, as after any unmap. */
    mmap(at, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

void sim_physmem_populate(struct sim_physmem *pm, void *at, uint64_t size, bool writable,
                          bool holds_home) {
    if (sim.cfg.data != SIM_DATA_FULL) return;
    if (holds_home && pm->populated) return; /* its page tables came along */
    /* Only a memfd whose pages all exist already: populating a fresh one would allocate memory
     * the program may never touch. */
    struct stat st;
    if (fstat(pm->fd, &st) != 0 || (uint64_t)st.st_blocks * 512 < (uint64_t)st.st_size) return;
    /* Best effort: an older kernel without MADV_POPULATE_* simply faults later. */
    if (madvise(at, size, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0 && holds_home &&
        writable)
        pm->populated = true;
}
