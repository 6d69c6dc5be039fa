#!/usr/bin/env python3
"""torch.distributed with the gloo backend: all-reduce (sum, f32) of the sizes
process_group_bench times, as the peer users would pick. Run under kiln's launcher (it reads
KILN_RANK, KILN_WORLD_SIZE and KILN_RENDEZVOUS), with Debian's python3-torch:

    bazel-bin/tools/launch --nproc=2 -- python3 bench/torch_gloo_bench.py [repetitions]

Each call is timed on its own (medians over the repetitions, after two warm-up rounds);
rank 0 prints the table.
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    rank, world = int(os.environ["KILN_RANK"]), int(os.environ["KILN_WORLD_SIZE"])
    store = os.environ["KILN_RENDEZVOUS"]
    assert store.startswith("file://"), "this script rendezvous through a file store"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"{store}/torch-init", rank=rank, world_size=world)
    sizes = [int(s) << 10 for s in os.environ.get("SIZES_KIB", "4,1024,25600,65536").split(",")]
    if rank == 0:
        print(f"torch {torch.__version__}, gloo, {world} processes")
        print(f"{'size':10} {'variant':28} {'median ms':>10} {'GB/s':>10}")
    for size in sizes:
        t = torch.ones(size // 4, dtype=torch.float32)
        times = []
        for i in range(reps + 2):
            start = time.perf_counter()
            dist.all_reduce(t, op=dist.ReduceOp.SUM)
            if i >= 2:
                times.append(time.perf_counter() - start)
        m = statistics.median(times)
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        if rank == 0:
            print(f"{label:10} {'torch.distributed gloo':28} {m * 1e3:10.3f} {size / m * 1e-9:10.2f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
