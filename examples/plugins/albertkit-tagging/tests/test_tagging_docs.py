"""The code in albertkit's guide "Extend albertkit" is this package's real code: every
python/toml block of docs/howto/extend.md that starts with ``# <path>`` is an excerpt of
that file, character for character."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
GUIDE = ROOT / "docs" / "howto" / "extend.md"
BLOCK = re.compile(r"```(python|toml)\n# (\S+)\n(.*?)```", re.S)


def excerpts(text: str) -> list[tuple[str, str]]:
    """``(path, code)`` of every block that names its file."""
    return [(path, code) for _, path, code in BLOCK.findall(text)]


def test_every_snippet_of_the_guide_is_in_the_package():
    found = excerpts(GUIDE.read_text(encoding="utf-8"))
    assert len(found) >= 7
    for path, code in found:
        source = (ROOT / path).read_text(encoding="utf-8")
        assert code in source, f"docs/howto/extend.md: the excerpt of {path} is not in it:\n{code}"


def test_the_check_notices_an_edited_snippet():
    (path, code), *_ = excerpts(GUIDE.read_text(encoding="utf-8"))
    edited = code.replace("register", "enroll", 1)
    assert edited != code and edited not in (ROOT / path).read_text(encoding="utf-8")
