#!/usr/bin/env bash
# The test suite: set up the environment and browser tools (first run only), then run pytest on the
# real ComfyUI runtime.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo_root/scripts/setup_env.sh" >&2
bash "$repo_root/scripts/setup_browser.sh" >&2
cd "$repo_root"
exec "${CACHEDSEARCH_VENV:-$repo_root/.venv}/bin/python" -m pytest "$@"
