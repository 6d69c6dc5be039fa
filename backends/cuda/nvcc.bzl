"""nvcc through a genrule: each .cu file becomes one -fPIC object for a cc_library's srcs."""

NVCC = "/usr/local/cuda/bin/nvcc"

# sm_80 (A100) and sm_90 (H100/H200) machine code, plus sm_90 PTX so newer GPUs JIT it.
GENCODE = " ".join([
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
])

def nvcc_objects(name, srcs, hdrs, target_compatible_with = None):
    """One genrule per .cu file; returns the list of object labels."""
    objects = []
    for src in srcs:
        base = src.rsplit("/", 1)[-1].replace(".cu", "")
        rule = name + "_" + base
        native.genrule(
            name = rule,
            srcs = [src] + hdrs,
            outs = [rule + ".o"],
            # -I. is the execution root, where workspace-relative includes resolve.
            cmd = (NVCC + " -c -std=c++20 -O3 -ccbin /usr/bin/g++ -Xcompiler -fPIC " +
                   "--extended-lambda --expt-relaxed-constexpr " + GENCODE +
                   " -I. -o $@ $(location " + src + ")"),
            target_compatible_with = target_compatible_with,
        )
        objects.append(":" + rule)
    return objects
