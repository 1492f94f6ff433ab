"""The Comfy Registry entry: comfy-cli's own validator accepts pyproject.toml, the links and the icon are real, and
the archive comfy-cli packs holds the product without tests, benchmarks, venvs or caches."""

import json
import pathlib
import re
import subprocess
import tomllib
import xml.etree.ElementTree as ElementTree

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
COMFY_CLI_VENV = REPO_ROOT / ".venv-comfy-cli"  # made by scripts/setup_comfy_cli.sh (the test command runs it)
ICON_TYPES = {".svg", ".png", ".jpg", ".gif"}
MAX_ICON_SIZE = (800, 400)  # the registry's limit, width x height


@pytest.fixture(scope="module")
def comfy_cli() -> pathlib.Path:
    if not (COMFY_CLI_VENV / "bin" / "comfy").exists():
        pytest.fail("no comfy-cli in .venv-comfy-cli: run `bash scripts/setup_comfy_cli.sh` (scripts/test.sh does)")
    return COMFY_CLI_VENV


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def test_comfy_node_validate_passes_without_warnings(comfy_cli, tmp_path):
    completed = subprocess.run(
        [str(comfy_cli / "bin" / "comfy"), "--skip-prompt", "--no-enable-telemetry", "node", "validate"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    # validate exits 0 on security warnings (exec, eval, several statements on a line): only this line means none
    assert "All validation checks passed successfully" in output, output


def test_registry_links_are_complete(pyproject):
    urls = pyproject["project"]["urls"]
    for key in ("Repository", "Documentation", "Bug Tracker"):
        assert re.fullmatch(r"https://\S+", urls.get(key, "")), f"[project.urls] {key}: {urls.get(key)!r}"
    repository = urls["Repository"]
    assert urls["Documentation"].startswith(repository) and urls["Bug Tracker"] == f"{repository}/issues"


def icon_size(path: pathlib.Path) -> tuple[int, int]:
    if path.suffix == ".svg":
        root = ElementTree.parse(path).getroot()
        return int(root.get("width")), int(root.get("height"))
    from PIL import Image

    with Image.open(path) as image:
        return image.size


def test_registry_icon_is_a_file_of_this_repository(pyproject):
    icon_url = pyproject["tool"]["comfy"]["Icon"]
    repository = pyproject["project"]["urls"]["Repository"]
    owner_and_name = repository.removeprefix("https://github.com/")
    prefix = f"https://raw.githubusercontent.com/{owner_and_name}/main/"
    assert icon_url.startswith(prefix), f"Icon {icon_url!r} is not a file of {repository} on main"
    icon = REPO_ROOT / icon_url.removeprefix(prefix)
    assert icon.is_file(), f"Icon {icon_url!r}: no {icon.relative_to(REPO_ROOT)} in the repository"
    assert icon.suffix in ICON_TYPES
    width, height = icon_size(icon)
    assert 0 < width <= MAX_ICON_SIZE[0] and 0 < height <= MAX_ICON_SIZE[1]


def test_packed_node_ships_the_product_only(comfy_cli, tmp_path):
    """comfy-cli's packer (what `comfy node pack` zips: git-tracked files less .comfyignore), into a temporary file."""
    archive = tmp_path / "node.zip"
    pack = ("import json, sys, zipfile\n"
            "from comfy_cli.file_utils import zip_files\n"
            "zip_files(sys.argv[1])\n"
            "print(json.dumps(zipfile.ZipFile(sys.argv[1]).namelist()))\n")
    completed = subprocess.run([str(comfy_cli / "bin" / "python"), "-c", pack, str(archive)], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr
    names = json.loads(completed.stdout.strip().splitlines()[-1])
    for product in ("__init__.py", "pyproject.toml", "nodes/search_nodes.py", "cachedsearch_core/step_cache.py",
                    "web/js/cachedsearch_results.js", "web/docs/CachedSearchSampler.md",
                    "workflows/01 Wan 2.1 (start here).json",
                    "workflows/01 Wan 2.1 (start here).jpg",
                    "locales/en/main.json"):
        assert product in names
    not_shipped = [name for name in names
                   if re.match(r"(tests|bench|\.ci|test-artifacts|node_modules|\.venv[^/]*)/", name)
                   or re.search(r"(^|/)(__pycache__|\.pytest_cache)/|\.pyc$", name)]
    assert not_shipped == []
