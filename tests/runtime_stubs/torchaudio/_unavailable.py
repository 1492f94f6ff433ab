"""Module-level ``__getattr__`` for the stand-in's modules (see ../README.md)."""


def attribute_getter(module_name: str):
    def __getattr__(name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        raise ImportError(
            f"{module_name}.{name} is not available: this torchaudio is the test suite's stand-in "
            "(tests/runtime_stubs), which lets ComfyUI import without audio support. Install a torchaudio "
            "that matches your torch to use audio nodes."
        )

    return __getattr__
