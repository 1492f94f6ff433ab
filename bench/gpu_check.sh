#!/usr/bin/env bash
# The GPU check on a lent GPU machine, in one call (docs/development.md, "The GPU check"):
#
#   bash bench/gpu_check.sh [bench/gpu_check.py arguments]
#
# with .gpu-check carried (made in the checkout first by `.venv/bin/python -m bench.gpu_check_carry`). Unpacks the
# carried ComfyUI 0.33.0 archive (sha256-checked) into /tmp, installs the carried wheels into /tmp with the machine's
# own python3 (the one with CUDA torch), puts the PyAV stand-in on the path and runs bench/gpu_check.py on the GPU.
# Results go to $OUT (gpu_check.json, gpu_check.md, and this output as gpu_check.log), rewritten as they come; the
# set-up counts against the check's budget (--budget, default 540 s).
set -euo pipefail
started=$(date +%s)
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
carry="$repo_root/.gpu-check"
out="${OUT:-$repo_root/bench/results/gpu-check}"
work=/tmp/cachedsearch-gpu-check

set_up_and_check() {
  source "$repo_root/scripts/runtimes.sh"
  local archive="$carry/$COMFYUI_033_ARCHIVE"
  if [ ! -f "$archive" ]; then
    echo "[gpu_check.sh] no $archive: run \`.venv/bin/python -m bench.gpu_check_carry\` in the checkout and" \
      "name .gpu-check in the call's carry"
    return 2
  fi
  echo "$COMFYUI_033_SHA256  $archive" | sha256sum --check --quiet
  rm -rf "$work"
  mkdir -p "$work"
  tar -xJf "$archive" -C "$work"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$work/site" \
    "$carry"/wheels/*.whl
  echo "[gpu_check.sh] set up in $(($(date +%s) - started)) s: ComfyUI 0.33.0 in $work, $(cd "$carry/wheels" &&
    echo *.whl)"
  cd "$repo_root"
  COMFYUI_PATH="$work/comfyui-0.33.0" PYTHONPATH="$work/site:$repo_root/bench/device_stubs" PYTHONUNBUFFERED=1 \
    python3 -m bench.gpu_check --out "$out" --started "$started" "$@"
}

mkdir -p "$out"
set_up_and_check "$@" 2>&1 | tee -a "$out/gpu_check.log"
