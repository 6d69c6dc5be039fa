#!/usr/bin/env python3
"""kiln's GPT against nanoGPT's (bench/nanogpt_model.py) in PyTorch, both ways:
  1. a kiln export (--export_nanogpt) loads into nanoGPT's GPT with load_state_dict(strict=True)
     and gives kiln's logits (bench:nanogpt_logits) within 1e-5;
  2. a fresh nanoGPT model's state dict, written by PyTorch, loads into nn::Gpt (the masks
     skipped) and gives PyTorch's logits within 1e-5.
  /usr/bin/python3 bench/nanogpt_compat.py EXPORT.safetensors --layers=2 --heads=2 --width=16 --context=16
Prints the largest differences as one JSON line; exits 1 beyond 1e-5.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import GPT, read_safetensors, write_safetensors  # noqa: E402


def kiln_logits(args, path, ids, tmp):
    out = os.path.join(tmp, "logits.safetensors")
    subprocess.run([args.logits_binary, "--file=" + path, "--out=" + out, "--ids=" + ",".join(map(str, ids)),
                    "--vocab=256", f"--context={args.context}", f"--layers={args.layers}", f"--heads={args.heads}",
                    f"--width={args.width}"], check=True)
    return read_safetensors(out)["logits"].double()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("export")
    for flag in ("layers", "heads", "width", "context"):
        p.add_argument("--" + flag, type=int, required=True)
    p.add_argument("--logits_binary", default="bazel-bin/bench/nanogpt_logits")
    args = p.parse_args()
    torch.manual_seed(0)
    ids = torch.randint(0, 256, (args.context,)).tolist()
    model = GPT(256, args.context, args.layers, args.heads, args.width).eval()
    with tempfile.TemporaryDirectory() as tmp:
        state = read_safetensors(args.export)
        state.update({k: v for k, v in model.state_dict().items() if k.endswith(".attn.bias")})  # masks: torch < 2
        model.load_state_dict(state, strict=True)
        with torch.no_grad():
            theirs = model(torch.tensor([ids])).double()
        exported = (theirs - kiln_logits(args, args.export, ids, tmp)).abs().max().item()
        fresh = GPT(256, args.context, args.layers, args.heads, args.width).eval()
        path = os.path.join(tmp, "torch.safetensors")
        write_safetensors(path, fresh.state_dict())
        with torch.no_grad():
            theirs = fresh(torch.tensor([ids])).double()
        imported = (theirs - kiln_logits(args, path, ids, tmp)).abs().max().item()
    print(json.dumps({"torch": torch.__version__, "kiln_export_in_nanogpt_max_abs_diff": exported,
                      "nanogpt_state_in_kiln_max_abs_diff": imported}))
    return 0 if max(exported, imported) <= 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
