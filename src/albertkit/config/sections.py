"""The sections of a ``TrainerConfig``: model, optimizer, runtime, distributed, ... (the data
sections are :mod:`albertkit.config.data`).

Every section is a pydantic model with ``extra="forbid"`` so a misspelt key is an error that
names it. Pluggable parts (data, optimizer) are chosen by a ``kind`` field. Derived
values (accumulation steps, the resolved architecture) are methods, never flags.

Example:
    >>> RuntimeConfig(micro_batch_size=8, global_batch_size=32).accumulation_steps(replicas=2)
    2
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from albertkit.config.base import Section
from albertkit.config.kinds import SizeName

# The optimizer sections live in albertkit.config.optimizer (below the registry, which
# registers LAMB and AdamW); they are importable from here too.
from albertkit.config.optimizer import (  # noqa: F401 - re-exported
    AdamWConfig,
    LambConfig,
    OptimizerConfig,
    OptimizerSection,
    ScheduleConfig,
)
from albertkit.config.registry import size_fields
from albertkit.config.sizes import Activation, AlbertSpec
from albertkit.config.validation import first_error
from albertkit.errors import ConfigError
from albertkit.hardware import DeviceKind, XlaPlan, local_device_kind, resolve_xla


# --------------------------------------------------------------------------- model
class ModelConfig(Section):
    """Model size preset plus per-field overrides (``None`` = take the preset's value).

    ``load_from`` names a starting checkpoint: a Hugging Face directory (``config.json`` +
    ``model.safetensors``) or an albertkit run directory. Its architecture wins over the
    preset; explicit overrides here must then agree with it.
    """

    size: SizeName = Field(
        "base",
        description="Architecture preset (tiny/base/large/xlarge/xxlarge or a plugin's); the "
        "fields below override it.",
    )
    vocab_size: int | None = Field(
        None, gt=0, description="Token vocabulary size; at least the tokenizer's size."
    )
    embedding_size: int | None = Field(
        None, gt=0, description="Factorised embedding width E (projected to hidden_size)."
    )
    hidden_size: int | None = Field(
        None, gt=0, description="Transformer hidden width H; divisible by num_attention_heads."
    )
    num_hidden_layers: int | None = Field(
        None, gt=0, description="Transformer layers (applied repeatedly from the shared groups)."
    )
    num_hidden_groups: int | None = Field(
        None, gt=0,
        description="Groups of layers with their own parameters (1 = all layers share one set).",
    )
    num_attention_heads: int | None = Field(None, gt=0, description="Attention heads per layer.")
    intermediate_size: int | None = Field(
        None, gt=0, description="Feed-forward inner width (usually 4 x hidden_size)."
    )
    inner_group_num: int | None = Field(
        None, gt=0, description="Layers inside each parameter-sharing group."
    )
    hidden_act: Activation | None = Field(
        None, description="Feed-forward activation (ALBERT: gelu_new, the tanh approximation)."
    )
    hidden_dropout_prob: float | None = Field(
        None, ge=0.0, lt=1.0, description="Dropout on embeddings and layer outputs (ALBERT v2: 0)."
    )
    attention_probs_dropout_prob: float | None = Field(
        None, ge=0.0, lt=1.0, description="Dropout on attention probabilities (ALBERT v2: 0)."
    )
    classifier_dropout_prob: float | None = Field(
        None, ge=0.0, lt=1.0, description="Dropout before the classification head."
    )
    max_position_embeddings: int | None = Field(
        None, gt=0, description="Longest sequence the position embeddings cover."
    )
    type_vocab_size: int | None = Field(
        None, gt=0, description="Number of segment (token type) ids."
    )
    initializer_range: float | None = Field(
        None, gt=0.0, description="Standard deviation of the weight initialiser."
    )
    layer_norm_eps: float | None = Field(None, gt=0.0, description="Epsilon of every LayerNorm.")
    pre_layer_norm: StrictBool | None = Field(
        None,
        description="Pre-LN blocks (LayerNorm before attention/feed-forward) instead of post-LN.",
    )
    load_from: Path | None = Field(
        None,
        description="Start from this Hugging Face or albertkit run directory; its architecture "
        "wins over size.",
    )

    def overrides(self) -> dict[str, Any]:
        return {
            k: v
            for k, v in self.model_dump().items()
            if k not in ("size", "load_from") and v is not None
        }

    @property
    def spec(self) -> AlbertSpec:
        """The resolved architecture: preset values, then the explicit overrides."""
        try:
            return AlbertSpec(**{**size_fields(self.size), **self.overrides()})
        except ValidationError as e:
            raise ConfigError(f"model: {first_error(e)}") from None

    @model_validator(mode="after")
    def _check_spec(self) -> ModelConfig:
        self.spec  # noqa: B018  (raises ConfigError naming the fields)
        return self


# --------------------------------------------------------------------------- runtime
class ProfileConfig(Section):
    """Which steps a TensorFlow profiler trace covers (``runtime.profile``).

    The trace goes to ``run_dir/tensorboard/plugins/profile/<time>/<host>.xplane.pb``: the
    Profile tab of TensorBoard (with ``tensorboard-plugin-profile``) shows it.

    Example:
        >>> ProfileConfig(start_step=20, num_steps=3).steps()
        range(20, 23)
    """

    start_step: int = Field(
        ..., gt=0,
        description="First optimizer step traced (steps count from 1, as in the log lines; "
        "leave the first steps, which compile, out).",
    )
    num_steps: int = Field(3, gt=0, description="Steps traced from start_step on.")
    ranks: list[Annotated[int, Field(ge=0)]] = Field(
        [0], min_length=1, description="Ranks that write a trace (each its own host's)."
    )

    def steps(self) -> range:
        return range(self.start_step, self.start_step + self.num_steps)


class SiftingConfig(Section):
    """Smart sifting: train each optimizer step on its hardest examples only.

    Per optimizer step, a forward pass without gradients scores every example of the step
    (``accumulation x micro_batch`` per replica); the ``beta`` share with the lowest loss is
    dropped and the kept examples, compacted into full micro-batches, get the forward and
    backward pass. The first ``warmup_steps`` steps train on everything.

    Example:
        >>> SiftingConfig(beta=0.5).kept_per_step(micro_batch=8, accumulation=4)
        (2, 8)
    """

    beta: float = Field(
        0.5, ge=0.0, lt=1.0,
        description="Share of each step's examples dropped (the lowest-loss ones); 0 keeps "
        "all (costs the scoring pass for nothing).",
    )
    warmup_steps: int = Field(
        100, ge=0, description="Optimizer steps trained on every example before sifting starts."
    )

    def kept_per_step(self, micro_batch: int, accumulation: int) -> tuple[int, int]:
        """``(micro-batches, examples each)`` trained per replica and step once sifting.

        ``n = accumulation x micro_batch`` examples are scored and ``n - floor(beta x n)``
        kept, rounded up so that they fill equal micro-batches of at most ``micro_batch``
        examples (the compiled step needs fixed shapes).
        """
        n = micro_batch * accumulation
        keep = max(1, n - int(self.beta * n))
        micro_batches = -(-keep // micro_batch)
        return micro_batches, -(-keep // micro_batches)


class RuntimeConfig(Section):
    """How the step runs: precision, XLA, batch sizes, steps and the seed.

    ``global_batch_size`` is the number of sequences per optimizer step over all replicas;
    ``micro_batch_size`` is what one replica computes at once. Accumulation steps are derived.
    """

    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = Field(
        "float32",
        description="float32, or mixed precision with float16 (dynamic loss scaling) or "
        "bfloat16. On a CPU, mixed_bfloat16 pays only with bfloat16 instructions (AVX-512 "
        "BF16, AMX); without them it is emulated and slower than float32, and the trainer "
        "warns (docs/performance.md).",
    )
    xla: Literal["auto"] | StrictBool = Field(
        "auto",
        description="XLA-compile (jit_compile) the gradient computation and evaluation: auto "
        "chooses per device and precision (on for GPU, off for CPU, where the graph "
        "executor with fused GELU kernels is faster; docs/performance.md), true/false force it.",
    )
    eager: StrictBool = Field(
        False,
        description="Run the step eagerly, without tf.function (debugging; excludes "
        "xla=true, makes auto mean off).",
    )
    remat: Literal["none", "selective", "full"] | StrictBool = Field(
        "selective",
        description="What the backward pass recomputes instead of keeping: selective (each "
        "layer's attention core and FFN activation: much less activation memory for a few "
        "percent of FLOPs), full (every transformer layer: least memory, about a third more "
        "compute) or none; true/false mean full/none (docs/memory.md).",
    )
    malloc_arenas: int | None = Field(
        None,
        gt=0,
        description="Cap glibc malloc arenas (e.g. 2) so CPU resident memory stays flat; "
        "applied when the run is built, before TensorFlow's thread pools allocate.",
    )
    micro_batch_size: int = Field(32, gt=0, description="Sequences one replica computes at once.")
    global_batch_size: int = Field(
        32, gt=0,
        description="Sequences per optimizer step over all replicas (a multiple of "
        "micro_batch_size).",
    )
    max_steps: int = Field(
        1000, gt=0, description="Optimizer steps of the run (the schedule ends here)."
    )
    eval_every_steps: int = Field(
        500, ge=0, description="Evaluate every N steps (0 = only at the end)."
    )
    eval_steps: int = Field(
        20, gt=0,
        description="At most this many eval batches per evaluation (SQuAD scores its whole eval "
        "file).",
    )
    seed: int = Field(0, description="Seed of weight initialisation, data order and masking.")
    initial_loss_scale: float = Field(
        2.0**15, gt=0.0, description="Starting loss scale (mixed_float16)."
    )
    loss_scale_growth_interval: int = Field(
        2000, gt=0, description="Finite steps before the loss scale doubles (mixed_float16)."
    )
    max_nonfinite_steps: int = Field(
        100, gt=0, description="Stop with an error after this many consecutive non-finite steps."
    )
    profile: ProfileConfig | None = Field(
        None,
        description="Trace these steps with TensorFlow's profiler into run_dir/tensorboard "
        "(null = no trace, no cost).",
    )
    sifting: SiftingConfig | None = Field(
        None,
        description="Smart sifting: skip the backward pass on each step's lowest-loss "
        "examples (null = off; see docs/howto/sift-easy-examples.md).",
    )

    @field_validator("xla", mode="before")
    @classmethod
    def _xla_choice(cls, value: Any) -> Any:
        # one clear message instead of one per member of the union
        if value == "auto" or isinstance(value, bool):
            return value
        raise ValueError("should be auto, true or false")

    @field_validator("remat", mode="before")
    @classmethod
    def _remat_choice(cls, value: Any) -> Any:
        # albertkit 0.1's booleans name the modes they meant: true = full, false = none
        if isinstance(value, bool):
            return "full" if value else "none"
        if value in ("none", "selective", "full"):
            return value
        raise ValueError("should be selective, full or none (or true = full, false = none)")

    def xla_plan(self, device: DeviceKind | None = None) -> XlaPlan:
        """Which parts of the step XLA compiles on ``device`` (default: the one TensorFlow
        sees), from ``xla``, ``precision`` and ``eager`` (:func:`albertkit.hardware.resolve_xla`).

        Example:
            >>> RuntimeConfig(precision="mixed_bfloat16").xla_plan("cpu").compute
            False
        """
        return resolve_xla(self.xla, device or local_device_kind(), self.precision, self.eager)

    def accumulation_steps(self, replicas: int = 1) -> int:
        per_step = self.micro_batch_size * replicas
        if self.global_batch_size % per_step:
            raise ConfigError(
                f"runtime.global_batch_size={self.global_batch_size} is not divisible by "
                f"runtime.micro_batch_size={self.micro_batch_size} x replicas={replicas}"
            )
        return self.global_batch_size // per_step

    @model_validator(mode="after")
    def _check_batches(self) -> RuntimeConfig:
        if self.global_batch_size % self.micro_batch_size:
            raise ValueError(
                f"runtime.global_batch_size={self.global_batch_size} is not divisible by "
                f"runtime.micro_batch_size={self.micro_batch_size}"
            )
        if self.xla is True and self.eager:
            raise ValueError("runtime.xla=true and runtime.eager=true exclude each other")
        return self


class DistributedConfig(Section):
    """Data-parallel backend. ``single`` is one process (CPU or one GPU)."""

    backend: Literal["single", "horovod", "tf_multiworker"] = Field(
        "single",
        description="single process, Horovod (under horovodrun/mpirun) or "
        "MultiWorkerMirroredStrategy.",
    )
    fp16_compression: StrictBool = Field(
        False, description="All-reduce gradients in float16 (halves network traffic)."
    )
    slurm_requeue: Literal["auto", "always", "never"] = Field(
        "auto",
        description="After SIGUSR1 (Slurm's --signal=USR1@N before the time limit) stops "
        "training with a checkpoint, rank 0 runs `scontrol requeue $SLURM_JOB_ID`: auto when "
        "the job is a requeueable batch job (sbatch --requeue, Requeue=1), always in any "
        "Slurm job, or never.",
    )
    startup_timeout_s: float = Field(
        120.0,
        gt=0,
        description="At start, every process of a multi-process job (a Slurm step, a "
        "TF_CONFIG cluster) reports to rank 0 before the backend starts; after this many "
        "seconds without all of them, each stops with one line naming the ranks that never "
        "joined.",
    )


class CheckpointConfig(Section):
    """When checkpoints are written to ``run_dir/checkpoints``, how many are kept, and resume."""

    every_steps: int = Field(
        500, gt=0, description="Checkpoint every N steps (and always at the end or when stopped)."
    )
    keep_last: int = Field(
        3, gt=0, description="Periodic checkpoints to keep (the best one is kept besides)."
    )
    resume: StrictBool = Field(
        True, description="Resume from the newest valid checkpoint in run_dir/checkpoints."
    )
    keep_best: StrictBool = Field(
        True, description="Checkpoint at each new best eval metric and keep that checkpoint."
    )
    allow_fresh_start_if_damaged: StrictBool = Field(
        False,
        description="When checkpoints exist but none verifies, move them to "
        "checkpoints/damaged/ and start from step 0 (default: refuse with an error).",
    )
    allow_config_change: StrictBool = Field(
        False,
        description="Resume even though training settings (model, optimizer, data, precision, "
        "...) differ from run_dir/config.yaml, continuing with the new ones; default: refuse, "
        "naming each field. Seed, batch sizes and replica count can never change on resume.",
    )


class MlflowConfig(Section):
    """Where ``logging.mlflow`` sends the run: parameters, metrics, summary and export.

    Example:
        >>> MlflowConfig(tracking_uri="file:///tmp/mlruns").experiment
        'albertkit'
    """

    tracking_uri: str | None = Field(
        None,
        description="A local directory (an SQLite database and the artifacts go there), "
        "any MLflow URI (sqlite:, http(s)://server, ...) or a SageMaker managed MLflow tracking "
        "server ARN (with sagemaker-mlflow); null = MLFLOW_TRACKING_URI from the environment, "
        "else run_dir/mlruns.",
    )
    experiment: str = Field("albertkit", min_length=1, description="MLflow experiment name.")
    run_name: str | None = Field(None, description="MLflow run name (default: run_dir's name).")
    log_export: StrictBool = Field(
        True, description="Upload exports made with AlbertTrainer.export as artifacts."
    )

    @model_validator(mode="after")
    def _no_credentials_in_uri(self) -> MlflowConfig:
        from urllib.parse import urlsplit

        uri = self.tracking_uri or ""
        if "://" in uri and urlsplit(uri).password:
            raise ValueError(
                "logging.mlflow.tracking_uri holds a password: it would be written to "
                "run_dir/config.yaml; set MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD "
                "in the environment instead")
        return self


class LoggingConfig(Section):
    """Training-metric cadence, progress bar and TensorBoard (``metrics.jsonl`` is always written)."""

    log_every_steps: int = Field(
        10, gt=0, description="Average training metrics over N steps, then log them."
    )
    progress_bar: StrictBool = Field(
        True, description="Show a progress bar (log lines go to the console when off)."
    )
    tensorboard: StrictBool = Field(
        True, description="Write TensorBoard event files to run_dir/tensorboard."
    )
    breakdown: StrictBool = Field(
        True,
        description="Log where each window's time went (input wait, compute, reduce/apply, "
        "checkpoint, eval, other) and per-rank utilisation; one step per window runs as its "
        "two halves, each timed.",
    )
    input_bound_share: float = Field(
        0.2, gt=0.0, lt=1.0,
        description="Warn that the run is input-bound when waiting for input takes more than "
        "this share of a logging window (windows shorter than a second are judged together "
        "with the next ones).",
    )
    mlflow: MlflowConfig | None = Field(
        None,
        description="Track the run in MLflow (needs albertkit[mlflow]); null = no tracking.",
    )
