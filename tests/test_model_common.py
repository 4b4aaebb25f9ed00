"""Every ALBERT model (the three heads, the bare encoder and the encoder as a Keras layer)
through the checks of ``model_harness.py``, under each dtype policy and remat mode, without
and with XLA.

The checks without XLA run over the whole product. XLA compiles each model (seconds on a
CPU), so by default five cases run, chosen to cover every model, policy and remat mode once;
the rest of the product is marked slow.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from albertkit.models.albert import (
    AlbertEncoder,
    AlbertForPretraining,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
)
from albertkit.models.encoder_layer import AlbertEncoderLayer
from albertkit.models.options import REMAT_MODES
from conftest import make_tiny_config
from model_harness import ModelCase, build_model, check_xla_forward, run_model_test

# The tiny architecture without dropout anywhere, so that training-mode outputs are the
# inference outputs and remat's path can be compared with the plain one.
SPEC = make_tiny_config(model={"classifier_dropout_prob": 0.0}).model.spec
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
B, T, P = 2, 10, 3


def _input_data() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    mask = np.ones((B, T), "int32")
    mask[1, T - 3 :] = 0  # the second sequence is padded
    segments = np.zeros((B, T), "int32")
    segments[:, T // 2 :] = 1
    return {
        "input_ids": (rng.integers(5, SPEC.vocab_size, (B, T)) * mask).astype("int32"),
        "input_mask": mask,
        "segment_ids": segments * mask,
        "masked_lm_positions": rng.integers(0, T // 2, (B, P)).astype("int32"),
    }


def _case(name, model_class, output_shape, **kwargs) -> ModelCase:
    init = {"spec": SPEC, **kwargs.pop("init", {})}
    return ModelCase(name, model_class, init, _input_data(), output_shape, **kwargs)


H, V = SPEC.hidden_size, SPEC.vocab_size
CASES = {
    "pretraining": _case("pretraining", AlbertForPretraining,
                         lambda b, t: {"mlm_logits": (b, P, V), "sop_logits": (b, 2)}),
    "question_answering": _case("question_answering", AlbertForQuestionAnswering,
                                lambda b, t: {"start_logits": (b, t), "end_logits": (b, t)}),
    "sequence_classification": _case("sequence_classification", AlbertForSequenceClassification,
                                     lambda b, t: {"logits": (b, 3)}, init={"num_labels": 3}),
    "encoder": _case("encoder", AlbertEncoder,
                     lambda b, t: {"sequence_output": (b, t, H), "pooled_output": (b, H)},
                     float32_outputs=False),
    # the encoder as a Keras layer for users' models: its inputs are exactly the encoder's
    "encoder_layer": ModelCase(
        "encoder_layer", AlbertEncoderLayer, {"spec": SPEC},
        {k: v for k, v in _input_data().items() if k != "masked_lm_positions"},
        lambda b, t: {"sequence_output": (b, t, H), "pooled_output": (b, H)},
        float32_outputs=False),
}
REGRESSION = _case("sequence_regression", AlbertForSequenceClassification,
                   lambda b, t: {"logits": (b, 1)}, init={"num_labels": 1})

# One XLA case per model, together covering every policy and remat mode.
XLA_DEFAULT = {
    ("pretraining", "float32", "none"),
    ("question_answering", "mixed_bfloat16", "selective"),
    ("sequence_classification", "mixed_float16", "full"),
    ("encoder", "mixed_bfloat16", "full"),
    ("encoder_layer", "float32", "selective"),
}


def _xla_params():
    for combo in itertools.product(CASES, POLICIES, REMAT_MODES):
        marks = () if combo in XLA_DEFAULT else (pytest.mark.slow,)
        yield pytest.param(*combo, marks=marks, id="-".join(combo))


@pytest.mark.parametrize("remat", REMAT_MODES)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", CASES)
def test_model(case, policy, remat):
    run_model_test(CASES[case], policy=policy, remat=remat)


def test_regression_head():
    run_model_test(REGRESSION, policy="float32", remat="none")


@pytest.mark.parametrize("case,policy,remat", _xla_params())
def test_xla_forward_equals_uncompiled(case, policy, remat):
    check_xla_forward(build_model(CASES[case], policy, remat), CASES[case], policy)
