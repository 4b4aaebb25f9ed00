"""Memory footprint of training an ALBERT architecture, from its sizes alone (pure arithmetic).

The planner's model: :func:`estimate_memory` predicts the peak training memory of one
replica, :func:`parameter_count` counts the weights. It lives with the model description
(not with the benchmark and the batch planner in :mod:`albertkit.perf.memory`) because training needs it
too: :func:`check_fits` refuses an architecture, for example one read from a downloaded
``config.json`` with a huge vocabulary, before a single variable is allocated.

Memory model (one replica, bytes; validated against measured peaks in docs/memory.md):

    state       = weights 4N (+2N compute-dtype copies under mixed precision: one cast of
                  each weight per forward pass, shared by a layer's applications)
                + gradients 4N (float32) (+4N accumulator when accumulating)
                + optimizer 8N (LAMB/AdamW m and v)
    activations = micro_batch * per-sequence activations (below), or the shared layer's
                  per-application weight gradients where they are larger (without XLA, or
                  with full recomputation)
    peak        = state + activations + workspace

Per sequence, per transformer-layer application and token, the tensors kept for the
backward pass are counted from the layer's ops and the compiled step's buffer assignment
(``XLA_FLAGS=--xla_dump_to``): ``ACT_HIDDEN`` H-wide tensors, ``ACT_FFN`` F-wide tensors
(the FFN's pre-activation, the activation's elementwise intermediates and its output) and
the attention probabilities (heads x T per token, float32, plus a compute-dtype copy under
mixed precision). ``runtime.remat`` changes what is kept (:data:`RematMode`). Embeddings and
the MLM head (float32 logits, softmax and their gradient at P positions) are added once.
H- and F-wide tensors take the compute dtype's bytes, except in an XLA-compiled step on a
CPU under mixed precision (``XLA_CPU_16BIT_BYTES``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from albertkit.config.sizes import AlbertSpec
from albertkit.errors import ConfigError
from albertkit.hardware import DeviceKind, GiB
from albertkit.models.options import FUSED_ACTIVATIONS, RematMode, remat_mode

Precision = Literal["float32", "mixed_float16", "mixed_bfloat16"]

# Per-token, per-layer-application activation tensor counts under XLA (see the module
# docstring). The buffer assignment of ALBERT-base's compiled step at seq 512 shows, per
# layer, 4 F-wide buffers (the FFN matmul, and gelu_new's tanh, product and output) and 8
# H-wide ones (Q, K, V, context, the two residual sums and the two LayerNorm outputs); these
# counts fit TensorFlow's allocator peaks of ALBERT-base at seq 128 and 512 (XLA, float32)
# within 2% (docs/memory.md). "selective" remat recomputes the activation and the attention
# core, so only 2 F-wide tensors (pre-activation and output) and no T x T tensor are kept.
ACT_HIDDEN = 8
ACT_FFN = 4
SELECTIVE_ACT_FFN = 2
# Without XLA (TensorFlow's graph executor runs the ops one by one) the backward pass keeps
# what each op's gradient needs. With the fused GELU and LayerNorm kernels
# (``kernels.fused_activation``, ``layers.LayerNorm``: each keeps only its input) and the
# attention core's own backward pass, that is 9 H-wide and 2 F-wide tensors per token and
# layer in both "none" and "selective" remat, fitted to the allocator peaks of ALBERT-base
# (docs/memory.md: seq 128 x 8 and 16, seq 512 x 2 and 4, float32 and mixed_bfloat16, both
# modes). An activation without a fused kernel keeps GRAPH_ACT_FFN F-wide tensors under
# "none" (its elementwise intermediates). "none" also keeps the attention probabilities:
# the attention core's in the compute dtype, or, when autodiff runs the attention (attention
# dropout, or float16 with its float32 softmax), the scores plus float32 probabilities.
GRAPH_ACT_HIDDEN = 9
GRAPH_ACT_FFN = 6
# The activations in FUSED_ACTIVATIONS run as one fused kernel each way
# (``kernels.fused_activation``), whose backward pass keeps only the input: without XLA the
# FFN then keeps its 2 F-wide tensors (pre-activation and output) in every remat mode, as
# "selective" does for the others. In an XLA-compiled step the kernels are inlined and XLA
# keeps ACT_FFN F-wide tensors, since "selective" recomputes only a formula activation
# (measured, docs/memory.md).
# Bytes per activation element of an XLA-compiled step on a CPU under mixed precision. XLA's
# CPU backend computes 16-bit types in float32 (its float-normalization pass) and keeps part
# of the activations in float32, part in the 16-bit type: fitted to TensorFlow's allocator
# peaks of ALBERT-base in mixed_bfloat16 with selective remat (docs/memory.md: seq 128 x 4,
# 8 and 16, seq 512 x 2 and 4), where 2 bytes predicted x0.68-0.78 and 4 bytes x1.01-1.26.
XLA_CPU_16BIT_BYTES = 3


def default_predictions(seq_length: int, masked_lm_prob: float = 0.15) -> int:
    """``max_predictions_per_seq`` for a masking rate: ceil(0.15 T), 20 at 128, 77 at 512."""
    return max(1, math.ceil(masked_lm_prob * seq_length))


def layer_applications(spec: AlbertSpec) -> int:
    """Transformer layers run per forward pass (the group is applied num_hidden_layers times)."""
    return spec.num_hidden_layers * spec.inner_group_num


# --------------------------------------------------------------------------- parameters
def layer_parameter_count(spec: AlbertSpec) -> int:
    """Parameters of one transformer layer (attention, FFN, two LayerNorms)."""
    h, f = spec.hidden_size, spec.intermediate_size
    return 4 * (h * h + h) + 2 * h + (h * f + f) + (f * h + h) + 2 * h


def parameter_count(
    spec: AlbertSpec, pooler: bool = True, mlm_head: bool = True, sop_head: bool = True
) -> int:
    """Trainable parameters of ``AlbertForPretraining`` (word embeddings tied to the decoder)."""
    v, e, h = spec.vocab_size, spec.embedding_size, spec.hidden_size
    embeddings = (v + spec.max_position_embeddings + spec.type_vocab_size) * e + 2 * e
    mapping = e * h + h
    groups = spec.num_hidden_groups * spec.inner_group_num * layer_parameter_count(spec)
    total = embeddings + mapping + groups + (2 * h if spec.pre_layer_norm else 0)
    if pooler:
        total += h * h + h
    if mlm_head:
        total += h * e + e + 2 * e + v
    if sop_head:
        total += 2 * h + 2
    return total


# --------------------------------------------------------------------------- memory
def compute_bytes(precision: Precision) -> int:
    """Bytes per element of the compute dtype (activations)."""
    if precision == "float32":
        return 4
    if precision in ("mixed_float16", "mixed_bfloat16"):
        return 2
    raise ValueError(f"precision={precision!r}; expected float32, mixed_float16 or mixed_bfloat16")


def activation_bytes_per_sequence(
    spec: AlbertSpec,
    seq_length: int,
    max_predictions: int,
    precision: Precision,
    remat: RematMode | bool = "none",
    xla: bool = True,
    device: DeviceKind = "gpu",
) -> dict[str, float]:
    """Activations kept for the backward pass of one sequence, by part (bytes).

    ``xla`` is whether the step's gradient computation is XLA-compiled (fused); without it
    more intermediates are kept (``GRAPH_*`` above). ``device`` ("cpu" or "gpu") matters
    only to an XLA-compiled step under mixed precision (``XLA_CPU_16BIT_BYTES``).

    ``remat`` is ``runtime.remat``. With "selective", ``recomputed_attention`` is the working
    set of one layer's recomputed attention core (its float32 probabilities and their
    gradient), live only while that layer's backward pass runs. With "full" only every
    layer's input is kept (``layers``); ``recomputed_layer`` is the working set of the one
    layer being recomputed, which :func:`estimate_memory` does not simply add (see there).
    """
    mode = remat_mode(remat)
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device={device!r}; expected 'cpu' or 'gpu'")
    mixed = precision != "float32"
    b = XLA_CPU_16BIT_BYTES if xla and device == "cpu" and mixed else compute_bytes(precision)
    t, p = seq_length, max_predictions
    e, h, f, v = spec.embedding_size, spec.hidden_size, spec.intermediate_size, spec.vocab_size
    n = layer_applications(spec)
    heads = spec.num_attention_heads
    fused = spec.hidden_act in FUSED_ACTIVATIONS
    if xla:
        ffn = SELECTIVE_ACT_FFN if mode == "selective" and not fused else ACT_FFN
        per_token_layer = b * (ACT_HIDDEN * h + ffn * f)
        per_token_attention = heads * t * (4 + (b if mixed else 0))
    else:
        ffn = SELECTIVE_ACT_FFN if mode == "selective" or fused else GRAPH_ACT_FFN
        per_token_layer = b * (GRAPH_ACT_HIDDEN * h + ffn * f)
        # The attention core (no attention dropout; the softmax in the compute dtype, not
        # under float16) keeps its probabilities only; autodiff keeps scores and probabilities.
        core = spec.attention_probs_dropout_prob == 0 and precision != "mixed_float16"
        per_token_attention = heads * t * (b if core else b + 4)
    parts: dict[str, float] = {}
    if mode == "full":
        parts["layers"] = float(n * t * b * h)
        parts["recomputed_layer"] = float(t * (per_token_layer + per_token_attention))
    elif mode == "selective":
        parts["layers"] = float(n * t * per_token_layer)
        parts["recomputed_attention"] = float(heads * t * t * 8)
    else:
        parts["layers"] = float(n * t * per_token_layer)
        parts["attention_probs"] = float(n * t * per_token_attention)
    return {
        **parts,
        # word/position/type sum, LayerNorm in/out (E wide), projection output (H wide)
        "embeddings": float(t * b * (3 * e + h)),
        # gathered rows, dense/act/LN (E wide); float32 logits, softmax and their gradient (V wide)
        "mlm_head": float(p * (b * (h + 3 * e) + 4 * 3 * v)),
    }


@dataclass(frozen=True)
class MemoryEstimate:
    """Predicted peak training memory of one replica, with its parts (bytes)."""

    parameters: int
    micro_batch: int
    state: dict[str, float]
    activations: dict[str, float]

    @property
    def state_bytes(self) -> float:
        return float(sum(self.state.values()))

    @property
    def activation_bytes(self) -> float:
        return float(sum(self.activations.values()))

    @property
    def peak_bytes(self) -> float:
        return self.state_bytes + self.activation_bytes

    def as_dict(self) -> dict[str, object]:
        return {
            "parameters": self.parameters,
            "micro_batch": self.micro_batch,
            "state_bytes": self.state,
            "activation_bytes": self.activations,
            "peak_bytes": self.peak_bytes,
        }


def estimate_memory(
    spec: AlbertSpec,
    seq_length: int,
    micro_batch: int,
    precision: Precision = "float32",
    max_predictions: int | None = None,
    accumulation: int = 1,
    remat: RematMode | bool = "none",
    xla: bool = True,
    device: DeviceKind = "gpu",
) -> MemoryEstimate:
    """Predict the peak memory of one training step of one replica (bytes).

    Args:
        spec: the architecture.
        seq_length: tokens per sequence.
        micro_batch: sequences per forward/backward pass.
        precision: ``float32``, ``mixed_float16`` or ``mixed_bfloat16``.
        max_predictions: masked positions per sequence (default 15% of ``seq_length``).
        accumulation: micro-batches per optimizer step (> 1 adds a gradient accumulator).
        remat: ``runtime.remat``, what the backward pass recomputes (:data:`RematMode`).
        xla: the gradient computation is XLA-compiled: pass the step's resolved plan,
            ``runtime.xla_plan().compute`` (``runtime.xla: auto`` decides per device and
            precision); without XLA more activations are kept.
        device: ``"gpu"`` or ``"cpu"``, the device the step runs on. It matters to an
            XLA-compiled step under mixed precision, whose CPU backend keeps part of the
            activations in float32 (``XLA_CPU_16BIT_BYTES``).
    """
    if micro_batch <= 0 or accumulation <= 0:
        raise ValueError(
            f"micro_batch={micro_batch} and accumulation={accumulation} must be positive"
        )
    preds = max_predictions or default_predictions(seq_length)
    n = parameter_count(spec)
    # One 16-bit copy of every weight under mixed precision, on both paths: XLA merges the
    # equal casts of a shared layer's applications, and without XLA the encoder makes one
    # cast per weight and forward pass (albertkit.models.precision.SharedWeightCasts).
    casts = 2.0 * n if precision != "float32" else 0.0
    state = {
        "weights": 4.0 * n,
        "weight_casts": casts,
        "gradients": 4.0 * n,
        "accumulator": 4.0 * n if accumulation > 1 else 0.0,
        "optimizer": 8.0 * n,
    }
    per_seq = activation_bytes_per_sequence(
        spec, seq_length, preds, precision, remat, xla, device
    )
    recomputed = per_seq.pop("recomputed_layer", None)
    activations = {k: micro_batch * v for k, v in per_seq.items()}
    # L float32 copies of one layer's weight gradients: each layer application's, kept
    # separately until the end of the backward pass sums them.
    weight_grads = 4.0 * layer_applications(spec) * layer_parameter_count(spec)
    if recomputed is not None:
        # TF's recompute_grad returns the copies. Measured (docs/memory.md), the peak is the
        # larger of them and the recomputed layer's working set, not their sum.
        activations["remat_peak"] = max(weight_grads, micro_batch * recomputed)
    elif not xla:
        # The graph executor's autodiff keeps them too, and by the time they are summed the
        # activations are freed: the peak is the larger of the two. Measured at base seq 128
        # (docs/memory.md): 550 MiB at micro-batch 2 and 568 at 4 in mixed_bfloat16 (6
        # layers at 2: 358), where the activations alone predicted 297-391. Under mixed
        # precision the copies are in the compute dtype, summed in float32 by one kernel
        # (albertkit.models.precision._fanned_cast): 379 MiB at micro-batch 2.
        copies = weight_grads * compute_bytes(precision) / 4
        activations["weight_gradient_copies"] = max(0.0, copies - sum(activations.values()))
    return MemoryEstimate(n, micro_batch, state, activations)


def check_fits(
    estimate: MemoryEstimate, limit_bytes: int, device: str, what: str
) -> MemoryEstimate:
    """Raise a ``ConfigError`` when ``estimate`` exceeds ``limit_bytes``.

    ``device`` names the memory (e.g. ``"host RAM"``, ``"GPU memory (A100 40 GB)"``) and
    ``what`` the settings and where the architecture came from, for the message.
    """
    if estimate.peak_bytes <= limit_bytes:
        return estimate
    state = estimate.state_bytes
    raise ConfigError(
        f"{what}: training needs about {estimate.peak_bytes / GiB:,.1f} GiB per replica "
        f"({estimate.parameters:,} parameters: {state / GiB:,.1f} GiB of weights, gradients "
        f"and optimizer state; {estimate.activation_bytes / GiB:,.1f} GiB of activations at "
        f"micro_batch={estimate.micro_batch}), more than the {limit_bytes / GiB:,.1f} GiB of "
        f"{device} (estimate of albertkit's memory planner, docs/memory.md)"
    )


# --------------------------------------------------------------------------- FLOPs
@dataclass(frozen=True)
class FlopCount:
    """Matmul FLOPs of one training sequence: ``forward`` broken down by part, ``training``."""

    parts: dict[str, float]

    @property
    def forward(self) -> float:
        return float(sum(self.parts.values()))

    @property
    def training(self) -> float:
        return 3.0 * self.forward


def training_flops(spec: AlbertSpec, seq_length: int, max_predictions: int) -> FlopCount:
    """Matmul FLOPs per training sequence, by part.

    FLOP count (2 FLOPs per multiply-accumulate; only matmuls, which are >99% of the work;
    layer norms, softmax, GELU and the optimizer are not counted, as in the MFU convention of
    Chowdhery et al. 2022, appendix B). With T = sequence length, P = masked positions
    (``max_predictions_per_seq``), E/H/F = embedding/hidden/FFN sizes, V = vocabulary and
    L = num_hidden_layers x inner_group_num transformer-layer applications, per sequence:

        embedding projection E->H        2 T E H
        attention Q, K, V                L * 3 * 2 T H^2
        attention scores  Q K^T          L * 2 T^2 H
        attention context P V            L * 2 T^2 H
        attention output projection      L * 2 T H^2
        feed-forward (two matmuls)       L * 2 * 2 T H F
        pooler + SOP classifier          2 H^2 + 2 H 2
        MLM head (P positions only)      2 P H E + 2 P E V

    and a training step costs 3x the forward (the backward computes two matmuls per forward
    matmul: input and weight gradients). ALBERT's shared parameters do not reduce FLOPs.
    The MLM head is counted at the P gathered positions; Hugging Face's PyTorch model computes
    it at all T positions, extra work that is not "model FLOPs" and so not counted for either.
    """
    if seq_length <= 0 or max_predictions <= 0:
        raise ValueError(
            f"seq_length={seq_length} and max_predictions={max_predictions} must be positive"
        )
    t, p = float(seq_length), float(max_predictions)
    e, h, f, v = spec.embedding_size, spec.hidden_size, spec.intermediate_size, spec.vocab_size
    n = layer_applications(spec)
    parts = {
        "embedding_projection": 2 * t * e * h,
        "attention_qkv": n * 3 * 2 * t * h * h,
        "attention_scores": n * 2 * t * t * h,
        "attention_context": n * 2 * t * t * h,
        "attention_output": n * 2 * t * h * h,
        "ffn": n * 2 * 2 * t * h * f,
        "pooler_sop": 2 * h * h + 2 * h * 2,
        "mlm_head": 2 * p * h * e + 2 * p * e * v,
    }
    return FlopCount(parts)
