"""Which config changes a resumed run accepts, and the refusal that names the others.

A checkpoint continues the run that wrote it: the same model, optimizer, data, seed, batch
sizes and precision. ``run_dir/config.yaml`` holds the config of the run whose checkpoints
are there (a run writes it when it starts, after it has resumed). Before a training run
resumes, the trainer compares that file with the current config field by field and refuses,
with one ``ConfigError`` naming every differing field as ``dotted.path: old -> new``, when a
field outside :data:`RESUMABLE_CHANGES` differs. Those fields change how long the run goes,
how it logs, evaluates, compiles and checkpoints, or where its files are: not what it
computes. ``checkpoint.allow_config_change: true`` resumes anyway (the new settings apply
from the checkpoint on, with a warning that lists them); the data position's own check
(seed, batch sizes, replica count: ``training.state.resume_identity``) is not waived by it.

The same split names a SageMaker run: :func:`settings_fingerprint` hashes the fields a
resume compares, so a variant of a config (another learning rate) gets its own checkpoint
prefix while the same config submitted again finds its checkpoints.

Example:
    >>> from albertkit.config import TrainerConfig
    >>> old = TrainerConfig.from_dict({"data": {"kind": "synthetic"},
    ...                                "optimizer": {"learning_rate": 0.001}})
    >>> new = TrainerConfig.from_dict({"data": {"kind": "synthetic"},
    ...                                "optimizer": {"learning_rate": 0.002},
    ...                                "runtime": {"max_steps": 2000}})
    >>> for line in describe_changes(changed_settings(old, new)):
    ...     print(line)
    optimizer.learning_rate: 0.001 -> 0.002
    >>> longer = TrainerConfig.from_dict({"data": {"kind": "synthetic"},
    ...                                   "optimizer": {"learning_rate": 0.001},
    ...                                   "runtime": {"max_steps": 2000}})
    >>> settings_fingerprint(longer) == settings_fingerprint(old) != settings_fingerprint(new)
    True
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

from albertkit.config import TrainerConfig
from albertkit.errors import ConfigError

log = logging.getLogger("albertkit")

# Dotted config paths (a section name covers all its fields) that may differ between a
# checkpoint's run and the run that resumes it. Everything else is compared.
RESUMABLE_CHANGES: tuple[str, ...] = (
    "run_dir",
    # where files are: the same data may move (a local path, an S3 channel in a job)
    "model.load_from",  # the first weights of a fresh run; a resume loads the checkpoint's
    "data.train_files",
    "data.eval_files",
    "data.train_file",
    "data.eval_file",
    "data.tokenizer",
    # how long: training longer stretches the schedule to the new total (docs/howto/resume.md)
    "runtime.max_steps",
    # evaluation only
    "runtime.eval_every_steps",
    "runtime.eval_steps",
    "data.n_best_size",
    "data.max_answer_length",
    "data.null_score_diff_threshold",
    # how the same step is computed or watched
    "runtime.xla",
    "runtime.eager",
    "runtime.remat",
    "runtime.malloc_arenas",
    "runtime.profile",
    "runtime.initial_loss_scale",  # the checkpoint's loss scale is restored
    "runtime.max_nonfinite_steps",
    # checkpoint cadence, retention and resume; logging, TensorBoard, MLflow
    "checkpoint",
    "logging",
    # which plugins load (the parts a run uses are compared by their kinds above)
    "plugins",
)

_UNSET = "<unset>"


def resumable(path: str) -> bool:
    """Whether the field at dotted ``path`` may change when a run resumes.

    Example:
        >>> resumable("logging.mlflow.experiment"), resumable("optimizer.learning_rate")
        (True, False)
    """
    return any(path == p or path.startswith(p + ".") for p in RESUMABLE_CHANGES)


def _flatten(node: Any, where: str = "") -> dict[str, Any]:
    """Leaves of a config dump by dotted path; lists are leaves."""
    if isinstance(node, dict) and node:
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(_flatten(value, f"{where}.{key}" if where else str(key)))
        return out
    return {where: node}


def changed_settings(old: TrainerConfig, new: TrainerConfig) -> list[tuple[str, Any, Any]]:
    """``(dotted path, old value, new value)`` for every field a resume compares that
    differs, in the config's order (``"<unset>"`` for a field only one side has)."""
    before = _flatten(old.model_dump(mode="json"))
    after = _flatten(new.model_dump(mode="json"))
    paths = list(before) + [p for p in after if p not in before]
    return [(p, before.get(p, _UNSET), after.get(p, _UNSET)) for p in paths
            if not resumable(p) and before.get(p, _UNSET) != after.get(p, _UNSET)]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def describe_changes(changes: list[tuple[str, Any, Any]]) -> list[str]:
    """One ``path: old -> new`` line per change."""
    return [f"{path}: {_text(a)} -> {_text(b)}" for path, a, b in changes]


def check_resumable(run_dir: Path, cfg: TrainerConfig, checkpoint: Path) -> None:
    """Refuse to resume ``checkpoint`` when ``cfg`` changes a field that the run in
    ``run_dir`` (its ``config.yaml``) trained with, unless ``checkpoint.allow_config_change``.

    Raises ``ConfigError`` naming every such field (``optimizer.learning_rate: 0.001 ->
    0.002``). A run directory without a readable ``config.yaml`` has nothing to compare.
    """
    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        return
    try:
        old = TrainerConfig.from_yaml(path)
    except ConfigError as e:
        log.warning("%s cannot be read (%s): the settings of the run that wrote %s are not "
                    "compared with this config", path, e, checkpoint)
        return
    lines = describe_changes(changed_settings(old, cfg))
    if not lines:
        return
    listed = "\n  ".join(lines)
    if cfg.checkpoint.allow_config_change:
        log.warning("resuming %s with changed training settings (checkpoint.allow_config_change"
                    "=true; %s -> this config):\n  %s", checkpoint, path, listed)
        return
    raise ConfigError(
        f"{checkpoint}: refusing to resume with changed training settings ({path} -> this "
        f"config):\n  {listed}\nRestore them; or start a new run (a new run_dir, with "
        "model.load_from=<this run_dir> for its weights; on SageMaker a new checkpoint "
        "prefix, which a changed config gets by default); or set "
        "checkpoint.allow_config_change=true to continue this run with them.")


def settings_fingerprint(cfg: TrainerConfig, **extra: Any) -> str:
    """8 hex digits naming the settings a resume compares (plus ``extra``, such as the replica
    count): equal for configs that may resume each other's checkpoints, different otherwise.

    Fields at their default value are left out, so a field added to the config later (at its
    default) does not rename existing runs; the section kinds are always in."""
    dump = _flatten(cfg.model_dump(mode="json", exclude_defaults=True))
    settings = {p: v for p, v in dump.items() if not resumable(p) and v != {}}
    settings.update({"data.kind": cfg.data.kind, "optimizer.kind": cfg.optimizer.kind}, **extra)
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:8]
