#!/usr/bin/python3
"""torch.matmul in f32 and bf16 on 2 threads at half_bench's BM_Matmul shapes: the framework
peer for kiln's bf16 GEMM (torch 1.13 sends CPU bf16 matmuls to oneDNN, which uses AVX-512 BF16
where the CPU has it). Debian's python3-torch imports only with /usr/bin/python3. Not part of
the build, the tests or CI; bench/README.md shows how it is run beside half_bench.
On Sapphire Rapids oneDNN takes AMX for bf16; --no_amx caps it at AVX-512 BF16 (vdpbf16ps, the
instruction kiln's kernel uses) through ONEDNN_MAX_CPU_ISA, read when torch loads.
"""
import argparse
import os
import statistics
import sys
import time

if "--no_amx" in sys.argv:
    os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX512_CORE_BF16"
import torch  # noqa: E402 (after the environment it reads)

SHAPES = [(1024, 1024, 1024), (64, 784, 256), (512, 768, 3072)]  # m, k, n


def measure(m, k, n, dtype, repetitions, min_time):
    gen = torch.Generator().manual_seed(1)
    a = (torch.rand(m, k, generator=gen) * 2 - 1).to(dtype)
    b = (torch.rand(k, n, generator=gen) * 2 - 1).to(dtype)
    for _ in range(3):
        torch.matmul(a, b)
    times = []
    for _ in range(repetitions):
        iterations, start = 0, time.perf_counter()
        while True:
            torch.matmul(a, b)
            iterations += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        times.append(elapsed / iterations)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--min_time", type=float, default=0.5, help="seconds per repetition")
    parser.add_argument("--no_amx", action="store_true", help="oneDNN without AMX (vdpbf16ps)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"mkldnn {torch.backends.mkldnn.is_available()}, "
          f"ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset')}")
    for m, k, n in SHAPES:
        for dtype in (torch.float32, torch.bfloat16):
            t = measure(m, k, n, dtype, args.repetitions, args.min_time)
            print(f"torch.matmul {m}x{k}x{n} {str(dtype).replace('torch.', ''):9s} "
                  f"{t * 1e3:8.3f} ms {2 * m * k * n / t * 1e-9:7.1f} GFLOPS")


if __name__ == "__main__":
    main()
