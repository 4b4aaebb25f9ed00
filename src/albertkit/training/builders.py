"""Building what a run is made of, once: architecture, task, model, optimizer, step.

The distributor comes from ``albertkit.distributed.build_distributor``. The trainer builds
through :func:`build_model_and_step`, and so does anything that must run
exactly the trainer's step (the benchmark): one code path decides the order (seed, then
variables under the distributor's scope) and the accumulation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albertkit.config import ConfigError, TrainerConfig
from albertkit.config.sizes import AlbertSpec

if TYPE_CHECKING:
    from albertkit.tasks.base import Task
    from albertkit.training.step import TrainStep


@dataclass
class ModelAndStep:
    """A task with its model, optimizer and the shared step, built under one distributor."""

    spec: AlbertSpec
    task: Task
    model: Any
    optimizer: Any
    step: TrainStep
    accum: int

    def groups(self) -> dict[str, list]:
        """The variables a checkpoint holds, by file."""
        return {
            "model": list(self.model.variables),
            "optimizer": list(self.optimizer.variables),
            "step": self.step.state_variables,
        }


def build_model_and_step(cfg: TrainerConfig, distributor: Any,
                         spec: AlbertSpec | None = None) -> ModelAndStep:
    """Seed, then build the task's model, the optimizer and the step under ``distributor``.

    Args:
        cfg: the run's config (task, model, optimizer, runtime).
        distributor: the backend; its replica count fixes the accumulation steps.
        spec: the architecture (default: :func:`resolve_spec` of ``cfg``).
    """
    import keras

    from albertkit.tasks import build_task
    from albertkit.training.step import TrainStep

    keras.utils.set_random_seed(cfg.runtime.seed)
    accum = cfg.runtime.accumulation_steps(distributor.replicas)
    spec = resolve_spec(cfg) if spec is None else spec
    task = build_task(cfg, spec)
    with distributor.scope():
        model = task.build_model()
        optimizer = cfg.optimizer.build(total_steps=cfg.runtime.max_steps)
        step = TrainStep(task, model, optimizer, distributor, cfg.runtime, accum,
                         cfg.optimizer.clip_norm)
    return ModelAndStep(spec, task, model, optimizer, step, accum)


def resolve_spec(cfg: TrainerConfig) -> AlbertSpec:
    """The model architecture: the preset + overrides, or the ``load_from`` checkpoint's."""
    src = cfg.model.load_from
    if src is None:
        return cfg.model.spec
    src = Path(src)
    if (src / "model_spec.json").is_file():  # an albertkit run directory
        base = json.loads((src / "model_spec.json").read_text())
    elif (src / "config.json").is_file():  # a Hugging Face directory
        from albertkit.models.hf import spec_from_hf_config

        base = spec_from_hf_config(src).model_dump()
    else:
        raise ConfigError(f"model.load_from={src}: neither an albertkit run directory "
                          "(model_spec.json) nor a Hugging Face directory (config.json)")
    # Explicit overrides may only change regularisation, never the shapes of weights.
    shape_free = {"hidden_dropout_prob", "attention_probs_dropout_prob",
                  "classifier_dropout_prob"}
    for k, v in cfg.model.overrides().items():
        if k in shape_free:
            base[k] = v
        elif base.get(k) != v:
            raise ConfigError(f"model.{k}={v} disagrees with model.load_from={src} "
                              f"({k}={base.get(k)})")
    return AlbertSpec(**base)
