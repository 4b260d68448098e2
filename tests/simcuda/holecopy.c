/* Copies that keep holes: a copy between two VMM mappings (memfds, physfd.c) in full data mode
 * moves only the pages of its source that hold data, and punches the destination where the
 * source is a hole, instead of reading and writing every byte.
 *
 * Why: the bytes are the same either way (a hole reads as zeros, and so does a punched range),
 * but a program whose buffers are never written, or only in part, the way a new user's first
 * try and most of the tests are, otherwise pays for the simulator itself: every eviction of a
 * 64 MiB buffer read 16k zero pages into existence (each a shmem fault) and wrote them, and
 * every later mapping of the memfd faulted them in again. Profiled on issue 16's user program
 * (8 x 64 MiB cycled through a 288 MiB budget for 30 steps) that was nearly all of its wall
 * time. Virtual time is not affected: the copy engine's timing model charges the whole copy
 * (executor.c), as the real link would. Only whole single-row copies of at least
 * HOLECOPY_MIN_BYTES between distinct, non-overlapping memfd ranges take this path; everything
 * else is copied byte for byte as before. */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define HOLECOPY_MIN_BYTES (2u << 20)

/* The memfd behind [addr, addr + bytes) when one mapping covers it all. */
static bool memfd_of(const void *p, size_t bytes, int *fd, uint64_t *off) {
    struct sim_lookup lk;
    uint64_t addr = (uint64_t)(uintptr_t)p;
    sim_lookup(addr, &lk);
    if (lk.range == NULL || lk.fd < 0 || addr + bytes > lk.mapping_base + lk.mapping_size)
        return false;
    *fd = lk.fd;
    *off = lk.fd_offset;
    return true;
}

int sim_holecopy_plan(const struct sim_copy_op *c, struct sim_copy_segment *seg, int cap) {
    if (c->staging != NULL || c->height > 1 || c->bytes < HOLECOPY_MIN_BYTES) return -1;
    int sfd, dfd;
    uint64_t soff, doff, n = c->bytes;
    if (!memfd_of(c->src, n, &sfd, &soff) || !memfd_of(c->dst, n, &dfd, &doff)) return -1;
    if (sfd == dfd && soff < doff + n && doff < soff + n) return -1; /* overlapping: memmove */
    /* The source's data and holes, in order; a hole is punched in the destination at once (the
     * lock is held: no other operation runs), data is left to the caller. */
    int nseg = 0;
    uint64_t at = soff, end = soff + n;
    while (at < end) {
        off_t data = lseek(sfd, (off_t)at, SEEK_DATA);
        uint64_t data_at = data < 0 ? end : (uint64_t)data;
        if (data < 0 && errno != ENXIO) return nseg == 0 ? -1 : nseg; /* unknown: copy all */
        if (data_at > end) data_at = end;
        if (data_at > at && fallocate(dfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                      (off_t)(doff + (at - soff)), (off_t)(data_at - at)) != 0) {
            /* Cannot punch: copy this stretch of zeros as bytes. */
            if (nseg == cap) return -1;
            seg[nseg++] = (struct sim_copy_segment){at - soff, data_at - at};
        }
        if (data_at >= end) break;
        off_t hole = lseek(sfd, (off_t)data_at, SEEK_HOLE);
        uint64_t hole_at = hole < 0 ? end : (uint64_t)hole;
        if (hole_at > end) hole_at = end;
        if (nseg == cap) return -1; /* too fragmented to be worth it: copy all */
        seg[nseg++] = (struct sim_copy_segment){data_at - soff, hole_at - data_at};
        at = hole_at;
    }
    return nseg;
}
