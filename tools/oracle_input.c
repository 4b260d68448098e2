/* Numbering a trace as the engine will see its replay (see oracle_input.h):
 * - buffers: every allocation the engine manages, in order: those of at least the replay's
 *   HOSTOFF_MIN_BYTES (the library's default unless --min-bytes says otherwise) that are not
 *   managed memory, each the size the engine maps (a whole number of 2 MiB granules, the
 *   simulated driver's);
 * - launches: those using at least one such buffer (the engine shows its policy no others).
 * If the replay ever diverges (an allocation the engine could not manage), the numbers shift and
 * the oracle's moves land on the wrong buffers: slower, never incorrect, since the engine still
 * checks every move. */
#include "oracle_input.h"
#include "outfile.h"
#include "u64map.h"
#include "oracle.h"
#include "move_cost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRANULE (2ull << 20)

/* Whether the engine manages this allocation in the replay (ho_engine_alloc's test). */
static bool engine_takes(const struct tev *e, uint64_t min_bytes) {
    return !e->managed && e->bytes >= min_bytes;
}

uint64_t oracle_unmanaged_peak(const struct trace *t, uint64_t min_bytes) {
    struct u64map live = {0};
    uint64_t now = 0, peak = 0, bytes;
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        if (e->kind == TEV_ALLOC && !engine_takes(e, min_bytes)) {
            if (u64map_put(&live, e->id, e->bytes)) now += e->bytes;
            if (now > peak) peak = now;
        } else if (e->kind == TEV_FREE && u64map_get(&live, e->id, &bytes)) {
            now -= bytes;
            u64map_del(&live, e->id);
        }
    }
    u64map_free(&live);
    return peak;
}

uint64_t oracle_largest_taken(const struct trace *t, uint64_t min_bytes) {
    uint64_t most = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        if (e->kind == TEV_ALLOC && engine_takes(e, min_bytes)) {
            uint64_t mapped = (e->bytes + GRANULE - 1) / GRANULE * GRANULE;
            if (mapped > most) most = mapped;
        }
    }
    return most;
}

int oracle_write_plan(const struct trace *t, uint64_t budget, uint64_t min_bytes, double h2d_gbps,
                      const char *path, char *err, size_t errcap) {
    struct u64map live = {0};
    size_t nbuf = 0, nlaunch = 0, nuse = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->ev[i].kind == TEV_ALLOC && engine_takes(&t->ev[i], min_bytes)) nbuf++;
        if (t->ev[i].kind == TEV_LAUNCH) nuse += t->ev[i].nuse;
    }
    uint64_t *bytes = calloc(nbuf + 1, sizeof *bytes), *born = calloc(nbuf + 1, sizeof *born);
    uint64_t *dies = calloc(nbuf + 1, sizeof *dies), *use = calloc(nuse + 1, sizeof *use);
    uint64_t *ns = calloc(t->launches + 1, sizeof *ns);
    size_t *use_start = calloc(t->launches + 2, sizeof *use_start);
    int rc = -1;
    struct ho_oracle_plan plan = {0};
    if (bytes == NULL || born == NULL || dies == NULL || use == NULL || ns == NULL ||
        use_start == NULL) {
        snprintf(err, errcap, "out of memory");
        goto done;
    }
    size_t b = 0, k = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct tev *e = &t->ev[i];
        uint64_t ord;
        switch (e->kind) {
        case TEV_ALLOC:
            if (!engine_takes(e, min_bytes)) {
                u64map_del(&live, e->id);
                break;
            }
            bytes[b] = (e->bytes + GRANULE - 1) / GRANULE * GRANULE;
            if (bytes[b] == 0) bytes[b] = GRANULE;
            born[b] = nlaunch;
            dies[b] = UINT64_MAX;
            if (!u64map_put(&live, e->id, b)) {
                snprintf(err, errcap, "out of memory");
                goto done;
            }
            b++;
            break;
        case TEV_FREE:
            if (u64map_get(&live, e->id, &ord)) {
                dies[ord] = nlaunch;
                u64map_del(&live, e->id);
            }
            break;
        case TEV_LAUNCH: {
            size_t first = k;
            for (uint32_t u = 0; u < e->nuse; u++)
                if (u64map_get(&live, t->uses[e->use_at + u], &ord)) use[k++] = ord;
            if (k == first) break; /* no managed buffer: the engine does not count it */
            ns[nlaunch] = e->ns;
            use_start[++nlaunch] = k;
            break;
        }
        default:
            break;
        }
    }
    for (size_t i = 0; i < nbuf; i++)
        if (dies[i] == UINT64_MAX) dies[i] = nlaunch;
    /* The fixed driver time of a round trip, as the engine starts with it (move_cost.h). */
    struct ho_oracle_input in = {nlaunch,
                                 ns,
                                 use_start,
                                 use,
                                 nbuf,
                                 bytes,
                                 born,
                                 dies,
                                 budget,
                                 h2d_gbps * 1e9,
                                 HO_PUBLISHED_EVICT_REMAP_NS + HO_PUBLISHED_RESTORE_REMAP_NS};
    if (ho_oracle_plan(&in, &plan) != 0) {
        snprintf(err, errcap, "out of memory while planning");
        goto done;
    }
    /* Created like every file hostoff writes (src/outfile.h), though the replay's own
     * temporary directory is private. */
    struct ho_outfile out;
    const char *why = "cannot be written";
    FILE *f = ho_outfile_open(&out, path, &why) == 0 ? fdopen(out.fd, "w") : NULL;
    bool ok = f != NULL && ho_oracle_write(&plan, f) == 0;
    if (f != NULL) {
        ok = fflush(f) == 0 && ok;
        out.fd = -1; /* fclose closes it */
        ok = fclose(f) == 0 && ok;
    }
    if (!ok || ho_outfile_commit(&out, &why) != 0) {
        if (!ok) ho_outfile_abort(&out);
        snprintf(err, errcap, "%s: cannot write the plan: %s", path, why);
        goto done;
    }
    rc = 0;
done:
    ho_oracle_free(&plan);
    u64map_free(&live);
    free(bytes);
    free(born);
    free(dies);
    free(use);
    free(ns);
    free(use_start);
    return rc;
}
