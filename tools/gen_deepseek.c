/* The deepseek preset: DeepSeek-V3's layer structure scaled to one GPU. Multi-head latent
 * attention (queries through a low-rank q_lora projection, keys and values through a shared
 * kv_lora latent plus a decoupled RoPE key, each head's query/key made of nope + rope dims);
 * the first dense_layers layers have a SwiGLU MLP, the rest a mixture of experts: a router over
 * `experts` routed experts of which `topk` run per token (tokens dispatched to them and combined
 * back, balanced load), plus `shared` always-on experts. RMSNorm throughout, untied LM head.
 * Each layer keeps two parameter buffers (attention, MLP or experts), so the experts' weights and
 * Adam moments are buffers of their own. Defaults: about 6 billion parameters, 12 layers. */
#include "gen_presets.h"

#include <stdio.h>

struct deepseek {
    uint64_t layers, dense_layers, hidden, heads, seq, mbs, vocab, q_lora, kv_lora, nope, rope,
        vdim, experts, topk, shared, moe_ffn, dense_ffn;
    int emb, head, layer0; /* parameter groups; a layer's are layer0 + 2l and layer0 + 2l + 1 */
};

#define OPT(name, field, def, help)                                                                \
    { name, offsetof(struct deepseek, field), def, help }
static const struct gen_optdef opts[] = {
    OPT("layers", layers, 12, "decoder layers"),
    OPT("dense-layers", dense_layers, 1, "leading layers with a dense MLP instead of experts"),
    OPT("hidden", hidden, 2560, "model width"),
    OPT("heads", heads, 20, "attention heads"),
    OPT("seq", seq, 4096, "sequence length"),
    OPT("micro-batch", mbs, 2, "sequences per micro-batch"),
    OPT("vocab", vocab, 102400, "vocabulary size"),
    OPT("q-lora", q_lora, 768, "query compression rank (0: a full query projection)"),
    OPT("kv-lora", kv_lora, 512, "key/value latent rank"),
    OPT("nope-dim", nope, 128, "per-head query/key dims without RoPE"),
    OPT("rope-dim", rope, 64, "per-head decoupled RoPE dims"),
    OPT("v-dim", vdim, 128, "per-head value dims"),
    OPT("experts", experts, 64, "routed experts per MoE layer"),
    OPT("topk", topk, 6, "routed experts per token"),
    OPT("shared-experts", shared, 2, "shared experts per MoE layer"),
    OPT("moe-ffn", moe_ffn, 1024, "an expert's intermediate width"),
    OPT("dense-ffn", dense_ffn, 8192, "the dense layers' intermediate width"),
};
#undef OPT

static uint64_t attn_params(const struct deepseek *m) {
    uint64_t H = m->hidden, A = m->heads, qk = m->nope + m->rope;
    uint64_t q = m->q_lora != 0 ? H * m->q_lora + m->q_lora + m->q_lora * A * qk : H * A * qk;
    uint64_t kv = H * (m->kv_lora + m->rope) + m->kv_lora + m->kv_lora * A * (m->nope + m->vdim);
    return q + kv + A * m->vdim * H + 2 * H; /* and the two RMSNorms of the layer */
}

static uint64_t mlp_params(const struct deepseek *m, bool dense) {
    uint64_t H = m->hidden;
    if (dense) return 3 * H * m->dense_ffn;
    return H * m->experts + (m->experts + m->shared) * 3 * H * m->moe_ffn;
}

static uint64_t param_count(const void *model) {
    const struct deepseek *m = model;
    uint64_t n = 2 * m->vocab * m->hidden + m->hidden; /* embedding, LM head, final norm */
    for (uint64_t l = 0; l < m->layers; l++)
        n += attn_params(m) + mlp_params(m, l < m->dense_layers);
    return n;
}

static bool check(const void *model, char *err, size_t cap) {
    const struct deepseek *m = model;
    if (m->layers == 0 || m->hidden == 0 || m->heads == 0 || m->seq == 0 || m->mbs == 0 ||
        m->vocab == 0 || m->kv_lora == 0 || m->nope + m->rope == 0 || m->vdim == 0) {
        snprintf(err, cap, "every dimension must be at least 1 (--q-lora and --rope-dim may be 0)");
        return false;
    }
    if (m->dense_layers < m->layers &&
        (m->experts == 0 || m->topk == 0 || m->moe_ffn == 0 || m->topk > m->experts)) {
        snprintf(err, cap, "MoE layers need 1 <= --topk <= --experts and --moe-ffn >= 1");
        return false;
    }
    if (m->dense_layers > 0 && m->dense_ffn == 0) {
        snprintf(err, cap, "dense layers need --dense-ffn >= 1");
        return false;
    }
    return true;
}

static void setup(struct gen *g, void *model) {
    struct deepseek *m = model;
    m->emb = gen_param(g, m->vocab * m->hidden);
    m->head = gen_param(g, m->vocab * m->hidden + m->hidden);
    m->layer0 = g->nparams;
    for (uint64_t l = 0; l < m->layers; l++) {
        gen_param(g, attn_params(m));
        gen_param(g, mlp_params(m, l < m->dense_layers));
    }
}

/* Multi-head latent attention; returns x2 = x + attention(x) (x is released). */
static gen_t mla(struct gen *g, const struct deepseek *m, int P, gen_t x) {
    const double dt = g->dtype, T = (double)(m->mbs * m->seq), H = (double)m->hidden;
    const double A = (double)m->heads, qk = (double)(m->nope + m->rope);
    const uint64_t e = (uint64_t)g->dtype, Tn = m->mbs * m->seq;
    gen_t a = gen_tensor(g, Tn * m->hidden * e, true);
    gen_opl(g, "rmsnorm", GEN_ELEM, 4 * T * H, P, H * dt, GEN_L(x), GEN_L(a), GEN_L(x));
    gen_t q = gen_tensor(g, Tn * m->heads * (m->nope + m->rope) * e, true);
    if (m->q_lora != 0) {
        const double r = (double)m->q_lora;
        gen_t cq = gen_tensor(g, Tn * m->q_lora * e, true);
        gen_opl(g, "gemm_q_down", GEN_GEMM, 2 * T * H * r, P, H * r * dt, GEN_L(a), GEN_L(cq),
                GEN_L(a));
        gen_t cqn = gen_tensor(g, Tn * m->q_lora * e, true);
        gen_opl(g, "rmsnorm", GEN_ELEM, 4 * T * r, P, r * dt, GEN_L(cq), GEN_L(cqn), GEN_L(cq));
        gen_release(g, cq);
        gen_opl(g, "gemm_q_up", GEN_GEMM, 2 * T * r * A * qk, P, r * A * qk * dt, GEN_L(cqn),
                GEN_L(q), GEN_L(cqn));
        gen_release(g, cqn);
    } else {
        gen_opl(g, "gemm_q", GEN_GEMM, 2 * T * H * A * qk, P, H * A * qk * dt, GEN_L(a), GEN_L(q),
                GEN_L(a));
    }
    const double kvr = (double)m->kv_lora, rope = (double)m->rope;
    gen_t ckv = gen_tensor(g, Tn * (m->kv_lora + m->rope) * e, true);
    gen_opl(g, "gemm_kv_down", GEN_GEMM, 2 * T * H * (kvr + rope), P, H * (kvr + rope) * dt,
            GEN_L(a), GEN_L(ckv), GEN_L(a));
    gen_release(g, a);
    gen_t ckvn = gen_tensor(g, Tn * m->kv_lora * e, true);
    gen_opl(g, "rmsnorm", GEN_ELEM, 4 * T * kvr, P, kvr * dt, GEN_L(ckv), GEN_L(ckvn), GEN_L(ckv));
    const double nv = (double)(m->nope + m->vdim);
    gen_t kv = gen_tensor(g, Tn * m->heads * (m->nope + m->vdim) * e, true);
    gen_opl(g, "gemm_kv_up", GEN_GEMM, 2 * T * kvr * A * nv, P, kvr * A * nv * dt, GEN_L(ckvn),
            GEN_L(kv), GEN_L(ckvn));
    gen_release(g, ckvn);
    /* Keys for the attention kernel: the nope part of kv with the shared RoPE key broadcast. */
    gen_t k = gen_tensor(g, Tn * m->heads * (m->nope + m->rope) * e, true);
    gen_opl(g, "rope_concat_k", GEN_ELEM, T * A * qk, -1, 0, GEN_L(kv, ckv), GEN_L(k), GEN_NONE);
    gen_release(g, ckv);
    gen_t o = gen_tensor(g, Tn * m->heads * m->vdim * e, true);
    gen_t lse = gen_tensor(g, m->mbs * m->heads * m->seq * 4, false);
    const double S = (double)m->seq, B = (double)m->mbs;
    gen_opl(g, "flash_attn_mla", GEN_ATTN, B * S * S * A * (qk + (double)m->vdim), -1, 0,
            GEN_L(q, k, kv), GEN_L(o, lse), GEN_L(q, k, kv, o, lse));
    gen_release(g, q);
    gen_release(g, k);
    gen_release(g, kv);
    gen_release(g, lse);
    gen_t p = gen_tensor(g, Tn * m->hidden * e, true);
    gen_opl(g, "gemm_o_proj", GEN_GEMM, 2 * T * A * (double)m->vdim * H, P,
            A * (double)m->vdim * H * dt, GEN_L(o), GEN_L(p), GEN_L(o));
    gen_release(g, o);
    gen_t x2 = gen_tensor(g, Tn * m->hidden * e, true);
    gen_opl(g, "residual_add", GEN_ADD, T * H, -1, 0, GEN_L(x, p), GEN_L(x2), GEN_NONE);
    gen_release(g, x);
    gen_release(g, p);
    return x2;
}

/* A SwiGLU MLP of width F on b (gate and up in one GEMM); returns its output. */
static gen_t swiglu(struct gen *g, const struct deepseek *m, int P, gen_t b, uint64_t rows,
                    uint64_t F, const char *up, const char *down, double wscale) {
    const double dt = g->dtype, R = (double)rows, H = (double)m->hidden, f = (double)F;
    const uint64_t e = (uint64_t)g->dtype;
    gen_t u = gen_tensor(g, rows * 2 * F * e, true);
    gen_opl(g, up, GEN_GEMM, 2 * R * H * 2 * f, P, wscale * H * 2 * f * dt, GEN_L(b), GEN_L(u),
            GEN_L(b));
    gen_t y = gen_tensor(g, rows * F * e, true);
    gen_opl(g, "swiglu", GEN_ELEM, 4 * R * f, -1, 0, GEN_L(u), GEN_L(y), GEN_L(u));
    gen_release(g, u);
    gen_t z = gen_tensor(g, rows * m->hidden * e, true);
    gen_opl(g, down, GEN_GEMM, 2 * R * f * H, P, wscale * f * H * dt, GEN_L(y), GEN_L(z), GEN_L(y));
    gen_release(g, y);
    return z;
}

/* The MoE block on b: routed experts (dispatch, grouped GEMMs, combine) plus shared experts. */
static gen_t moe(struct gen *g, const struct deepseek *m, int P, gen_t b) {
    const double T = (double)(m->mbs * m->seq), H = (double)m->hidden, E = (double)m->experts;
    const double K = (double)m->topk;
    const uint64_t Tn = m->mbs * m->seq, e = (uint64_t)g->dtype;
    gen_t r = gen_tensor(g, Tn * m->experts * 4, true);
    gen_opl(g, "gemm_router", GEN_GEMM, 2 * T * H * E, P, H * E * g->dtype, GEN_L(b), GEN_L(r),
            GEN_L(b));
    gen_t idx = gen_tensor(g, Tn * m->topk * 8, true); /* expert index and gate weight */
    gen_opl(g, "topk_softmax", GEN_ELEM, 8 * T * E, -1, 0, GEN_L(r), GEN_L(idx), GEN_L(r));
    gen_release(g, r);
    gen_t xd = gen_tensor(g, Tn * m->topk * m->hidden * e, true);
    gen_opl(g, "moe_dispatch", GEN_ELEM, 0, -1, 0, GEN_L(b, idx), GEN_L(xd), GEN_L(idx));
    /* The grouped GEMMs read every routed expert's weights once. */
    gen_t z =
        swiglu(g, m, P, xd, Tn * m->topk, m->moe_ffn, "grouped_gemm_up", "grouped_gemm_down", E);
    gen_release(g, xd);
    gen_t sz =
        swiglu(g, m, P, b, Tn, m->shared * m->moe_ffn, "gemm_shared_up", "gemm_shared_down", 1);
    gen_t out = gen_tensor(g, Tn * m->hidden * e, true);
    gen_opl(g, "moe_combine", GEN_ELEM, 2 * T * K * H, -1, 0, GEN_L(z, idx, sz), GEN_L(out),
            GEN_L(z, idx));
    gen_release(g, z);
    gen_release(g, idx);
    gen_release(g, sz);
    return out;
}

static void forward(struct gen *g, const void *model) {
    const struct deepseek *m = model;
    const double dt = g->dtype, T = (double)(m->mbs * m->seq), H = (double)m->hidden;
    const uint64_t act = m->mbs * m->seq * m->hidden * (uint64_t)g->dtype;
    gen_t x = gen_tensor(g, act, true);
    gen_opl(g, "embedding", GEN_GATHER, 0, m->emb, 2 * T * H * dt, GEN_NONE, GEN_L(x), GEN_NONE);
    for (uint64_t l = 0; l < m->layers; l++) {
        int Pa = m->layer0 + 2 * (int)l, Pm = Pa + 1;
        gen_t x2 = mla(g, m, Pa, x);
        gen_t b = gen_tensor(g, act, true);
        gen_opl(g, "rmsnorm", GEN_ELEM, 4 * T * H, Pa, H * dt, GEN_L(x2), GEN_L(b), GEN_L(x2));
        gen_t y = l < m->dense_layers ? swiglu(g, m, Pm, b, m->mbs * m->seq, m->dense_ffn,
                                               "gemm_mlp_up", "gemm_mlp_down", 1)
                                      : moe(g, m, Pm, b);
        gen_release(g, b);
        x = gen_tensor(g, act, true);
        gen_opl(g, "residual_add", GEN_ADD, T * H, -1, 0, GEN_L(x2, y), GEN_L(x), GEN_NONE);
        gen_release(g, x2);
        gen_release(g, y);
    }
    gen_t xf = gen_tensor(g, act, true);
    gen_opl(g, "rmsnorm", GEN_ELEM, 4 * T * H, m->head, H * dt, GEN_L(x), GEN_L(xf), GEN_L(x));
    gen_release(g, x);
    const double V = (double)m->vocab;
    gen_t logits = gen_tensor(g, m->mbs * m->seq * m->vocab * (uint64_t)g->dtype, true);
    gen_opl(g, "gemm_lm_head", GEN_GEMM, 2 * T * H * V, m->head, V * H * dt, GEN_L(xf),
            GEN_L(logits), GEN_L(xf));
    gen_release(g, xf);
    gen_opl(g, "cross_entropy", GEN_LOSS, 4 * T * V, -1, 0, GEN_L(logits), GEN_NONE, GEN_L(logits));
    gen_release(g, logits);
}

const struct gen_preset gen_preset_deepseek = {
    .name = "deepseek",
    .summary = "DeepSeek-V3-like: multi-head latent attention, MoE layers with shared experts",
    .opts = opts,
    .nopts = sizeof opts / sizeof opts[0],
    .model_size = sizeof(struct deepseek),
    .check = check,
    .param_count = param_count,
    .setup = setup,
    .forward = forward,
};
