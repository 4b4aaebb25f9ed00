"""What every report shares: its error, the record of what it wrote, reading JSON inputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from albertkit import fileio
from albertkit.errors import ReportError


@dataclass
class Report:
    """What a report wrote.

    Attributes:
        out_dir: the output directory.
        markdown: the Markdown summary (``report.md`` / ``benchmark.md``).
        charts: chart name -> PNG path, in the order they appear in the summary.
        notes: charts that were skipped and why, and data problems found on the way.
    """

    out_dir: Path
    markdown: Path
    charts: dict[str, Path] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_json(path: Path, what: str) -> Any:
    """The parsed file, ``None`` if it does not exist; unreadable -> :class:`ReportError`
    naming the file (and, for malformed JSON, the line and column)."""
    if not path.is_file():
        return None
    return fileio.read_json(path, what, ReportError)


def charts_markdown(charts: list[tuple[str, str, Path | None]]) -> list[str]:
    """The "Charts" section: each chart under its title, linked relative to the summary."""
    if not charts:
        return []
    lines = ["## Charts", ""]
    for name, title, path in charts:
        rel = path.name if path is not None else f"{name}.png"
        lines += [f"### {title}", "", f"![{title}]({rel})", ""]
    return lines


def notes_markdown(notes: list[str]) -> list[str]:
    return ["## Notes", ""] + [f"- {n}" for n in notes] + [""] if notes else []
