"""Models of the recorded benchmark set (hostoff_workloads.py), written in plain torch.nn.

Every model runs the way a single-GPU training script under torch.autocast(bfloat16) runs it:
parameters in fp32, each matrix multiplication casting its operands to bf16 (a weight's cast is
one kernel per forward; an activation is cast at every use, as autocast does for tensors that
are not leaves), the residual stream in fp32 (fp32 + bf16 promotes), norms and the loss in fp32.
The meta device has no autocast, so the casts are written out (lin() and conv()). Attention is
fused (hostoff_record.flash_attention: the scores are never stored).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import hostoff_record as hr

LOW = torch.bfloat16


def _param(*shape):
    return nn.Parameter(torch.empty(*shape, device="meta"))


def lin(x, w, b=None):
    """A linear layer under autocast: input, weight and bias cast to bf16 (no kernel for a tensor
    that already is), one matrix multiplication."""
    return F.linear(x.to(LOW), w.to(LOW), None if b is None else b.to(LOW))


# --- GPT-2 class: learnt positions, LayerNorm, GELU MLP, tied embedding -----------------------

class GPTBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1_w, self.ln1_b = _param(d), _param(d)
        self.qkv_w, self.qkv_b = _param(3 * d, d), _param(3 * d)
        self.proj_w, self.proj_b = _param(d, d), _param(d)
        self.ln2_w, self.ln2_b = _param(d), _param(d)
        self.fc_w, self.fc_b = _param(4 * d, d), _param(4 * d)
        self.fc2_w, self.fc2_b = _param(d, 4 * d), _param(d)

    def forward(self, x):
        b, s, d = x.shape
        h = F.layer_norm(x, (d,), self.ln1_w, self.ln1_b)
        q, k, v = lin(h, self.qkv_w, self.qkv_b).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = hr.flash_attention(q, k, v, causal=True).transpose(1, 2).contiguous().view(b, s, d)
        x = x + lin(a, self.proj_w, self.proj_b)
        h = F.layer_norm(x, (d,), self.ln2_w, self.ln2_b)
        h = F.gelu(lin(h, self.fc_w, self.fc_b), approximate="tanh")
        return x + lin(h, self.fc2_w, self.fc2_b)


class GPT(nn.Module):
    def __init__(self, layers, d, heads, vocab, seq, ckpt=False):
        super().__init__()
        self.wte, self.wpe = _param(vocab, d), _param(seq, d)
        self.blocks = nn.ModuleList(GPTBlock(d, heads) for _ in range(layers))
        self.lnf_w, self.lnf_b = _param(d), _param(d)
        self.ckpt = ckpt

    def forward(self, idx, targets):
        b, s = idx.shape
        pos = torch.arange(s, device=idx.device)
        x = F.embedding(idx, self.wte) + F.embedding(pos, self.wpe)
        for blk in self.blocks:
            x = checkpoint(blk, x) if self.ckpt else blk(x)
        x = F.layer_norm(x, (x.shape[-1],), self.lnf_w, self.lnf_b)
        logits = lin(x, self.wte)
        return F.cross_entropy(logits.float().view(b * s, -1), targets.view(b * s))


# --- Llama class: RMSNorm, rotary positions, grouped-query attention, SwiGLU, untied head -----

def rms_norm(x, w, eps=1e-5):
    x = x.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return w * x


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


def rope_tables(s, head_dim, device):
    inv = 1.0 / (500000 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    t = torch.arange(s, device=device).float()
    freqs = torch.outer(t, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(LOW)[None, None], emb.sin().to(LOW)[None, None]


class SwiGLU(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.gate_w, self.up_w, self.down_w = _param(ffn, d), _param(ffn, d), _param(d, ffn)

    def forward(self, h):
        return lin(F.silu(lin(h, self.gate_w)) * lin(h, self.up_w), self.down_w)


class LlamaAttention(nn.Module):
    def __init__(self, d, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.q_w, self.k_w = _param(d, d), _param(kv_heads * self.hd, d)
        self.v_w, self.o_w = _param(kv_heads * self.hd, d), _param(d, d)

    def forward(self, h, cos, sin):
        b, s, d = h.shape
        q = lin(h, self.q_w).view(b, s, self.heads, self.hd).transpose(1, 2)
        k = lin(h, self.k_w).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        v = lin(h, self.v_w).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        a = hr.flash_attention(q, k, v, causal=True).transpose(1, 2).contiguous().view(b, s, d)
        return lin(a, self.o_w)


class MoE(nn.Module):
    """Top-k routed SwiGLU experts, eager and without dropped tokens: the router's choices are
    sorted by expert, each expert gathers its tokens (index_select), runs, and adds its output
    back weighted by the router (index_add_). Meta tensors hold no routing decisions, so every
    expert gets an equal share of the tokens (balanced load, what the auxiliary loss aims at)."""

    def __init__(self, d, ffn, experts, topk):
        super().__init__()
        self.router_w = _param(experts, d)
        self.experts = nn.ModuleList(SwiGLU(d, ffn) for _ in range(experts))
        self.topk = topk

    def forward(self, h):
        b, s, d = h.shape
        x = h.reshape(b * s, d)
        probs = lin(x, self.router_w).float().softmax(-1)
        weight, expert = probs.topk(self.topk, dim=-1)
        weight = weight / weight.sum(-1, keepdim=True)
        order = expert.flatten().argsort()
        token = order // self.topk
        gate = weight.flatten()[order].to(LOW)
        share = token.shape[0] // len(self.experts)
        out = torch.zeros_like(x)
        for e, ex in enumerate(self.experts):
            idx = token[e * share:(e + 1) * share]
            y = ex(x.index_select(0, idx)) * gate[e * share:(e + 1) * share, None]
            out.index_add_(0, idx, y.float())
        return out.view(b, s, d)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, ffn, experts=0, topk=2):
        super().__init__()
        self.attn_norm, self.ffn_norm = _param(d), _param(d)
        self.attn = LlamaAttention(d, heads, kv_heads)
        self.mlp = MoE(d, ffn, experts, topk) if experts else SwiGLU(d, ffn)

    def forward(self, x, cos, sin):
        x = x + self.attn(rms_norm(x, self.attn_norm), cos, sin)
        return x + self.mlp(rms_norm(x, self.ffn_norm))


class Llama(nn.Module):
    def __init__(self, layers, d, heads, kv_heads, ffn, vocab, experts=0, topk=2, ckpt=False):
        super().__init__()
        self.embed = _param(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, kv_heads, ffn, experts, topk)
                                    for _ in range(layers))
        self.norm, self.head = _param(d), _param(vocab, d)
        self.hd = d // heads
        self.ckpt = ckpt

    def forward(self, idx, targets):
        b, s = idx.shape
        cos, sin = rope_tables(s, self.hd, idx.device)
        x = F.embedding(idx, self.embed)
        for blk in self.blocks:
            x = checkpoint(blk, x, cos, sin) if self.ckpt else blk(x, cos, sin)
        logits = lin(rms_norm(x, self.norm), self.head)
        return F.cross_entropy(logits.float().view(b * s, -1), targets.view(b * s))


# --- ResNet-50 class: bottleneck blocks, BatchNorm, channels-first --------------------------

def conv(x, w, stride=1, padding=0):
    return F.conv2d(x.to(LOW), w.to(LOW), None, stride, padding)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.c1, self.b1 = _param(width, cin, 1, 1), nn.BatchNorm2d(width, device="meta")
        self.c2, self.b2 = _param(width, width, 3, 3), nn.BatchNorm2d(width, device="meta")
        self.c3, self.b3 = _param(cout, width, 1, 1), nn.BatchNorm2d(cout, device="meta")
        self.stride = stride
        self.down = None
        if stride != 1 or cin != cout:
            self.down = _param(cout, cin, 1, 1)
            self.bd = nn.BatchNorm2d(cout, device="meta")

    def forward(self, x):
        h = F.relu(self.b1(conv(x, self.c1)))
        h = F.relu(self.b2(conv(h, self.c2, self.stride, 1)))
        h = self.b3(conv(h, self.c3))
        sc = x if self.down is None else self.bd(conv(x, self.down, self.stride))
        return F.relu(h + sc)


class ResNet(nn.Module):
    def __init__(self, blocks=(3, 4, 6, 3), classes=1000):
        super().__init__()
        self.stem, self.bn = _param(64, 3, 7, 7), nn.BatchNorm2d(64, device="meta")
        layers, cin = [], 64
        for i, n in enumerate(blocks):
            width = 64 * 2 ** i
            for j in range(n):
                layers.append(Bottleneck(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * 4
        self.layers = nn.ModuleList(layers)
        self.fc_w, self.fc_b = _param(classes, cin), _param(classes)

    def forward(self, img, targets):
        x = F.relu(self.bn(conv(img, self.stem, 2, 3)))
        x = F.max_pool2d(x, 3, 2, 1)
        for blk in self.layers:
            x = blk(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.cross_entropy(lin(x, self.fc_w, self.fc_b).float(), targets)
