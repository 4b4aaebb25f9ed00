"""Run logging: one log-line format, TensorBoard scalars, a metrics.jsonl file, progress bars.

The log-line format is a contract: SageMaker metric definitions are generated from it
(``albertkit.sagemaker.plan``) and ``albertkit report`` reads ``metrics.jsonl``, whose steps
never go backwards (a resumed run first removes the records after its checkpoint's step,
:meth:`RunLogger.roll_back`)::

    albertkit step=120 loss=3.141500 mlm_accuracy=0.123400 ...
    albertkit eval step=120 mlm_accuracy=0.130000 ...

Only the chief (rank 0) writes; other ranks get a ``RunLogger`` with ``enabled=False``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from albertkit.fileio import atomic_write_text

log = logging.getLogger("albertkit")

LOG_PREFIX = "albertkit"


def format_log_line(step: int, metrics: dict[str, float], kind: str = "train") -> str:
    """``albertkit [eval ]step=N key=value ...`` with floats to 6 significant decimals."""
    head = LOG_PREFIX if kind == "train" else f"{LOG_PREFIX} {kind}"
    parts = [f"{k}={_fmt(v)}" for k, v in metrics.items()]
    return f"{head} step={step} " + " ".join(parts)


def _fmt(v: Any) -> str:
    if isinstance(v, int | bool):
        return str(int(v))
    f = float(v)
    return f"{f:.6g}" if abs(f) >= 1e4 or (f != 0 and abs(f) < 1e-4) else f"{f:.6f}"


def setup_console_logging(debug: bool = False) -> None:
    """Plain ``albertkit`` logger on stderr (idempotent)."""
    if log.handlers:
        log.setLevel(logging.DEBUG if debug else logging.INFO)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if debug else logging.INFO)
    log.propagate = False


class RunLogger:
    """Writes scalars to TensorBoard and ``metrics.jsonl`` and log lines to the console.

    Args:
        run_dir: the run directory (``tensorboard/`` and ``metrics.jsonl`` go there).
        enabled: False on non-chief ranks: every method is then a no-op.
        tensorboard: write TensorBoard event files.
    """

    def __init__(self, run_dir: Path, enabled: bool = True, tensorboard: bool = True) -> None:
        self.enabled = enabled
        self.run_dir = Path(run_dir)
        self._writers: dict[str, Any] = {}
        self._tensorboard = tensorboard and enabled
        self._jsonl = None
        # more destinations for every record (e.g. the MLflow tracker): ``sink.scalars(step,
        # metrics, kind)``; each must return at once
        self.sinks: list[Any] = []
        if enabled:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self._jsonl = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115

    def _writer(self, kind: str):
        if kind not in self._writers:
            import tensorflow as tf

            self._writers[kind] = tf.summary.create_file_writer(
                str(self.run_dir / "tensorboard" / kind))
        return self._writers[kind]

    def scalars(self, step: int, metrics: dict[str, float], kind: str = "train",
                echo: bool = True) -> None:
        if not self.enabled:
            return
        metrics = {k: float(v) for k, v in metrics.items()}
        if echo:
            log.info(format_log_line(step, metrics, kind))
        assert self._jsonl is not None
        self._jsonl.write(json.dumps({"kind": kind, "step": step, **metrics}) + "\n")
        self._jsonl.flush()
        if self._tensorboard:
            import tensorflow as tf

            with self._writer(kind).as_default(step=step):
                for k, v in metrics.items():
                    tf.summary.scalar(k, v)
        for sink in self.sinks:
            sink.scalars(step, metrics, kind)

    def roll_back(self, step: int) -> int:
        """Drop the records of steps after ``step`` from ``metrics.jsonl``: a run resuming
        from a checkpoint at ``step`` redoes them, and their earlier values (of an attempt
        that was killed or stopped later than its last checkpoint) would otherwise be
        followed by the resumed ones, so the steps would go backwards. The file is rewritten
        atomically (a torn last line goes too); returns how many records were dropped."""
        if not self.enabled or self._jsonl is None:
            return 0
        path = self.run_dir / "metrics.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines()
        kept = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if not (isinstance(rec, dict) and isinstance(rec.get("step"), int)
                    and rec["step"] > step):
                kept.append(line)
        if len(kept) == len(lines):
            return 0
        self._jsonl.close()
        atomic_write_text(path, "".join(line + "\n" for line in kept))
        self._jsonl = open(path, "a", encoding="utf-8")  # noqa: SIM115
        dropped = len(lines) - len(kept)
        log.info("metrics.jsonl: removed %d record(s) after step %d, which this run redoes",
                 dropped, step)
        return dropped

    def close(self) -> None:
        for w in self._writers.values():
            w.flush()
            w.close()
        self._writers.clear()
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """All records of ``run_dir/metrics.jsonl`` (torn last line from a kill is ignored)."""
    path = Path(run_dir) / "metrics.jsonl"
    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
