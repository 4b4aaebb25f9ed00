"""Typed, validated configuration for every albertkit job.

One ``TrainerConfig`` tree describes a whole run. Every section is a pydantic model with
``extra="forbid"`` so a misspelt key is an error that names it. Pluggable parts (data,
optimizer) are tagged unions with a ``kind`` field. Derived values (accumulation steps) are
methods, never flags. Nothing here reads the environment: ``cli.py`` and the SageMaker entry
point do that.

Example:
    >>> cfg = TrainerConfig.model_validate({"data": {"kind": "synthetic"}})
    >>> cfg.runtime.accumulation_steps(replicas=1)
    1
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from albertkit.models.sizes import SIZES, Activation, AlbertSpec, SizeName
from albertkit.sagemaker.config import SageMakerConfig


class ConfigError(ValueError):
    """A configuration problem, with a message that names the field, value and source."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# --------------------------------------------------------------------------- model
class ModelConfig(_Section):
    """Model size preset plus per-field overrides (``None`` = take the preset's value).

    ``load_from`` names a starting checkpoint: a Hugging Face directory (``config.json`` +
    ``model.safetensors``) or an albertkit run directory. Its architecture wins over the
    preset; explicit overrides here must then agree with it.
    """

    size: SizeName = "base"
    vocab_size: int | None = Field(None, gt=0)
    embedding_size: int | None = Field(None, gt=0)
    hidden_size: int | None = Field(None, gt=0)
    num_hidden_layers: int | None = Field(None, gt=0)
    num_hidden_groups: int | None = Field(None, gt=0)
    num_attention_heads: int | None = Field(None, gt=0)
    intermediate_size: int | None = Field(None, gt=0)
    inner_group_num: int | None = Field(None, gt=0)
    hidden_act: Activation | None = None
    hidden_dropout_prob: float | None = Field(None, ge=0.0, lt=1.0)
    attention_probs_dropout_prob: float | None = Field(None, ge=0.0, lt=1.0)
    classifier_dropout_prob: float | None = Field(None, ge=0.0, lt=1.0)
    max_position_embeddings: int | None = Field(None, gt=0)
    type_vocab_size: int | None = Field(None, gt=0)
    initializer_range: float | None = Field(None, gt=0.0)
    layer_norm_eps: float | None = Field(None, gt=0.0)
    pre_layer_norm: bool | None = None
    load_from: Path | None = None

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
            return AlbertSpec(**{**SIZES[self.size], **self.overrides()})
        except ValidationError as e:
            raise ConfigError(f"model: {_first_error(e)}") from None

    @model_validator(mode="after")
    def _check_spec(self) -> ModelConfig:
        self.spec  # noqa: B018  (raises ConfigError naming the fields)
        return self


# --------------------------------------------------------------------------- data
class _PretrainingShape(_Section):
    seq_length: int = Field(128, gt=8)
    max_predictions_per_seq: int = Field(20, gt=0)

    @model_validator(mode="after")
    def _check_predictions(self):
        if self.max_predictions_per_seq > self.seq_length:
            raise ValueError(
                f"data.max_predictions_per_seq={self.max_predictions_per_seq} exceeds "
                f"data.seq_length={self.seq_length}"
            )
        return self


class SyntheticData(_PretrainingShape):
    """Random token ids in the pretraining feature format (smoke tests, benchmarks)."""

    kind: Literal["synthetic"] = "synthetic"
    num_examples: int = Field(1024, gt=0)
    eval_examples: int = Field(128, ge=0)


class MaskingConfig(_Section):
    """Masking rules of Google's ALBERT ``create_pretraining_data.py``."""

    masked_lm_prob: float = Field(0.15, gt=0.0, lt=1.0)
    max_ngram: int = Field(3, ge=1, le=3)
    mask_token_prob: float = Field(0.8, ge=0.0, le=1.0)
    random_token_prob: float = Field(0.1, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_split(self):
        if self.mask_token_prob + self.random_token_prob > 1.0:
            raise ValueError(
                f"masking.mask_token_prob={self.mask_token_prob} + masking.random_token_prob="
                f"{self.random_token_prob} exceeds 1"
            )
        return self


class TFRecordData(_PretrainingShape):
    """Pretraining TFRecords (Google ALBERT feature format), static or dynamic masking."""

    kind: Literal["tfrecord"] = "tfrecord"
    train_files: list[str] = Field(..., min_length=1)
    eval_files: list[str] = []
    masking: Literal["static", "dynamic"] = "static"
    masking_rules: MaskingConfig = MaskingConfig()
    tokenizer: Path | None = None
    shuffle_buffer: int = Field(10000, ge=0)
    deterministic: bool = True


class DemoData(_PretrainingShape):
    """The built-in demo corpus (English prose shipped with Python), prepared on first use."""

    kind: Literal["demo"] = "demo"
    vocab_size: int = Field(3000, gt=100)
    dupe_factor: int = Field(10, gt=0)
    eval_fraction: float = Field(0.05, gt=0.0, lt=0.5)
    masking: Literal["static", "dynamic"] = "dynamic"
    shuffle_buffer: int = Field(10000, ge=0)


class SquadData(_Section):
    """SQuAD v1.1 / v2.0 question answering (official JSON format)."""

    kind: Literal["squad"] = "squad"
    version: Literal["1.1", "2.0"] = "2.0"
    train_file: Path
    eval_file: Path | None = None
    tokenizer: Path
    max_seq_length: int = Field(384, gt=16)
    doc_stride: int = Field(128, gt=0)
    max_query_length: int = Field(64, gt=0)
    n_best_size: int = Field(20, gt=0)
    max_answer_length: int = Field(30, gt=0)
    null_score_diff_threshold: float = 0.0  # v2.0: predict "" when null - best span > this
    do_lower_case: bool | None = None  # None = the tokenizer directory's own setting

    @model_validator(mode="after")
    def _check_lengths(self):
        if self.max_query_length + 3 >= self.max_seq_length:
            raise ValueError(
                f"data.max_query_length={self.max_query_length} leaves no room for context in "
                f"data.max_seq_length={self.max_seq_length}"
            )
        if self.doc_stride >= self.max_seq_length - self.max_query_length - 3:
            raise ValueError(
                f"data.doc_stride={self.doc_stride} must be smaller than the context window "
                f"({self.max_seq_length - self.max_query_length - 3} tokens)"
            )
        return self


GlueTaskName = Literal["cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "qnli", "rte", "wnli"]


class ClassificationData(_Section):
    """GLUE-style sentence / sentence-pair classification or regression."""

    kind: Literal["classification"] = "classification"
    task: GlueTaskName | None = None
    train_file: Path
    eval_file: Path | None = None
    tokenizer: Path
    format: Literal["auto", "tsv", "csv", "jsonl"] = "auto"
    text_a: str | None = None
    text_b: str | None = None
    label: str | None = None
    labels: list[str] | None = None
    regression: bool | None = None
    max_seq_length: int = Field(128, gt=8)
    do_lower_case: bool | None = None  # None = the tokenizer directory's own setting


DataConfig = Annotated[
    SyntheticData | TFRecordData | DemoData | SquadData | ClassificationData,
    Field(discriminator="kind"),
]

# --------------------------------------------------------------------------- optimizer
class ScheduleConfig(_Section):
    """Linear warmup to the peak rate, then polynomial decay to ``end_learning_rate``."""

    warmup_steps: int = Field(0, ge=0)
    warmup_fraction: float | None = Field(None, ge=0.0, lt=1.0)
    power: float = Field(1.0, gt=0.0)
    end_learning_rate: float = Field(0.0, ge=0.0)

    def resolved_warmup(self, total_steps: int) -> int:
        if self.warmup_fraction is not None:
            return int(round(self.warmup_fraction * total_steps))
        return self.warmup_steps


class _OptimizerBase(_Section):
    learning_rate: float = Field(1e-3, gt=0.0)
    beta_1: float = Field(0.9, gt=0.0, lt=1.0)
    beta_2: float = Field(0.999, gt=0.0, lt=1.0)
    epsilon: float = Field(1e-6, gt=0.0)
    weight_decay: float = Field(0.01, ge=0.0)
    exclude_from_weight_decay: list[str] = ["layer_norm", "LayerNorm", "bias"]
    clip_norm: float | None = Field(1.0, gt=0.0)
    schedule: ScheduleConfig = ScheduleConfig()


class LambConfig(_OptimizerBase):
    """LAMB (You et al. 2020) with ALBERT semantics: decay inside the trust ratio."""

    kind: Literal["lamb"] = "lamb"
    learning_rate: float = Field(0.00176, gt=0.0)
    exclude_from_layer_adaptation: list[str] | None = None  # None = same as weight decay

    def build(self, total_steps: int):
        from albertkit.optimizers.lamb import Lamb
        from albertkit.optimizers.schedules import WarmupPolynomialDecay

        return Lamb(
            learning_rate=WarmupPolynomialDecay.from_config_section(self, total_steps),
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            weight_decay_rate=self.weight_decay,
            exclude_from_weight_decay=self.exclude_from_weight_decay,
            exclude_from_layer_adaptation=self.exclude_from_layer_adaptation,
        )


class AdamWConfig(_OptimizerBase):
    """AdamW (Loshchilov & Hutter) as in BERT/ALBERT: decay excluded for LayerNorm and bias."""

    kind: Literal["adamw"] = "adamw"

    def build(self, total_steps: int):
        from albertkit.optimizers.adamw import AdamW
        from albertkit.optimizers.schedules import WarmupPolynomialDecay

        return AdamW(
            learning_rate=WarmupPolynomialDecay.from_config_section(self, total_steps),
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            weight_decay_rate=self.weight_decay,
            exclude_from_weight_decay=self.exclude_from_weight_decay,
        )


OptimizerConfig = Annotated[LambConfig | AdamWConfig, Field(discriminator="kind")]


# --------------------------------------------------------------------------- runtime
class RuntimeConfig(_Section):
    """How the step runs: precision, XLA, batch sizes, steps and the seed.

    ``global_batch_size`` is the number of sequences per optimizer step over all replicas;
    ``micro_batch_size`` is what one replica computes at once. Accumulation steps are derived.
    """

    precision: Literal["float32", "mixed_float16", "mixed_bfloat16"] = "float32"
    xla: bool = True
    eager: bool = False
    micro_batch_size: int = Field(32, gt=0)
    global_batch_size: int = Field(32, gt=0)
    max_steps: int = Field(1000, gt=0)
    eval_every_steps: int = Field(500, ge=0)
    eval_steps: int = Field(20, gt=0)
    seed: int = 0
    initial_loss_scale: float = Field(2.0**15, gt=0.0)
    loss_scale_growth_interval: int = Field(2000, gt=0)
    max_nonfinite_steps: int = Field(100, gt=0)

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
        if self.xla and self.eager:
            raise ValueError("runtime.xla=true and runtime.eager=true exclude each other")
        return self


class DistributedConfig(_Section):
    """Data-parallel backend. ``single`` is one process (CPU or one GPU)."""

    backend: Literal["single", "horovod", "tf_multiworker"] = "single"
    fp16_compression: bool = False


class CheckpointConfig(_Section):
    every_steps: int = Field(500, gt=0)
    keep_last: int = Field(3, gt=0)
    resume: bool = True
    keep_best: bool = True


class LoggingConfig(_Section):
    log_every_steps: int = Field(10, gt=0)
    progress_bar: bool = True
    tensorboard: bool = True


# --------------------------------------------------------------------------- root
class TrainerConfig(_Section):
    """The root of every albertkit job.

    Example:
        >>> cfg = TrainerConfig.model_validate(
        ...     {"model": {"size": "tiny"}, "data": {"kind": "synthetic"},
        ...      "runtime": {"max_steps": 10}})
        >>> cfg.model.spec.num_hidden_layers
        2
    """

    run_dir: Path = Path("runs/albertkit")
    model: ModelConfig = ModelConfig()
    data: DataConfig
    optimizer: OptimizerConfig = LambConfig()
    runtime: RuntimeConfig = RuntimeConfig()
    distributed: DistributedConfig = DistributedConfig()
    checkpoint: CheckpointConfig = CheckpointConfig()
    logging: LoggingConfig = LoggingConfig()
    sagemaker: SageMakerConfig | None = None

    @property
    def task(self) -> Literal["pretraining", "squad", "classification"]:
        kind = self.data.kind
        if kind in ("synthetic", "tfrecord", "demo"):
            return "pretraining"
        if kind == "squad":
            return "squad"
        return "classification"

    @model_validator(mode="after")
    def _cross_checks(self) -> TrainerConfig:
        spec = self.model.spec
        seq = getattr(self.data, "seq_length", None) or getattr(self.data, "max_seq_length", None)
        if seq is not None and seq > spec.max_position_embeddings:
            raise ValueError(
                f"data sequence length {seq} exceeds model.max_position_embeddings="
                f"{spec.max_position_embeddings}"
            )
        warmup = self.optimizer.schedule.resolved_warmup(self.runtime.max_steps)
        if warmup > self.runtime.max_steps:
            raise ValueError(
                f"optimizer.schedule.warmup_steps={warmup} exceeds "
                f"runtime.max_steps={self.runtime.max_steps}"
            )
        if self.runtime.eval_every_steps and self.data.kind == "tfrecord" and not self.data.eval_files:
            pass  # evaluation then uses nothing; the trainer says so once
        return self

    # ------------------------------------------------------------------ I/O
    @classmethod
    def from_dict(cls, raw: dict[str, Any], overrides: list[str] | None = None,
                  source: str = "<dict>") -> TrainerConfig:
        raw = apply_overrides(raw, overrides or [])
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            raise ConfigError(f"{source}: invalid configuration:\n{_format_errors(e)}") from None

    @classmethod
    def from_yaml(cls, path: str | os.PathLike, overrides: list[str] | None = None) -> TrainerConfig:
        """Load a YAML (or JSON) file, apply ``key.path=value`` overrides, validate."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(e, "problem", None) or str(e)
            raise ConfigError(f"{path}:{where}: malformed YAML: {problem}") from None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: top level must be a mapping, got {type(raw).__name__}")
        return cls.from_dict(raw, overrides, source=str(path))

    from_json = from_yaml  # JSON is YAML

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def to_yaml(self, path: str | os.PathLike | None = None) -> str:
        text = yaml.safe_dump(self.to_dict(), sort_keys=False)
        if path is not None:
            atomic_write_text(Path(path), text)
        return text

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        text = json.dumps(self.to_dict(), indent=2)
        if path is not None:
            atomic_write_text(Path(path), text)
        return text


# --------------------------------------------------------------------------- helpers
def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``raw`` with dotted ``a.b.c=value`` overrides applied.

    Values are parsed as YAML scalars/lists (``1e-3`` -> float, ``true`` -> bool,
    ``[a, b]`` -> list); ``key=null`` removes an override.
    """
    out = json.loads(json.dumps(raw, default=str))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.path=value")
        key, _, text = item.partition("=")
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"override {item!r} has an empty key")
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        node = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(
                    f"override {item!r}: {'.'.join(parts[: i + 1])} is a value, not a section"
                )
            node = nxt
        node[parts[-1]] = value
    return out


def _loc(err: dict[str, Any]) -> str:
    # drop the tagged-union discriminator values pydantic inserts into locations
    parts = [str(p) for p in err["loc"]]
    kinds = {"synthetic", "tfrecord", "demo", "squad", "classification", "lamb", "adamw"}
    return ".".join(p for p in parts if p not in kinds) or "<root>"


def _format_errors(e: ValidationError) -> str:
    lines = []
    for err in e.errors():
        msg = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        shown = "" if isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"  {_loc(err)}: {msg}{shown}")
    return "\n".join(lines)


def _first_error(e: ValidationError) -> str:
    return _format_errors(e).splitlines()[0].strip()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers never see a partial file."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
