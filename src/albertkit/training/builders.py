"""Building what a run is made of, once: architecture, task, model, optimizer, step.

The distributor comes from ``albertkit.distributed.build_distributor``. The trainer builds
through :func:`build_model_and_step`, and so does anything that must run
exactly the trainer's step (the benchmark): one code path decides the order (seed, then
variables under the distributor's scope) and the accumulation.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albertkit.config import TrainerConfig
from albertkit.config.sizes import AlbertSpec
from albertkit.errors import ConfigError
from albertkit.training.phases import check_seq_fits

if TYPE_CHECKING:
    from albertkit.distributed import Distributor
    from albertkit.tasks.base import Task
    from albertkit.training.step import TrainStep

log = logging.getLogger(__name__)


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


def build_model_and_step(cfg: TrainerConfig, distributor: Distributor,
                         spec: AlbertSpec | None = None, optimizer: Any = None) -> ModelAndStep:
    """Seed, then build the task's model, the optimizer and the step under ``distributor``.

    Args:
        cfg: the run's config (task, model, optimizer, runtime).
        distributor: the backend; its replica count fixes the accumulation steps.
        spec: the architecture (default: :func:`resolve_spec` of ``cfg``).
        optimizer: an unbuilt Keras optimizer used instead of ``cfg.optimizer``'s (the step
            builds it on the model's trainable variables).
    """
    import keras

    from albertkit.tasks import build_task
    from albertkit.training.step import TrainStep

    keras.utils.set_random_seed(cfg.runtime.seed)
    accum = cfg.runtime.accumulation_steps(distributor.replicas)
    spec = resolve_spec(cfg) if spec is None else spec
    check_memory(cfg, spec, accum)  # before the first variable is allocated
    task = build_task(cfg, spec)
    with distributor.scope():
        model = task.build_model()
        if optimizer is None:
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
    differ = {}
    for k, v in cfg.model.overrides().items():
        if k in shape_free:
            base[k] = v
        elif base.get(k) != v:
            differ[k] = v
    if differ:  # every differing field in one line, not the first of several
        ours = ", ".join(f"model.{k}={v}" for k, v in differ.items())
        theirs = ", ".join(f"{k}={base.get(k)}" for k in differ)
        verb = "disagrees" if len(differ) == 1 else "disagree"
        raise ConfigError(f"{ours} {verb} with model.load_from={src} ({theirs})")
    spec = AlbertSpec(**base)
    check_seq_fits(cfg, spec, src)
    return spec


def check_memory(cfg: TrainerConfig, spec: AlbertSpec, accum: int = 1) -> None:
    """Refuse an architecture whose training step cannot fit this machine's memory.

    The estimate is the memory planner's (:func:`albertkit.models.footprint.estimate_memory`)
    for one replica at ``runtime.micro_batch_size``; the limit is the total memory of one
    GPU when TensorFlow sees GPUs, else the host's RAM. Without the check, a downloaded
    ``config.json`` with a huge ``vocab_size`` goes straight to allocation: minutes of
    swapping or an out-of-memory kill instead of an error naming the field.
    """
    from albertkit.hardware import local_device_kind
    from albertkit.models.footprint import check_fits, default_predictions, estimate_memory

    seq = getattr(cfg.data, "seq_length", None) or getattr(cfg.data, "max_seq_length", None)
    if seq is None:
        return
    preds = getattr(cfg.data, "max_predictions_per_seq", None) or default_predictions(seq)
    rt = cfg.runtime
    kind = local_device_kind()
    # a multiple-choice example is one sequence per choice (unknown until read: 1)
    per_example = getattr(cfg.data, "sequences_per_example", None) or 1
    estimate = estimate_memory(spec, seq, rt.micro_batch_size * per_example, rt.precision, preds,
                               accumulation=accum, remat=rt.remat,
                               xla=rt.xla_plan(kind).compute,  # the path the step will take
                               device=kind)
    device, limit = device_memory()
    if limit is None:
        log.debug("device memory unknown: the model-size check is skipped")
        return
    origin = (f"model.load_from={cfg.model.load_from}" if cfg.model.load_from is not None
              else f"model (size={cfg.model.size} with its overrides)")
    sizes = ", ".join(f"{k}={getattr(spec, k):,}" for k in
                      ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                       "intermediate_size", "max_position_embeddings"))
    what = (f"{origin}: {sizes}; runtime.micro_batch_size={rt.micro_batch_size}, "
            f"sequence length {seq}, runtime.precision={rt.precision}")
    check_fits(estimate, limit, device, what)


def device_memory() -> tuple[str, int | None]:
    """(what the memory is, its size in bytes) for one replica: the smallest GPU's total
    memory (from ``nvidia-smi``) when TensorFlow sees GPUs, else the host's RAM; ``None``
    when it cannot be found out."""
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        total = _gpu_memory_bytes()
        return "GPU memory (one GPU)", total
    import psutil

    return "host RAM", int(psutil.virtual_memory().total)


def _gpu_memory_bytes() -> int | None:
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        mib = [int(line) for line in out.split() if line.strip().isdigit()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return min(mib) << 20 if mib else None
