"""ComfyUI's running server, where there is one."""

from __future__ import annotations


def prompt_server():
    """The running PromptServer, or None outside a server (in-process tests, scripts, a node pack loaded alone)."""
    try:
        from server import PromptServer
    except ImportError:
        return None
    return getattr(PromptServer, "instance", None)
