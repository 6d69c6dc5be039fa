#!/usr/bin/env python3
"""The peer of bench:generate_bench in PyTorch: nanoGPT's GPT (bench/nanogpt_model.py) sampling
as nanoGPT's generate() does (the whole window each token; nanoGPT has no key-value cache),
with the same model (4 blocks, width 128, 4 heads, vocabulary 256), at context 64 and 256,
context - 8 tokens after an 8-token prompt. Prints tokens/s as one JSON line.

  /usr/bin/python3 bench/generate_torch.py --threads=2
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import GPT  # noqa: E402


@torch.no_grad()
def generate(model, ids, count, context):
    for _ in range(count):
        logits = model(ids[:, -context:])[:, -1, :]
        ids = torch.cat([ids, torch.multinomial(logits.softmax(-1), 1)], dim=1)
    return ids


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    result = {"torch": torch.__version__, "threads": args.threads}
    for context in (64, 256):
        model = GPT(256, context, 4, 4, 128).eval()
        prompt = torch.tensor([[10, 65, 58, 32, 84, 104, 101, 32]])
        generate(model, prompt, 4, context)  # warm-up
        start = time.perf_counter()
        generate(model, prompt, context - 8, context)
        result[f"uncached_tokens_per_s_context_{context}"] = round((context - 8) / (time.perf_counter() - start), 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
