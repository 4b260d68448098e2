/* The GPU kit's kernel bodies for the simulator: the host functions KIT_SIM_IMAGE names (see
 * kit.h and docs/simcuda.md). They run on the simulator's executor thread with the launch's
 * parameters; device address == process address there. On a GPU they are linked in but never
 * called (the cubin's kernels run instead). kit_spin has no body here: the image declares it
 * `ns=param:0`, so its virtual duration is its parameter and nothing runs. */
#include "kit.h"

#include <stddef.h>

/* simcuda's extension, weak: a real libcuda.so.1 does not have it. */
extern void simcuda_set_duration_ns(uint64_t ns) __attribute__((weak));

/* Virtual duration: the bytes a kernel moves at an HBM-like 3 TB/s, plus 2 us. */
static void duration(uint64_t bytes) {
    if (simcuda_set_duration_ns != NULL) simcuda_set_duration_ns(2000 + bytes / 3000);
}

static void add_errors(uint64_t *errors, uint64_t bad) {
    if (bad != 0) __atomic_fetch_add(errors, bad, __ATOMIC_RELAXED);
}

#define U64(i) (*(uint64_t *)p[i])
#define PTR(i) (*(uint64_t **)p[i])

void kit_fill(void **p);
void kit_check(void **p);
void kit_vu3(void **p);
void kit_read(void **p);
void kit_wide(void **p);

void kit_fill(void **p) {
    uint64_t *buf = PTR(0), id = U64(1), version = U64(2), words = U64(3);
    for (uint64_t i = 0; i < words; i++)
        buf[i] = kit_word(id, version, i);
    duration(8 * words);
}

void kit_check(void **p) {
    const uint64_t *buf = PTR(0);
    uint64_t id = U64(1), version = U64(2), words = U64(3), bad = 0;
    for (uint64_t i = 0; i < words; i++)
        bad += buf[i] != kit_word(id, version, i);
    add_errors(PTR(4), bad);
    duration(8 * words);
}

void kit_vu3(void **p) {
    uint64_t bad = 0, bytes = 0;
    for (int s = 0; s < KIT_SLOTS; s++) {
        uint64_t *buf = PTR(4 * s);
        if (buf == NULL) continue;
        uint64_t id = U64(4 * s + 1), version = U64(4 * s + 2), words = U64(4 * s + 3);
        for (uint64_t i = 0; i < words; i++) {
            bad += buf[i] != kit_word(id, version, i);
            buf[i] = kit_word(id, version + 1, i);
        }
        bytes += 16 * words;
    }
    add_errors(PTR(4 * KIT_SLOTS), bad);
    duration(bytes);
}

void kit_read(void **p) {
    const uint64_t *buf = PTR(0);
    uint64_t words = U64(1), acc = 0;
    for (uint64_t i = 0; i < words; i++)
        acc ^= buf[i];
    if (acc == KIT_READ_MAGIC) PTR(2)[0] = acc;
    duration(8 * words);
}

void kit_wide(void **p) {
    const struct kit_wide_args *a = p[0];
    uint64_t bad = 0;
    for (uint64_t b = 0; b < a->count && b < KIT_WIDE_MAX; b++) {
        uint64_t *buf = a->buf[b];
        for (uint64_t i = 0; i < a->words; i++) {
            bad += buf[i] != kit_word(a->id[b], a->version, i);
            buf[i] = kit_word(a->id[b], a->version + 1, i);
        }
    }
    add_errors(*(uint64_t **)p[1], bad);
    duration(16 * a->words * a->count);
}
