#!/usr/bin/env bash
# The main job: set up the environment (first run only), then run the demo.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$repo_root/scripts/setup_env.sh" --first-only >&2
cd "$repo_root"
exec "${CACHEDSEARCH_VENV:-$repo_root/.venv}/bin/python" scripts/demo.py "$@"
