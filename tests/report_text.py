"""Reading a node's report as its numbers: tests assert what a line says (its figures), not a copy of its wording."""

import re


def numbers(text: str) -> list[float]:
    """The numbers a line says, in order."""
    return [float(number) for number in re.findall(r"\d+(?:\.\d+)?", text)]


def line_of(text: str, head: str) -> str:
    """The one line of ``text`` that starts with ``head`` (a line's first words name it, as a heading does)."""
    (line,) = [line for line in text.splitlines() if line.startswith(head)]
    return line
