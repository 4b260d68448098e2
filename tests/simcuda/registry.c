/* Registry of the ranges the simulated device knows: a sorted array searched by binary search.
 * Callers hold sim.lock. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

static struct sim_range **ranges;
static size_t nranges, cap;

/* Index of the last range whose base <= addr, or -1. */
static long floor_index(uint64_t addr) {
    long lo = 0, hi = (long)nranges - 1, ans = -1;
    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (ranges[mid]->base <= addr) {
            ans = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return ans;
}

struct sim_range *sim_range_add(uint64_t base, uint64_t size, enum sim_range_kind kind,
                                int device) {
    if (nranges == cap) {
        size_t ncap = cap ? cap * 2 : 256;
        struct sim_range **n = realloc(ranges, ncap * sizeof *n);
        if (n == NULL) return NULL;
        ranges = n;
        cap = ncap;
    }
    struct sim_range *r = calloc(1, sizeof *r);
    if (r == NULL) return NULL;
    r->base = base;
    r->size = size;
    r->kind = kind;
    r->device = device;
    r->buffer_id = ++sim.next_id;
    long at = floor_index(base) + 1;
    memmove(&ranges[at + 1], &ranges[at], (nranges - (size_t)at) * sizeof *ranges);
    ranges[at] = r;
    nranges++;
    return r;
}

void sim_range_remove(struct sim_range *r) {
    long at = floor_index(r->base);
    while (at >= 0 && ranges[at] != r)
        at--;
    if (at < 0) return;
    memmove(&ranges[at], &ranges[at + 1], (nranges - (size_t)at - 1) * sizeof *ranges);
    nranges--;
    free(r);
}

struct sim_range *sim_range_find(uint64_t addr) {
    long at = floor_index(addr);
    if (at < 0) return NULL;
    struct sim_range *r = ranges[at];
    return addr < r->base + r->size ? r : NULL;
}

/* Applies the releases whose virtual time has come. */
static void apply_releases(struct sim_device *dev) {
    uint64_t now = sim_now();
    size_t w = 0;
    for (size_t i = 0; i < dev->nreleases; i++) {
        if (dev->releases[i].at_ns <= now)
            sim_capacity_give(dev, dev->releases[i].bytes);
        else
            dev->releases[w++] = dev->releases[i];
    }
    dev->nreleases = w;
}

void sim_capacity_give_at(struct sim_device *dev, uint64_t bytes, uint64_t at_ns, void *va,
                          uint64_t va_size) {
    if (dev->nreleases == dev->cap_releases) {
        size_t cap = dev->cap_releases ? dev->cap_releases * 2 : 64;
        struct sim_release *n = realloc(dev->releases, cap * sizeof *n);
        if (n == NULL) {
            sim_capacity_give(dev, bytes); /* early rather than never; the range is not reused */
            return;
        }
        dev->releases = n;
        dev->cap_releases = cap;
    }
    dev->releases[dev->nreleases++] = (struct sim_release){bytes, at_ns, va, va_size};
}

void sim_capacity_settle(struct sim_device *dev) {
    if (dev->frees_queued > 0) sim_device_drain(dev);
    apply_releases(dev);
}

bool sim_capacity_take(struct sim_device *dev, uint64_t bytes) {
    apply_releases(dev);
    if (dev->used_bytes + bytes > sim.cfg.device_mem) return false;
    dev->used_bytes += bytes;
    if (dev->used_bytes > dev->peak_bytes) dev->peak_bytes = dev->used_bytes;
    return true;
}

void sim_capacity_give(struct sim_device *dev, uint64_t bytes) {
    dev->used_bytes = bytes > dev->used_bytes ? 0 : dev->used_bytes - bytes;
}
