/* The lru policy: the reactive baseline. It plans nothing and predicts nothing; the engine evicts
 * the least recently used buffers when room is short and restores a buffer when a launch needs
 * it (ho_policy_victims, HO_POLICY_LRU). */
#include "policy.h"

static void lru_alloc(void *self, struct ho_policy_buffer *b, uint64_t bytes, uint64_t site) {
    (void)self, (void)b, (void)bytes, (void)site;
}

static void lru_buffer(void *self, const struct ho_policy_buffer *b) {
    (void)self, (void)b;
}

static void lru_nothing(void *self) {
    (void)self;
}

static void lru_set_budget(void *self, uint64_t bytes) {
    (void)self, (void)bytes;
}

static uint64_t lru_launch(void *self, uint64_t sig, const uint64_t *ids, size_t n,
                           struct ho_policy_actions *out) {
    (void)self, (void)sig, (void)ids, (void)n;
    out->nevict = out->nrestore = 0;
    return 0;
}

static bool lru_no(const void *self) {
    (void)self;
    return false;
}

static uint64_t lru_next_use(const void *self, const struct ho_policy_buffer *b) {
    (void)self, (void)b;
    return HO_NEXT_USE_UNKNOWN;
}

static void lru_duration(void *self, uint64_t launch, uint64_t ns) {
    (void)self, (void)launch, (void)ns;
}

static void lru_set_move_fixed(void *self, uint64_t ns) {
    (void)self, (void)ns;
}

static void lru_set_link(void *self, double bytes_per_s) {
    (void)self, (void)bytes_per_s;
}

const struct ho_policy_ops ho_policy_lru_ops = {
    .name = "lru",
    .plans = false,
    .timed = false,
    .alloc = lru_alloc,
    .free = lru_buffer,
    .step = lru_nothing,
    .set_budget = lru_set_budget,
    .launch = lru_launch,
    .predicts = lru_no,
    .next_use = lru_next_use,
    .late = lru_buffer,
    .wants_timing = lru_no,
    .duration = lru_duration,
    .set_link = lru_set_link,
    .set_move_fixed = lru_set_move_fixed,
    .destroy = lru_nothing,
};
