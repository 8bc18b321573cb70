#!/usr/bin/env python3
"""The PyTorch reference of bench/vs_torch.sh: the same decoder as a parallax
model file (GPT-2: LayerNorm, GELU-tanh, learned positions, biases, tied
embeddings; Llama: RMSNorm, SwiGLU, RoPE, no biases, untied), trained with
AdamW in fp32 on random tokens. Prints one JSON line: tokens/s from the median
step time, the steps after the first (warm-up) counted. A benchmark reference
only: nothing in the build or the tests imports torch.
  torch_ref.py MODEL.json --seq S --gbs B --mbs b --steps N --threads T"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def rope_tables(seq, d, base):  # cos, sin: [seq, d/2], computed once
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    return ang.cos(), ang.sin()


def rope(x, cos, sin):  # x: [b, h, s, d], rotating the pairs (2i, 2i + 1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, m):
        super().__init__()
        h, self.heads = m["hidden"], m["heads"]
        self.kv = m.get("kv_heads", self.heads)
        self.hd = m.get("head_dim", h // self.heads)
        self.llama = m.get("norm") == "rmsnorm"
        bias = m.get("bias", False)
        eps = m.get("norm_eps", 1e-5)
        norm = (lambda: nn.RMSNorm(h, eps=eps)) if self.llama else (lambda: nn.LayerNorm(h, eps=eps))
        self.ln1, self.ln2 = norm(), norm()
        self.qkv = nn.Linear(h, (self.heads + 2 * self.kv) * self.hd, bias=bias or m.get("qkv_bias", False))
        self.proj = nn.Linear(self.heads * self.hd, h, bias=bias)
        f = m["ffn_hidden"]
        self.swiglu = m.get("mlp") == "swiglu"
        if self.swiglu:  # as Hugging Face's Llama: separate gate and up projections
            self.gate, self.up = nn.Linear(h, f, bias=bias), nn.Linear(h, f, bias=bias)
        else:
            self.fc1 = nn.Linear(h, f, bias=bias)
        self.fc2 = nn.Linear(f, h, bias=bias)

    def mlp(self, x):
        if self.swiglu:
            return self.fc2(F.silu(self.gate(x)) * self.up(x))
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split([self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], -1)
        q = q.view(b, s, self.heads, self.hd).transpose(1, 2)
        k = k.view(b, s, self.kv, self.hd).transpose(1, 2)
        v = v.view(b, s, self.kv, self.hd).transpose(1, 2)
        if self.llama:
            q, k = rope(q, cos, sin), rope(k, cos, sin)
        if self.kv != self.heads:
            k = k.repeat_interleave(self.heads // self.kv, 1)
            v = v.repeat_interleave(self.heads // self.kv, 1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, -1))
        return x + self.mlp(self.ln2(x))


class Model(nn.Module):
    def __init__(self, m, seq):
        super().__init__()
        h = m["hidden"]
        self.emb = nn.Embedding(m["vocab"], h)
        self.pos = nn.Embedding(seq, h) if m.get("position", "rope") == "learned" else None
        self.blocks = nn.ModuleList(Block(m) for _ in range(m["layers"]))
        eps = m.get("norm_eps", 1e-5)
        self.ln = nn.RMSNorm(h, eps=eps) if m.get("norm") == "rmsnorm" else nn.LayerNorm(h, eps=eps)
        self.cos, self.sin = rope_tables(seq, m.get("head_dim", h // m["heads"]), m.get("rope_theta", 10000.0))
        self.head = None if m.get("tied_embeddings") else nn.Linear(h, m["vocab"], bias=False)
        for mod in self.modules():  # GPT-2's initialisation: N(0, 0.02), biases 0
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, std=0.02)
            if isinstance(mod, nn.Linear) and mod.bias is not None:
                nn.init.zeros_(mod.bias)

    def forward(self, tok):
        x = self.emb(tok)
        if self.pos is not None:
            x = x + self.pos(torch.arange(tok.shape[1]))
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        x = self.ln(x)
        return x @ self.emb.weight.t() if self.head is None else self.head(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--seq", type=int, required=True)
    ap.add_argument("--gbs", type=int, required=True)
    ap.add_argument("--mbs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    m = json.load(open(a.model))
    model = Model(m, a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    times, losses = [], []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(a.gbs // a.mbs):  # gradient accumulation over the micro-batches
            tok = torch.randint(0, m["vocab"], (a.mbs, a.seq + 1))
            logits = model(tok[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tok[:, 1:].reshape(-1)) * (a.mbs / a.gbs)
            loss.backward()
            total += loss.item()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(total)
    step = statistics.median(times[1:] if len(times) > 1 else times)
    print(json.dumps({"tokens_per_s": a.gbs * a.seq / step, "step_time_s": step, "losses": losses,
                      "threads": a.threads, "torch": torch.__version__}))


if __name__ == "__main__":
    main()
