#!/usr/bin/env python3
"""PyTorch's time per step of step_bench's MLP (784-256-256-10, batch 64, cross-entropy, SGD
with momentum 0.9), the framework peer of bench/README.md. Run with Debian's python3-torch:

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/torch_mlp_step.py 2        # 2 torch threads
    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/torch_mlp_step.py 2 bf16   # under CPU autocast

With "bf16" the forward and the loss run under torch.autocast("cpu", torch.bfloat16), the peer
of step_bench's BM_StepKilnPrecision/mlp_bf16: f32 parameters and optimizer, bf16 matmuls
(PyTorch 1.13 has no f16 autocast on the CPU). Prints the median of 5 timings of 200 steps,
after 50 warm-up steps.
"""
import contextlib
import os
import sys
import time

import torch

if len(sys.argv) > 1:
    torch.set_num_threads(int(sys.argv[1]))
precision = sys.argv[2] if len(sys.argv) > 2 else "f32"
if precision not in ("f32", "bf16"):
    sys.exit(f"torch_mlp_step.py: precision must be f32 or bf16, got {precision!r}")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                            torch.nn.ReLU(), torch.nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.rand(64, 784) * 2 - 1
y = torch.randint(0, 10, (64,))


def autocast():
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def step():
    opt.zero_grad(set_to_none=True)
    with autocast():
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()


for _ in range(50):
    step()
times = []
for _ in range(5):
    start = time.perf_counter()
    for _ in range(200):
        step()
    times.append((time.perf_counter() - start) / 200 * 1e6)
times.sort()
print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')} "
      f"torch threads={torch.get_num_threads()} {precision}: median {times[2]:.0f} us per step")
