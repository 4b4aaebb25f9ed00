"""Run tracking in MLflow (``logging.mlflow``): parameters, metrics, summary and export.

Rank 0 only. Every call to MLflow happens on one background thread, in order, so a slow or
unreachable tracking server never blocks or stops training: a failed call is retried with
backoff (``retries`` times), then dropped with a warning, and training goes on. The MLflow
run's id is kept in ``run_dir/mlflow_run.json``, so a resumed run (the same ``run_dir``)
appends to the same MLflow run.

The tracking URI is ``logging.mlflow.tracking_uri``, else ``MLFLOW_TRACKING_URI``, else
``run_dir/mlruns``; a plain directory holds an SQLite database and the artifacts
(:func:`resolve_uri`). A SageMaker managed MLflow
tracking server ARN works when AWS's ``sagemaker-mlflow`` plugin is installed (it is in the
albertkit training image).

Example (where a run goes and the parameters it records; the tracker, started for a config
``cfg`` with ``logging.mlflow`` set, is skipped here: importing MLflow and creating its
database take longer than a test should):
    >>> resolve_uri("run/mlruns", Path("run"))  # a plain directory: SQLite plus artifacts
    ('sqlite:///.../run/mlruns/mlflow.db', 'file:///.../run/mlruns/artifacts')
    >>> resolve_uri("http://mlflow.internal:5000", Path("run"))
    ('http://mlflow.internal:5000', None)
    >>> flatten({"model": {"size": "tiny", "hidden_size": 32}, "run_dir": "run"})
    {'model.size': 'tiny', 'model.hidden_size': '32', 'run_dir': 'run'}
    >>> tracker = MlflowTracker.start(cfg, Path("run"))  # doctest: +SKIP
    >>> tracker.scalars(10, {"loss": 2.5}, kind="train")  # doctest: +SKIP
    >>> tracker.finish("completed", [Path("run/summary.json")])  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from albertkit.errors import ConfigError
from albertkit.fileio import atomic_write_text

log = logging.getLogger("albertkit")

RUN_FILE = "mlflow_run.json"
# MLflow's limits (its REST API): 100 params / 1000 metrics per log_batch, 6000-char values
_PARAMS_PER_BATCH, _METRICS_PER_BATCH, _PARAM_CHARS = 100, 1000, 6000


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"model": {"size": "base"}}`` -> ``{"model.size": "base"}`` (values as text)."""
    out: dict[str, str] = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            text = v if isinstance(v, str) else json.dumps(v)
            out[key] = text[:_PARAM_CHARS]
    return out


def resolve_uri(uri: str | None, run_dir: Path) -> tuple[str, str | None]:
    """The tracking URI to use and, for a local directory, where artifacts go.

    A plain directory (the default: ``run_dir/mlruns``) holds an SQLite database
    (``mlflow.db``) and an ``artifacts`` folder: MLflow 3 keeps its old file store only behind
    ``MLFLOW_ALLOW_FILE_STORE=true``, and a database needs an artifact location that is not
    the working directory. Every other URI (``sqlite:``, ``file:``, ``http(s):``, an ARN) is
    used as given.
    """
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or str(Path(run_dir) / "mlruns")
    if "://" in uri or uri.startswith(("arn:", "file:", "databricks", "sqlite:")):
        return uri, None
    folder = Path(uri).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()


class MlflowTracker:
    """Sends a run to MLflow from a background thread (see the module docstring).

    Use :meth:`start`; every other method only queues work and returns at once.
    """

    RETRIES = 3  # attempts after the first, for each call
    BACKOFF = 2.0  # seconds before the first retry, doubled for each next one
    FINISH_TIMEOUT = 120.0  # seconds the end of a run waits for the queue to drain

    def __init__(self, client: Any, uri: str, artifacts: str | None, run_dir: Path,
                 experiment: str, run_name: str, params: dict[str, str], retries: int = 3,
                 backoff: float = 2.0) -> None:
        self.client, self.uri, self.run_dir = client, uri, Path(run_dir)
        self.artifact_location = artifacts
        self.experiment, self.run_name, self.params = experiment, run_name, params
        self.retries, self.backoff = retries, backoff
        self.run_id: str | None = None
        self.failed_calls = 0
        self._queue: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="albertkit-mlflow", daemon=True)
        self._thread.start()
        self._submit("open the MLflow run", self._open)

    @classmethod
    def start(cls, cfg: Any, run_dir: Path) -> MlflowTracker | None:
        """A tracker for ``cfg.logging.mlflow`` (None when it is not set)."""
        settings = cfg.logging.mlflow
        if settings is None:
            return None
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            raise ConfigError("logging.mlflow is set but MLflow is not installed: "
                              "pip install -e '.[mlflow]' in a clone of the albertkit "
                              "repository") from None
        uri, artifacts = resolve_uri(settings.tracking_uri, run_dir)
        return cls(MlflowClient(tracking_uri=uri), uri, artifacts, run_dir, settings.experiment,
                   settings.run_name or Path(run_dir).resolve().name,
                   flatten(cfg.to_dict()), cls.RETRIES, cls.BACKOFF)

    # ------------------------------------------------------------------ the worker
    def _submit(self, what: str, fn: Callable[[], None]) -> None:
        self._queue.put((what, fn))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                self._queue.task_done()
                return
            what, fn = item
            for attempt in range(self.retries + 1):
                try:
                    fn()
                    break
                except Exception as e:  # a tracking server must never stop training
                    if attempt == self.retries:
                        self.failed_calls += 1
                        log.warning("MLflow (%s): could not %s after %d attempts: %s; "
                                    "training goes on", self.uri, what, attempt + 1,
                                    _one_line(e))
                    else:
                        time.sleep(self.backoff * 2**attempt)
            self._queue.task_done()

    def _open(self) -> None:
        path = self.run_dir / RUN_FILE
        if path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("tracking_uri") == self.uri:
                self.run_id = saved["run_id"]
                self.client.update_run(self.run_id, status="RUNNING")
                log.info("MLflow: continuing run %s at %s", self.run_id, self.uri)
                return
        exp = self.client.get_experiment_by_name(self.experiment)
        exp_id = exp.experiment_id if exp else self.client.create_experiment(
            self.experiment, artifact_location=self.artifact_location)
        run = self.client.create_run(exp_id, run_name=self.run_name,
                                     tags={"albertkit.run_dir": str(self.run_dir.resolve())})
        self.run_id = run.info.run_id
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in self.params.items()]
        for i in range(0, len(items), _PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=items[i:i + _PARAMS_PER_BATCH])
        atomic_write_text(path, json.dumps({"tracking_uri": self.uri, "run_id": self.run_id,
                                            "experiment": self.experiment}, indent=2))
        log.info("MLflow: run %s in experiment %r at %s", self.run_id, self.experiment,
                 self.uri)

    def _need_run(self) -> str:
        if self.run_id is None:  # opening failed: try again before this call
            self._open()
        assert self.run_id is not None
        return self.run_id

    # ------------------------------------------------------------------ what the run sends
    def scalars(self, step: int, metrics: dict[str, float], kind: str = "train") -> None:
        """Metrics of one log line; eval and time metrics are prefixed ``eval/``, ``time/``."""
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        prefix = "" if kind == "train" else f"{kind}/"
        items = [Metric(prefix + k, float(v), stamp, int(step)) for k, v in metrics.items()]

        def send() -> None:
            run_id = self._need_run()
            for i in range(0, len(items), _METRICS_PER_BATCH):
                self.client.log_batch(run_id, metrics=items[i:i + _METRICS_PER_BATCH])

        self._submit(f"log {kind} metrics of step {step}", send)

    def artifacts(self, paths: list[Path], folder: str | None = None) -> None:
        """Upload files and directories (``folder`` inside the run's artifacts)."""
        paths = [Path(p) for p in paths]

        def send() -> None:
            run_id = self._need_run()
            for p in paths:
                if p.is_dir():
                    self.client.log_artifacts(run_id, str(p), f"{folder}/{p.name}"
                                              if folder else p.name)
                elif p.is_file():
                    self.client.log_artifact(run_id, str(p), folder)

        self._submit(f"upload {', '.join(p.name for p in paths)}", send)

    def finish(self, status: str, files: list[Path], timeout: float | None = None) -> None:
        """Upload ``files``, mark the run (``completed`` -> FINISHED, ``interrupted`` ->
        KILLED, else FAILED) and wait up to ``timeout`` s for the queue to drain."""
        self.artifacts(files)
        state = {"completed": "FINISHED", "interrupted": "KILLED"}.get(status, "FAILED")
        self._submit("close the MLflow run",
                     lambda: self.client.set_terminated(self._need_run(), status=state))
        self.close(self.FINISH_TIMEOUT if timeout is None else timeout)

    def close(self, timeout: float = 120.0) -> None:
        """Stop the worker after what is queued (waits at most ``timeout`` seconds)."""
        self._queue.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning("MLflow (%s): still busy after %.0f s; not waiting longer (some "
                        "metrics or artifacts may be missing there)", self.uri, timeout)


def log_export(run_dir: Path, out_dir: Path, cfg: Any) -> None:
    """Upload an export to the run's MLflow run (``logging.mlflow.log_export``), if the run
    was tracked; failures warn."""
    settings = getattr(cfg.logging, "mlflow", None)
    path = Path(run_dir) / RUN_FILE
    if settings is None or not settings.log_export or not path.is_file():
        return
    saved = json.loads(path.read_text(encoding="utf-8"))
    try:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=saved["tracking_uri"]).log_artifacts(
            saved["run_id"], str(out_dir), "export")
        log.info("MLflow: export %s uploaded to run %s", out_dir, saved["run_id"])
    except Exception as e:
        log.warning("MLflow: could not upload the export %s: %s", out_dir, _one_line(e))


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"
