"""The doctor's typed result: checks with a status, one report, a table for people and JSON.

Example:
    >>> r = DoctorReport(host="n1", rank=0, world_size=1, checks=[
    ...     Check("python", "ok", "3.11.7"), Check("run_dir", "fail", "not writable")])
    >>> r.ok, [c.name for c in r.failures]
    (False, ['run_dir'])
    >>> print(r.table().splitlines()[1])
    python    ok    3.11.7
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "info", "warn", "fail"]
CLOCK_TOLERANCE_SECONDS = 2.0
"""The cluster check's default limit, in seconds, on how far the ranks' clocks may differ."""


@dataclass
class Check:
    """One line of the report. ``fail`` makes the doctor exit non-zero; ``warn`` and
    ``info`` are shown only. ``where`` names the node and rank a cluster check failed on."""

    name: str
    status: Status
    value: str
    details: dict[str, Any] = field(default_factory=dict)
    where: str | None = None


@dataclass
class DoctorReport:
    """Everything one ``albertkit doctor`` found, as seen from ``host`` (rank ``rank``)."""

    host: str
    rank: int
    world_size: int
    checks: list[Check]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.status == "fail"]

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        """The report for scripts: ``ok``, this process's place, and every check."""
        return {"ok": self.ok, "host": self.host, "rank": self.rank,
                "world_size": self.world_size,
                "checks": [{k: v for k, v in asdict(c).items() if v is not None or k != "where"}
                           for c in self.checks]}

    def table(self) -> str:
        """The report for people: one row per check (name, status, what was found)."""
        width = max([len("check")] + [len(c.name) for c in self.checks])
        rows = [f"{'check':<{width}}  status  found"]
        for c in self.checks:
            value = f"{c.where}: {c.value}" if c.where else c.value
            rows.append(f"{c.name:<{width}}  {c.status:<6}  {value}")
        return "\n".join(rows)

    def failure_lines(self) -> list[str]:
        """One line per failed check: the check, then the node and rank, then what failed."""
        return [f"FAILED {c.name}" + (f" on {c.where}" if c.where else "") + f": {c.value}"
                for c in self.failures]
