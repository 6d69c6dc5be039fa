#!/usr/bin/env python3
"""Side-by-side ratios from one Google Benchmark JSON run.

Usage: ./bazelw run //bench:tensor_bench -- --benchmark_repetitions=3 \
           --benchmark_format=json > /tmp/bench.json
       python3 bench/compare.py /tmp/bench.json

Each line pairs a kiln benchmark with its reference from the same run and prints the
ratio of their rates (GFLOPS or GB/s; medians when the run has repetitions).
"""
import json
import re
import sys

# (kiln benchmark regex, reference benchmark template): \1 etc. refer to the kiln match.
PAIRS = [
    (r"BM_MatmulKiln/(\d+)/1$", r"BM_MatmulEigen/\1"),
    (r"BM_MatmulKiln/(\d+)/(\d+)$", r"BM_MatmulEigenThreadPool/\1/\2"),
    (r"BM_AddKiln/(\d+)$", r"BM_Memcpy/\1"),
    (r"BM_SumKiln/(\d+)$", r"BM_Memcpy/\1"),
    (r"BM_StepKiln/(\w+)$", r"BM_StepTorch/\1"),
    (r"BM_StepKiln/(\w+)$", r"BM_StepEigen/\1/best"),
    (r"BM_AutodiffChainKiln$", r"BM_AutodiffChainTorch"),
    (r"BM_AllReduceKiln/(\d+)$", r"BM_Memcpy/\1"),
    (r"BM_DataParallelMlp/2/(\d+)$", r"BM_DataParallelMlp/1/\1"),
    (r"BM_DataParallelMlp/2/256$", r"BM_DataParallelMlp/1/512"),
]


def rates(path):
    """Name -> (rate, unit). Rates are higher-is-better: GFLOPS, GB/s, or steps/s for
    benchmarks that only have a time."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    has_aggregates = any(b.get("run_type") == "aggregate" for b in data["benchmarks"])
    for b in data["benchmarks"]:
        if has_aggregates and b.get("aggregate_name") != "median":
            continue
        name = re.sub(r"(/process_time)?(/real_time)?(_median)?$", "", b.get("run_name", b["name"]))
        for unit in ("GFLOPS", "GB/s", "samples/s"):
            if unit in b:
                out[name] = (b[unit] * 1e-9 if b[unit] > 1e6 else b[unit], unit)
        if name not in out:
            seconds = b["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}[b["time_unit"]]
            out[name] = (1 / seconds, "it/s")
    # The no-framework peer at its best thread count and threading (Eigen's thread pool or
    # OpenMP): BM_StepEigen/<step>/best.
    for name in list(out):
        m = re.match(r"BM_StepEigen(?:OpenMp)?(/\w+)/\d+$", name)
        best = "BM_StepEigen" + m.group(1) + "/best" if m else None
        if m and (best not in out or out[name][0] > out[best][0]):
            out[best] = out[name]
    return out


def main():
    table = rates(sys.argv[1])
    print(f"{'kiln':32} {'reference':32} {'kiln':>17} {'reference':>17} {'ratio':>6}")
    for name, (rate, unit) in sorted(table.items()):
        for pattern, ref_template in PAIRS:
            m = re.match(pattern, name)
            if not m:
                continue
            ref = m.expand(ref_template)
            if ref in table and ref != name:
                ref_rate = table[ref][0]
                print(f"{name:32} {ref:32} {rate:10.1f}{unit:>7} {ref_rate:10.1f}{unit:>7}"
                      f" {rate / ref_rate:6.2f}")


if __name__ == "__main__":
    main()
