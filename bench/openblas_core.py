"""Debian's OpenBLAS (0.3.21) takes CPUs newer than it knows, such as this machine's Xeon (family 6,
model 207), for a Prescott and runs its SSE3 kernels: torch's f32 GEMMs ~8x slower (about 10
GFLOPS on 2 threads instead of 60-85). Import this before torch, whose OpenBLAS reads
OPENBLAS_CORETYPE when it loads, and call name_unknown_core(): when OpenBLAS would fall back to
Prescott on a CPU with AVX2 or AVX-512, it names the core from the CPU's flags instead.
A user's own OPENBLAS_CORETYPE is left alone.
"""
import ctypes
import os
import subprocess
import sys

_PROBE = ("import ctypes; b = ctypes.CDLL('libopenblas.so.0'); b.openblas_get_corename.restype = ctypes.c_char_p; "
          "print(b.openblas_get_corename().decode())")


def _cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def name_unknown_core():
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    probe = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != "Prescott":
        return  # no OpenBLAS, or one that knows this CPU
    flags = _cpu_flags()
    for core, needs in [("Cooperlake", {"avx512f", "avx512_bf16"}), ("SkylakeX", {"avx512f"}),
                        ("Haswell", {"avx2", "fma"})]:
        if needs <= flags:
            os.environ["OPENBLAS_CORETYPE"] = core
            return


def core_and_threads():
    """The core OpenBLAS runs and its threads, as loaded in this process (("", 0) without OpenBLAS)."""
    try:
        blas = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return "", 0
    blas.openblas_get_corename.restype = ctypes.c_char_p
    return blas.openblas_get_corename().decode(), blas.openblas_get_num_threads()
