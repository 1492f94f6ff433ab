#!/usr/bin/env bash
# comfy-cli (PyPI) in a venv of its own, .venv-comfy-cli/, for the registry check (tests/test_registry.py runs
# `comfy node validate` and comfy-cli's packer). Kept apart from the ComfyUI venvs so its dependencies never change
# ComfyUI's requirements. Idempotent: the first run needs PyPI, later runs only check and work offline.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python_bin="${PYTHON:-python3}"
comfy_cli_pin="comfy-cli==1.23.0"
venv="$repo_root/.venv-comfy-cli"

if [ -x "$venv/bin/comfy" ] && [ "$(cat "$venv/installed" 2>/dev/null)" = "$comfy_cli_pin" ]; then
  exit 0
fi
echo "[setup] installing $comfy_cli_pin into $venv"
"$python_bin" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$comfy_cli_pin"
echo "$comfy_cli_pin" > "$venv/installed"
