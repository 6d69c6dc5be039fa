"""The optional backends, listed once for Bazel (backends/registry.h lists them for C++)."""

# Each name is what the backend's devices are called ("vulkan:0") and its --config: .bazelrc
# has `build:<name> --define=backend_<name>=1`, and //:with_<name> (made below) is true then.
# The value is the library backends/registry.h includes from. The CPU backend is always built.
OPTIONAL_BACKENDS = {
    "vulkan": "//backends/vulkan",
    "cuda": "//backends/cuda:cuda_backend",
}

def backend_config_settings():
    """//:with_<name> for each optional backend (called once, in the root BUILD.bazel)."""
    for name in OPTIONAL_BACKENDS:
        native.config_setting(
            name = "with_" + name,
            define_values = {"backend_" + name: "1"},
        )

def _each_compiled(libraries):
    # The name (or, with `libraries`, the library) of each optional backend compiled in.
    out = []
    for name, library in OPTIONAL_BACKENDS.items():
        out = out + select({
            "//:with_" + name: [library if libraries else name],
            "//conditions:default": [],
        })
    return out

def compiled_backend_names():
    """The names of the backends this build compiles in, the CPU first: a test's arguments."""
    return ["cpu"] + _each_compiled(False)

def compiled_backend_libraries():
    """The libraries of the optional backends this build compiles in (the registry's deps)."""
    return _each_compiled(True)
