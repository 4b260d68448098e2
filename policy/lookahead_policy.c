/* The lookahead policy behind the policy interface (policy.h): each operation is the lookahead's
 * own call (lookahead.h) on buffer ids. */
#include "lookahead.h"

static void la_alloc(void *self, struct ho_policy_buffer *b, uint64_t bytes, uint64_t site) {
    ho_la_alloc(self, b->id, bytes, site);
}

static void la_free(void *self, const struct ho_policy_buffer *b) {
    ho_la_free(self, b->id);
}

static void la_step(void *self) {
    ho_la_step(self);
}

static void la_set_budget(void *self, uint64_t bytes) {
    ho_la_set_budget(self, bytes);
}

static uint64_t la_launch(void *self, uint64_t sig, const uint64_t *ids, size_t n,
                          struct ho_policy_actions *out) {
    ho_la_launch(self, sig, ids, n, out);
    return ho_la_launches(self) - 1;
}

static bool la_predicts(const void *self) {
    return ho_la_predicts(self);
}

static uint64_t la_next_use(const void *self, const struct ho_policy_buffer *b) {
    return ho_la_next_use(self, b->id);
}

static void la_late(void *self, const struct ho_policy_buffer *b) {
    ho_la_late(self, b->id);
}

static bool la_wants_timing(const void *self) {
    return ho_la_wants_timing(self);
}

static void la_duration(void *self, uint64_t launch, uint64_t ns) {
    ho_la_duration(self, launch, ns);
}

static void la_set_move_fixed(void *self, uint64_t ns) {
    ho_la_set_move_fixed(self, ns);
}

static void la_set_link(void *self, double bytes_per_s) {
    ho_la_set_link(self, bytes_per_s);
}

static void la_destroy(void *self) {
    ho_la_destroy(self);
}

static const struct ho_policy_ops lookahead_ops = {
    .name = "lookahead",
    .plans = true,
    .timed = true,
    .alloc = la_alloc,
    .free = la_free,
    .step = la_step,
    .set_budget = la_set_budget,
    .launch = la_launch,
    .predicts = la_predicts,
    .next_use = la_next_use,
    .late = la_late,
    .wants_timing = la_wants_timing,
    .duration = la_duration,
    .set_link = la_set_link,
    .set_move_fixed = la_set_move_fixed,
    .destroy = la_destroy,
};

bool ho_policy_lookahead(struct ho_policy *out, unsigned lead0) {
    struct ho_lookahead *la = ho_la_create(lead0);
    if (la == NULL) return false;
    *out = (struct ho_policy){&lookahead_ops, la};
    return true;
}
