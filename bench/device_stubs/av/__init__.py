"""The GPU check's PyAV stand-in: lets ComfyUI import on the GPU machine, which has no PyAV (bench/gpu_check.sh puts
this folder on its PYTHONPATH; the 36 MB wheel does not fit in what a GPU call can carry beside comfy-kitchen).

ComfyUI imports ``av`` and names from ``av.container``, ``av.codec``, ``av.error``, ``av.subtitles.stream`` and
``av.video.reformatter`` at import time (and keys dicts on ``ColorTrc`` members) but uses them only to read and
write video files, which the check never does. Every name here is a placeholder class: importable, usable as a
dict key, an ``isinstance`` target or in an ``except`` clause, and raising ImportError when called. Never install
it into a user's environment.
"""

import functools
import sys
import types

SUBMODULES = ("audio", "audio.resampler", "codec", "container", "error", "filter", "subtitles", "subtitles.stream",
              "video", "video.reformatter")


class _Unavailable(type):
    """Metaclass of the placeholders: any attribute is another placeholder, any call says PyAV is missing."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"{cls.__qualname__!r} has no attribute {name!r}")
        return placeholder(f"{cls.__module__}.{cls.__qualname__}.{name}")

    def __call__(cls, *args, **kwargs):
        raise ImportError(f"{cls.__module__}.{cls.__qualname__} is not available: this av is the GPU check's stand-in "
                          "(bench/device_stubs), which lets ComfyUI import without PyAV. Install PyAV to read or "
                          "write video files.")


@functools.cache
def placeholder(qualified_name: str) -> type:
    package, _, qualname = qualified_name.partition(".")
    return _Unavailable(qualname.rsplit(".", 1)[-1], (Exception,), {"__qualname__": qualname, "__module__": package})


def _attribute_getter(module_name: str):
    def __getattr__(name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        return placeholder(f"{module_name}.{name}")

    return __getattr__


__getattr__ = _attribute_getter(__name__)
for _name in SUBMODULES:
    _module = types.ModuleType(f"{__name__}.{_name}")
    _module.__getattr__ = _attribute_getter(_module.__name__)
    sys.modules[_module.__name__] = _module
    _parent, _, _leaf = _module.__name__.rpartition(".")
    setattr(sys.modules[_parent], _leaf, _module)
