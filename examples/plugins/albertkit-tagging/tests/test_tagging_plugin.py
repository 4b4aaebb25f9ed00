"""The plugin as albertkit finds it: its parts in the registries, chosen by a config."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from albertkit_tagging.config import TAGGER_SMALL, BioTaggingData, LionConfig
from albertkit_tagging.optimizer import PathExcludingLion

from albertkit.config import TrainerConfig
from albertkit.errors import ConfigError
from albertkit.optimizers import WarmupPolynomialDecay

EXAMPLE = Path(__file__).resolve().parents[1] / "example" / "tagging.yaml"


def test_albertkit_plugins_lists_the_parts_with_their_distribution():
    out = subprocess.run([sys.executable, "-m", "albertkit.cli", "plugins"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    mine = [line.split() for line in out if "albertkit-tagging" in line]
    assert [row[:2] for row in mine] == [["task", "tagging"], ["data", "kind"],
                                         ["optimizer", "lion"], ["size", "tagger-small"]]
    assert any("bio_tagging (trains tagging)" in line for line in out)


def test_the_example_config_selects_the_plugin_s_data_optimizer_and_size():
    cfg = TrainerConfig.from_yaml(EXAMPLE)
    assert cfg.task == "tagging"
    assert isinstance(cfg.data, BioTaggingData) and isinstance(cfg.optimizer, LionConfig)
    spec = cfg.model.spec
    assert {k: getattr(spec, k) for k in TAGGER_SMALL} == TAGGER_SMALL
    optimizer = cfg.optimizer.build(total_steps=400)
    assert isinstance(optimizer, PathExcludingLion)
    assert isinstance(optimizer.learning_rate, WarmupPolynomialDecay) or \
        isinstance(optimizer._learning_rate, WarmupPolynomialDecay)
    # a field the data kind does not have is refused, named
    with pytest.raises(ConfigError, match="data.colour: Extra inputs"):
        TrainerConfig.from_yaml(EXAMPLE, values={"data.colour": "red"})


def test_lion_steps_by_the_sign_and_skips_decay_for_excluded_paths():
    lion = LionConfig(learning_rate=0.1, weight_decay=0.5, schedule={"warmup_steps": 0})
    optimizer = lion.build(total_steps=10)
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    gamma = keras.Variable(np.ones((2,), "float32"), name="gamma")
    # Keras matches excluded names against the short name; the plugin's path rule needs the
    # layer's path: a LayerNorm's gamma lives under ".../layer_norm/gamma" in albertkit.
    layer = keras.layers.LayerNormalization(name="layer_norm")
    layer.build((None, 2))
    optimizer.apply([np.full((2, 2), 3.0, "float32"), np.full((2,), -2.0, "float32")],
                    [kernel, layer.gamma])
    # lr(0) = 0.1 (no warmup): kernel -= lr * (sign(g) + wd * w) = 1 - 0.1 * (1 + 0.5)
    np.testing.assert_allclose(kernel.numpy(), 0.85, rtol=1e-6)
    # gamma: no decay (its path names layer_norm): 1 - 0.1 * sign(-2) = 1.1
    np.testing.assert_allclose(layer.gamma.numpy(), 1.1, rtol=1e-6)
    assert gamma.numpy().tolist() == [1.0, 1.0]
