#!/usr/bin/env bash
# The test suite on every ComfyUI runtime of scripts/runtimes.sh: ComfyUI 0.3.75, then 0.33.0 when its archive
# is there (or only the ComfyUI at COMFYUI_PATH). Sets up the environments and browser tools (first run only),
# runs pytest once per runtime with the same arguments, and fails when any runtime fails.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo_root/scripts/setup_env.sh" >&2
bash "$repo_root/scripts/setup_browser.sh" >&2
bash "$repo_root/scripts/setup_comfy_cli.sh" >&2
source "$repo_root/scripts/runtimes.sh"
cd "$repo_root"
if [ -n "$RUNTIME_SKIPPED" ]; then
  echo "[test] $RUNTIME_SKIPPED"
fi

failed=()
for index in "${!RUNTIME_NAMES[@]}"; do
  name="${RUNTIME_NAMES[$index]}" venv="${RUNTIME_VENVS[$index]}" comfyui_dir="${RUNTIME_DIRS[$index]}"
  python_path="${PYTHONPATH:-}"
  # ComfyUI 0.33 imports torchaudio, which has no wheel for the pinned torch: the test-only stand-in goes on
  # the path of this run only, never into the venv.
  if ! PYTHONPATH="$python_path" "$venv/bin/python" -c "import torchaudio" 2>/dev/null; then
    python_path="$repo_root/tests/runtime_stubs${python_path:+:$python_path}"
  fi
  echo "[test] $name ($comfyui_dir, venv $venv)"
  if ! COMFYUI_PATH="$comfyui_dir" PYTHONPATH="$python_path" "$venv/bin/python" -m pytest "$@"; then
    failed+=("$name")
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "[test] FAILED on: $(IFS=,; echo "${failed[*]}" | sed 's/,/, /g')"
  exit 1
fi
echo "[test] passed on: $(IFS=,; echo "${RUNTIME_NAMES[*]}" | sed 's/,/, /g')"
