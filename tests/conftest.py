"""Fixtures on the real ComfyUI runtime: in-process nodes and a live server."""

import pathlib
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from scripts import comfy_runtime, tiny_image_reward, tiny_models  # noqa: E402


@pytest.fixture(scope="session")
def tiny_models_dir(tmp_path_factory) -> pathlib.Path:
    """Tiny random-weight checkpoints in ComfyUI's models layout, generated once per session."""
    models = tmp_path_factory.mktemp("tiny_models")
    tiny_models.generate_tiny_models(models)
    tiny_image_reward.write_tiny_image_reward(models / "image_reward")
    tiny_image_reward.write_tiny_clip(models / "clip_score" / "tiny-clip")
    return models


def _base_with_models(tmp_path_factory, name, models_dir) -> pathlib.Path:
    base = comfy_runtime.prepare_base_directory(tmp_path_factory.mktemp(name))
    for entry in models_dir.glob("*/*"):
        folder = base / "models" / entry.parent.name
        folder.mkdir(exist_ok=True)
        (folder / entry.name).symlink_to(entry)
    return base


@pytest.fixture(scope="session")
def engine(tmp_path_factory, tiny_models_dir):
    """ComfyUI imported in this process on the CPU, with tiny models in its models folder."""
    base = _base_with_models(tmp_path_factory, "comfy_in_process", tiny_models_dir)
    nodes = comfy_runtime.load_in_process(base)
    return InProcessComfy(nodes, comfy_runtime.loaded_extension(base))


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
def comfy_server(tmp_path_factory, tiny_models_dir):
    """A real ComfyUI server on loopback with this extension and tiny models installed."""
    base = _base_with_models(tmp_path_factory, "comfy_server", tiny_models_dir)
    server = comfy_runtime.ComfyServer(base)
    server.start()
    yield server
    server.stop()
