"""Run the real ComfyUI engine for tests, the demo and benchmarks.

Two levels, both with this repository installed as a custom-node pack beside
the test-only synthetic-conditioning pack:
- ``load_in_process``: imports ComfyUI into this process (on the CPU, or on
  the GPU ComfyUI finds with ``cpu=False``), for direct node calls;
- ``ComfyServer``: starts ``main.py`` as a subprocess on loopback, with a small
  HTTP client for ``POST /prompt`` and ``/history``.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
TEST_NODES_DIR = REPO_ROOT / "tests" / "comfy_test_nodes"
EXTENSION_FOLDER = "cachedsearch"
TEST_NODES_FOLDER = "cachedsearch_test_nodes"


def comfyui_root() -> pathlib.Path:
    """COMFYUI_PATH, else the ComfyUI that scripts/setup_env.sh prepared this venv for."""
    configured = os.environ.get("COMFYUI_PATH")
    if not configured:
        recorded = pathlib.Path(sys.prefix) / "comfyui-path"
        configured = recorded.read_text().strip() if recorded.exists() else str(REPO_ROOT / ".comfyui")
    root = pathlib.Path(configured).resolve()
    if not (root / "main.py").exists():
        raise RuntimeError(f"No ComfyUI at {root}: run `bash scripts/setup_env.sh` or set COMFYUI_PATH")
    return root


def comfyui_version() -> str:
    """The version of the ComfyUI at comfyui_root() (its comfyui_version.py; "unknown" in a checkout without one)."""
    path = comfyui_root() / "comfyui_version.py"
    return path.read_text().split('"')[1] if path.exists() else "unknown"


def scratch_directory(prefix: str) -> pathlib.Path:
    """A new temporary folder that is removed when this process exits (benchmarks copy GBs of weights into theirs)."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def prepare_base_directory(base_dir: pathlib.Path) -> pathlib.Path:
    """A ComfyUI base directory whose custom_nodes hold this repo and the test nodes."""
    custom_nodes = base_dir / "custom_nodes"
    custom_nodes.mkdir(parents=True, exist_ok=True)
    for name, target in ((EXTENSION_FOLDER, REPO_ROOT), (TEST_NODES_FOLDER, TEST_NODES_DIR)):
        link = custom_nodes / name
        if not link.exists():
            link.symlink_to(target, target_is_directory=True)
    for folder in ("models/diffusion_models", "models/vae", "models/loras", "input", "output", "temp", "user"):
        (base_dir / folder).mkdir(parents=True, exist_ok=True)
    return base_dir


def import_comfy(base_dir: pathlib.Path | None = None, cpu: bool = True):
    """Put ComfyUI on sys.path and select the CPU (``cpu=False``: the device ComfyUI picks itself, as ``main.py``
    without ``--cpu``); call before any other ``comfy`` import."""
    root = comfyui_root()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import comfy.cli_args
    import utils.install_util  # noqa: F401  ComfyUI's top-level utils package, before anything can shadow it

    comfy.cli_args.args.cpu = cpu
    comfy.cli_args.args.disable_api_nodes = True
    if base_dir is not None:
        comfy.cli_args.args.base_directory = str(base_dir)
    return comfy.cli_args.args


def load_in_process(base_dir: pathlib.Path, cpu: bool = True):
    """Import ComfyUI on the CPU (``cpu=False``: on its own choice of device) with ``base_dir`` as its base
    directory; returns its ``nodes`` module."""
    prepare_base_directory(base_dir)
    import_comfy(base_dir, cpu)
    import folder_paths
    import nodes

    folder_paths.set_output_directory(str(base_dir / "output"))
    folder_paths.set_temp_directory(str(base_dir / "temp"))
    folder_paths.set_input_directory(str(base_dir / "input"))
    for folder in ("diffusion_models", "vae", "loras", "custom_nodes"):
        target = base_dir / ("custom_nodes" if folder == "custom_nodes" else f"models/{folder}")
        folder_paths.add_model_folder_path(folder, str(target), is_default=True)
    if "CachedSearchApplyCache" not in nodes.NODE_CLASS_MAPPINGS:
        asyncio.run(nodes.init_extra_nodes(init_custom_nodes=True, init_api_nodes=False))
    return nodes


def run_node(node_class, **inputs):
    """Call a V1 or V3 node class directly, under inference mode as ComfyUI's executor does; returns its results."""
    import torch

    with torch.inference_mode():
        if hasattr(node_class, "FUNCTION") and not hasattr(node_class, "define_schema"):
            return getattr(node_class(), node_class.FUNCTION)(**inputs)
        # V3: the executor runs a clone of the class carrying the hidden inputs (none outside a server)
        return node_class.PREPARE_CLASS_CLONE({}).execute(**inputs).result


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerError(RuntimeError):
    pass


class ComfyServer:
    """A real ComfyUI server (``main.py``, on the CPU unless ``cpu=False``) on a free loopback port."""

    def __init__(self, base_dir: pathlib.Path, log_path: pathlib.Path | None = None, extra_args=(), cpu: bool = True,
                 env: dict | None = None):
        self.env = {**os.environ, **env} if env else None
        self.base_dir = prepare_base_directory(pathlib.Path(base_dir))
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path or self.base_dir / "server.log"
        self.extra_args = (["--cpu"] if cpu else []) + list(extra_args)
        self.client_id = uuid.uuid4().hex
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> ComfyServer:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self, timeout: float = 180.0) -> None:
        root = comfyui_root()
        command = [
            sys.executable, str(root / "main.py"), "--listen", "127.0.0.1", "--port", str(self.port),
            "--base-directory", str(self.base_dir), "--disable-api-nodes", "--disable-auto-launch",
            *self.extra_args,
        ]
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(command, cwd=root, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerError(f"ComfyUI exited with {self.process.returncode}; see {self.log_path}:\n{self.log_tail()}")
            try:
                self.get("/system_stats")
                return
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)  # polls the condition; the deadline below bounds it
        self.stop()
        raise ServerError(f"ComfyUI did not answer within {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def log_tail(self, characters: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-characters:] if self.log_path.exists() else ""

    def request(self, method: str, path: str, payload=None):
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                body = response.read()
                return response.status, (json.loads(body) if body else None)
        except urllib.error.HTTPError as error:
            body = error.read()
            try:
                return error.code, json.loads(body)
            except json.JSONDecodeError:
                return error.code, body.decode(errors="replace")

    def get(self, path: str):
        status, body = self.request("GET", path)
        if status != 200:
            raise ServerError(f"GET {path} -> {status}: {body}")
        return body

    def queue_prompt(self, graph: dict) -> tuple[int, dict]:
        """POST /prompt; returns (status, body) so tests can inspect validation errors."""
        return self.request("POST", "/prompt", {"prompt": graph, "client_id": self.client_id})

    def wait_for(self, prompt_id: str, timeout: float = 600.0) -> dict:
        """Poll /history until the prompt finished; returns its history entry."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            history = self.get(f"/history/{prompt_id}")
            if prompt_id in history:  # an entry appears only once the prompt finished or failed
                return history[prompt_id]
            if self.process is None or self.process.poll() is not None:
                raise ServerError(f"ComfyUI exited while running {prompt_id}:\n{self.log_tail()}")
            time.sleep(0.2)  # polls the condition; the deadline bounds it
        raise ServerError(f"prompt {prompt_id} did not finish within {timeout}s (no /history entry):\n{self.log_tail()}")

    def run_prompt(self, graph: dict, timeout: float = 600.0, progress=None) -> dict:
        """Queue ``graph`` and wait for it; ``progress(node, value, maximum)`` gets the server's progress events."""
        if progress is not None:
            body = asyncio.run(self._run_watching_progress(graph, timeout, progress))
        else:
            status, body = self.queue_prompt(graph)
            if status != 200:
                raise ServerError(f"prompt rejected ({status}): {json.dumps(body, indent=1)}")
        entry = self.wait_for(body["prompt_id"], timeout)
        if entry["status"].get("status_str") != "success":
            raise ServerError(f"prompt failed: {json.dumps(entry['status'], indent=1)}\n{self.log_tail()}")
        return entry

    async def _run_watching_progress(self, graph: dict, timeout: float, progress) -> dict:
        import aiohttp

        socket_url = f"ws://127.0.0.1:{self.port}/ws?clientId={self.client_id}"
        async with aiohttp.ClientSession() as session, session.ws_connect(socket_url) as socket:
            status, body = self.queue_prompt(graph)  # after connecting, so no event is missed
            if status != 200:
                raise ServerError(f"prompt rejected ({status}): {json.dumps(body, indent=1)}")
            prompt_id = body["prompt_id"]
            finished = {"execution_success", "execution_error", "execution_interrupted"}
            while True:
                message = await socket.receive(timeout=timeout)
                if message.type != aiohttp.WSMsgType.TEXT:
                    if message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                        return body
                    continue
                event = json.loads(message.data)
                data = event.get("data", {})
                if data.get("prompt_id") != prompt_id:
                    continue
                if event["type"] == "progress":
                    progress(data["node"], data["value"], data["max"])
                elif event["type"] in finished:
                    return body

    def run_batch(self, graphs: list[dict], on_progress=None, timeout: float = 900.0, on_executing=None) -> list[dict]:
        """Queue ``graphs`` back to back, as the GUI's batch queue does, and wait for all of them.

        ``on_progress(index, node, value, maximum)`` sees every progress event of prompt ``index``, and
        ``on_executing(index, node)`` every node start; returning True from either cancels that prompt (a
        targeted interrupt, which cannot hit the next prompt in the queue).
        Returns the history entries in queue order (failed or interrupted ones included).
        """
        return asyncio.run(self._run_batch(graphs, on_progress, timeout, on_executing))

    async def _run_batch(self, graphs, on_progress, timeout, on_executing=None):
        import aiohttp

        socket_url = f"ws://127.0.0.1:{self.port}/ws?clientId={self.client_id}"
        finished_types = {"execution_success", "execution_error", "execution_interrupted"}
        async with aiohttp.ClientSession() as session, session.ws_connect(socket_url) as socket:
            prompt_ids = []
            for graph in graphs:
                status, body = self.queue_prompt(graph)
                if status != 200:
                    raise ServerError(f"prompt rejected ({status}): {json.dumps(body, indent=1)}")
                prompt_ids.append(body["prompt_id"])
            index_of = {prompt_id: index for index, prompt_id in enumerate(prompt_ids)}
            pending = set(prompt_ids)
            while pending:
                message = await socket.receive(timeout=timeout)
                if message.type != aiohttp.WSMsgType.TEXT:
                    if message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                        raise ServerError(f"websocket closed while waiting:\n{self.log_tail()}")
                    continue
                event = json.loads(message.data)
                prompt_id = event.get("data", {}).get("prompt_id")
                if prompt_id not in index_of:
                    continue
                data = event["data"]
                if event["type"] == "progress" and on_progress is not None:
                    if on_progress(index_of[prompt_id], data["node"], data["value"], data["max"]):
                        self.interrupt(prompt_id)
                elif event["type"] == "executing" and on_executing is not None and data.get("node") is not None:
                    if on_executing(index_of[prompt_id], data["node"]):
                        self.interrupt(prompt_id)
                elif event["type"] in finished_types:
                    pending.discard(prompt_id)
        return [self.wait_for(prompt_id, timeout) for prompt_id in prompt_ids]

    def reset_caches(self, timeout: float = 300.0) -> None:
        """Make the server forget every cached node output and loaded model (POST /free), as a restart would, and
        return only once it has.

        The worker applies /free's flags between two prompts: at once when it is idle, else after the prompt it is
        running. A barrier prompt queued behind the flags therefore finishes only after they are applied, or just
        before the worker applies them, in the same loop pass, before it takes the next prompt."""
        status, body = self.request("POST", "/free", {"unload_models": True, "free_memory": True})
        if status != 200:
            raise ServerError(f"POST /free -> {status}: {body}")
        barrier = {"barrier": {"class_type": "CachedSearchTestQueueBarrier", "inputs": {"token": uuid.uuid4().hex}}}
        try:
            self.run_prompt(barrier, timeout=timeout)
        except ServerError as error:
            raise ServerError(f"the server did not finish a barrier prompt after POST /free: {error}") from error

    def interrupt(self, prompt_id: str | None = None) -> None:
        """Cancel the running prompt, or only ``prompt_id`` if it is the one running."""
        self.request("POST", "/interrupt", {"prompt_id": prompt_id} if prompt_id else {})


def loaded_extension(base_dir: pathlib.Path):
    """This repository's package as ComfyUI imported it (after ``load_in_process``)."""
    module_path = str(pathlib.Path(base_dir) / "custom_nodes" / EXTENSION_FOLDER)
    return sys.modules[module_path.replace(".", "_x_")]
