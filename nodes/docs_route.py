"""GET /cachedsearch/docs/<path>: the pack's documentation files (README.md, docs/ and web/docs/, with their images),
so the doc pages web/docs/page.html shows can follow every link between them: a node page (web/docs/<node>.md,
which ComfyUI serves under the extension too) links to ../../docs/*.md and ../../README.md, outside web/, which
ComfyUI does not serve. Only those files, read as they are; nothing else of the pack or the disk."""

from __future__ import annotations

import pathlib

from .route_checks import ExtensionRoutes, RouteRefused, no_query, shown

DOCS_ROUTE = "/cachedsearch/docs"
PACK_ROOT = pathlib.Path(__file__).resolve().parent.parent
# The folders and files a doc page may show, relative to the pack; their subfolders too (images).
SHOWN = ("README.md", "docs", "web/docs")
KINDS = {".md": "text/markdown; charset=utf-8", ".png": "image/png", ".jpg": "image/jpeg", ".svg": "image/svg+xml"}


def doc_file(path: str) -> pathlib.Path:
    """The documentation file ``path`` names (relative to the pack), refused (RouteRefused) unless it is one."""
    file = (PACK_ROOT / path).resolve()
    inside = any(file == (PACK_ROOT / shown_path).resolve() or (PACK_ROOT / shown_path).resolve() in file.parents
                 for shown_path in SHOWN)
    if not inside or file.suffix.lower() not in KINDS:
        raise RouteRefused(404, f"path: got {shown(path)}; use a .md file or image of README.md, docs/ or web/docs/")
    if not file.is_file():
        raise RouteRefused(404, f"path: no file {path} in the pack's documentation")
    return file


def register_docs_route(routes: ExtensionRoutes) -> None:
    """GET /cachedsearch/docs/<path> on a running ComfyUI server: the file, or a 404 naming the path."""

    @routes.get(DOCS_ROUTE + "/{path:.+}")
    async def doc(request):
        from aiohttp import web  # a server runs on aiohttp

        no_query(request)
        file = doc_file(request.match_info["path"])
        return web.Response(body=file.read_bytes(), content_type=KINDS[file.suffix.lower()].split(";")[0],
                            charset="utf-8" if file.suffix.lower() == ".md" else None)
