"""Plan a SageMaker training job from a config, without AWS: the exact CreateTrainingJob request.

The Python-API version of the planning step in docs/howto/sagemaker.md (the full walk-through,
stack and image included, is docs/sagemaker.md). Nothing here calls AWS or needs
credentials: ``to_sagemaker()`` validates the config and the SageMaker settings together,
and ``plan()`` builds the request that ``fit()`` would submit.

    python examples/sagemaker_plan.py                           # reference recipe, 8 x p4d
    python examples/sagemaker_plan.py --config examples/configs/sagemaker_finetune_squad.yaml
    python examples/sagemaker_plan.py --instance-count 4 --tiny

The values that come from your AWS account (role, image, output bucket, subnet, security
group) are placeholders here; for a real job export ALBERTKIT_SM_ROLE_ARN and friends from
the infra stack's outputs (docs/sagemaker.md) and run `albertkit launch`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import _shared

# What `albertkit launch` reads from ALBERTKIT_SM_* variables: placeholders for planning.
PLACEHOLDERS = {
    "role_arn": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
    "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:example",
    "bucket": "albertkit-123456789012-us-east-1",
    "output_path": "s3://albertkit-123456789012-us-east-1/output",
    "subnets": ["subnet-0123456789abcdef0"],
    "security_group_ids": ["sg-0123456789abcdef0"],
}


def main() -> int:
    p = _shared.parser(__doc__.splitlines()[0])
    p.add_argument("--config", type=Path, default=_shared.CONFIGS / "sagemaker_pretrain_base.yaml",
                   help="YAML config with a sagemaker: section")
    p.add_argument("--instance-count", type=int, default=None)
    args = p.parse_args()
    out = _shared.out_dir(args, __file__)

    from albertkit import AlbertTrainer, TrainerConfig

    cfg = TrainerConfig.from_yaml(args.config)
    overrides = {} if args.instance_count is None else {"instance_count": args.instance_count}
    # The placeholders stand in for the ALBERTKIT_SM_* environment: the config file's
    # sagemaker: section and the overrides win over them, as with `albertkit launch`.
    job = AlbertTrainer(cfg).to_sagemaker(env_defaults=PLACEHOLDERS, **overrides)  # checked here
    request = job.plan(job_name="albertkit-example-plan")

    rc = request["ResourceConfig"]
    print(f"job {request['TrainingJobName']}: {rc['InstanceCount']} x {rc['InstanceType']}, "
          f"image {request['AlgorithmSpecification']['TrainingImage']}")
    for channel in request.get("InputDataConfig", []):
        source = channel["DataSource"]
        kind = next(iter(source))
        where = source[kind].get("S3Uri") or source[kind].get("FileSystemId")
        print(f"  input channel {channel['ChannelName']!r}: {kind} {where}")
    if "CheckpointConfig" in request:
        print(f"  checkpoints: {request['CheckpointConfig']['S3Uri']}")
    print(f"  spot: {request.get('EnableManagedSpotTraining', False)}, "
          f"max run {request['StoppingCondition']['MaxRuntimeInSeconds']} s")
    print(f"  hyperparameters: {request.get('HyperParameters')}")
    print(f"  metrics: {[m['Name'] for m in request['AlgorithmSpecification'].get('MetricDefinitions', [])]}")
    path = out / "create_training_job.json"
    path.write_text(json.dumps(request, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"full request: {path}")
    print("submit for real: job.fit()  (or: albertkit launch --config CONFIG)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
