"""Resident memory of a real ComfyUI server across many queued searches (tiny Wan 2.1, CPU).

    .venv/bin/python -m bench.server_memory [--prompts 30]

Queues the tiny search graph (N = 3, 16 steps, ranking from scores) with a new
seed each time, cancelling every fifth prompt during its first draft, and prints the
server's RSS after each batch of ten.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, graphs, tiny_models  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=30)
    args = parser.parse_args()
    import psutil

    base = comfy_runtime.scratch_directory("cachedsearch_memory_")
    comfy_runtime.prepare_base_directory(base)
    tiny_models.generate_tiny_models(base / "models")
    with comfy_runtime.ComfyServer(base) as server:
        process = psutil.Process(server.process.pid)
        print("| prompts done | server RSS MiB |")
        print("|---|---|")
        print(f"| 0 (idle) | {process.memory_info().rss / 2**20:.0f} |")
        for start in range(0, args.prompts, 10):
            batch = [graphs.wan_search(seed=1000 + index, steps=16, filename_prefix="memory")
                     for index in range(start, min(start + 10, args.prompts))]
            cancelled = set()

            def on_progress(index, node, value, maximum, cancelled=cancelled):
                if index % 5 == 2 and node == "search" and value >= 2 and index not in cancelled:
                    cancelled.add(index)
                    return True
                return False

            server.run_batch(batch, on_progress)
            print(f"| {start + len(batch)} ({len(cancelled)} cancelled in this batch) | "
                  f"{process.memory_info().rss / 2**20:.0f} |")


if __name__ == "__main__":
    main()
