/* The oracle policy behind the policy interface (policy.h): it follows a plan made in advance by
 * `hostoff replay` (oracle.h) instead of deciding. The plan names launches and buffers by number;
 * here they are counted as the engine shows them (the launches it tells its policy, allocations in
 * order) and mapped back to buffer ids. Each buffer's note is its number + 1 (0: none yet). */
#include "oracle.h"
#include "policy.h"

#include <stdlib.h>

struct oracle_follower {
    struct ho_oracle_plan plan;
    uint64_t *id;      /* buffer number -> the live buffer's id (0: not yet, or freed) */
    uint64_t allocs;   /* allocations numbered so far */
    uint64_t launches; /* launches seen so far */
};

static void follow_alloc(void *self, struct ho_policy_buffer *b, uint64_t bytes, uint64_t site) {
    (void)bytes, (void)site;
    struct oracle_follower *f = self;
    uint64_t n = f->allocs++;
    b->note = n + 1;
    if (n < f->plan.nbuf) f->id[n] = b->id;
}

static void follow_free(void *self, const struct ho_policy_buffer *b) {
    struct oracle_follower *f = self;
    uint64_t n = b->note - 1;
    if (b->note != 0 && n < f->plan.nbuf && f->id[n] == b->id) f->id[n] = 0;
}

static uint64_t follow_launch(void *self, uint64_t sig, const uint64_t *ids, size_t nids,
                              struct ho_policy_actions *out) {
    (void)sig, (void)ids, (void)nids;
    struct oracle_follower *f = self;
    const struct ho_oracle_plan *p = &f->plan;
    uint64_t l = f->launches++;
    out->nevict = out->nrestore = 0;
    if (l >= p->nlaunch) return l;
    for (size_t k = p->act_start[l]; k < p->act_start[l + 1]; k++) {
        uint64_t n = p->act[k] >> 1;
        uint64_t id = n < p->nbuf ? f->id[n] : 0;
        if (id == 0) continue;
        if (p->act[k] & 1) {
            if (out->nrestore < HO_POLICY_MAX_ACTIONS) out->restore[out->nrestore++] = id;
        } else if (out->nevict < HO_POLICY_MAX_ACTIONS) {
            out->evict[out->nevict++] = id;
        }
    }
    return l;
}

static bool follow_predicts(const void *self) {
    (void)self;
    return true; /* the plan knows every use from the first launch on */
}

static uint64_t follow_next_use(const void *self, const struct ho_policy_buffer *b) {
    const struct oracle_follower *f = self;
    uint64_t n = b->note - 1;
    if (b->note == 0 || n >= f->plan.nbuf || f->launches == 0) return HO_NEXT_USE_UNKNOWN;
    return ho_oracle_next_use(&f->plan, n, f->launches - 1);
}

/* The plan is fixed: nothing the process does at run time changes it. */
static void follow_buffer(void *self, const struct ho_policy_buffer *b) {
    (void)self, (void)b;
}

static void follow_step(void *self) {
    (void)self;
}

static void follow_set_budget(void *self, uint64_t bytes) {
    (void)self, (void)bytes;
}

static bool follow_wants_timing(const void *self) {
    (void)self;
    return false;
}

static void follow_duration(void *self, uint64_t launch, uint64_t ns) {
    (void)self, (void)launch, (void)ns;
}

/* The plan was made with the published fixed cost already (oracle_input.c). */
static void follow_set_move_fixed(void *self, uint64_t ns) {
    (void)self, (void)ns;
}

static void follow_set_link(void *self, double bytes_per_s) {
    (void)self, (void)bytes_per_s;
}

static void follow_destroy(void *self) {
    struct oracle_follower *f = self;
    ho_oracle_free(&f->plan);
    free(f->id);
    free(f);
}

static const struct ho_policy_ops oracle_ops = {
    .name = "oracle",
    .plans = true,
    .timed = false,
    .complete_plan = true,
    .alloc = follow_alloc,
    .free = follow_free,
    .step = follow_step,
    .set_budget = follow_set_budget,
    .launch = follow_launch,
    .predicts = follow_predicts,
    .next_use = follow_next_use,
    .late = follow_buffer,
    .wants_timing = follow_wants_timing,
    .duration = follow_duration,
    .set_link = follow_set_link,
    .set_move_fixed = follow_set_move_fixed,
    .destroy = follow_destroy,
};

bool ho_policy_oracle(struct ho_policy *out, struct ho_oracle_plan *plan) {
    struct oracle_follower *f = calloc(1, sizeof *f);
    uint64_t *id = calloc(plan->nbuf + 1, sizeof *id);
    if (f == NULL || id == NULL) {
        free(f);
        free(id);
        ho_oracle_free(plan);
        return false;
    }
    f->plan = *plan;
    f->id = id;
    *out = (struct ho_policy){&oracle_ops, f};
    return true;
}
