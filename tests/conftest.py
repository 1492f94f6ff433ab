"""Fixtures on the real ComfyUI runtime: in-process nodes and a live server."""

import pathlib
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, tiny_models  # noqa: E402


@pytest.fixture(scope="session")
def comfy_base(tmp_path_factory) -> pathlib.Path:
    base = tmp_path_factory.mktemp("comfy_in_process")
    comfy_runtime.prepare_base_directory(base)
    return base


@pytest.fixture(scope="session")
def comfy(comfy_base):
    """ComfyUI imported in this process on the CPU, with tiny models in its models folder."""
    nodes = comfy_runtime.load_in_process(comfy_base)
    tiny_models.write_tiny_models(comfy_base / "models")
    return InProcessComfy(nodes, comfy_runtime.loaded_extension(comfy_base))


class InProcessComfy:
    def __init__(self, nodes_module, extension):
        self.nodes = nodes_module.NODE_CLASS_MAPPINGS
        self.extension = extension

    def run(self, node_id, **inputs):
        return comfy_runtime.run_node(self.nodes[node_id], **inputs)

    def one(self, node_id, **inputs):
        (result,) = self.run(node_id, **inputs)
        return result


@pytest.fixture(scope="session")
def comfy_server(tmp_path_factory):
    """A real ComfyUI server on loopback with this extension and tiny models installed."""
    base = tmp_path_factory.mktemp("comfy_server")
    comfy_runtime.prepare_base_directory(base)
    tiny_models.write_tiny_models(base / "models")
    server = comfy_runtime.ComfyServer(base)
    server.start()
    yield server
    server.stop()
