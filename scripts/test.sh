#!/usr/bin/env bash
# The test suite.
#
#   bash scripts/test.sh [pytest arguments]           the full matrix: sets up the environments and browser tools
#                                                     (first run only), then runs pytest on every ComfyUI runtime of
#                                                     scripts/runtimes.sh at the same time (0.3.75, and 0.33.0 when
#                                                     its archive is there, or only the ComfyUI at COMFYUI_PATH),
#                                                     each into its log under test-artifacts/, shown when it ends;
#                                                     fails when any fails and prints each phase's wall time
#   bash scripts/test.sh --serial [pytest arguments]  the same, one runtime after the other, output as it comes
#   bash scripts/test.sh --fast [pytest arguments]    the fast tier while you work: the first runtime only, no
#                                                     set-up, no server, no browser (core and nodes in process)
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fast=false
parallel=true
case "${1:-}" in
  --fast) fast=true; parallel=false; shift ;;
  --serial) parallel=false; shift ;;
esac

started=$SECONDS
duration() {  # duration SECONDS -> "12m03s"
  printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}
phases=()

if ! $fast; then
  bash "$repo_root/scripts/setup_env.sh" >&2
  bash "$repo_root/scripts/setup_browser.sh" >&2
  bash "$repo_root/scripts/setup_comfy_cli.sh" >&2
  phases+=("set-up $(duration $((SECONDS - started)))")
fi
source "$repo_root/scripts/runtimes.sh"
cd "$repo_root"
count="${#RUNTIME_NAMES[@]}"
tier=()
if $fast; then
  count=1
  tier=(-m "not server and not browser and not slow")
  if [ ! -x "${RUNTIME_VENVS[0]}/bin/python" ] || [ ! -f "${RUNTIME_DIRS[0]}/main.py" ]; then
    echo "[test] --fast runs on what is set up: run \`bash scripts/setup_env.sh --first-only\` (or the full" \
      "\`bash scripts/test.sh\`) once first" >&2
    exit 1
  fi
elif [ -n "$RUNTIME_SKIPPED" ]; then
  echo "[test] $RUNTIME_SKIPPED"
fi
if [ "$count" -lt 2 ]; then
  parallel=false
fi

# run_runtime INDEX: pytest on that runtime with this script's pytest arguments; its exit status.
run_runtime() {
  local index="$1" name="${RUNTIME_NAMES[$1]}" venv="${RUNTIME_VENVS[$1]}" comfyui_dir="${RUNTIME_DIRS[$1]}"
  local python_path="${PYTHONPATH:-}" live_layout="pinned-classic,newest-nodes2"
  shift
  # ComfyUI 0.33 imports torchaudio, which has no wheel for the pinned torch: the test-only stand-in goes on
  # the path of this run only, never into the venv.
  if ! PYTHONPATH="$python_path" "$venv/bin/python" -c "import torchaudio" 2>/dev/null; then
    python_path="$repo_root/tests/runtime_stubs${python_path:+:$python_path}"
  fi
  # Every shipped workflow runs live in the browser on two frontend/renderer combinations: one on each runtime when
  # the matrix has two, both when it has one.
  if [ "$count" -gt 1 ]; then
    live_layout=$([ "$index" -eq 0 ] && echo pinned-classic || echo newest-nodes2)
  fi
  echo "[test] $name ($comfyui_dir, venv $venv)"
  COMFYUI_PATH="$comfyui_dir" PYTHONPATH="$python_path" CACHEDSEARCH_LIVE_LAYOUT="$live_layout" \
    "$venv/bin/python" -m pytest "${tier[@]}" "$@"
}

failed=()
if $parallel; then
  # Most of a tiny-model test is single-threaded Python (ours, ComfyUI's, the server's), so two runtimes side by
  # side fill the two cores of a developer's machine; each torch keeps to one thread so they do not fight.
  mkdir -p test-artifacts
  pids=()
  for ((index = 0; index < count; index++)); do
    log="test-artifacts/pytest-runtime-$index.log"
    echo "[test] ${RUNTIME_NAMES[$index]}: running, output in $log"
    (
      begin=$SECONDS
      status=0
      OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 run_runtime "$index" "$@" > "$log" 2>&1 || status=$?
      echo "$status $((SECONDS - begin))" > "$log.status"
    ) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || true
  done
  for ((index = 0; index < count; index++)); do
    log="test-artifacts/pytest-runtime-$index.log"
    cat "$log"
    read -r status took < "$log.status" || { status=1; took=0; }
    phases+=("${RUNTIME_NAMES[$index]} $(duration "$took") (side by side)")
    if [ "$status" -ne 0 ]; then
      failed+=("${RUNTIME_NAMES[$index]}")
    fi
  done
else
  for ((index = 0; index < count; index++)); do
    begin=$SECONDS
    if ! run_runtime "$index" "$@"; then
      failed+=("${RUNTIME_NAMES[$index]}")
    fi
    phases+=("${RUNTIME_NAMES[$index]} $(duration $((SECONDS - begin)))")
  done
fi

echo "[test] wall time: $(IFS=';'; echo "${phases[*]}" | sed 's/;/, /g'); total $(duration $((SECONDS - started)))"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "[test] FAILED on: $(IFS=';'; echo "${failed[*]}" | sed 's/;/, /g')"
  exit 1
fi
echo "[test] passed on: $(IFS=';'; echo "${RUNTIME_NAMES[*]:0:$count}" | sed 's/;/, /g')"
