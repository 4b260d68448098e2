/* The simulated device's address space: device address == process address.
 *
 * Everything the device can address is a real mapping in this process, so kernel bodies read and
 * write it directly. Anything reserved but not mapped, and anything freed, is PROT_NONE: touching
 * it faults, and the fault guard turns that into the device's illegal-address error. Freed ranges
 * stay reserved (PROT_NONE, pages dropped) and are reused by later allocations of the same size,
 * so a stale device pointer never lands in unrelated host memory. */
#include "sim.h"

#include <stdlib.h>
#include <sys/mman.h>

struct retired {
    void *addr;
    uint64_t size;
    struct retired *next;
};

/* Retired ranges by exact size, oldest first (lock held by callers). */
static struct retired *retired_head, *retired_tail;

static const int map_flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

void *sim_va_reserve(uint64_t size, uint64_t align) {
    for (struct retired **pp = &retired_head, *prev = NULL; *pp != NULL;
         prev = *pp, pp = &(*pp)->next) {
        struct retired *r = *pp;
        if (r->size == size && ((uintptr_t)r->addr & (align - 1)) == 0) {
            *pp = r->next;
            if (retired_tail == r) retired_tail = prev;
            void *addr = r->addr;
            free(r);
            return addr;
        }
    }
    if (align < 4096) align = 4096;
    uint64_t span = size + align;
    void *raw = mmap(NULL, span, PROT_NONE, map_flags, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uintptr_t base = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    /* Give back the slack on both sides so neighbours stay unrelated. */
    if (base > (uintptr_t)raw) munmap(raw, base - (uintptr_t)raw);
    uintptr_t end = (uintptr_t)raw + span;
    if (end > base + size) munmap((void *)(base + size), end - (base + size));
    return (void *)base;
}

bool sim_va_commit(void *addr, uint64_t size) {
    return mmap(addr, size, PROT_READ | PROT_WRITE, map_flags | MAP_FIXED, -1, 0) != MAP_FAILED;
}

void sim_va_close(void *addr, uint64_t size) {
    /* Replacing the mapping drops its pages and leaves the range PROT_NONE. */
    mmap(addr, size, PROT_NONE, map_flags | MAP_FIXED, -1, 0);
}

void sim_va_recycle(void *addr, uint64_t size) {
    struct retired *r = malloc(sizeof *r);
    if (r == NULL) return; /* the range stays PROT_NONE forever: safe, merely unused */
    r->addr = addr;
    r->size = size;
    r->next = NULL;
    if (retired_tail != NULL)
        retired_tail->next = r;
    else
        retired_head = r;
    retired_tail = r;
}

void sim_va_retire(void *addr, uint64_t size) {
    sim_va_close(addr, size);
    sim_va_recycle(addr, size);
}
