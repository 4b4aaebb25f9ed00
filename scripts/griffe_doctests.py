"""A griffe extension for the API reference (mkdocs.yml): docstring examples render as code.

albertkit's docstrings introduce their ``>>>`` examples with ``Example:`` or ``Example (what it
shows, possibly over several lines):``, which the standard library's doctest runs
(tests/test_docstrings.py). griffe's Google-style parser knows only ``Examples:`` as an
examples section: it reads ``Example:`` as an admonition of Markdown text (where ``>>>`` lines
become block quotes and an output such as ``[0.68, -2.31]`` a broken link) and a title in
parentheses as plain text. This extension rewrites each such heading, before the docstring is
parsed, to ``Examples:`` followed by the parenthesised words as the section's first line,
so that griffe renders the examples as code (without their ``# doctest:`` flags). It also
turns Sphinx roles (``:class:`~albertkit.x.Y` ``) into plain code spans, which Markdown would
otherwise show with the role's name. The source stays as it is; nothing is imported: griffe
reads the source.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

HEADING = re.compile(r"^(?P<indent>\s*)Examples?(?P<rest>\s*\(.*|:)\s*$")
ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


def examples_sections(text: str) -> str:
    """``text`` with every ``Example...:`` heading turned into an ``Examples:`` section."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = HEADING.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        indent, rest = match["indent"], match["rest"].strip()
        title = [rest]
        while not title[-1].endswith(":") and i + 1 < len(lines):  # a title over several lines
            i += 1
            title.append(lines[i].strip())
        i += 1
        out.append(f"{indent}Examples:")
        words = " ".join(title)[:-1].strip()
        if words.startswith("(") and words.endswith(")"):
            words = words[1:-1].strip()
        if words:
            out += [f"{indent}    {words[0].upper()}{words[1:]}:", ""]
    return "\n".join(out)


class ExampleSections(griffe.Extension):
    """Turn the ``Example...:`` headings of every docstring griffe reads into sections, and
    its Sphinx roles into code spans."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is None:
            return
        text = ROLE.sub(r"`\1`", obj.docstring.value)
        obj.docstring.value = examples_sections(text) if ">>>" in text else text
