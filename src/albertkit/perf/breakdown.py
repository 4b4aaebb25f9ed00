"""Where a training step's time goes: its pieces timed one by one (``--breakdown``)."""

from __future__ import annotations

import statistics
from typing import Any

from albertkit.perf.meter import timed
from albertkit.perf.settings import BenchmarkSettings


def step_breakdown(
    step: Any, batch: dict[str, Any], s: BenchmarkSettings, repeats: int = 3
) -> dict[str, float]:
    """Median seconds of the pieces of one training step, each compiled on its own.

    XLA fuses a whole step into one program, so a profiler shows one op; timing the pieces
    (with the step's XLA setting, forward + backward where marked) shows where time goes:
    ``compute`` (all micro-batches, forward + backward) and ``apply`` (reduce, clip,
    optimizer) are the step's own two functions; the rest are the model's parts.
    """
    import tensorflow as tf

    model, task = step.model, step.task
    encoder = model.albert
    layer = encoder.albert_layer_groups[0].albert_layers[0]
    micro = {k: v[0] for k, v in batch.items()}
    b, t, h = s.micro_batch, s.seq_length, s.spec.hidden_size
    hidden = tf.random.normal((b, t, h))
    bias = tf.zeros((b, 1, 1, t))
    masked = tf.random.normal((b, s.predictions, h))
    jit = step.xla.compute  # the pieces compile as the step's compute does (auto resolved)

    def fwd_bwd(fn, x):
        # gradients for the weights and, for a hidden-state input, for the input too (as
        # inside the network)
        def run(x):
            sources = [v.value for v in model.trainable_variables]
            with tf.GradientTape() as tape:
                if isinstance(x, tf.Tensor):
                    tape.watch(x)
                    sources.append(x)
                out = tf.reduce_sum(tf.cast(fn(x), tf.float32))
            grads = tape.gradient(out, sources)
            return out, [g for g in grads if g is not None]

        return tf.function(run, jit_compile=jit), (x,)

    def loss_only(m):
        return task.loss_and_stats(model, m, training=True)[0]

    def mlm(x):
        logits = model.predictions(x, encoder.embeddings.word_embeddings.embeddings)
        return tf.reduce_logsumexp(tf.cast(logits, tf.float32), -1)

    def embed(m):
        e = encoder.embeddings(m["input_ids"], m["segment_ids"], training=True)
        return encoder.embedding_hidden_mapping_in(e)

    pieces = {
        "forward (loss)": (tf.function(loss_only, jit_compile=jit), (micro,)),
        "forward+backward": fwd_bwd(loss_only, micro),
        "embeddings+projection fwd+bwd": fwd_bwd(embed, micro),
        "one transformer layer fwd+bwd": fwd_bwd(lambda x: layer(x, bias, training=True), hidden),
        "attention block fwd+bwd": fwd_bwd(
            lambda x: layer.attention(x, bias, training=True), hidden
        ),
        "MLM head (gathered) fwd+bwd": fwd_bwd(mlm, masked),
        "MLM head at all T positions fwd+bwd (HF's way)": fwd_bwd(mlm, hidden),
    }
    scale = tf.constant(1.0)
    grads, stats = step._compute(batch, scale)
    pieces["step: compute (XLA part)"] = (step._compute, (batch, scale))
    pieces["step: apply (reduce, clip, optimizer)"] = (lambda: step._apply(grads, stats), ())
    pieces["step: total"] = (step._train, (batch,))

    def sync(out):
        for x in tf.nest.flatten(out):
            if hasattr(x, "numpy"):
                x.numpy()
                break

    result = {}
    for name, (fn, args) in pieces.items():
        sync(fn(*args))  # compile
        result[name] = statistics.median(timed(lambda fn=fn, args=args: sync(fn(*args)), repeats))
    result["layers x num_hidden_layers (fwd+bwd)"] = (
        result["one transformer layer fwd+bwd"] * s.spec.num_hidden_layers * s.spec.inner_group_num
    )
    return result
