/* Synthetic training traces (hostoff gen-trace): a small tape-based model of a training step.
 *
 * A preset (gen_gpt.c, gen_deepseek.c) describes the forward pass as operations on tensors; the
 * tape then derives the backward pass the way an autograd engine runs it, and the optimizer step
 * follows. Each operation becomes one or more kernel launches whose durations come from FLOPs and
 * bytes at the H200's measured rates (the larger of compute time and memory time); each tensor is
 * a buffer, allocated when produced and freed when the last forward or backward use is done, so
 * the trace's memory profile is the one a caching allocator would show an allocator-level tool.
 *
 * Every call writes one trace line (or, in a counting pass with out == NULL, only counts), and
 * advances the host clock by what the host spends on that call: the host runs ahead of the device
 * exactly when kernels are longer than the host's cost per launch. */
#ifndef HOSTOFF_TOOLS_GEN_H
#define HOSTOFF_TOOLS_GEN_H

#include "u64map.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The H200's measured rates (DESIGN.md, fact 8). */
#define GEN_BF16_FLOPS 790e12
#define GEN_HBM_BYTES  4.3e12

enum gen_kind {
    GEN_GEMM,   /* x @ W: backward is a data-gradient and a weight-gradient GEMM of equal cost */
    GEN_ELEM,   /* elementwise or normalisation: backward reads what it saved and the gradient */
    GEN_ATTN,   /* fused attention: backward costs 2.5x the forward FLOPs (FlashAttention-2) */
    GEN_ADD,    /* residual add: backward passes the gradient through, no kernel */
    GEN_GATHER, /* embedding lookup: backward scatter-adds into the weight gradient */
    GEN_LOSS,   /* the loss: backward seeds the gradient of its input */
};

typedef int gen_t; /* a tensor handle (index in the tape's tensor table), or -1 */

#define GEN_MAX_ARGS 8

struct gen_op {
    const char *name;
    enum gen_kind kind;
    double flops, wbytes; /* forward FLOPs; bytes of the weight slice it reads */
    int param;            /* parameter group (-1: none) */
    gen_t in[GEN_MAX_ARGS], out[GEN_MAX_ARGS], saved[GEN_MAX_ARGS];
    int nin, nout, nsaved;
};

struct gen_tensor {
    uint64_t bytes;
    uint64_t id;      /* the buffer, while live (0: none) */
    bool grad_needed; /* a gradient flows back into it */
    bool released;    /* no more forward uses */
    int saved_refs;   /* backward uses still to come */
    int grad;         /* its gradient buffer (index in grads), or -1 */
};

struct gen_grad {
    uint64_t id, bytes;
    int refs; /* tensors whose gradient this buffer is */
};

struct gen_param {
    uint64_t params;          /* parameter count */
    uint64_t w, master, m, v; /* buffer ids (master: 0 when the weights are fp32) */
    uint64_t grad;            /* gradient buffer id while allocated, else 0 */
};

struct gen {
    FILE *out; /* NULL: counting pass */
    int dtype; /* bytes per activation / weight element */
    double flops_rate, bytes_rate;
    uint64_t host_ns;       /* host time per launch or copy */
    uint64_t host_small_ns; /* host time per allocation, free, sync or step marker */
    uint64_t min_kernel_ns;
    /* Running state. */
    uint64_t t, next_id, live, peak, events, launches, steps;
    double device_ns;    /* the sum of kernel durations (device busy time, one stream) */
    struct u64map sizes; /* live buffer id -> bytes */
    struct gen_tensor *tensors;
    int ntensors, captensors;
    struct gen_grad *grads;
    int ngrads, capgrads;
    struct gen_op *tape;
    int ntape, captape;
    struct gen_param *params;
    int nparams, capparams;
    uint64_t tokens; /* the input batch buffer */
    uint64_t token_bytes;
    bool failed; /* out of memory or a write error */
};

void gen_init(struct gen *g, FILE *out, int dtype, uint64_t host_ns);
void gen_done(struct gen *g);

/* Trace lines. */
uint64_t gen_alloc(struct gen *g, uint64_t bytes, bool stream_ordered);
void gen_free(struct gen *g, uint64_t id);
void gen_kernel(struct gen *g, const char *name, double flops, double bytes, const uint64_t *ids,
                int n);
void gen_copy_h2d(struct gen *g, uint64_t id, uint64_t bytes);
void gen_sync(struct gen *g);
void gen_step(struct gen *g);

/* Model building. A parameter group (a layer's weights in one flat buffer, with its fp32 master
 * copy and Adam moments), allocated now and kept for the whole run. */
int gen_param(struct gen *g, uint64_t params);
/* The input batch: a persistent buffer the step copies in from the host. */
void gen_inputs(struct gen *g, uint64_t bytes);
/* A new activation of `bytes`, allocated now (stream-ordered). */
gen_t gen_tensor(struct gen *g, uint64_t bytes, bool grad_needed);
/* A forward operation: one kernel now, its backward recorded on the tape. `saved` are the
 * tensors its backward reads (inputs or outputs). */
void gen_op(struct gen *g, const struct gen_op *op);
/* gen_op with the tensor lists written inline: GEN_L(a, b) (ended by -1), GEN_NONE. */
#define GEN_L(...) ((const gen_t[]){__VA_ARGS__, -1})
#define GEN_NONE   ((const gen_t[]){-1})
void gen_opl(struct gen *g, const char *name, enum gen_kind kind, double flops, int param,
             double wbytes, const gen_t *in, const gen_t *out, const gen_t *saved);
/* The forward pass is done with t: freed now unless the backward still needs it. */
void gen_release(struct gen *g, gen_t t);
/* Runs the tape backwards (gradients accumulate into the parameter groups), then clears it. */
void gen_backward(struct gen *g);
/* Adam on every parameter group, then the gradients are freed (zero_grad(set_to_none=True)). */
void gen_optimizer(struct gen *g);

#endif
