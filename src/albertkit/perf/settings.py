"""What ``albertkit benchmark`` measures: the settings every worker process receives.

The settings travel to the worker processes as JSON (``model_dump_json``), so everything a
worker needs to rebuild the same step is a field here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from albertkit.config.kinds import SizeName
from albertkit.config.registry import size_fields
from albertkit.config.sizes import AlbertSpec
from albertkit.errors import BenchmarkError
from albertkit.models.footprint import default_predictions

Framework = Literal["albertkit", "hf-pytorch"]
Precision = Literal["float32", "mixed_float16", "mixed_bfloat16"]


class BenchmarkSettings(BaseModel):
    """What to benchmark. ``model`` holds per-field overrides of the size preset."""

    model_config = ConfigDict(extra="forbid")

    size: SizeName = "base"
    model: dict[str, Any] = {}
    seq_length: int = Field(128, gt=8)
    max_predictions: int | None = Field(None, gt=0)
    micro_batch: int = Field(8, gt=0)
    accumulation: int = Field(1, gt=0)
    precision: Precision = "float32"
    xla: Literal["auto"] | bool = Field(
        "auto", description="runtime.xla: auto (per device and precision), True or False")
    optimizer: Literal["adamw", "lamb"] = "adamw"
    remat: Literal["none", "selective", "full"] | bool = Field(
        "selective",
        description="runtime.remat: what albertkit recomputes in the backward pass (selective, "
        "the configuration's default; full; none); true/false mean full/none")
    malloc_arenas: int | None = Field(
        None, gt=0, description="cap glibc malloc arenas in every worker (None: glibc default)")
    tensor_stats: bool = Field(
        False,
        description="run albertkit on TensorFlow's BFC allocator, which counts tensor bytes "
        "(the planner check on CPU); resident memory is then the BFC allocator's, not that "
        "of the allocator a training run uses")
    steps: int = Field(5, gt=0, description="timed steps per round and framework")
    warmup: int = Field(2, ge=1, description="untimed steps (compilation) before timing")
    rounds: int = Field(3, gt=0)
    compare: list[Framework] = []
    processes: list[int] = [1]
    pipeline: bool = True
    pipeline_batches: int = Field(200, gt=0)
    breakdown: bool = Field(False, description="also time the step's pieces (albertkit)")
    sifting_beta: float | None = Field(
        None, ge=0.0, lt=1.0,
        description="albertkit: smart sifting at this beta, every timed step sifted (no "
        "warm-up); sequences/s counts the sequences scored (each step's whole batch)")
    hf_threads: int | None = Field(None, gt=0, description="torch threads (None: its default)")
    seed: int = 0
    noisy_load_per_cpu: float = Field(
        0.25, gt=0,
        description="mark the result noisy above this many runnable threads of other "
        "processes per CPU (1-minute load average before, sampled during the rounds)")
    noisy_spread_pct: float = Field(
        10.0, gt=0,
        description="mark the result noisy when a framework's per-round sequences/s spread "
        "((max - min) / median) exceeds this percentage")

    @model_validator(mode="after")
    def _check(self) -> BenchmarkSettings:
        spec = self.spec  # validates the overrides
        if self.seq_length > spec.max_position_embeddings:
            raise ValueError(f"seq_length={self.seq_length} exceeds model "
                             f"max_position_embeddings={spec.max_position_embeddings}")
        if self.predictions > self.seq_length:
            raise ValueError(
                f"max_predictions={self.predictions} exceeds seq_length={self.seq_length}"
            )
        if "hf-pytorch" in self.compare and spec.pre_layer_norm:
            raise ValueError("--compare hf-pytorch: Hugging Face ALBERT has no pre_layer_norm")
        if "hf-pytorch" in self.compare and self.precision == "mixed_float16":
            raise ValueError("--compare hf-pytorch runs CPU PyTorch: use float32 or "
                             "mixed_bfloat16 (autocast), not mixed_float16")
        if self.sifting_beta is not None and self.compare:
            raise ValueError(
                "--sifting-beta times albertkit's sifted step: compare it with a run without "
                "--sifting-beta, not with --compare (Hugging Face has no sifted step)"
            )
        if any(p < 1 for p in self.processes):
            raise ValueError(f"processes={self.processes}: every entry must be >= 1")
        return self

    @property
    def spec(self) -> AlbertSpec:
        # Dropout off on both sides: the v2 presets have none except the classifier's, and
        # random masks would make the two frameworks' work differ.
        return AlbertSpec(**{**size_fields(self.size), "hidden_dropout_prob": 0.0,
                             "attention_probs_dropout_prob": 0.0,
                             "classifier_dropout_prob": 0.0, **self.model})

    @property
    def predictions(self) -> int:
        return self.max_predictions or default_predictions(self.seq_length)

    @property
    def sequences_per_step(self) -> int:
        """Sequences one process consumes per optimizer step."""
        return self.micro_batch * self.accumulation


def model_overrides(items: list[str]) -> dict[str, Any]:
    """``--set field=value`` items (``albertkit benchmark``'s, a benchmark script's) -> model
    field overrides (values read as YAML scalars)."""
    import yaml

    model: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise BenchmarkError(f"--set {item!r} must look like field=value")
        model[key.strip()] = yaml.safe_load(value)
    return model
