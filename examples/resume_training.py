"""Stop a run half-way, resume it, and check it ends exactly where an uninterrupted run ends.

The Python-API version of docs/howto/resume.md. A checkpoint holds the model, the optimizer,
the step, the loss-scale state, the seed and the data position, so a resumed run continues
with the very batches it would have seen. Here the interruption is ``fit(until_step=N)``;
Ctrl-C, ``kill -TERM`` or a SageMaker spot interruption do the same thing (a checkpoint is
written, then the process exits), and ``kill -9`` loses at most the steps since the last
periodic checkpoint.

    python examples/resume_training.py            # 50 steps on random tokens
    python examples/resume_training.py --tiny     # 8 steps, about a minute on a CPU
"""

from __future__ import annotations

import sys
from pathlib import Path

import _shared


def newest_weights(run_dir: Path) -> dict:
    """The model weights of the newest checkpoint of a run (plain safetensors files)."""
    import numpy as np
    from safetensors.numpy import load_file

    from albertkit.training import CheckpointManager

    ckpt = CheckpointManager(run_dir / "checkpoints").latest()
    tensors = load_file(str(ckpt.path / "model.safetensors"))
    # weights only: dropout layers also keep their random-generator state in the model
    return {k: v for k, v in tensors.items() if np.issubdtype(v.dtype, np.floating)}


def main() -> int:
    args = _shared.parser(__doc__.splitlines()[0]).parse_args()
    _shared.quiet_tensorflow()
    _shared.setup_logging()
    out = _shared.out_dir(args, __file__)

    import numpy as np

    from albertkit import AlbertTrainer, TrainerConfig

    config = _shared.CONFIGS / "pretrain_tiny_synthetic.yaml"
    common = ["runtime.eval_every_steps=0", "logging.progress_bar=false"]
    if args.tiny:
        common += ["runtime.max_steps=8", "checkpoint.every_steps=4", "runtime.xla=false",
                   "data.num_examples=64", "data.eval_examples=16"]
    resumed_cfg = TrainerConfig.from_yaml(config, [f"run_dir={out / 'resumed'}", *common])
    straight_cfg = TrainerConfig.from_yaml(config, [f"run_dir={out / 'straight'}", *common])
    total = resumed_cfg.runtime.max_steps
    half = total // 2

    # 1. Train to half-way and stop, as if the job had been interrupted there.
    first = AlbertTrainer(resumed_cfg).fit(until_step=half)
    print(f"first run:  {first.summary['status']} at step {first.summary['step']}")

    # 2. The same config again: it finds the checkpoint in run_dir and carries on.
    second = AlbertTrainer(resumed_cfg).fit()
    print(f"second run: resumed from step {second.summary['resumed_from_step']}, "
          f"{second.summary['status']} at step {second.summary['step']}")

    # 3. An uninterrupted run of the same config, for comparison.
    AlbertTrainer(straight_cfg).fit()

    a, b = newest_weights(out / "resumed"), newest_weights(out / "straight")
    diff = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
    print(f"max |resumed - uninterrupted| over {len(a)} weight tensors: {diff:.3g}")
    if diff > 1e-5:
        print("error: the resumed run drifted from the uninterrupted one", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
