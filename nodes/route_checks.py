"""What every HTTP route of the extension checks before it acts: a body no larger than the route's limit, read
without trusting its length header, JSON that is an object, and fields of the right kind and range. A request that
fails a check is answered with a 4xx whose message names the input, what it got and what to send ("input: got X;
use Y"), and changes nothing.

The work a route does on ComfyUI's event loop is linear in its body at most, and the body is bounded, so the
longest a request can hold the loop is bounded too (each route states its limit).
"""

from __future__ import annotations

import functools
import json
import math

SHOWN_CHARACTERS = 60  # how much of a refused value a message quotes
MAX_DIGITS = 20  # the longest JSON integer read (a 64-bit seed has 20 digits); longer ones cost time to convert
MAX_NAME_CHARACTERS = 200  # ids and names: ComfyUI's prompt and node ids, ComfyUI-Distributed's job and worker ids


class RouteRefused(Exception):
    """A request a route refuses: its HTTP status and the message naming the input; ``fields`` go into the JSON
    answer beside "error"."""

    def __init__(self, status: int, message: str, **fields):
        super().__init__(message)
        self.status = status
        self.fields = fields

    def response(self):
        return json_answer({"error": str(self), **self.fields}, status=self.status)


def json_answer(payload, status: int = 200):
    """A route's JSON answer."""
    from aiohttp import web  # a route runs on aiohttp, which a server has and a script without one need not

    return web.json_response(payload, status=status)


def answering_refusals(handler):
    """Wrap an aiohttp handler so that a RouteRefused it raises becomes its JSON answer."""

    @functools.wraps(handler)
    async def answered(request):
        try:
            return await handler(request)
        except RouteRefused as refused:
            return refused.response()

    return answered


class ExtensionRoutes:
    """A running server's route table as every route of the extension goes on it: ``@routes.post(path)`` puts the
    handler there answering the RouteRefused it raises (``answering_refusals``)."""

    def __init__(self, server):
        self.server = server

    def get(self, path: str):
        return lambda handler: self.server.routes.get(path)(answering_refusals(handler))

    def post(self, path: str):
        return lambda handler: self.server.routes.post(path)(answering_refusals(handler))


def shown(value) -> str:
    """A value as the client wrote it in JSON, cut to a readable length, with its JSON kind."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > SHOWN_CHARACTERS:
        text = f"{text[:SHOWN_CHARACTERS]}... ({len(text)} characters)"
    return f"{text} ({json_kind(value)})"


def json_kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


async def read_chunks(request, max_bytes: int) -> list[bytes]:
    """The request's body as the pieces it arrived in (joining them is a copy of the whole body, which a large one
    should make off the event loop), refused with 413 as soon as it is known to exceed ``max_bytes``: from its
    Content-Length before anything is read, else (a chunked upload) once more has arrived."""
    declared = request.content_length
    if declared is not None and declared > max_bytes:
        raise RouteRefused(413, f"body: got {declared} bytes; {request.path} takes at most {max_bytes} bytes")
    chunks, size = [], 0
    while chunk := await request.content.readany():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise RouteRefused(413, f"body: got more than {max_bytes} bytes; {request.path} takes at most "
                                    f"{max_bytes} bytes")
    return chunks


class _NumberRefused(ValueError):
    """A number the JSON reader refuses: what it got and what to use instead."""

    def __init__(self, got: str, use: str):
        super().__init__(f"got {got}; {use}")


def _refuse_constant(name: str):
    raise _NumberRefused(name, "JSON has no NaN or Infinity, use a finite number")


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        raise _NumberRefused(f"a whole number of {digits} digits", f"use at most {MAX_DIGITS} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NumberRefused(text[:SHOWN_CHARACTERS], "use a finite number (within a 64-bit float's range)")
    return value


async def read_json_object(request, max_bytes: int, expected: str) -> dict:
    """The body as a JSON object (``expected``: how the route's object looks, quoted in the messages)."""
    body = b"".join(await read_chunks(request, max_bytes))
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant, parse_int=_bounded_int,
                           parse_float=_finite_float)
    except UnicodeDecodeError as error:
        raise RouteRefused(400, f"body: byte {error.start} is not UTF-8 text; send JSON {expected}") from None
    except _NumberRefused as error:
        raise RouteRefused(400, f"body: {error}, and send JSON {expected}") from None
    except json.JSONDecodeError as error:
        raise RouteRefused(400, f"body: not JSON (unreadable at character {error.pos} of {len(body)}); send JSON "
                                f"{expected}") from None
    except RecursionError:
        raise RouteRefused(400, f"body: JSON nested too deeply to read; send JSON {expected}") from None
    if not isinstance(value, dict):
        raise RouteRefused(400, f"body: got {shown(value)}; send a JSON object {expected}")
    return value


def check_fields(body: dict, required: tuple[str, ...], optional: tuple[str, ...], expected: str) -> None:
    """Every required field present and no field the route does not know (a misspelt one would be ignored)."""
    for field in required:
        if field not in body:
            raise RouteRefused(400, f"{field}: missing; send JSON {expected}")
    for field in body:
        if field not in required and field not in optional:
            if field.isidentifier() and len(field) <= SHOWN_CHARACTERS:
                raise RouteRefused(400, f"{field}: not a field of this request; send JSON {expected}")
            raise RouteRefused(400, f"body: got a field named {shown(field)}; send JSON {expected}")


def name(value, input_name: str, use: str) -> str:
    """A non-empty id or name of at most MAX_NAME_CHARACTERS characters."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARACTERS:
        raise RouteRefused(400, f"{input_name}: got {shown(value)}; use {use} (text of 1 to {MAX_NAME_CHARACTERS} "
                                "characters)")
    return value


def whole_number(value, name: str, low: int | None = None, high: int | None = None, use: str = "a whole number"
                 ) -> int:
    """A JSON whole number (not true/false, not 3.0), within [low, high] when they are given."""
    in_range = low is None or (isinstance(value, int) and low <= value <= high)
    if not isinstance(value, int) or isinstance(value, bool) or not in_range:
        limits = "" if low is None else f" from {low} to {high}"
        raise RouteRefused(400, f"{name}: got {shown(value)}; use {use}{limits}")
    return value


def number(value, name: str, low: float, high: float, use: str = "") -> float:
    """A finite JSON number within [low, high]."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not low <= value <= high:
        raise RouteRefused(400, f"{name}: got {shown(value)}; use {use or 'a number'} from {low:g} to {high:g}")
    return value


def text(value, name: str, use: str) -> str:
    if not isinstance(value, str):
        raise RouteRefused(400, f"{name}: got {shown(value)}; use {use}")
    return value


def flag(value, name: str, use: str) -> bool:
    if not isinstance(value, bool):
        raise RouteRefused(400, f"{name}: got {shown(value)}; use true or false ({use})")
    return value


def no_query(request) -> None:
    """A GET route that takes no parameters refuses any, so a misspelt one is not silently ignored."""
    if request.query_string:
        raise RouteRefused(400, f"query: got {shown(request.query_string)}; {request.path} takes no parameters")
