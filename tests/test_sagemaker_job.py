"""to_sagemaker(...).fit() through the real SageMaker SDK v3 and boto3, against moto.

Nothing leaves the machine: moto answers every AWS call in-process, credentials are fake,
SDK telemetry is opted out and any socket connection attempt fails the test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("sagemaker.train")
boto3 = pytest.importorskip("boto3")
moto = pytest.importorskip("moto")

import test_sagemaker_plugins as smplugins  # noqa: E402
from albertkit.config import ConfigError, TrainerConfig  # noqa: E402
from albertkit.sagemaker import submit as smsubmit  # noqa: E402
from albertkit.sagemaker.shipping import PLUGIN_WHEEL_DIR  # noqa: E402
from conftest import refuse_network  # noqa: E402
from test_sagemaker_plugins import DIST, MODULE, SRC, WHEEL, rows_config  # noqa: E402

fresh_registry, plugin = smplugins.fresh_registry, smplugins.plugin  # fixtures

REGION = "us-east-1"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest"
BUCKET = "albertkit-test-bucket"
NET = {"subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]}
FSX = {
    "kind": "fsx_lustre",
    "file_system_id": "fs-0123456789abcdef0",
    "mount_name": "abcdefgh",
    "directory": "/pretrain",
    "path_in_config": "data/pretrain",
}


@pytest.fixture
def aws(monkeypatch, tmp_path):
    """Fake credentials and region, SDK config isolated, network forbidden, moto running."""
    for var in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ENDPOINT_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    sdk_config = tmp_path / "sagemaker-config.yaml"
    sdk_config.write_text(
        "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"
    )
    for var in [v for v in os.environ if v.startswith("ALBERTKIT_SM_")]:
        monkeypatch.delenv(var)  # to_sagemaker reads them: only a test's own count
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("SAGEMAKER_VALIDATE_ROLE", "false")
    monkeypatch.setenv("SAGEMAKER_USER_CONFIG_OVERRIDE", str(sdk_config))
    monkeypatch.setenv("SAGEMAKER_ADMIN_CONFIG_OVERRIDE", str(sdk_config))

    attempts = refuse_network(monkeypatch)
    with moto.mock_aws():
        session = boto3.Session(region_name=REGION)
        role = session.client("iam").create_role(
            RoleName="albertkit-sagemaker", AssumeRolePolicyDocument="{}"
        )["Role"]["Arn"]
        session.client("s3").create_bucket(Bucket=BUCKET)
        yield session, role
    assert attempts == [], f"network access attempted: {attempts}"


def make_config(role: str, tmp_path, **sagemaker) -> TrainerConfig:
    local = tmp_path / "squad-small"
    local.mkdir(exist_ok=True)
    (local / "train.json").write_text('{"version": "v2.0", "data": []}')
    return TrainerConfig.from_dict(
        {
            "model": {"size": "tiny"},
            "data": {
                "kind": "tfrecord",
                "train_files": ["data/pretrain/train-*.tfrecord"],
                "eval_files": [f"{local}/eval-*.tfrecord"],
                "seq_length": 64,
                "max_predictions_per_seq": 10,
            },
            "runtime": {"micro_batch_size": 8, "global_batch_size": 128, "max_steps": 100},
            "sagemaker": {
                "role_arn": role,
                "image_uri": IMAGE,
                "output_path": f"s3://{BUCKET}/albertkit",
                "inputs": {"train": FSX, "extra": {"kind": "local", "path": str(local)}},
                **NET,
                **sagemaker,
            },
        }
    )


def s3_keys(session, prefix: str) -> list[str]:
    pages = (
        session.client("s3").get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    )
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_fit_no_wait_submits_the_planned_request(aws, tmp_path):
    session, role = aws
    cfg = make_config(role, tmp_path)
    job = smsubmit.to_sagemaker(
        cfg,
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        distribution={"kind": "horovod"},
        spot=True,
        max_run_seconds=3600,
        max_wait_seconds=7200,
        checkpoint_s3_uri=f"s3://{BUCKET}/checkpoints/run-1",
        tensorboard_s3_uri=f"s3://{BUCKET}/tensorboard/run-1",
        tags={"project": "albertkit"},
        environment={"NCCL_DEBUG": "WARN"},
        hyperparameters={"optimizer.learning_rate": 0.002},
        base_job_name="albert-test",
    )
    assert job.fit(wait=False, boto_session=session) is job
    assert job.job_name and job.job_name.startswith("albert-test-")

    # 1. the request that went through botocore's validation is exactly plan()
    assert job.submitted_request == job.plan(job_name=job.job_name)

    # 2. what SageMaker (moto) stored
    d = session.client("sagemaker").describe_training_job(TrainingJobName=job.job_name)
    assert d["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert d["RoleArn"] == role
    assert d["ResourceConfig"] == {
        "InstanceType": "ml.p4d.24xlarge",
        "InstanceCount": 2,
        "VolumeSizeInGB": 100,
    }
    assert d["VpcConfig"] == {
        "SecurityGroupIds": NET["security_group_ids"],
        "Subnets": NET["subnets"],
    }
    channels = {c["ChannelName"]: c for c in d["InputDataConfig"]}
    assert channels["train"]["DataSource"]["FileSystemDataSource"] == {
        "FileSystemId": "fs-0123456789abcdef0",
        "FileSystemAccessMode": "ro",
        "FileSystemType": "FSxLustre",
        "DirectoryPath": "/abcdefgh/pretrain",
    }
    assert set(channels) == {"train", "extra", "code", "sm_drivers"}
    assert d["CheckpointConfig"] == {
        "S3Uri": f"s3://{BUCKET}/checkpoints/run-1",
        "LocalPath": "/opt/ml/checkpoints",
    }
    assert d["EnableManagedSpotTraining"] is True
    assert d["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert d["HyperParameters"] == {
        "config": "albertkit_config.json",
        "optimizer__learning_rate": "0.002",
    }
    assert d["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/albertkit"
    plan = job.plan(job_name=job.job_name)
    for key in (
        "InputDataConfig",
        "ResourceConfig",
        "VpcConfig",
        "StoppingCondition",
        "CheckpointConfig",
        "HyperParameters",
        "TensorBoardOutputConfig",
        "RoleArn",
    ):
        assert d[key] == plan[key], key

    # 3. the source and the local input were uploaded next to each other
    code_uri = channels["code"]["DataSource"]["S3DataSource"]["S3Uri"]
    prefix = code_uri.removeprefix(f"s3://{BUCKET}/")
    assert prefix == f"albertkit/albert-test/{job.job_name}/input/code"
    keys = s3_keys(session, prefix)
    assert {
        f"{prefix}/albertkit_entry.py",
        f"{prefix}/albertkit_config.json",
        f"{prefix}/albertkit/sagemaker/entrypoint.py",
    } <= set(keys)
    assert not [k for k in keys if "__pycache__" in k]
    body = session.client("s3").get_object(Bucket=BUCKET, Key=f"{prefix}/albertkit_config.json")
    shipped = TrainerConfig.model_validate(json.loads(body["Body"].read()))
    assert shipped == job.trainer_config and shipped.distributed.backend == "horovod"
    extra = channels["extra"]["DataSource"]["S3DataSource"]["S3Uri"]
    assert s3_keys(session, extra.removeprefix(f"s3://{BUCKET}/")) == [
        f"{extra.removeprefix(f's3://{BUCKET}/')}/train.json"
    ]

    # the Horovod launcher albertkit uploads in place of the SDK's MPI driver
    drivers = channels["sm_drivers"]["DataSource"]["S3DataSource"]["S3Uri"].removeprefix(
        f"s3://{BUCKET}/"
    )
    s3 = session.client("s3")
    assert f"{drivers}/distributed_drivers/albertkit_mpi_driver.py" in s3_keys(session, drivers)
    # with the host-list reader it imports (it runs outside albertkit's package)
    assert f"{drivers}/distributed_drivers/albertkit_cluster.py" in s3_keys(session, drivers)
    distributed = json.loads(
        s3.get_object(Bucket=BUCKET, Key=f"{drivers}/distributed.json")["Body"].read()
    )
    assert distributed == {"process_count_per_node": 8, "mpi_additional_options": None}
    train_sh = s3.get_object(Bucket=BUCKET, Key=f"{drivers}/sm_train.sh")["Body"].read().decode()
    assert "distributed_drivers/albertkit_mpi_driver.py" in train_sh
    assert "cd /opt/ml/input/data/code" in train_sh

    # 4. following the job
    assert job.status() == "Completed"  # moto completes jobs at once
    assert smsubmit.attach(job.job_name, session).status() == "Completed"


def test_keep_alive_multiworker_and_waiting(aws, tmp_path):
    session, role = aws
    job = smsubmit.to_sagemaker(
        make_config(role, tmp_path),
        instance_type="ml.g5.12xlarge",
        instance_count=2,
        distribution={"kind": "tf_multiworker"},
        keep_alive_seconds=1800,
        encrypt_inter_container_traffic=True,
    ).fit(wait=True, logs=True, boto_session=session)  # moto completes at once
    assert job.status() == "Completed"
    smsubmit.attach(job.job_name, session).wait(logs=True)
    assert job.submitted_request == job.plan(job_name=job.job_name)
    d = job.describe()
    assert d["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 1800
    assert d["ResourceConfig"]["InstanceCount"] == 2
    assert "EnableManagedSpotTraining" not in job.submitted_request
    assert job.submitted_request["EnableInterContainerTrafficEncryption"] is True


def test_invalid_jobs_are_refused_before_any_aws_call(aws, tmp_path, monkeypatch):
    session, role = aws
    calls: list[str] = []
    session.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))

    def no_sdk(*a, **k):
        raise AssertionError("the SDK must not be reached for an invalid job")

    monkeypatch.setattr("sagemaker.train.ModelTrainer", no_sdk)
    cfg = make_config(role, tmp_path)
    cases = {
        "FSx.*subnets": {"subnets": [], "security_group_ids": []},
        "shorter than max_run_seconds": {
            "spot": True,
            "checkpoint_s3_uri": f"s3://{BUCKET}/c",
            "max_run_seconds": 100,
            "max_wait_seconds": 50,
        },
        "spot=true needs checkpoint_s3_uri": {  # nowhere to put the run's own prefix either
            "spot": True, "max_wait_seconds": 10**6, "output_path": None
        },
        "processes per host is unknown": {
            "instance_type": "ml.trn9.huge",
            "instance_count": 2,
            "distribution": {"kind": "horovod"},
        },
        "exceeds SageMaker's limit of 2500": {"hyperparameters": {"data.tokenizer": "x" * 3000}},
    }
    for message, overrides in cases.items():
        with pytest.raises(ConfigError, match=message):
            smsubmit.to_sagemaker(cfg, **overrides).fit(wait=False, boto_session=session)
    assert calls == []


# --------------------------------------------------------------------------- the guide's code
ROOT = Path(__file__).resolve().parents[1]
DOC_MARKER = "<!-- doc-test: python-job"


def doc_block(path: Path, marker: str) -> str:
    """The ```python block right after ``marker`` in ``path`` (fails if either is gone)."""
    text = path.read_text(encoding="utf-8")
    assert marker in text, f"{path}: the marker {marker!r} of the tested block is gone"
    after = text.split(marker, 1)[1]
    found = re.match(r"[^\n]*\n```python\n(.*?)```", after, flags=re.S)
    assert found, f"{path}: no ```python block right after {marker!r}"
    return found.group(1)


def test_sagemaker_guide_python_block_runs_as_printed(aws, monkeypatch, capsys):
    """docs/sagemaker.md's first Python block, with the variables the guide exports, submits
    through the real SDK the job it describes (moto answers)."""
    session, role = aws
    block = doc_block(ROOT / "docs" / "sagemaker.md", DOC_MARKER)
    assert 'TrainerConfig.from_yaml("examples/configs/sagemaker_pretrain_base.yaml")' in block
    for var, value in {
        "ALBERTKIT_SM_BUCKET": BUCKET,
        "ALBERTKIT_SM_ROLE_ARN": role,
        "ALBERTKIT_SM_OUTPUT_PATH": f"s3://{BUCKET}/jobs",
        "ALBERTKIT_SM_IMAGE_URI": IMAGE,
        "ALBERTKIT_SM_SUBNETS": NET["subnets"][0],
        "ALBERTKIT_SM_SECURITY_GROUP_IDS": NET["security_group_ids"][0],
    }.items():
        monkeypatch.setenv(var, value)
    monkeypatch.chdir(ROOT)  # the guide's paths are relative to the repository
    namespace: dict = {}
    exec(compile(block, "docs/sagemaker.md", "exec"), namespace)  # noqa: S102 - our own docs
    job = namespace["job"]
    assert job.job_name and job.job_name.startswith("albert-base-pretrain-")
    printed = capsys.readouterr().out  # print(job.plan()): the request, checkpoints included
    assert "'TrainingJobName'" in printed and "'CheckpointConfig'" in printed

    request = job.submitted_request
    assert request == job.plan(job_name=job.job_name)
    assert request["RoleArn"] == role
    assert request["AlgorithmSpecification"]["TrainingImage"] == IMAGE
    assert request["ResourceConfig"] == {
        "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 8, "VolumeSizeInGB": 200}
    assert request["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/jobs"
    assert request["VpcConfig"] == {
        "SecurityGroupIds": NET["security_group_ids"], "Subnets": NET["subnets"]}
    assert request["EnableManagedSpotTraining"] is True
    # the run's own checkpoint prefix, under the output path; TensorBoard in the bucket
    assert re.fullmatch(rf"s3://{BUCKET}/jobs/checkpoints/albert-base-pretrain-[0-9a-f]{{8}}",
                        request["CheckpointConfig"]["S3Uri"])
    assert request["TensorBoardOutputConfig"]["S3OutputPath"] == (
        f"s3://{BUCKET}/tensorboard/albert-base-run-1")
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    assert set(channels) == {"train", "code", "sm_drivers"}
    code = channels["code"]["DataSource"]["S3DataSource"]["S3Uri"]
    assert code.startswith(f"s3://{BUCKET}/jobs/albert-base-pretrain/{job.job_name}/")
    assert s3_keys(session, code.removeprefix(f"s3://{BUCKET}/"))  # the source was uploaded
    stored = session.client("sagemaker").describe_training_job(TrainingJobName=job.job_name)
    assert stored["RoleArn"] == role and stored["ResourceConfig"]["InstanceCount"] == 8
    assert stored["CheckpointConfig"] == request["CheckpointConfig"]


# --------------------------------------------------------------------------- plugins
@pytest.mark.slow  # a wheel built, a job submitted, a fresh process that installs it: ~30 s
def test_the_wheel_travels_in_the_code_channel_and_the_container_installs_it(
        plugin, fresh_registry, monkeypatch, tmp_path, aws):
    """fit() against moto uploads the wheel with the source; a fresh process laid out as the
    container (only albertkit's source on its path) installs it and parses the config."""
    source, _, site = plugin
    monkeypatch.syspath_prepend(str(site))
    session, role = aws
    cfg = rows_config(role_arn=role, output_path=f"s3://{BUCKET}/albertkit",
                      plugins=[str(source)])
    job = smsubmit.to_sagemaker(cfg, env_defaults={}).fit(wait=False, boto_session=session)
    assert job.submitted_request == job.plan(job_name=job.job_name)
    channels = {c["ChannelName"]: c for c in job.submitted_request["InputDataConfig"]}
    assert set(channels) == {"code", "sm_drivers"}  # the wheel rides with the source
    prefix = channels["code"]["DataSource"]["S3DataSource"]["S3Uri"].removeprefix(
        f"s3://{BUCKET}/")
    keys = s3_keys(session, prefix)
    assert f"{prefix}/{PLUGIN_WHEEL_DIR}/{WHEEL}" in keys
    assert sorted(p.name for p in source.iterdir()) == [f"{MODULE}.py", "pyproject.toml"]

    # the container: /opt/ml/input/data/code as SageMaker downloads it
    code = tmp_path / "opt" / "ml" / "input" / "data" / "code"
    s3 = session.client("s3")
    for key in keys:
        target = code / key.removeprefix(prefix + "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(BUCKET, key, str(target))
    # the entry point's main(), its training replaced by parsing (no TensorFlow needed)
    container = textwrap.dedent(f"""
        import sys
        import albertkit.tfstart
        from albertkit.config.registry import entries
        from albertkit.sagemaker import entrypoint

        def parse_only(env):
            cfg = entrypoint.container_config(env)
            source = entries("task")[cfg.task].source.distribution
            print(cfg.task, cfg.data.kind, source, sys.path[0])
            return 0

        albertkit.tfstart.start_tensorflow = lambda quiet: None
        entrypoint.run = parse_only
        sys.exit(entrypoint.main([], {{}}, {str(tmp_path / "opt" / "ml")!r}))
    """)
    done = subprocess.run([sys.executable, "-c", container], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC), "TMPDIR": str(tmp_path)},
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    task, kind, dist, installed = done.stdout.split()
    assert (task, kind, dist) == ("rows_task", "rows", DIST)
    # a directory of the process's own, holding the plugin (the environment is not touched)
    assert Path(installed).parent == tmp_path and (Path(installed) / f"{MODULE}.py").is_file()


def test_a_plugin_that_does_not_build_stops_launch_before_any_job(plugin, fresh_registry,
                                                                 monkeypatch, tmp_path, aws,
                                                                 capsys):
    from albertkit.cli import main as cli_main

    source, _, site = plugin
    monkeypatch.syspath_prepend(str(site))
    session, role = aws
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text(
        (source / "pyproject.toml").read_text().replace('"setuptools.build_meta"',
                                                        '"no_such_backend_module"'))
    cfg = rows_config(role_arn=role, output_path=f"s3://{BUCKET}/albertkit",
                      plugins=[str(broken)])
    path = tmp_path / "job.json"
    path.write_text(json.dumps(cfg.to_dict() | {"sagemaker": cfg.extension_section("sagemaker")}))
    assert cli_main(["launch", "--config", str(path), "--no-wait"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: building the plugin in {broken} into a wheel failed: pip "
                          "said: "), err
    assert session.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert s3_keys(session, "albertkit/") == []  # nothing uploaded
