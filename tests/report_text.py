"""Reading a node's report as its numbers: tests assert what a line says (its figures), not a copy of its wording."""

import re


def numbers(text: str) -> list[float]:
    """The numbers a line says, in order."""
    return [float(number) for number in re.findall(r"\d+(?:\.\d+)?", text)]


def line_of(text: str, head: str) -> str:
    """The one line of ``text`` that starts with ``head`` (a line's first words name it, as a heading does)."""
    (line,) = [line for line in text.splitlines() if line.startswith(head)]
    return line


def refusal(input_name: str, *facts) -> str:
    """A pattern for an error that names ``input_name`` first and then says ``facts`` (values, counts) in order: a
    refusal's wording is the product's, its facts are what a test pins down."""
    return rf"^{re.escape(input_name)}: " + _in_order(facts)


def says(text: str, *facts) -> bool:
    """Whether ``text`` (a panel's, a verdict's) says ``facts`` in this order, whatever its wording around them."""
    return re.search(_in_order(facts), text, re.S) is not None


def _in_order(facts) -> str:
    return "".join(rf".*?{_whole(str(fact))}" for fact in facts)


def _whole(fact: str) -> str:
    """``fact`` as a pattern that does not match inside a longer word or number (3 is not the 3 of 0.3 or 13)."""
    edge = r"(?<![\w.])" if re.match(r"\w", fact) else ""
    end = r"(?![\w]|\.\d)" if re.search(r"\w$", fact) else ""
    return f"{edge}{re.escape(fact)}{end}"
