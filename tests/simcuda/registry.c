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

void sim_capacity_settle(struct sim_device *dev) {
    if (dev->frees_queued > 0) sim_device_drain(dev);
    sim_releases_apply(dev);
}

bool sim_capacity_take(struct sim_device *dev, uint64_t bytes) {
    sim_releases_apply(dev);
    if (dev->used_bytes + bytes > sim.cfg.device_mem) return false;
    dev->used_bytes += bytes;
    if (dev->used_bytes > dev->peak_bytes) dev->peak_bytes = dev->used_bytes;
    return true;
}

void sim_capacity_give(struct sim_device *dev, uint64_t bytes) {
    dev->used_bytes = bytes > dev->used_bytes ? 0 : dev->used_bytes - bytes;
}
