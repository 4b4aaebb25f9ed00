"""The built-in demo: a tiny ALBERT pretrained on English prose that ships with Python.

Settings chosen to avoid ALBERT's unigram plateau on CPU (see DESIGN.md and
transformers issues #4727/#5984): a small model, AdamW with warmup and a modest peak rate,
dynamic masking so the small corpus is not memorised.
"""

from __future__ import annotations

from pathlib import Path

from albertkit.config import TrainerConfig

DEMO_STEPS = 1500


def demo_config(run_dir: str | Path = "runs/demo", max_steps: int | None = None,
                overrides: list[str] | None = None) -> TrainerConfig:
    """The demo's full config (``albertkit demo`` runs exactly this)."""
    steps = max_steps or DEMO_STEPS
    raw = {
        "run_dir": str(run_dir),
        "model": {"size": "tiny", "vocab_size": 3000},
        "data": {"kind": "demo", "vocab_size": 3000, "seq_length": 128,
                 "max_predictions_per_seq": 20, "masking": "dynamic"},
        "optimizer": {"kind": "adamw", "learning_rate": 5e-4, "weight_decay": 0.01,
                      "schedule": {"warmup_steps": min(100, steps // 10)}},
        "runtime": {"micro_batch_size": 32, "global_batch_size": 32, "max_steps": steps,
                    "eval_every_steps": max(steps // 4, 1), "eval_steps": 40, "xla": True},
        "checkpoint": {"every_steps": max(steps // 4, 1), "keep_last": 2},
        "logging": {"log_every_steps": 25},
    }
    return TrainerConfig.from_dict(raw, overrides or [], source="albertkit demo")
