"""The main job on tiny random weights: cached sampling through the real ComfyUI engine.

    bash scripts/demo.sh

Starts a real ComfyUI server (CPU, loopback) with this extension, queues the
same tiny Wan 2.1 text-to-video graph with the cache off and on, and prints
the cache report of each run next to its wall time.
"""

from __future__ import annotations

import pathlib
import re
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, graphs, tiny_models  # noqa: E402

REPORT_LINE = re.compile(r"CachedSearch cache \(.*")


def main() -> None:
    base = pathlib.Path(tempfile.mkdtemp(prefix="cachedsearch_demo_"))
    print(f"[demo] ComfyUI base directory: {base}")
    comfy_runtime.prepare_base_directory(base)
    tiny_models.generate_tiny_models(base / "models")
    with comfy_runtime.ComfyServer(base) as server:
        print(f"[demo] ComfyUI {comfy_runtime.comfyui_root()} serving on {server.url}")
        for mode in ("off", "adaptive"):
            graph = graphs.cached_wan_sampling(seed=42, steps=30, mode=mode, tau=0.10, width=128, height=128,
                                               length=17, filename_prefix=f"demo_{mode}")
            log_before = len(server.log_tail(10**9))
            start = time.perf_counter()
            entry = server.run_prompt(graph)
            seconds = time.perf_counter() - start
            reports = REPORT_LINE.findall(server.log_tail(10**9)[log_before:])
            frames = len(entry["outputs"]["save"]["images"])
            print(f"[demo] cache {mode:8s}: {seconds:5.2f} s, {frames} frames saved to {base / 'output'}")
            for report in reports:
                print(f"         {report}")
    print("[demo] random weights: the skip pattern says nothing about real models; see bench/ and README.")


if __name__ == "__main__":
    main()
