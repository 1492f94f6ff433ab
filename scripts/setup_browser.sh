#!/usr/bin/env bash
# Browser-test tools from the package registries: Debian's chromium (no browser download) and
# playwright-core from npm. Idempotent. Without root, prints how to install chromium and the
# browser test is skipped (outside CI). Also fetches the newest frontend package for the frontend matrix.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "[setup] installing Debian's chromium"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "[setup] /usr/bin/chromium is missing (sudo apt-get install chromium): the browser test will be skipped"
  fi
fi

if command -v npm >/dev/null; then
  if [ ! -d "$repo_root/tests/browser/node_modules/playwright-core" ]; then
    echo "[setup] installing playwright-core (npm)"
    (cd "$repo_root/tests/browser" && npm ci --silent --no-audit --no-fund)
  fi
else
  echo "[setup] npm is missing: the browser test will be skipped"
fi

# The newest published frontend, for the browser test's frontend matrix (served with --front-end-root).
newest_frontend="1.58.1"
frontend_dir="$repo_root/.runtimes/frontend-$newest_frontend"
if [ ! -f "$frontend_dir/index.html" ]; then
  echo "[setup] fetching comfyui-frontend-package==$newest_frontend"
  download_dir="$(mktemp -d)"
  "${PYTHON:-python3}" -m pip download -q --disable-pip-version-check --no-deps \
    "comfyui-frontend-package==$newest_frontend" -d "$download_dir"
  "${PYTHON:-python3}" "$repo_root/scripts/unpack_wheel_folder.py" "$download_dir"/comfyui_frontend_package-*.whl \
    "comfyui_frontend_package/static/" "$frontend_dir"
  rm -rf "$download_dir"
fi
