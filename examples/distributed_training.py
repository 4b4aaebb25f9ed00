"""Data-parallel training on one machine: two processes, then the same run in one process.

The Python-API version of docs/howto/distributed.md. It starts the config
examples/configs/howto_distributed_tiny.yaml as two cooperating processes on localhost
(TensorFlow multi-worker by default, Horovod with --backend horovod), then runs the same
config in a single process and compares the final weights: with the same global batch
both runs take the same optimizer steps on the same examples, so the weights agree to
float32 round-off.

    python examples/distributed_training.py                      # 2 x tf_multiworker
    python examples/distributed_training.py --backend horovod    # needs scripts/build_horovod.sh
    python examples/distributed_training.py --tiny               # 6 steps

On real machines the processes are started by horovodrun/mpirun, by one command per
machine with TF_CONFIG set, or by SageMaker (docs/sagemaker.md), not by this script.
"""

from __future__ import annotations

import sys

import _shared


def main() -> int:
    p = _shared.parser(__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["tf_multiworker", "horovod"], default="tf_multiworker")
    p.add_argument("--nproc", type=int, default=2, help="number of processes")
    args = p.parse_args()
    _shared.quiet_tensorflow()
    _shared.setup_logging()
    out = _shared.out_dir(args, __file__)

    import numpy as np
    from resume_training import newest_weights

    from albertkit import AlbertTrainer, TrainerConfig
    from albertkit.distributed import cli_command, launch_local

    config = _shared.CONFIGS / "howto_distributed_tiny.yaml"
    common = ["runtime.max_steps=6", "checkpoint.every_steps=6"] if args.tiny else []

    # 1. N processes of `albertkit pretrain` (what you would type on each machine).
    argv = ["pretrain", "--config", str(config), "--distributed", args.backend,
            "--run-dir", str(out / "distributed")]
    for item in common:
        argv += ["--set", item]
    print(f"starting {args.nproc} {args.backend} processes: albertkit {' '.join(argv)}")
    code = launch_local(cli_command(argv), args.nproc, args.backend)
    if code != 0:
        print(f"error: the distributed run exited with code {code}", file=sys.stderr)
        return code

    # 2. The same config in this process, with the same global batch (more accumulation).
    cfg = TrainerConfig.from_yaml(config, [f"run_dir={out / 'single'}",
                                           "distributed.backend=single", *common])
    single = AlbertTrainer(cfg).fit()
    print(f"single process: {single.summary['accumulation_steps']} accumulation steps x "
          f"micro-batch {cfg.runtime.micro_batch_size} = global batch "
          f"{single.summary['global_batch_size']}")

    a, b = newest_weights(out / "distributed"), newest_weights(out / "single")
    diff = max(float(np.max(np.abs(a[k] - b[k]))) for k in a)
    print(f"max |{args.backend} x{args.nproc} - single process| over {len(a)} weight "
          f"tensors: {diff:.2e}")
    if diff > 1e-4:
        print("error: the distributed run differs from the single-process run", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
