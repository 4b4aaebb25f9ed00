"""A communication-cost model for data-parallel ALBERT: bytes all-reduced per optimizer
step and the scaling efficiency it predicts (docs/distributed.md explains and tabulates it).

Model (all assumptions are arguments):

* Every optimizer step all-reduces each trainable parameter's gradient once: ``P x 4``
  bytes in float32, ``P x 2`` with fp16 compression. albertkit accumulates micro-batches
  *inside* the compiled step, so this does not grow with accumulation; a loop that
  all-reduces every micro-batch (the reference scripts) moves ``k`` times as much.
* A ring (or NCCL's hierarchical ring/tree) all-reduce over ``n`` nodes sends and
  receives ``2 (n - 1) / n x bytes`` through each node's network link; the links inside a
  node (NVLink) are much faster and ignored.
* Compute per sequence is :func:`albertkit.models.footprint.training_flops` (3x the forward matmul
  FLOPs; ALBERT shares weights across layers, so FLOPs follow the layer count, not the
  parameter count). GPU speed is calibrated on a measured throughput (the reference
  system: 931 sequences/s per 8-V100 node, ALBERT-base, sequence 512).
* The all-reduce starts after the last micro-batch's backward pass (no overlap: the
  gradients come out of one XLA-compiled function), so its time adds to the step time.
"""

from __future__ import annotations

from dataclasses import dataclass

from albertkit.config.sizes import SIZES, AlbertSpec
from albertkit.models.footprint import default_predictions, parameter_count, training_flops

REFERENCE_SEQ_PER_S_PER_NODE = 931.0  # ALBERT-base, seq 512, 8 x V100 (p3dn.24xlarge)
REFERENCE_GPUS_PER_NODE = 8
REFERENCE_SEQ_LENGTH = 512


def gradient_bytes(parameters: int, fp16_compression: bool = False) -> int:
    """Bytes of one all-reduce of every gradient."""
    return parameters * (2 if fp16_compression else 4)


def ring_bytes_per_link(message_bytes: float, nodes: int) -> float:
    """Bytes each node sends (and receives) in a ring all-reduce of ``message_bytes``."""
    return 0.0 if nodes <= 1 else 2.0 * (nodes - 1) / nodes * message_bytes


def link_seconds(link_bytes: float, link_gbps: float, link_efficiency: float = 0.7) -> float:
    """Seconds to move ``link_bytes`` through a ``link_gbps`` Gbit/s link at that efficiency."""
    return link_bytes / (link_gbps * 1e9 / 8 * link_efficiency)


def allreduce_seconds(spec: AlbertSpec, nodes: int, link_gbps: float, *,
                      fp16_compression: bool = False, link_efficiency: float = 0.7) -> float:
    """Inter-node time of one optimizer step's gradient all-reduce (0 on one node)."""
    message = gradient_bytes(parameter_count(spec), fp16_compression)
    return link_seconds(ring_bytes_per_link(message, nodes), link_gbps, link_efficiency)


def training_flops_per_sequence(spec: AlbertSpec, seq_length: int) -> float:
    """Forward + backward matmul FLOPs of one sequence (masked positions: 15%)."""
    return training_flops(spec, seq_length, default_predictions(seq_length)).training


@dataclass(frozen=True)
class ScalingPrediction:
    """What the model predicts for one configuration (times in seconds)."""

    bytes_per_step: int          # all-reduced per optimizer step (message size)
    link_bytes_per_step: float   # through each node's network link per optimizer step
    compute_seconds: float       # one optimizer step's forward/backward on one GPU
    comm_seconds: float          # all-reduce time per optimizer step (inter-node)
    efficiency: float            # throughput(nodes) / (nodes x throughput(1 node))


def predict(spec: AlbertSpec, *, nodes: int, gpus_per_node: int = 8,
            global_batch: int = 4096, micro_batch: int = 16, seq_length: int = 512,
            link_gbps: float = 100.0, link_efficiency: float = 0.7,
            fp16_compression: bool = False, reduce_every_micro_batch: bool = False,
            reference_flops_per_gpu: float | None = None) -> ScalingPrediction:
    """Predicted step time split and scaling efficiency at ``nodes`` nodes.

    Args:
        spec: the architecture (its trainable parameters are what is all-reduced).
        link_gbps: each node's network bandwidth in Gbit/s (p3dn.24xlarge: 100;
            p4d.24xlarge: 400 with EFA).
        link_efficiency: the fraction of ``link_gbps`` an all-reduce achieves.
        reduce_every_micro_batch: model a loop that all-reduces after every micro-batch.
        reference_flops_per_gpu: achieved FLOP/s of one GPU (default: calibrated on the
            reference system's ALBERT-base throughput).
    """
    replicas = nodes * gpus_per_node
    per_gpu = global_batch / replicas
    if per_gpu < micro_batch or per_gpu % micro_batch:
        raise ValueError(f"global_batch={global_batch} over {replicas} GPUs is {per_gpu:g} "
                         f"sequences each: not a multiple of micro_batch={micro_batch}")
    accumulation = int(per_gpu // micro_batch)
    flops_rate = reference_flops_per_gpu or calibrated_flops_per_gpu()
    compute = per_gpu * training_flops_per_sequence(spec, seq_length) / flops_rate
    message = gradient_bytes(parameter_count(spec), fp16_compression)
    reductions = accumulation if reduce_every_micro_batch else 1
    link_bytes = reductions * ring_bytes_per_link(message, nodes)
    comm = link_seconds(link_bytes, link_gbps, link_efficiency)
    # one node does the same per-GPU work with no inter-node traffic
    efficiency = compute / (compute + comm)
    return ScalingPrediction(message * reductions, link_bytes, compute, comm, efficiency)


def calibrated_flops_per_gpu() -> float:
    """Achieved FLOP/s of one V100 in the reference run (ALBERT-base, sequence 512)."""
    base = AlbertSpec(**SIZES["base"])
    per_gpu = REFERENCE_SEQ_PER_S_PER_NODE / REFERENCE_GPUS_PER_NODE
    return per_gpu * training_flops_per_sequence(base, REFERENCE_SEQ_LENGTH)
