#!/usr/bin/python3
"""Medians of bench:gemm_bench's repetitions as a table: GFLOPS per CPU-second (process CPU
time, so under load it counts only the time the threads ran) and per wall second, kiln's
kernel (the backend's choice), kiln's AVX2 kernel and Tensor matmul against Eigen's. Usage: gemm_table.py out.json"""
import collections
import json
import statistics
import sys

FLOPS = {"qkv": (1024, 384, 1152), "mlp_up": (1024, 384, 1536), "proj": (1024, 384, 256),
         "dx_qkv": (1024, 1152, 384), "dx_mlp": (1024, 1536, 384), "dw_mlp": (1536, 2048, 384),
         "att_qk64": (64, 32, 64), "att_qk256": (256, 64, 256), "att_wv256": (256, 256, 64),
         "sq256": (256, 256, 256), "sq1024": (1024, 1024, 1024),
         "mlp_fc1_64": (64, 784, 256), "mlp_fc1_32": (32, 784, 256), "mlp_dw1_32": (256, 32, 784)}


def main(path):
    runs = collections.defaultdict(lambda: ([], []))
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        name = b["run_name"].split("/process_time")[0]
        shape, layouts, threads, impl = name.split("/")
        m, k, n = FLOPS[shape]
        scale = {"ms": 1e-3, "us": 1e-6, "ns": 1e-9}[b["time_unit"]]
        cpu, wall = runs[(shape, layouts, threads, impl)]
        cpu.append(2 * m * k * n / (b["cpu_time"] * scale) * 1e-9)
        wall.append(2 * m * k * n / (b["real_time"] * scale) * 1e-9)
    keys = sorted({k[:3] for k in runs}, key=lambda k: (list(FLOPS).index(k[0]), k[2], k[1]))
    print("| shape (m,k,n) | A,B | threads | Eigen | kiln | kiln/Eigen | kiln AVX2 | kiln AVX2/Eigen | Tensor matmul "
          "| Eigen wall | kiln wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, layouts, threads in keys:
        med = {i: [statistics.median(v) if v else float("nan") for v in runs[(shape, layouts, threads, i)]]
               for i in ("eigen", "kiln", "kiln_avx2", "tensor")}
        print(f"| {shape} {FLOPS[shape]} | {layouts} | {threads[1:]} | {med['eigen'][0]:.0f} | {med['kiln'][0]:.0f} | "
              f"{med['kiln'][0] / med['eigen'][0]:.2f} | {med['kiln_avx2'][0]:.0f} | "
              f"{med['kiln_avx2'][0] / med['eigen'][0]:.2f} | {med['tensor'][0]:.0f} | {med['eigen'][1]:.0f} | "
              f"{med['kiln'][1]:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1])
