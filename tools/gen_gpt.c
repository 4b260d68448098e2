/* The gpt preset: a dense pre-LayerNorm decoder (GPT-2/3 style): embedding with learnt positions,
 * layers of causal self-attention (fused, FlashAttention-style: the S x S scores are never
 * stored) and a GELU MLP, each with a residual add; a final LayerNorm and an LM head tied to the
 * embedding; cross-entropy loss. Each layer's parameters (QKV, output projection, both MLP
 * matrices, biases, two LayerNorms) are one flat buffer, as FSDP and Megatron keep them. */
#include "gen_presets.h"

#include <stdio.h>

struct gpt {
    uint64_t layers, hidden, heads, seq, mbs, vocab, ffn;
    int emb, layer0; /* parameter groups: the embedding (with the final norm), then the layers */
};

static const struct gen_optdef opts[] = {
    {"layers", offsetof(struct gpt, layers), 24, "decoder layers"},
    {"hidden", offsetof(struct gpt, hidden), 4096, "model width"},
    {"heads", offsetof(struct gpt, heads), 32, "attention heads"},
    {"seq", offsetof(struct gpt, seq), 4096, "sequence length"},
    {"micro-batch", offsetof(struct gpt, mbs), 4, "sequences per micro-batch"},
    {"vocab", offsetof(struct gpt, vocab), 50304, "vocabulary size"},
    {"ffn", offsetof(struct gpt, ffn), 0, "MLP width (0: 4 x hidden)"},
};

static uint64_t ffn(const struct gpt *m) {
    return m->ffn != 0 ? m->ffn : 4 * m->hidden;
}

static uint64_t layer_params(const struct gpt *m) {
    uint64_t H = m->hidden, F = ffn(m);
    return 4 * H * H + 2 * H * F + 3 * H + H + F + H + 4 * H; /* matrices, biases, 2 LayerNorms */
}

static uint64_t emb_params(const struct gpt *m) {
    return (m->vocab + m->seq) * m->hidden + 2 * m->hidden; /* tokens, positions, final norm */
}

static uint64_t param_count(const void *model) {
    const struct gpt *m = model;
    return emb_params(m) + m->layers * layer_params(m);
}

static bool check(const void *model, char *err, size_t cap) {
    const struct gpt *m = model;
    if (m->layers == 0 || m->hidden == 0 || m->heads == 0 || m->seq == 0 || m->mbs == 0 ||
        m->vocab == 0) {
        snprintf(err, cap, "every dimension must be at least 1");
        return false;
    }
    if (m->hidden % m->heads != 0) {
        snprintf(err, cap, "--hidden %llu is not a multiple of --heads %llu",
                 (unsigned long long)m->hidden, (unsigned long long)m->heads);
        return false;
    }
    return true;
}

static void setup(struct gen *g, void *model) {
    struct gpt *m = model;
    m->emb = gen_param(g, emb_params(m));
    m->layer0 = g->nparams;
    for (uint64_t l = 0; l < m->layers; l++)
        gen_param(g, layer_params(m));
}

static void forward(struct gen *g, const void *model) {
    const struct gpt *m = model;
    const double dt = g->dtype;
    const uint64_t T = m->mbs * m->seq, H = m->hidden, F = ffn(m), A = m->heads;
    const uint64_t act = T * H * (uint64_t)g->dtype;
    const double TH = (double)T * (double)H;
    gen_t x = gen_tensor(g, act, true);
    gen_opl(g, "embedding", GEN_GATHER, 0, m->emb, 2 * TH * dt, GEN_NONE, GEN_L(x), GEN_NONE);
    for (uint64_t l = 0; l < m->layers; l++) {
        int P = m->layer0 + (int)l;
        gen_t a = gen_tensor(g, act, true);
        gen_opl(g, "layernorm", GEN_ELEM, 8 * TH, P, 2 * H * dt, GEN_L(x), GEN_L(a), GEN_L(x));
        gen_t q = gen_tensor(g, 3 * act, true);
        gen_opl(g, "gemm_qkv", GEN_GEMM, 2 * TH * 3 * H, P, 3.0 * H * H * dt, GEN_L(a), GEN_L(q),
                GEN_L(a));
        gen_release(g, a);
        /* Causal attention: QK^T and PV over half the S x S pairs. */
        gen_t o = gen_tensor(g, act, true);
        gen_t lse = gen_tensor(g, m->mbs * A * m->seq * 4, false);
        gen_opl(g, "flash_attn", GEN_ATTN, 2.0 * m->mbs * (double)m->seq * m->seq * H, -1, 0,
                GEN_L(q), GEN_L(o, lse), GEN_L(q, o, lse));
        gen_release(g, q);
        gen_release(g, lse);
        gen_t p = gen_tensor(g, act, true);
        gen_opl(g, "gemm_proj", GEN_GEMM, 2 * TH * H, P, (double)H * H * dt, GEN_L(o), GEN_L(p),
                GEN_L(o));
        gen_release(g, o);
        gen_t x2 = gen_tensor(g, act, true);
        gen_opl(g, "residual_add", GEN_ADD, TH, -1, 0, GEN_L(x, p), GEN_L(x2), GEN_NONE);
        gen_release(g, x);
        gen_release(g, p);
        gen_t b = gen_tensor(g, act, true);
        gen_opl(g, "layernorm", GEN_ELEM, 8 * TH, P, 2 * H * dt, GEN_L(x2), GEN_L(b), GEN_L(x2));
        gen_t h = gen_tensor(g, T * F * (uint64_t)g->dtype, true);
        gen_opl(g, "gemm_fc1", GEN_GEMM, 2 * TH * F, P, (double)H * F * dt, GEN_L(b), GEN_L(h),
                GEN_L(b));
        gen_release(g, b);
        gen_t u = gen_tensor(g, T * F * (uint64_t)g->dtype, true);
        gen_opl(g, "gelu", GEN_ELEM, 8.0 * T * F, -1, 0, GEN_L(h), GEN_L(u), GEN_L(h));
        gen_release(g, h);
        gen_t y = gen_tensor(g, act, true);
        gen_opl(g, "gemm_fc2", GEN_GEMM, 2 * TH * F, P, (double)H * F * dt, GEN_L(u), GEN_L(y),
                GEN_L(u));
        gen_release(g, u);
        gen_t x3 = gen_tensor(g, act, true);
        gen_opl(g, "residual_add", GEN_ADD, TH, -1, 0, GEN_L(x2, y), GEN_L(x3), GEN_NONE);
        gen_release(g, x2);
        gen_release(g, y);
        x = x3;
    }
    gen_t xf = gen_tensor(g, act, true);
    gen_opl(g, "layernorm", GEN_ELEM, 8 * TH, m->emb, 2 * H * dt, GEN_L(x), GEN_L(xf), GEN_L(x));
    gen_release(g, x);
    gen_t logits = gen_tensor(g, T * m->vocab * (uint64_t)g->dtype, true);
    gen_opl(g, "gemm_lm_head", GEN_GEMM, 2 * TH * m->vocab, m->emb, (double)m->vocab * H * dt,
            GEN_L(xf), GEN_L(logits), GEN_L(xf));
    gen_release(g, xf);
    gen_opl(g, "cross_entropy", GEN_LOSS, 4.0 * T * m->vocab, -1, 0, GEN_L(logits), GEN_NONE,
            GEN_L(logits));
    gen_release(g, logits);
}

const struct gen_preset gen_preset_gpt = {
    .name = "gpt",
    .summary = "dense decoder (GPT): attention + GELU MLP per layer, tied LM head",
    .opts = opts,
    .nopts = sizeof opts / sizeof opts[0],
    .model_size = sizeof(struct gpt),
    .check = check,
    .param_count = param_count,
    .setup = setup,
    .forward = forward,
};
