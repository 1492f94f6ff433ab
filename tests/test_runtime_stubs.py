"""The test-only torchaudio stand-in (tests/runtime_stubs): importable, unusable, never installed."""

import importlib.util
import pathlib
import site
import sys

import pytest

STUBS = pathlib.Path(__file__).resolve().parent / "runtime_stubs"


def load_stand_in(module_name, relative_path):
    spec = importlib.util.spec_from_file_location(
        module_name, STUBS / relative_path, submodule_search_locations=[str((STUBS / relative_path).parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[module_name]
    return module


@pytest.fixture
def stand_in():
    package = load_stand_in("torchaudio_stand_in", "torchaudio/__init__.py")
    sys.modules["torchaudio_stand_in"] = package
    try:
        functional = importlib.import_module("torchaudio_stand_in.functional")
    finally:
        for name in [name for name in sys.modules if name.startswith("torchaudio_stand_in")]:
            del sys.modules[name]
    return package, functional


def test_dunder_lookups_are_missing_attributes_so_introspection_works(stand_in):
    package, functional = stand_in
    assert not hasattr(package, "__version__") and not hasattr(functional, "__wrapped__")
    with pytest.raises(AttributeError):
        package.__path_hooks__


@pytest.mark.parametrize("module_index, attribute", [(0, "load"), (0, "transforms"), (1, "resample")])
def test_any_real_use_raises_import_error_naming_the_stand_in(stand_in, module_index, attribute):
    with pytest.raises(ImportError, match=rf"\.{attribute} is not available: this torchaudio is the test suite's "
                       r"stand-in \(tests/runtime_stubs\)"):
        getattr(stand_in[module_index], attribute)


def test_no_site_packages_folder_holds_a_stand_in():
    folders = [pathlib.Path(folder) for folder in site.getsitepackages() + [site.getusersitepackages()]]
    assert folders
    for folder in folders:
        init = folder / "torchaudio" / "__init__.py"
        assert not (init.exists() and "stand-in" in init.read_text()), init
