/* The trace generator's emitter and tape (see gen.h). */
#include "gen.h"

#include <stdlib.h>
#include <string.h>

void gen_init(struct gen *g, FILE *out, int dtype, uint64_t host_ns) {
    memset(g, 0, sizeof *g);
    g->out = out;
    g->dtype = dtype;
    /* fp32 matrices run on TF32 tensor cores at half the bf16 rate. */
    g->flops_rate = dtype >= 4 ? GEN_BF16_FLOPS / 2 : GEN_BF16_FLOPS;
    g->bytes_rate = GEN_HBM_BYTES;
    g->host_ns = host_ns;
    /* A caching allocator's hit, a sync call, a marker: about a microsecond of host time. */
    g->host_small_ns = 1000;
    /* No kernel runs shorter than about a microsecond, however little it does. */
    g->min_kernel_ns = 1000;
}

void gen_done(struct gen *g) {
    u64map_free(&g->sizes);
    free(g->tensors);
    free(g->grads);
    free(g->tape);
    free(g->params);
}

static bool grow(struct gen *g, void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int c = *cap ? *cap * 2 : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (q == NULL) {
        g->failed = true;
        return false;
    }
    *p = q;
    *cap = c;
    return true;
}

/* ----------------------------------------------------------------------------- trace lines */

uint64_t gen_alloc(struct gen *g, uint64_t bytes, bool stream_ordered) {
    uint64_t id = ++g->next_id;
    if (g->out != NULL)
        fprintf(g->out, "{\"e\":\"alloc\",\"t\":%llu,\"id\":%llu,\"bytes\":%llu%s}\n",
                (unsigned long long)g->t, (unsigned long long)id, (unsigned long long)bytes,
                stream_ordered ? ",\"s\":0" : "");
    if (!u64map_put(&g->sizes, id, bytes)) g->failed = true;
    g->live += bytes;
    if (g->live > g->peak) g->peak = g->live;
    g->t += g->host_small_ns;
    g->events++;
    return id;
}

void gen_free(struct gen *g, uint64_t id) {
    uint64_t bytes = 0;
    if (!u64map_get(&g->sizes, id, &bytes)) {
        g->failed = true; /* a generator bug: freeing what is not live */
        return;
    }
    u64map_del(&g->sizes, id);
    if (g->out != NULL)
        fprintf(g->out, "{\"e\":\"free\",\"t\":%llu,\"id\":%llu,\"s\":0}\n",
                (unsigned long long)g->t, (unsigned long long)id);
    g->live -= bytes;
    g->t += g->host_small_ns;
    g->events++;
}

void gen_kernel(struct gen *g, const char *name, double flops, double bytes, const uint64_t *ids,
                int n) {
    double compute = flops / g->flops_rate * 1e9, memory = bytes / g->bytes_rate * 1e9;
    double ns = compute > memory ? compute : memory;
    uint64_t k = (uint64_t)(ns + 0.5);
    if (k < g->min_kernel_ns) k = g->min_kernel_ns;
    if (g->out != NULL) {
        fprintf(g->out, "{\"e\":\"launch\",\"t\":%llu,\"s\":0,\"k\":\"%s\",\"ns\":%llu,\"use\":[",
                (unsigned long long)g->t, name, (unsigned long long)k);
        for (int i = 0; i < n; i++)
            fprintf(g->out, "%s%llu", i ? "," : "", (unsigned long long)ids[i]);
        fputs("]}\n", g->out);
    }
    g->device_ns += (double)k;
    g->t += g->host_ns;
    g->events++;
    g->launches++;
}

void gen_copy_h2d(struct gen *g, uint64_t id, uint64_t bytes) {
    if (g->out != NULL)
        fprintf(
            g->out,
            "{\"e\":\"copy\",\"t\":%llu,\"s\":0,\"dir\":\"h2d\",\"bytes\":%llu,\"use\":[%llu]}\n",
            (unsigned long long)g->t, (unsigned long long)bytes, (unsigned long long)id);
    g->t += g->host_ns;
    g->events++;
}

void gen_sync(struct gen *g) {
    if (g->out != NULL)
        fprintf(g->out, "{\"e\":\"sync\",\"t\":%llu,\"s\":0}\n", (unsigned long long)g->t);
    g->t += g->host_small_ns;
    g->events++;
}

void gen_step(struct gen *g) {
    if (g->out != NULL) fprintf(g->out, "{\"e\":\"step\",\"t\":%llu}\n", (unsigned long long)g->t);
    g->t += g->host_small_ns;
    g->events++;
    g->steps++;
}

/* ------------------------------------------------------------------------ model building */

int gen_param(struct gen *g, uint64_t params) {
    if (!grow(g, (void **)&g->params, &g->capparams, g->nparams + 1, sizeof *g->params)) return 0;
    struct gen_param *p = &g->params[g->nparams];
    memset(p, 0, sizeof *p);
    p->params = params;
    p->w = gen_alloc(g, params * (uint64_t)g->dtype, false);
    /* Mixed precision keeps an fp32 master copy; fp32 weights are their own master. */
    if (g->dtype < 4) p->master = gen_alloc(g, params * 4, false);
    p->m = gen_alloc(g, params * 4, false);
    p->v = gen_alloc(g, params * 4, false);
    return g->nparams++;
}

void gen_inputs(struct gen *g, uint64_t bytes) {
    g->tokens = gen_alloc(g, bytes, false);
    g->token_bytes = bytes;
}

gen_t gen_tensor(struct gen *g, uint64_t bytes, bool grad_needed) {
    if (!grow(g, (void **)&g->tensors, &g->captensors, g->ntensors + 1, sizeof *g->tensors))
        return -1;
    struct gen_tensor *t = &g->tensors[g->ntensors];
    memset(t, 0, sizeof *t);
    t->bytes = bytes;
    t->id = gen_alloc(g, bytes, true);
    t->grad_needed = grad_needed;
    t->grad = -1;
    return g->ntensors++;
}

static void maybe_free(struct gen *g, gen_t i) {
    struct gen_tensor *t = &g->tensors[i];
    if (t->id != 0 && t->released && t->saved_refs == 0) {
        gen_free(g, t->id);
        t->id = 0;
    }
}

void gen_release(struct gen *g, gen_t i) {
    if (i < 0) return;
    g->tensors[i].released = true;
    maybe_free(g, i);
}

/* The ids and byte total of a list of tensors (live ones), appended to ids[*n]. */
static double add_tensors(struct gen *g, const gen_t *ts, int nt, uint64_t *ids, int *n) {
    double bytes = 0;
    for (int i = 0; i < nt; i++) {
        const struct gen_tensor *t = &g->tensors[ts[i]];
        if (t->id == 0) continue;
        ids[(*n)++] = t->id;
        bytes += (double)t->bytes;
    }
    return bytes;
}

void gen_op(struct gen *g, const struct gen_op *op) {
    uint64_t ids[3 * GEN_MAX_ARGS + 2];
    int n = 0;
    double bytes = add_tensors(g, op->in, op->nin, ids, &n);
    if (op->param >= 0) ids[n++] = g->params[op->param].w;
    if (op->kind == GEN_GATHER || op->kind == GEN_LOSS) ids[n++] = g->tokens;
    bytes += op->wbytes + add_tensors(g, op->out, op->nout, ids, &n);
    gen_kernel(g, op->name, op->flops, bytes, ids, n);
    for (int i = 0; i < op->nsaved; i++)
        g->tensors[op->saved[i]].saved_refs++;
    if (!grow(g, (void **)&g->tape, &g->captape, g->ntape + 1, sizeof *g->tape)) return;
    g->tape[g->ntape++] = *op;
}

static int list(gen_t *dst, const gen_t *src) {
    int n = 0;
    while (src[n] >= 0 && n < GEN_MAX_ARGS) {
        dst[n] = src[n];
        n++;
    }
    return n;
}

void gen_opl(struct gen *g, const char *name, enum gen_kind kind, double flops, int param,
             double wbytes, const gen_t *in, const gen_t *out, const gen_t *saved) {
    struct gen_op op = {
        .name = name, .kind = kind, .flops = flops, .wbytes = wbytes, .param = param};
    op.nin = list(op.in, in);
    op.nout = list(op.out, out);
    op.nsaved = list(op.saved, saved);
    gen_op(g, &op);
}

/* ------------------------------------------------------------------------------ backward */

static int grad_new(struct gen *g, uint64_t bytes) {
    if (!grow(g, (void **)&g->grads, &g->capgrads, g->ngrads + 1, sizeof *g->grads)) return -1;
    g->grads[g->ngrads] = (struct gen_grad){gen_alloc(g, bytes, true), bytes, 1};
    return g->ngrads++;
}

static void grad_unref(struct gen *g, int k) {
    if (k >= 0 && --g->grads[k].refs == 0) gen_free(g, g->grads[k].id);
}

static uint64_t param_grad(struct gen *g, int p) {
    struct gen_param *pp = &g->params[p];
    if (pp->grad == 0) pp->grad = gen_alloc(g, pp->params * (uint64_t)g->dtype, true);
    return pp->grad;
}

/* Collects the gradients of op's outputs (those that received one). */
static double out_grads(struct gen *g, const struct gen_op *op, uint64_t *ids, int *n) {
    double bytes = 0;
    for (int i = 0; i < op->nout; i++) {
        int k = g->tensors[op->out[i]].grad;
        if (k < 0) continue;
        ids[(*n)++] = g->grads[k].id;
        bytes += (double)g->grads[k].bytes;
    }
    return bytes;
}

/* The gradients of op's inputs, created on first write (later writes accumulate into them). */
static double in_grads(struct gen *g, const struct gen_op *op, uint64_t *ids, int *n) {
    double bytes = 0;
    for (int i = 0; i < op->nin; i++) {
        struct gen_tensor *t = &g->tensors[op->in[i]];
        if (!t->grad_needed) continue;
        if (t->grad < 0) t->grad = grad_new(g, t->bytes);
        if (t->grad < 0) continue;
        ids[(*n)++] = g->grads[t->grad].id;
        bytes += (double)t->bytes;
    }
    return bytes;
}

static void name2(char *buf, size_t cap, const char *a, const char *b) {
    snprintf(buf, cap, "%s%s", a, b);
}

static void backward_op(struct gen *g, const struct gen_op *op) {
    uint64_t ids[4 * GEN_MAX_ARGS + 4];
    int n = 0;
    char name[96];
    bool any_out = false;
    for (int i = 0; i < op->nout; i++)
        any_out |= g->tensors[op->out[i]].grad >= 0;
    if (!any_out && op->kind != GEN_LOSS) return; /* nothing flows back through it */
    double wb = op->wbytes;
    switch (op->kind) {
    case GEN_GEMM: {
        double b = out_grads(g, op, ids, &n);
        if (op->param >= 0) ids[n++] = g->params[op->param].w;
        b += wb + in_grads(g, op, ids, &n);
        name2(name, sizeof name, op->name, "_dgrad");
        gen_kernel(g, name, op->flops, b, ids, n);
        if (op->param >= 0) {
            n = 0;
            b = add_tensors(g, op->saved, op->nsaved, ids, &n) + out_grads(g, op, ids, &n);
            ids[n++] = param_grad(g, op->param);
            name2(name, sizeof name, op->name, "_wgrad");
            gen_kernel(g, name, op->flops, b + 2 * wb, ids, n);
        }
        break;
    }
    case GEN_ADD: {
        int k = g->tensors[op->out[0]].grad;
        for (int i = 0; i < op->nin; i++) {
            struct gen_tensor *t = &g->tensors[op->in[i]];
            if (!t->grad_needed) continue;
            if (t->grad < 0) { /* the same gradient flows on: no copy, no kernel */
                t->grad = k;
                g->grads[k].refs++;
                continue;
            }
            uint64_t acc[2] = {g->grads[k].id, g->grads[t->grad].id};
            name2(name, sizeof name, op->name, "_bwd");
            gen_kernel(g, name, 0, 3.0 * (double)g->grads[k].bytes, acc, 2);
        }
        break;
    }
    case GEN_ELEM:
    case GEN_ATTN:
    case GEN_GATHER:
    case GEN_LOSS: {
        double b = add_tensors(g, op->saved, op->nsaved, ids, &n) + out_grads(g, op, ids, &n);
        if (op->kind == GEN_GATHER || op->kind == GEN_LOSS) ids[n++] = g->tokens;
        if (op->param >= 0) {
            ids[n++] = g->params[op->param].w;
            ids[n++] = param_grad(g, op->param);
            b += 3 * wb;
        }
        b += in_grads(g, op, ids, &n);
        double f = op->kind == GEN_ATTN   ? 2.5 * op->flops
                   : op->kind == GEN_LOSS ? op->flops
                                          : 2 * op->flops;
        name2(name, sizeof name, op->name, "_bwd");
        gen_kernel(g, name, f, b, ids, n);
        break;
    }
    }
}

void gen_backward(struct gen *g) {
    for (int k = g->ntape - 1; k >= 0; k--) {
        const struct gen_op *op = &g->tape[k];
        backward_op(g, op);
        /* What this op's backward read can go once no other backward reads it; the gradients
         * of its outputs are complete and consumed. */
        for (int i = 0; i < op->nsaved; i++) {
            g->tensors[op->saved[i]].saved_refs--;
            maybe_free(g, op->saved[i]);
        }
        for (int i = 0; i < op->nout; i++) {
            struct gen_tensor *t = &g->tensors[op->out[i]];
            grad_unref(g, t->grad);
            t->grad = -1;
        }
    }
    /* Gradients of tensors no op produced (none in the presets) and forgotten tensors. */
    for (int i = 0; i < g->ntensors; i++) {
        struct gen_tensor *t = &g->tensors[i];
        grad_unref(g, t->grad);
        t->grad = -1;
        t->released = true;
        t->saved_refs = 0;
        maybe_free(g, i);
    }
    g->ntape = 0;
    g->ntensors = 0;
    g->ngrads = 0;
}

void gen_optimizer(struct gen *g) {
    for (int i = 0; i < g->nparams; i++) {
        struct gen_param *p = &g->params[i];
        if (p->grad == 0) continue;
        uint64_t ids[5];
        int n = 0;
        ids[n++] = p->w;
        ids[n++] = p->grad;
        if (p->master != 0) ids[n++] = p->master;
        ids[n++] = p->m;
        ids[n++] = p->v;
        /* Reads weights and gradients, reads and writes fp32 master, m and v, writes weights. */
        double P = (double)p->params, dt = g->dtype;
        double bytes = P * (3 * dt + 8 * (p->master != 0 ? 3 : 2));
        gen_kernel(g, "adam", 12 * P, bytes, ids, n);
    }
    for (int i = 0; i < g->nparams; i++) {
        struct gen_param *p = &g->params[i];
        if (p->grad == 0) continue;
        gen_free(g, p->grad);
        p->grad = 0;
    }
}
