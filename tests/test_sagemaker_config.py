"""SageMakerConfig validation, the instance table, metric regexes and plan(): all pure."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from albertkit.cli import sagemaker as smcli
from albertkit.config import ConfigError, TrainerConfig
from albertkit.hardware import INSTANCE_TYPES, gpus_per_instance, instance_spec
from albertkit.sagemaker import defaults as smdefaults
from albertkit.sagemaker import plan as smplan
from albertkit.sagemaker import submit as smsubmit
from albertkit.sagemaker.config import SageMakerConfig
from albertkit.tasks import TASK_NAMES
from albertkit.training.run_logger import format_log_line

ROLE = "arn:aws:iam::123456789012:role/albertkit-sagemaker"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest"
FSX = {
    "kind": "fsx_lustre",
    "file_system_id": "fs-0123456789abcdef0",
    "mount_name": "abcdefgh",
    "directory": "/pretrain",
    "path_in_config": "data/pretrain",
}
NET = {"subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]}


def sm(**kw) -> dict:
    return {"role_arn": ROLE, "image_uri": IMAGE, "output_path": "s3://bucket/albertkit", **kw}


def trainer_config(sagemaker: dict | None = None, **sections) -> TrainerConfig:
    raw = {
        "model": {"size": "tiny"},
        "data": {"kind": "synthetic", "seq_length": 64, "max_predictions_per_seq": 10},
        "runtime": {"micro_batch_size": 8, "global_batch_size": 128, "max_steps": 100},
        **sections,
    }
    if sagemaker is not None:
        raw["sagemaker"] = sagemaker
    return TrainerConfig.from_dict(raw)


def refused(match: str, **kw) -> None:
    with pytest.raises((ValueError, ConfigError), match=match):
        SageMakerConfig.model_validate(sm(**kw))


# --------------------------------------------------------------------------- config
def test_defaults_and_derived_values():
    cfg = SageMakerConfig.model_validate(
        sm(instance_type="ml.p4d.24xlarge", instance_count=2, distribution={"kind": "horovod"})
    )
    assert (cfg.processes_per_host, cfg.replicas, cfg.backend) == (8, 16, "horovod")
    mw = SageMakerConfig.model_validate(
        sm(
            instance_type="ml.g5.12xlarge",
            instance_count=3,
            distribution={"kind": "tf_multiworker"},
        )
    )
    assert (mw.processes_per_host, mw.replicas, mw.backend) == (1, 12, "tf_multiworker")
    assert SageMakerConfig().backend == "single" and SageMakerConfig().replicas == 1


def test_invalid_combinations_are_refused_with_clear_messages():
    refused(r"FSx for Lustre.*VPC.*subnets", inputs={"train": FSX})
    refused(
        r"max_wait_seconds=3600 is shorter than max_run_seconds=7200",
        spot=True,
        checkpoint_s3_uri="s3://bucket/ckpt",
        max_run_seconds=7200,
        max_wait_seconds=3600,
    )
    # checked with the job (the section may get output_path from the environment); with
    # output_path set, the run's own prefix is derived (test_spot_jobs_get_the_runs_own_...)
    with pytest.raises(ConfigError, match=r"spot=true needs checkpoint_s3_uri"):
        smsubmit.to_sagemaker(trainer_config(sm()), env_defaults={}, spot=True,
                              max_wait_seconds=10**6, output_path=None)
    refused(r"spot=true needs max_wait_seconds", spot=True, checkpoint_s3_uri="s3://bkt/c")
    refused(r"max_wait_seconds=100 applies only to managed spot", max_wait_seconds=100)
    refused(
        r"warm pools are not available for managed spot",
        spot=True,
        checkpoint_s3_uri="s3://bkt/c",
        max_wait_seconds=10**6,
        keep_alive_seconds=600,
    )
    refused(
        r"ml\.x9\.huge.*not in albertkit's instance table.*processes_per_host",
        instance_type="ml.x9.huge",
        distribution={"kind": "horovod"},
    )
    refused(r"has no GPU", instance_type="ml.m5.xlarge", distribution={"kind": "horovod"})
    refused(
        r"hyperparameters\['optimizer.learning_rate'\]: value of 2501 characters exceeds",
        hyperparameters={"optimizer.learning_rate": "1" * 2501},
    )
    refused(r"needs both", subnets=["subnet-1"])
    refused(r"instance_count=2 needs a distribution", instance_count=2)
    refused(r"looks like a secret", environment={"WANDB_API_TOKEN": "x"})
    refused(r"looks like a credential", hyperparameters={"data.tokenizer": "AKIAABCDEFGHIJKLMNOP"})
    refused(r"reserved", inputs={"code": {"kind": "s3", "uri": "s3://bkt/c"}})
    refused(r"not an S3 URI", output_path="bucket/albertkit")
    refused(r"not an IAM role ARN", role_arn="albertkit-role")
    refused(r"not an FSx id", inputs={"train": {**FSX, "file_system_id": "fsx-1"}}, **NET)
    refused(r"less than or equal to 21600", keep_alive_seconds=21601)
    refused(r"Extra inputs are not permitted", instance_typ="ml.p4d.24xlarge")


def test_secret_names_are_matched_as_whole_words():
    # a name is refused for a secret word between underscores, not for a word that merely
    # starts with one (TOKENIZERS_PARALLELISM is the tokenizers library's thread switch)
    for name in ("HF_TOKEN", "WANDB_API_TOKEN", "DB_PASSWORD", "MY_SECRET", "SSH_PRIVATE_KEY",
                 "GOOGLE_CREDENTIALS", "AWS_SECRET_ACCESS_KEY", "TOKEN"):
        refused(r"looks like a secret", environment={name: "x"})
    allowed = {"TOKENIZERS_PARALLELISM": "false", "NCCL_DEBUG": "WARN", "SECRETARIAT_MODE": "1"}
    assert SageMakerConfig.model_validate(sm(environment=allowed)).environment == allowed


def test_hyperparameter_names_are_dotted_config_paths():
    for key in ("optimizer-learning_rate", "optimizer__learning_rate", "a b", ".runtime", "x."):
        refused(r"is not a dotted config path", hyperparameters={key: 1})
    ok = SageMakerConfig.model_validate(sm(hyperparameters={"runtime.max_steps": 5}))
    assert ok.hyperparameters == {"runtime.max_steps": 5}


def test_valid_combinations_pass():
    SageMakerConfig.model_validate(sm(inputs={"train": FSX}, **NET))
    SageMakerConfig.model_validate(
        sm(spot=True, checkpoint_s3_uri="s3://bkt/c", max_run_seconds=3600, max_wait_seconds=3600)
    )
    SageMakerConfig.model_validate(
        sm(instance_type="ml.x9.huge", distribution={"kind": "horovod", "processes_per_host": 4})
    )


def test_spot_with_multiworker_on_several_gpus_is_refused_with_the_reason():
    """A spot job resumes after each interruption; tf_multiworker with several GPUs per
    worker cannot resume at its place in the data (docs/distributed.md, Known limits)."""
    spot = {"spot": True, "checkpoint_s3_uri": "s3://bkt/c", "max_wait_seconds": 10**6}
    multiworker = {"kind": "tf_multiworker"}
    refused(
        r"spot=true with distribution\.kind=tf_multiworker on ml\.p4d\.24xlarge \(8 GPUs per "
        r"instance\): after an interruption such a job does not resume at its place in the "
        r"training data .*; use distribution \{kind: horovod\}",
        instance_type="ml.p4d.24xlarge", instance_count=2, distribution=multiworker, **spot,
    )
    refused(r"ml\.g5\.12xlarge \(4 GPUs", instance_type="ml.g5.12xlarge",
            distribution=multiworker, **spot)
    # the same job through to_sagemaker (the distribution from distributed.backend): one line
    cfg = trainer_config(sm(instance_type="ml.g6.48xlarge", **spot),
                         distributed={"backend": "tf_multiworker"})
    with pytest.raises(ConfigError, match=r"sagemaker\.<root>: spot=true with distribution"):
        smsubmit.to_sagemaker(cfg, instance_count=2)
    # one GPU (or none) per worker resumes exactly; Horovod always does; without spot the
    # job is not restarted by SageMaker
    for ok in (
        sm(instance_type="ml.g5.2xlarge", instance_count=4, distribution=multiworker, **spot),
        sm(instance_type="ml.m5.xlarge", instance_count=2, distribution=multiworker, **spot),
        sm(instance_type="ml.p4d.24xlarge", instance_count=2, distribution={"kind": "horovod"},
           **spot),
        sm(instance_type="ml.p4d.24xlarge", instance_count=2, distribution=multiworker),
    ):
        SageMakerConfig.model_validate(ok)


def test_fsx_directory_path():
    spec = SageMakerConfig.model_validate(sm(inputs={"train": FSX}, **NET)).inputs["train"]
    assert spec.directory_path == "/abcdefgh/pretrain"
    root = {**FSX, "directory": "/"}
    assert (
        SageMakerConfig.model_validate(sm(inputs={"t": root}, **NET)).inputs["t"].directory_path
        == "/abcdefgh"
    )


def test_instance_table():
    assert gpus_per_instance("ml.p3dn.24xlarge") == 8
    assert gpus_per_instance("ml.g5.xlarge") == 1 and gpus_per_instance("ml.m5.xlarge") == 0
    assert instance_spec("ml.p3.16xlarge").bf16 is False and instance_spec("ml.p5.48xlarge").bf16
    assert instance_spec("ml.unknown") is None
    with pytest.raises(KeyError, match="not in albertkit's instance table"):
        gpus_per_instance("ml.unknown")
    for name, spec in INSTANCE_TYPES.items():
        assert name.startswith("ml.") and spec.vcpus > 0
        assert (spec.gpus == 0) == (spec.gpu is None)


def test_env_defaults():
    env = {
        "ALBERTKIT_SM_ROLE_ARN": ROLE,
        "ALBERTKIT_SM_SUBNETS": "subnet-a, subnet-b",
        "ALBERTKIT_SM_INSTANCE_COUNT": "4",
        "ALBERTKIT_SM_IMAGE_URI": "",
        "UNRELATED": "x",
    }
    assert smdefaults.sagemaker_defaults_from_env(env) == {
        "role_arn": ROLE,
        "subnets": ["subnet-a", "subnet-b"],
        "instance_count": 4,
    }
    bad = smdefaults.sagemaker_defaults_from_env({"ALBERTKIT_SM_INSTANCE_COUNT": "four"})
    with pytest.raises(ConfigError, match=r"sagemaker.instance_count.*'four'"):
        SageMakerConfig.from_trainer_config(trainer_config(bad))


# --------------------------------------------------------------------------- metrics
def test_metric_regexes_match_real_log_lines():
    train = format_log_line(
        120,
        {
            "loss": 3.1415,
            "mlm_loss": 2.5,
            "mlm_accuracy": 0.1234,
            "sop_loss": 0.6415,
            "sop_accuracy": 0.61,
            "grad_norm": 1.5,
            "learning_rate": 1.2e-05,
            "seq_per_s": 12345.678,
        },
    )
    evaluation = format_log_line(
        120,
        {
            "loss": 2.9,
            "mlm_accuracy": 0.15,
            "sop_accuracy": 0.64,
            "mlm_accuracy_over_baseline": 1.4,
        },
        kind="eval",
    )
    # what CloudWatch receives: the console logger's timestamp, and MPI's rank tag
    lines = [f"12:00:00 INFO {train}", f"[1,0]<stderr>:12:00:01 INFO {evaluation}"]
    found: dict[str, float] = {}
    for definition in smplan.metric_definitions("pretraining"):
        hits = [m for line in lines if (m := re.search(definition["Regex"], line))]
        assert len(hits) == 1, (definition, lines)  # train regexes never match eval lines
        found[definition["Name"]] = float(hits[0].group(1))
    assert found["train:loss"] == pytest.approx(3.1415)
    assert found["train:mlm_accuracy"] == pytest.approx(0.1234)  # not sop_ or mlm_loss
    assert found["train:learning_rate"] == pytest.approx(1.2e-05)
    assert found["train:seq_per_s"] == pytest.approx(12345.7, rel=1e-5)
    assert found["eval:loss"] == pytest.approx(2.9) and found["eval:sop_accuracy"] == 0.64
    assert found["eval:mlm_accuracy"] == pytest.approx(0.15)  # not ..._over_baseline


def test_squad_and_classification_metrics():
    line = format_log_line(
        300, {"exact": 75.2, "f1": 78.4, "HasAns_f1": 80.0, "best_f1": 79.0}, "eval"
    )
    defs = {d["Name"]: d["Regex"] for d in smplan.metric_definitions("squad")}
    assert float(re.search(defs["eval:f1"], line).group(1)) == pytest.approx(78.4)
    assert float(re.search(defs["eval:best_f1"], line).group(1)) == pytest.approx(79.0)
    assert re.search(defs["eval:exact_match"], line) is None
    cls = {d["Name"]: d["Regex"] for d in smplan.metric_definitions("classification")}
    line = format_log_line(10, {"loss": 0.5, "accuracy": 0.875}, "eval")
    assert float(re.search(cls["eval:accuracy"], line).group(1)) == 0.875
    for task in TASK_NAMES:
        defs = smplan.metric_definitions(task)
        assert len(defs) <= 40 and all(len(d["Regex"]) <= 500 for d in defs)


# --------------------------------------------------------------------------- job checks
def test_job_level_checks_before_any_call():
    with pytest.raises(ConfigError) as e:
        smsubmit.to_sagemaker(trainer_config({}))
    assert "sagemaker.role_arn is not set" in str(e.value)
    assert "ALBERTKIT_SM_IMAGE_URI" in str(e.value)
    cfg = trainer_config(sm())
    with pytest.raises(ConfigError, match=r"'runtime.max_step' is not a field"):
        smsubmit.to_sagemaker(cfg, hyperparameters={"runtime.max_step": 5})
    with pytest.raises(ConfigError, match=r"'runtime' is a section"):
        smsubmit.to_sagemaker(cfg, hyperparameters={"runtime": 5})
    with pytest.raises(ConfigError, match=r"runtime.max_steps"):
        smsubmit.to_sagemaker(cfg, hyperparameters={"runtime.max_steps": -3})
    # 128 sequences over 2 hosts x 8 GPUs x micro batch 8 = 128: ok; over 3 hosts: not
    smsubmit.to_sagemaker(cfg, instance_count=2, distribution={"kind": "horovod"})
    with pytest.raises(ConfigError, match=r"replicas=24.*instance_count=3 x 8"):
        smsubmit.to_sagemaker(cfg, instance_count=3, distribution={"kind": "horovod"})
    with pytest.raises(ConfigError, match=r"micro_batch_size=16 x replicas=16"):  # a swept value
        smsubmit.to_sagemaker(
            cfg,
            instance_count=2,
            distribution={"kind": "horovod"},
            hyperparameters={"runtime.micro_batch_size": 16},
        )
    bf16 = trainer_config(
        sm(),
        runtime={"precision": "mixed_bfloat16", "micro_batch_size": 8, "global_batch_size": 64},
    )
    with pytest.raises(ConfigError, match=r"V100 GPUs without native bfloat16"):
        smsubmit.to_sagemaker(bf16, instance_type="ml.p3.16xlarge", distribution={"kind": "horovod"})
    with pytest.raises(
        ConfigError, match=r"invalid SageMaker settings:\n  sagemaker.<root>: .*FSx"
    ):
        smsubmit.to_sagemaker(cfg, inputs={"train": FSX})


def test_local_data_paths_must_come_from_a_channel():
    tf = {
        "kind": "tfrecord",
        "train_files": ["data/pretrain/train-*.tfrecord"],
        "eval_files": ["s3://bucket/eval/eval-0.tfrecord"],
        "seq_length": 64,
        "max_predictions_per_seq": 10,
    }
    cfg = trainer_config(sm(), data=tf)
    with pytest.raises(ConfigError) as e:
        smsubmit.to_sagemaker(cfg)
    assert "data.train_files[0]='data/pretrain/train-*.tfrecord' is not provided" in str(e.value)
    assert "data.eval_files[0]='s3://bucket/eval/eval-0.tfrecord'" in str(e.value)
    smsubmit.to_sagemaker(
        cfg, inputs={"train": FSX, "eval": {"kind": "s3", "uri": "s3://bucket/eval/"}}, **NET
    )


# --------------------------------------------------------------------------- plan
def test_plan_field_by_field():
    cfg = trainer_config(
        sm(
            instance_type="ml.p4d.24xlarge",
            instance_count=2,
            distribution={"kind": "horovod"},
            volume_size_gb=200,
            max_run_seconds=7200,
            spot=True,
            max_wait_seconds=14400,
            checkpoint_s3_uri="s3://bucket/ckpt/run-1",
            tensorboard_s3_uri="s3://bucket/tb",
            inputs={
                "train": FSX,
                "eval": {"kind": "s3", "uri": "s3://bucket/eval", "input_mode": "FastFile"},
            },
            tags={"project": "albertkit"},
            environment={"NCCL_DEBUG": "WARN"},
            hyperparameters={"optimizer.learning_rate": 0.002, "runtime.xla": False},
            base_job_name="albert_base",
            **NET,
        )
    )
    plan = smsubmit.to_sagemaker(cfg).plan(job_name="albert-base-20250101000000")
    prefix = "s3://bucket/albertkit/albert_base/albert-base-20250101000000/input"
    assert plan["TrainingJobName"] == "albert-base-20250101000000"
    assert plan["HyperParameters"] == {
        "config": "albertkit_config.json",
        # dots travel as "__": the SDK driver exports each name as SM_HP_<NAME>
        "optimizer__learning_rate": "0.002",
        "runtime__xla": "false",
    }
    algo = plan["AlgorithmSpecification"]
    assert algo["TrainingImage"] == IMAGE and algo["TrainingInputMode"] == "File"
    assert algo["MetricDefinitions"] == smplan.metric_definitions("pretraining")
    assert algo["ContainerEntrypoint"] == ["/bin/bash"]
    assert plan["RoleArn"] == ROLE
    assert plan["InputDataConfig"] == [
        {
            "ChannelName": "train",
            "DataSource": {
                "FileSystemDataSource": {
                    "FileSystemId": "fs-0123456789abcdef0",
                    "FileSystemAccessMode": "ro",
                    "FileSystemType": "FSxLustre",
                    "DirectoryPath": "/abcdefgh/pretrain",
                }
            },
            "InputMode": "File",
        },
        {
            "ChannelName": "eval",
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": "s3://bucket/eval",
                    "S3DataDistributionType": "FullyReplicated",
                }
            },
            "InputMode": "FastFile",
        },
        *[
            {
                "ChannelName": name,
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": f"{prefix}/{name}",
                        "S3DataDistributionType": "FullyReplicated",
                    }
                },
                "InputMode": "File",
            }
            for name in ("code", "sm_drivers")
        ],
    ]
    assert plan["OutputDataConfig"] == {
        "S3OutputPath": "s3://bucket/albertkit",
        "CompressionType": "GZIP",
    }
    assert plan["ResourceConfig"] == {
        "InstanceType": "ml.p4d.24xlarge",
        "InstanceCount": 2,
        "VolumeSizeInGB": 200,
    }
    assert plan["VpcConfig"] == {
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
        "Subnets": ["subnet-0123456789abcdef0"],
    }
    assert plan["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 14400}
    assert plan["Tags"] == [{"Key": "project", "Value": "albertkit"}]
    assert plan["EnableManagedSpotTraining"] is True
    assert plan["CheckpointConfig"] == {
        "S3Uri": "s3://bucket/ckpt/run-1",
        "LocalPath": "/opt/ml/checkpoints",
    }
    assert plan["TensorBoardOutputConfig"] == {
        "S3OutputPath": "s3://bucket/tb",
        "LocalPath": "/opt/ml/checkpoints/tensorboard",
    }
    assert plan["Environment"] == {"NCCL_DEBUG": "WARN"}
    assert "KeepAlivePeriodInSeconds" not in plan["ResourceConfig"]
    json.dumps(plan)  # plain data


def test_plan_without_optional_parts_and_keep_alive():
    plan = smsubmit.to_sagemaker(trainer_config(sm()), keep_alive_seconds=900).plan()
    assert re.fullmatch(r"albertkit-\d{14}", plan["TrainingJobName"])
    assert plan["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 900
    for absent in (
        "VpcConfig",
        "Tags",
        "EnableManagedSpotTraining",
        "CheckpointConfig",
        "TensorBoardOutputConfig",
        "Environment",
    ):
        assert absent not in plan
    assert plan["StoppingCondition"] == {"MaxRuntimeInSeconds": 2 * 24 * 3600}


def test_transported_config_and_staged_source(tmp_path):
    cfg = trainer_config(sm(), distributed={"backend": "single"})
    job = smsubmit.to_sagemaker(cfg, instance_count=2, distribution={"kind": "tf_multiworker"})
    src = job.stage_source(tmp_path / "src")
    shipped = TrainerConfig.from_json(src / smplan.CONFIG_FILE)
    assert shipped.distributed.backend == "tf_multiworker"
    assert SageMakerConfig.from_trainer_config(shipped).instance_count == 2
    assert shipped.model_dump(exclude={"distributed"}) == cfg.model_dump(exclude={"distributed"})
    assert (src / smplan.ENTRY_SCRIPT).read_text().startswith('"""SageMaker entry script')
    assert (src / "albertkit" / "sagemaker" / "entrypoint.py").is_file()
    assert not list(src.rglob("__pycache__"))
    text = (src / smplan.CONFIG_FILE).read_text()
    assert "AKIA" not in text and "secret" not in text.lower()


def test_to_sagemaker_overrides_keep_config_values():
    cfg = trainer_config(sm(instance_type="ml.g5.xlarge", tags={"team": "nlp"}))
    job = smsubmit.to_sagemaker(cfg, instance_count=1, volume_size_gb=50)
    assert job.sagemaker_config.instance_type == "ml.g5.xlarge"
    assert (
        job.sagemaker_config.tags == {"team": "nlp"} and job.sagemaker_config.volume_size_gb == 50
    )


# --------------------------------------------------------------------------- CLI
def test_launch_dry_run(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(
        "model: {size: tiny}\n"
        "data: {kind: synthetic, seq_length: 64, max_predictions_per_seq: 10}\n"
        "runtime: {micro_batch_size: 8, global_batch_size: 16}\n"
        "sagemaker:\n  instance_type: ml.g5.xlarge\n  output_path: s3://from-yaml/x\n"
    )
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    env = smdefaults.sagemaker_defaults_from_env(
        {
            "ALBERTKIT_SM_ROLE_ARN": ROLE,
            "ALBERTKIT_SM_IMAGE_URI": IMAGE,
            "ALBERTKIT_SM_OUTPUT_PATH": "s3://from-env/x",
        }
    )
    smcli.add_launch_parser(sub, env)
    args = parser.parse_args(
        ["launch", "--config", str(path), "--dry-run", "--set", "sagemaker.volume_size_gb=77"]
    )
    assert args.func(args) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["RoleArn"] == ROLE and plan["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert plan["OutputDataConfig"]["S3OutputPath"] == "s3://from-yaml/x"  # file beats env
    assert plan["ResourceConfig"]["VolumeSizeInGB"] == 77  # --set beats file
    args = parser.parse_args(
        ["launch", "--config", str(path), "--dry-run", "--set", "sagemaker.instance_count=2"]
    )
    assert args.func(args) == 2
    assert "instance_count=2 needs a distribution" in capsys.readouterr().err


def test_cli_validates_the_sagemaker_section_where_it_is_used(tmp_path, capsys):
    from albertkit.cli import main

    path = tmp_path / "job.yaml"
    path.write_text(
        "model: {size: tiny}\n"
        "data: {kind: synthetic, seq_length: 64, max_predictions_per_seq: 10}\n"
        "runtime: {micro_batch_size: 8, global_batch_size: 16, max_steps: 1}\n"
        f"run_dir: {tmp_path / 'run'}\n"
        "sagemaker:\n  instance_count: four\n"
    )
    assert main(["config", "show", "-c", str(path)]) == 2
    assert f"{path}: invalid configuration: sagemaker.instance_count" in capsys.readouterr().err
    assert main(["launch", "--config", str(path), "--dry-run"]) == 2
    assert "  sagemaker.instance_count: Input should be a valid integer" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing ran
    # the config loader itself keeps the section raw; to_sagemaker names the field too
    cfg = TrainerConfig.from_yaml(path)
    with pytest.raises(ConfigError, match=r"sagemaker\.instance_count.*'four'"):
        smsubmit.to_sagemaker(cfg)
    # a local run's config is loaded without entering albertkit.sagemaker
    check = ("import argparse, sys; from albertkit.cli.train import load_config; "
             f"cfg = load_config(argparse.Namespace(config={str(path)!r}, overrides=[])); "
             "assert cfg.task == 'pretraining'; "
             "assert not [m for m in sys.modules if m.startswith('albertkit.sagemaker')]")
    subprocess.run([sys.executable, "-c", check], check=True)


def test_shipped_sagemaker_examples_validate():
    from pathlib import Path

    configs = sorted((Path(__file__).parents[1] / "examples" / "configs").glob("sagemaker_*.yaml"))
    assert configs, "no examples/configs/sagemaker_*.yaml"
    for path in configs:
        cfg = smdefaults.load_launch_config(
            path, [], {"bucket": "bkt", "role_arn": ROLE, "image_uri": IMAGE, "output_path": "s3://bkt/p", **NET}
        )
        plan = smsubmit.to_sagemaker(cfg).plan()
        assert plan["ResourceConfig"]["InstanceType"].startswith("ml."), path


def test_example_buckets_come_from_the_environment():
    # the shipped examples name no bucket: ALBERTKIT_SM_BUCKET (the stack's) fills s3://{bucket}/
    root = Path(__file__).resolve().parents[1] / "examples" / "configs"
    env = {
        "ALBERTKIT_SM_BUCKET": "my-team-bucket",
        "ALBERTKIT_SM_ROLE_ARN": ROLE,
        "ALBERTKIT_SM_IMAGE_URI": IMAGE,
        "ALBERTKIT_SM_OUTPUT_PATH": "s3://my-team-bucket/output",
        "ALBERTKIT_SM_SUBNETS": "subnet-0123456789abcdef0",
        "ALBERTKIT_SM_SECURITY_GROUP_IDS": "sg-0123456789abcdef0",
    }
    defaults = smdefaults.sagemaker_defaults_from_env(env)
    squad = smdefaults.load_launch_config(root / "sagemaker_finetune_squad.yaml", [], defaults)
    squad_sm = SageMakerConfig.from_trainer_config(squad)
    uris = [i.uri for i in squad_sm.inputs.values() if i.kind == "s3"]
    assert uris and all(u.startswith("s3://my-team-bucket/") for u in uris)
    pretrain = smdefaults.load_launch_config(root / "sagemaker_pretrain_base.yaml", [], defaults)
    pretrain_sm = SageMakerConfig.from_trainer_config(pretrain)
    # no fixed checkpoint prefix: the spot job gets its run's own, under the output path
    assert pretrain_sm.checkpoint_s3_uri is None
    checkpoints = smsubmit.to_sagemaker(pretrain, env_defaults={}).plan()["CheckpointConfig"]
    assert re.fullmatch(r"s3://my-team-bucket/output/checkpoints/albert-base-pretrain-[0-9a-f]{8}",
                        checkpoints["S3Uri"])
    assert pretrain_sm.tensorboard_s3_uri.startswith("s3://my-team-bucket/tensorboard/")
    for path in (root / "sagemaker_finetune_squad.yaml", root / "sagemaker_pretrain_base.yaml"):
        assert "s3://{bucket}/" in path.read_text()
        assert "123456789012-us-east-1" not in path.read_text()
    # without the variable the error names the fields and the variable to set
    del env["ALBERTKIT_SM_BUCKET"]
    with pytest.raises(ConfigError, match=r"tensorboard_s3_uri.*\{bucket\}.*ALBERTKIT_SM_BUCKET"):
        SageMakerConfig.from_trainer_config(smdefaults.load_launch_config(
            root / "sagemaker_pretrain_base.yaml", [], smdefaults.sagemaker_defaults_from_env(env)
        ))
    refused(r"bucket='s3://x' is not an S3 bucket name", bucket="s3://x")


def test_every_sagemaker_field_has_a_description():
    """Every field of every model in albertkit.sagemaker.config, nested ones included (they
    become the sagemaker rows of docs/configuration.md)."""
    import inspect

    from pydantic import BaseModel

    from albertkit.sagemaker import config as smconfig

    models = [
        obj
        for obj in vars(smconfig).values()
        if inspect.isclass(obj)
        and issubclass(obj, BaseModel)
        and obj.__module__ == smconfig.__name__
    ]
    assert {m.__name__ for m in models} >= {
        "SageMakerConfig", "S3Input", "FSxLustreInput", "LocalInput",
        "HorovodDistribution", "MultiWorkerDistribution",
    }
    missing = [
        f"{m.__name__}.{name}"
        for m in models
        for name, info in m.model_fields.items()
        if not (info.description or "").strip()
    ]
    assert not missing, f"add description= to these fields: {missing}"


# --------------------------------------------------------------------------- one resolver
def test_python_and_cli_resolve_the_same_settings(tmp_path, monkeypatch, capsys):
    """overrides > the config's sagemaker section > ALBERTKIT_SM_* > built-in defaults, the
    same from Python (which reads os.environ itself) as from albertkit launch."""
    from albertkit import AlbertTrainer
    from albertkit.cli import main

    path = tmp_path / "job.yaml"
    path.write_text(
        "model: {size: tiny}\n"
        "data: {kind: synthetic, seq_length: 64, max_predictions_per_seq: 10}\n"
        "runtime: {micro_batch_size: 8, global_batch_size: 16}\n"
        "sagemaker:\n  instance_type: ml.g5.xlarge\n  volume_size_gb: 50\n"
        "  tensorboard_s3_uri: s3://{bucket}/tensorboard/run-1\n"
    )
    env = {
        "ALBERTKIT_SM_ROLE_ARN": ROLE,
        "ALBERTKIT_SM_IMAGE_URI": IMAGE,
        "ALBERTKIT_SM_OUTPUT_PATH": "s3://env-bucket/jobs",
        "ALBERTKIT_SM_BUCKET": "env-bucket",
        "ALBERTKIT_SM_INSTANCE_TYPE": "ml.g5.2xlarge",  # the file's section wins
    }
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    python = AlbertTrainer(TrainerConfig.from_yaml(path)).to_sagemaker(volume_size_gb=77)
    python_plan = python.plan(job_name="albertkit-1")
    assert main(["launch", "--config", str(path), "--dry-run",
                 "--set", "sagemaker.volume_size_gb=77"]) == 0
    cli_plan = json.loads(capsys.readouterr().out)
    for key in ("RoleArn", "ResourceConfig", "OutputDataConfig", "TensorBoardOutputConfig",
                "StoppingCondition", "HyperParameters"):
        assert python_plan[key] == cli_plan[key], key
    assert python_plan["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert cli_plan["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert python_plan["RoleArn"] == ROLE  # environment
    assert python_plan["ResourceConfig"] == {  # file over environment, override over file
        "InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 77}
    assert python_plan["OutputDataConfig"]["S3OutputPath"] == "s3://env-bucket/jobs"
    assert python_plan["TensorBoardOutputConfig"]["S3OutputPath"] == (
        "s3://env-bucket/tensorboard/run-1")  # {bucket} from the environment
    assert python_plan["StoppingCondition"] == {"MaxRuntimeInSeconds": 2 * 24 * 3600}  # built-in
    # an explicit env_defaults replaces the environment ({} ignores it)
    with pytest.raises(ConfigError, match=r"bucket is not set"):
        smsubmit.to_sagemaker(TrainerConfig.from_yaml(path), env_defaults={})
    # and the resolved section is what `albertkit config show` validates
    shown = smdefaults.load_launch_config(path, ["sagemaker.volume_size_gb=77"],
                                          smdefaults.sagemaker_defaults_from_env(env))
    assert SageMakerConfig.from_trainer_config(shown) == python.sagemaker_config


# --------------------------------------------------------------------------- one run, one prefix
def test_spot_jobs_get_the_runs_own_checkpoint_prefix():
    spot = {"spot": True, "max_wait_seconds": 10**6}

    def uri(cfg, **overrides):
        request = smsubmit.to_sagemaker(cfg, env_defaults={}, **overrides).plan(job_name="j")
        return request.get("CheckpointConfig", {}).get("S3Uri")

    base = trainer_config(sm())
    first = uri(base, **spot)
    assert re.fullmatch(r"s3://bucket/albertkit/checkpoints/albertkit-[0-9a-f]{8}", first), first
    # the same run submitted again (a later job, another process) finds its checkpoints
    assert uri(trainer_config(sm()), **spot) == first
    # changes a resume accepts keep the prefix: a longer run, other cadences
    longer = trainer_config(sm(), runtime={"micro_batch_size": 8, "global_batch_size": 128,
                                           "max_steps": 500, "eval_every_steps": 50},
                            checkpoint={"every_steps": 10})
    assert uri(longer, **spot) == first
    # a variant gets its own: another learning rate (in the config or as a hyperparameter),
    # another replica count, another job name
    other_lr = trainer_config(sm(), optimizer={"learning_rate": 0.002})
    assert uri(other_lr, **spot) != first
    assert uri(base, hyperparameters={"optimizer.learning_rate": 0.002}, **spot) == uri(
        other_lr, **spot)
    more_hosts = {"instance_type": "ml.g5.12xlarge", "distribution": {"kind": "horovod"}}
    assert uri(base, instance_count=2, **more_hosts, **spot) != uri(
        base, instance_count=4, **more_hosts, **spot)
    assert uri(base, base_job_name="albert-lr2", **spot).startswith(
        "s3://bucket/albertkit/checkpoints/albert-lr2-")
    # an explicit prefix is kept; an on-demand job syncs none unless asked ('auto')
    assert uri(base, checkpoint_s3_uri="s3://bucket/mine", **spot) == "s3://bucket/mine"
    assert uri(base) is None
    assert uri(base, checkpoint_s3_uri="auto") == first
    # what the job ships is the resolved prefix
    job = smsubmit.to_sagemaker(base, env_defaults={}, **spot)
    assert job.sagemaker_config.checkpoint_s3_uri == first
    refused(r"checkpoint_s3_uri='s3:/x' is not an S3 URI", checkpoint_s3_uri="s3:/x")
