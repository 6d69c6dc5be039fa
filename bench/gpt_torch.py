#!/usr/bin/env python3
"""The peer of examples/gpt in PyTorch (Debian's python3-torch; run with /usr/bin/python3):
the same byte-level GPT (pre-LN blocks, tanh GELU, tied head, nanoGPT's init), the same corpus
and 90/10 split, the same hyper-parameters (AdamW betas (0.9, 0.99), decay on linear weights
only, warm-up then cosine to lr/10, global-norm clipping) and the same validation windows.
Random batches are drawn with torch's generator, so the runs are alike, not identical.
Where Debian's OpenBLAS does not know the CPU it would run SSE3 kernels; bench/openblas_core.py
names the core instead (the JSON's openblas gives the core that ran and OpenBLAS's threads).

  /usr/bin/python3 bench/gpt_torch.py --steps=200 --threads=2

Prints one JSON line: ms_per_step (the median of the steps after --timing_warmup; the mean of all
in ms_per_step_mean), the final validation loss, first_loss and loss_curve ([step, mean train
loss of the steps since the previous point], ten points).
"""
import argparse
import json
import math
import os
import statistics
import time

import openblas_core

openblas_core.name_unknown_core()  # before torch loads OpenBLAS
import torch  # noqa: E402
import torch.nn as nn
import torch.nn.functional as F


def corpus(folder):
    names = sorted(n for n in os.listdir(folder)
                   if not n.startswith(".") and not n.endswith((".dat", ".u8"))
                   and os.path.isfile(os.path.join(folder, n)) and not os.path.islink(os.path.join(folder, n)))
    return b"".join(open(os.path.join(folder, n), "rb").read() for n in names)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.qkv(self.ln_1(x)).reshape(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True) \
            if hasattr(F, "scaled_dot_product_attention") else self.attend(qkv)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    @staticmethod
    def attend(qkv):  # torch 1.13 has no scaled_dot_product_attention
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = q.shape[2]
        scores = q @ k.transpose(2, 3) / math.sqrt(q.shape[3])
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        return scores.masked_fill(mask, float("-inf")).softmax(-1) @ v


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, heads, width):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        nn.init.normal_(self.wte.weight, std=0.02)
        nn.init.normal_(self.wpe.weight, std=0.02)
        self.h = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        for name, p in self.named_parameters():  # GPT-2's init, as nn::Gpt's
            if name.endswith(".weight") and p.dim() == 2 and not name.startswith(("wte", "wpe")):
                residual = name.endswith(("proj.weight", "out.weight"))
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers) if residual else 0.02)
            elif name.endswith(".bias") and "ln_" not in name:
                nn.init.zeros_(p)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.T


def main():
    p = argparse.ArgumentParser()
    for name, default in [("steps", 1200), ("batch_size", 32), ("context", 64), ("layers", 4), ("heads", 4),
                          ("width", 128), ("warmup", 100), ("eval_batches", 16), ("threads", 2), ("seed", 1),
                          ("timing_warmup", 3)]:
        p.add_argument("--" + name, type=int, default=default)
    for name, default in [("lr", 1e-3), ("weight_decay", 0.1), ("clip", 1.0)]:
        p.add_argument("--" + name, type=float, default=default)
    p.add_argument("--data_dir", default="/usr/share/games/fortunes")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data = torch.frombuffer(bytearray(corpus(a.data_dir)), dtype=torch.uint8).long()
    split = len(data) * 9 // 10
    train, val = data[:split], data[split:]
    model = Gpt(256, a.context, a.layers, a.heads, a.width)
    decay = [p for n, p in model.named_parameters() if n.endswith(".weight") and "ln_" not in n and "wte" not in n
             and "wpe" not in n]
    rest = [p for n, p in model.named_parameters() if not any(p is q for q in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": rest, "weight_decay": 0}],
                            lr=a.lr, betas=(0.9, 0.99))

    def lr_at(step):
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        t = min(1.0, (step - a.warmup) / max(1, a.steps - a.warmup))
        return a.lr / 10 + 0.5 * (a.lr - a.lr / 10) * (1 + math.cos(math.pi * t))

    def windows(src, starts):
        x = torch.stack([src[s:s + a.context] for s in starts])
        y = torch.stack([src[s + 1:s + a.context + 1] for s in starts])
        return x, y

    def validate():
        model.eval()
        total, n, span = 0.0, a.eval_batches * a.batch_size, len(val) - a.context - 1
        with torch.no_grad():
            for b in range(a.eval_batches):
                x, y = windows(val, [(b * a.batch_size + i) * span // n for i in range(a.batch_size)])
                total += F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1)).item()
        model.train()
        return total / a.eval_batches

    step_ms, losses = [], []
    for step in range(a.steps):
        start = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x, y = windows(train, torch.randint(0, len(train) - a.context - 1, (a.batch_size,)).tolist())
        loss = F.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        step_ms.append(1000 * (time.perf_counter() - start))
        losses.append(loss.item())
    v = validate()
    timed = step_ms[a.timing_warmup:] or step_ms
    print(json.dumps({"val_loss": round(v, 4), "val_bits_per_byte": round(v / math.log(2), 4),
                      "ms_per_step": round(statistics.median(timed), 2),
                      "ms_per_step_mean": round(statistics.mean(step_ms), 2), "timing_warmup": a.timing_warmup,
                      "first_loss": round(losses[0], 4), "loss_curve": curve(losses), "steps": a.steps,
                      "threads": a.threads, "torch": torch.__version__, "openblas": openblas_core.core_and_threads()}))


def curve(losses, points=10):
    """[step, mean train loss of the steps since the previous point] at `points` evenly spaced steps."""
    every, out, since = max(1, len(losses) // points), [], 0
    for step in range(1, len(losses) + 1):
        if step % every == 0 or step == len(losses):
            out.append([step, round(statistics.mean(losses[since:step]), 4)])
            since = step
    return out


if __name__ == "__main__":
    main()
