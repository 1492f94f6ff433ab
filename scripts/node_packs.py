"""Other projects' node packs the tests, benchmarks and workflow builder install into a test ComfyUI.

Neither pack is on the registries reachable here; checked snapshots live in ``../shared/runtimes/`` beside the
repository (or beside the main checkout when this is a git worktree; ``CACHEDSEARCH_RUNTIMES`` overrides both),
and each is unpacked into a ComfyUI's ``custom_nodes`` only after its sha256 matches.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pathlib
import shutil
import subprocess
import tarfile
import tempfile
import tomllib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def runtimes_folders() -> list[pathlib.Path]:
    folders = []
    if os.environ.get("CACHEDSEARCH_RUNTIMES"):
        folders.append(pathlib.Path(os.environ["CACHEDSEARCH_RUNTIMES"]))
    folders.append(REPO_ROOT.parent / "shared" / "runtimes")
    try:
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=REPO_ROOT,
                                capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        folders.append(pathlib.Path(common).parent.parent / "shared" / "runtimes")
    except (OSError, subprocess.SubprocessError):
        pass
    return list(dict.fromkeys(folders))


@dataclasses.dataclass(frozen=True)
class NodePack:
    """A node pack snapshot: its archive's name and sha256, the folder a git clone of it would make, and how the
    Comfy Registry and ComfyUI-Manager know it (its pyproject's name and repository)."""

    folder: str
    archive_name: str
    sha256: str
    registry_id: str
    repository: str  # owner/name on GitHub
    registry_version: str | None = None  # None: the snapshot is not a registry release

    @property
    def workflow_properties(self) -> dict:
        """What a workflow node of this pack carries so the frontend's missing-nodes dialog and ComfyUI-Manager name
        the pack and offer to install it."""
        properties = {"cnr_id": self.registry_id, "aux_id": self.repository}
        return properties | ({"ver": self.registry_version} if self.registry_version else {})

    def find_archive(self) -> pathlib.Path | None:
        for folder in runtimes_folders():
            if (folder / self.archive_name).is_file():
                return folder / self.archive_name
        return None

    def absent_reason(self) -> str:
        """One line for a skipped test: which archive is missing and where it was looked for."""
        return (f"{self.archive_name} not found in {[str(folder) for folder in runtimes_folders()]} "
                "(set CACHEDSEARCH_RUNTIMES)")

    def install(self, custom_nodes: pathlib.Path, archive: pathlib.Path) -> pathlib.Path:
        """Unpack the checked archive into ``custom_nodes/<folder>`` (kept when already there)."""
        target = custom_nodes / self.folder
        if target.exists():
            return target
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if digest != self.sha256:
            raise RuntimeError(f"{archive}: sha256 {digest}, expected {self.sha256}; replace it with the checked "
                               f"snapshot {self.archive_name}")
        with tempfile.TemporaryDirectory(dir=custom_nodes) as staging, tarfile.open(archive) as bundle:
            bundle.extractall(staging, filter="data")
            (unpacked,) = pathlib.Path(staging).iterdir()
            shutil.move(unpacked, target)
        return target


DISTRIBUTED = NodePack("ComfyUI-Distributed", "ComfyUI-Distributed-1.4.4.tar.xz",
                       "e8908453d8060015f7e87f480e9f9c0b9bd7c17dc130f88b52d629520394be5a",
                       "ComfyUI-Distributed", "robertvoy/ComfyUI-Distributed", "1.4.4")
# city96's ComfyUI-GGUF at commit 795e451 (Unet Loader (GGUF), GGUFModelPatcher); needs the `gguf` package.
# Its GitHub main says version 2.0.0; the registry's releases are 1.x, so no registry version is claimed.
GGUF = NodePack("ComfyUI-GGUF", "ComfyUI-GGUF-795e451.tar.xz",
                "659251ff025961b4a087982bde865e5f62adda9a5984ebd47c01321d9491fe7f",
                "comfyui-gguf", "city96/ComfyUI-GGUF")
PACKS = (DISTRIBUTED, GGUF)


def own_workflow_properties() -> dict:
    """CachedSearch's own registry id, repository and version, from its pyproject.toml."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    repository = project["urls"]["Repository"].removeprefix("https://github.com/")
    return {"cnr_id": project["name"], "aux_id": repository, "ver": project["version"]}


def workflow_properties(python_module: str, own_folder: str) -> dict:
    """The registry properties of a node whose ``/object_info`` python_module is ``python_module``: CachedSearch's
    (installed as ``custom_nodes/<own_folder>``), a known pack's, or none for ComfyUI's own nodes."""
    if not python_module.startswith("custom_nodes."):
        return {}
    folder = python_module.split(".", 1)[1]
    if folder == own_folder:
        return own_workflow_properties()
    pack = next((pack for pack in PACKS if pack.folder == folder), None)
    return pack.workflow_properties if pack is not None else {}
