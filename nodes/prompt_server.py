"""ComfyUI's running server, where there is one."""

from __future__ import annotations

import threading
import weakref


def prompt_server():
    """The running PromptServer, or None outside a server (in-process tests, scripts, a node pack loaded alone)."""
    try:
        from server import PromptServer
    except ImportError:
        return None
    return getattr(PromptServer, "instance", None)


def progress_text_sender(node_id):
    """A function that shows a line of text on the node in the GUI, or None outside a server run."""
    server = prompt_server()
    if server is None or node_id is None:
        return None
    return lambda text: server.send_progress_text(text, node_id)


class PerServer:
    """State that belongs to one server (a mailbox its routes fill and its runs read), not to the process: two
    servers in one process (tests, embedding) keep theirs apart, and a server that is gone takes its state along.
    Without a server, each call gets a fresh object that no route reaches."""

    def __init__(self, make):
        self._make = make
        self._by_server = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # the routes' thread and the prompt worker's thread may ask first at once

    def of(self, server):
        if server is None:
            return self._make()
        with self._lock:
            if server not in self._by_server:
                self._by_server[server] = self._make()
            return self._by_server[server]
