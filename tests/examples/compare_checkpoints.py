#!/usr/bin/env python3
"""Prints the largest absolute difference between the tensors of two safetensors files
(F32/F64 only; every name must be in both, with the same shape).

Usage: compare_checkpoints.py a.safetensors b.safetensors
"""
import array
import json
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        code = {"F32": "f", "F64": "d"}.get(info["dtype"])
        if code is None:
            continue
        begin, end = info["data_offsets"]
        out[name] = (info["shape"], array.array(code, data[begin:end]))
    return out


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    if sorted(a) != sorted(b):
        print(f"different tensors: {sorted(set(a) ^ set(b))}")
        return 1
    worst, where = 0.0, ""
    for name in a:
        if a[name][0] != b[name][0]:
            print(f"{name}: shape {a[name][0]} vs {b[name][0]}")
            return 1
        for x, y in zip(a[name][1], b[name][1]):
            if abs(x - y) > worst:
                worst, where = abs(x - y), name
    print(f"{worst:.3g} {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
