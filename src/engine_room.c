/* Room under a device's budget: cached device memory given back first, then the planned evictions
 * waiting behind the background cap, then evictions of the least valuable buffers, and waiting for
 * the copies that free the memory; reclaiming when the driver itself is out of memory; the device
 * and host byte counts the report shows. */
#include "engine_internal.h"

#include "log.h"
#include "policy.h"
#include "real.h"
#include "stats.h"

#include <stdlib.h>

void ho_device_bytes(int64_t delta) {
    uint64_t now = atomic_fetch_add(&ho_stats.bytes_device_now, (uint64_t)delta) + (uint64_t)delta;
    if (delta > 0) ho_peak(&ho_stats.bytes_peak_device, now);
}

void ho_note_host_peak(void) {
    HO_ASSERT_HELD(&eng.lock);
    ho_peak(&ho_stats.bytes_peak_host, eng.host_used + eng.host_waste + eng.host_pooled);
}

static bool protected_buf(const struct ho_managed *m, struct ho_managed *const *protect, int n) {
    for (int i = 0; i < n; i++)
        if (protect[i] == m) return true;
    return false;
}

/* Starts evicting the least valuable movable buffers of device d until `need` more bytes would
 * fit (eng.lock held). Returns how many evictions it started; sets *host_full when the host side
 * refused one. Least valuable: once the lookahead policy predicts, the buffer needed furthest
 * ahead (only those needed later than `beyond` launches from now are candidates); else the least
 * recently used. */
size_t ho_evict_for(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                    int nprotect, uint64_t beyond, bool *host_full) {
    HO_ASSERT_HELD(&eng.lock);
    bool predicts = ho_predicting();
    size_t started = 0;
    /* Pooled device memory does not count: it is given up before anything is evicted. */
    while (d->resident - d->evicting - d->cached + need > d->budget && !*host_full) {
        size_t n = 0, cap = 0;
        for (struct ho_managed *m = eng.all; m != NULL; m = m->next)
            cap++;
        struct ho_policy_candidate *c = calloc(cap ? cap : 1, sizeof *c);
        struct ho_managed **by_id = calloc(cap ? cap : 1, sizeof *by_id);
        uint64_t *victims = calloc(cap ? cap : 1, sizeof *victims);
        size_t k = 0, round = 0;
        if (c != NULL && by_id != NULL && victims != NULL) {
            for (struct ho_managed *m = eng.all; m != NULL; m = m->next) {
                if (dev_of(m) != d || m->pinned || m->tr != NULL ||
                    atomic_load(&m->state) != HO_RESIDENT || protected_buf(m, protect, nprotect))
                    continue;
                uint64_t next = predicts ? ho_predicted_next_use(m) : HO_NEXT_USE_UNKNOWN;
                if (predicts && next <= beyond) continue;
                /* The candidate's id is its index here, so a victim is found without a search. */
                by_id[n] = m;
                c[n] = (struct ho_policy_candidate){n, m->span, atomic_load(&m->last_use), next};
                n++;
            }
            uint64_t over = d->resident - d->evicting - d->cached + need - d->budget;
            k = ho_policy_victims(predicts ? HO_POLICY_FURTHEST : HO_POLICY_LRU, over, c, n,
                                  victims, n);
            for (size_t i = 0; i < k && !*host_full; i++) {
                if (ho_start_evict(by_id[victims[i]]))
                    round++;
                else
                    *host_full = true;
            }
        }
        free(c);
        free(by_id);
        free(victims);
        started += round;
        if (round == 0) break;
    }
    return started;
}

/* Room is needed now (ho_make_room, below): the planned evictions whose launch has run start,
 * oldest first, however much is already in flight, until `need` more bytes would fit. The
 * background cap keeps planned moves from delaying an urgent one; once room is urgent, a planned
 * eviction is the cheapest room there is: its buffer was leaving anyway and the plan brings it back
 * in time, while the victim the engine would choose instead (needed furthest ahead) is one the plan
 * keeps, so it comes back on demand and the planned one still leaves later. On gpt2-1k.tensor
 * at 70% each steady step's 3.3 GB logits allocation found 6.5 GB of planned evictions waiting
 * behind the cap (1.2 GB in flight). On the policy benchmark (docs/policy-benchmark.md, fifth
 * round) it shortened 11 rows' steady step (up to 16%, llama-32k.tensor c2c 80%) and
 * lengthened 2 (by 0.7% and 2.6%). Those whose launch has not run yet keep waiting: starting
 * them would make this allocation wait for the device to get there; and so do the buffers the
 * call that needs the room uses (a restore's launch). */
static void defer_ready(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                        int nprotect) {
    HO_ASSERT_HELD(&eng.lock);
    for (size_t i = 0; i < d->ndefer && d->resident - d->evicting - d->cached + need > d->budget;) {
        if (ho_event_query(d, d->defer[i].after) == CUDA_ERROR_NOT_READY) {
            i++;
            continue;
        }
        struct ho_managed *m = d->defer[i].m;
        if (protected_buf(m, protect, nprotect)) {
            i++;
            continue;
        }
        ho_defer_drop(d, m);
        if (d->budget != UINT64_MAX && !m->pinned && m->tr == NULL &&
            atomic_load(&m->state) == HO_RESIDENT)
            ho_start_evict(m);
    }
}

/* Makes `need` more bytes fit device d's budget (a pooled chunk of exactly `need` bytes is room:
 * the caller takes it): evicts, then waits for the copies that free the memory. Moves in flight
 * hold their buffers (they are no candidates): when nothing else is left, wait for the oldest of
 * them to land and try again. eng.lock held. */
enum ho_room ho_make_room(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                          int nprotect, uint64_t *stall) {
    HO_ASSERT_HELD(&eng.lock);
    if (d->budget == UINT64_MAX || need > d->budget)
        return need > d->budget ? HO_ROOM_NONE : HO_ROOM_OK;
    /* Memory held for reuse on a stream goes before anything is evicted (engine_sfree.c). */
    if (d->sfree != NULL && !ho_room_for(d, need)) ho_sfree_flush(d, 0);
    ho_cache_trim(d, need, d->budget);
    if (atomic_load(&eng.capturing) > 0) return HO_ROOM_OVER_LIMIT; /* nothing moves meanwhile */
    ho_defer_poll(d);                        /* planned evictions that can start now come first, */
    defer_ready(d, need, protect, nprotect); /* and past the background cap those this room needs */
    bool host_full = false;
    /* A move can fail (the driver refused a copy or a remap: the buffer then stays where it was),
     * so try again while attempts still start moves, a bounded number of times. */
    for (int attempt = 0; attempt < 16; attempt++) {
        size_t started = ho_evict_for(d, need, protect, nprotect, 0, &host_full);
        bool waited = false;
        /* Evictions first (they run at the link's pace), then frees (they wait for the device to
         * reach the buffers' last uses). */
        while (!ho_room_for(d, need) &&
               (d->head[HO_Q_EVICT] != NULL || d->head[HO_Q_FREE] != NULL)) {
            int q = d->head[HO_Q_EVICT] != NULL ? HO_Q_EVICT : HO_Q_FREE;
            struct ho_transition *head = d->head[q];
            *stall += ho_wait_move(head->m);
            if (d->head[q] == head) break; /* the driver would not wait: no room this way */
            /* A completed move or free may have landed its memory in the pool. */
            ho_cache_trim(d, need, d->budget);
            waited = true;
        }
        if (ho_room_for(d, need)) return HO_ROOM_OK;
        if (host_full) break;
        /* Still short: moves that landed (a prefetch, or an eviction a use cancelled) left
         * candidates behind; go round again unless this round changed nothing. */
        struct ho_transition *restoring = d->head[HO_Q_RESTORE];
        if (restoring != NULL) {
            *stall += ho_wait_move(restoring->m);
            if (d->head[HO_Q_RESTORE] == restoring) break;
        } else if (started == 0 && !waited)
            break;
    }
    if (!host_full && ho_log_enabled(HO_LOG_DEBUG)) {
        unsigned moving = 0, held = 0, resident = 0;
        for (struct ho_managed *m = eng.all; m != NULL; m = m->next) {
            if (dev_of(m) != d || atomic_load(&m->state) != HO_RESIDENT) continue;
            resident++;
            if (m->tr != NULL)
                moving++;
            else if (m->pinned || protected_buf(m, protect, nprotect))
                held++;
        }
        ho_log(HO_LOG_DEBUG,
               "no room for %llu bytes: %llu resident of a %llu budget (%llu cached, %llu "
               "leaving); %u resident buffers: %u with a move in flight, %u pinned or in use",
               (unsigned long long)need, (unsigned long long)d->resident,
               (unsigned long long)d->budget, (unsigned long long)d->cached,
               (unsigned long long)d->evicting, resident, moving, held);
    }
    return host_full ? HO_ROOM_OVER_LIMIT : HO_ROOM_NONE;
}

/* A device allocation failed for lack of memory: finish what is on its way out, then evict more
 * (never the buffers in `protect`: those of a use being prepared, which it may have settled
 * already). Returns true when something was freed. eng.lock held. */
bool ho_reclaim_device(struct ho_dev *d, uint64_t need, struct ho_managed *const *protect,
                       int nprotect, uint64_t *stall) {
    HO_ASSERT_HELD(&eng.lock);
    uint64_t before = d->resident;
    ho_sfree_flush(d, 0);
    ho_cache_trim(d, UINT64_MAX / 2, 0); /* all of it */
    if (d->resident < before) return true;
    for (int q = HO_Q_EVICT; q < HO_NQUEUES; q++) {
        while (q != HO_Q_RESTORE && d->head[q] != NULL) {
            struct ho_transition *head = d->head[q];
            *stall += ho_wait_move(head->m);
            if (d->head[q] == head) break; /* the driver would not wait */
        }
    }
    if (d->resident < before) return true;
    uint64_t saved = d->budget;
    d->budget = d->resident > need ? d->resident - need : 0;
    ho_make_room(d, need, protect, nprotect, stall);
    d->budget = saved;
    ho_cache_trim(d, UINT64_MAX / 2, 0); /* the evictions pooled their chunks: give them back */
    return d->resident < before;
}

void ho_count_stall(uint64_t ns) {
    if (ns > 0) ho_count(&ho_stats.time_ns_stall, ns);
}

CUresult ho_create_device_handle(struct ho_dev *d, uint64_t span, CUmemGenericAllocationHandle *h,
                                 struct ho_managed *const *protect, int nprotect, uint64_t *stall) {
    HO_ASSERT_HELD(&eng.lock);
    for (;;) {
        CUresult rc = ho_real.cuMemCreate(h, span, &d->dev_prop, 0);
        if (rc != CUDA_ERROR_OUT_OF_MEMORY) return rc;
        if (!ho_reclaim_device(d, span, protect, nprotect, stall)) return CUDA_ERROR_OUT_OF_MEMORY;
    }
}
