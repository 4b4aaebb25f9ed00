"""Run an albertkit config as a SageMaker training job: pure request building, then submission.

``to_sagemaker(config, **overrides)`` checks the training config and the SageMaker settings
together (before any AWS call) and returns a :class:`SageMakerJob`. ``job.plan()`` is the
CreateTrainingJob request exactly as it will be sent, built without AWS; ``job.fit()``
submits it through the SageMaker SDK v3 ``ModelTrainer`` and (when waiting) streams the
CloudWatch logs. ``attach(name)`` follows a job that is already running.

How the config travels: the whole ``TrainerConfig`` is written as JSON into the uploaded
source directory; the hyperparameters carry only that file's name plus dotted scalar
overrides (``optimizer.learning_rate``), so a tuning job can sweep them and nothing secret
ends up in the request. The container side is ``albertkit.sagemaker.entrypoint``.

Example:
    >>> from albertkit import TrainerConfig
    >>> cfg = TrainerConfig.model_validate({"data": {"kind": "synthetic"}, "sagemaker": {
    ...     "role_arn": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
    ...     "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest",
    ...     "output_path": "s3://my-bucket/albertkit"}})
    >>> request = to_sagemaker(cfg, instance_type="ml.g5.xlarge").plan(job_name="albertkit-1")
    >>> request["ResourceConfig"]["InstanceType"]
    'ml.g5.xlarge'
"""

from __future__ import annotations

import argparse
import json
import logging
import posixpath
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from albertkit.config import ConfigError, TrainerConfig, apply_overrides, atomic_write_text
from albertkit.sagemaker.config import (
    CONFIG_HYPERPARAMETER,
    SageMakerConfig,
    hyperparameter_key,
    hyperparameter_text,
)
from albertkit.sagemaker.instances import instance_spec
from albertkit.sagemaker.mpi_driver import DRIVER_SCRIPT, SSH_KEY_DIR, write_job_ssh_key
from albertkit.tasks import TASK_NAMES, task_class

log = logging.getLogger(__name__)

# Names inside the uploaded source directory (the SDK's "code" channel).
ENTRY_SCRIPT = "albertkit_entry.py"
CONFIG_FILE = "albertkit_config.json"
# Where TensorBoard event files are written inside the checkpoint directory (= run_dir).
TENSORBOARD_SUBDIR = "tensorboard"

# What ModelTrainer adds to every request that has source code (sagemaker.train.constants in
# sagemaker 3.x). plan() mirrors it without importing the SDK; the moto test compares
# plan() with the request the SDK really sends, so a change in the SDK fails that test.
_SDK_CODE_CHANNEL = "code"
_SDK_DRIVERS_CHANNEL = "sm_drivers"
_SDK_ENTRYPOINT = ["/bin/bash"]
_SDK_ARGUMENTS = [
    "-c",
    "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh "
    "&& /opt/ml/input/data/sm_drivers/sm_train.sh",
]
_SDK_INSTALL_HINT = (
    "submitting needs the SageMaker SDK v3 and boto3: pip install 'albertkit[sagemaker]'"
)

# --------------------------------------------------------------------------- metrics
# albertkit.training.run_logger writes one line per log step and per evaluation, e.g.
#   albertkit step=120 loss=3.1415 mlm_accuracy=0.1234 sop_accuracy=0.6100 learning_rate=0.000500 seq_per_s=123.4
#   albertkit eval step=120 loss=2.9 mlm_accuracy=0.1500 sop_accuracy=0.6400
# SageMaker turns the first capture group of each regex into a CloudWatch metric.
# The names come from the task classes (their log_keys), the one place they are listed.
TRAIN_METRICS: dict[str, tuple[str, ...]] = {
    name: task_class(name).log_keys.train_lines for name in TASK_NAMES
}
EVAL_METRICS: dict[str, tuple[str, ...]] = {
    name: task_class(name).log_keys.eval for name in TASK_NAMES
}
_NUMBER = r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"


def metric_regex(name: str, evaluation: bool = False) -> str:
    """Regex whose first group is ``name``'s value in an albertkit training/eval log line.

    The key is matched after a space, so ``accuracy`` never matches ``mlm_accuracy``; the
    prefix ``albertkit step=`` never matches an ``albertkit eval step=`` line. Not anchored,
    because MPI prefixes every line with the rank (``[1,0]<stdout>:``).
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"metric name {name!r} is not a log-line key")
    prefix = "albertkit eval step=" if evaluation else "albertkit step="
    return rf"{prefix}[0-9]+ (?:\S+ )*{name}={_NUMBER}"


def metric_definitions(task: str) -> list[dict[str, str]]:
    """SageMaker MetricDefinitions (``train:<name>``, ``eval:<name>``) for one task."""
    if task not in TRAIN_METRICS:
        raise ValueError(f"unknown task {task!r}; known: {sorted(TRAIN_METRICS)}")
    out = [{"Name": f"train:{n}", "Regex": metric_regex(n)} for n in TRAIN_METRICS[task]]
    out += [{"Name": f"eval:{n}", "Regex": metric_regex(n, True)} for n in EVAL_METRICS[task]]
    return out


# --------------------------------------------------------------------------- helpers
def split_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/a/b/`` -> ``("bucket", "a/b")``."""
    rest = uri[len("s3://") :]
    bucket, _, key = rest.partition("/")
    return bucket, key.strip("/")


def _normalize(path: str) -> str:
    if "://" in path:
        return path.rstrip("/")
    return posixpath.normpath(path) if path else path


def path_under(value: str, prefix: str) -> str | None:
    """The remainder of ``value`` below ``prefix`` (``""`` if equal), else ``None``."""
    v, p = _normalize(value), _normalize(prefix)
    if v == p:
        return ""
    if p in ("", "."):
        return None
    if v.startswith(p.rstrip("/") + "/"):
        return v[len(p.rstrip("/")) + 1 :]
    return None


# Fields of the training config that name files or directories the job must read.
_PATH_FIELDS = (
    ("data", "train_files"),
    ("data", "eval_files"),
    ("data", "tokenizer"),
    ("data", "train_file"),
    ("data", "eval_file"),
    ("model", "load_from"),
)


def _path_values(cfg: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for section, field in _PATH_FIELDS:
        value = cfg.get(section, {}).get(field)
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield f"{section}.{field}[{i}]", str(item)
        elif value is not None:
            yield f"{section}.{field}", str(value)


def _scalar_at(raw: dict[str, Any], dotted: str) -> Any:
    node: Any = raw
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(part)
        node = node[part]
    return node


def _stamp() -> str:
    # the SDK uses local time with this format (sagemaker.train.utils._get_unique_name)
    return datetime.now().strftime("%Y%m%d%H%M%S")


def job_name_for(base_job_name: str, stamp: str | None = None) -> str:
    """The job name ModelTrainer derives from ``base_job_name`` (``<base>-<timestamp>``)."""
    return f"{base_job_name.replace('_', '-')}-{stamp or _stamp()}"[:63]


# --------------------------------------------------------------------------- checks
def check_job(trainer_config: TrainerConfig, sm: SageMakerConfig) -> None:
    """Refuse what would fail on SageMaker, before any AWS call. Raises ``ConfigError``."""
    problems: list[str] = []
    for field in ("role_arn", "image_uri", "output_path"):
        if getattr(sm, field) is None:
            env = f"ALBERTKIT_SM_{field.upper()}"
            problems.append(f"sagemaker.{field} is not set (config file, --set, or ${env})")

    raw = trainer_config.model_dump(mode="json")
    for key in sm.hyperparameters:
        try:
            current = _scalar_at(raw, key)
        except KeyError:
            problems.append(f"sagemaker.hyperparameters: {key!r} is not a field of the config")
            continue
        if isinstance(current, dict | list):
            problems.append(
                f"sagemaker.hyperparameters: {key!r} is a section or list, not a scalar"
            )
    effective = trainer_config  # the config as the container will see it
    if not problems and sm.hyperparameters:
        overrides = [f"{k}={hyperparameter_text(v)}" for k, v in sm.hyperparameters.items()]
        try:
            effective = TrainerConfig.from_dict(
                trainer_config.to_dict(), overrides, "sagemaker.hyperparameters"
            )
        except ConfigError as e:
            problems.append(str(e))

    replicas = sm.replicas
    try:
        effective.runtime.accumulation_steps(replicas)
    except ConfigError as e:
        problems.append(
            f"{e} (the job has {replicas} replicas: sagemaker.instance_count="
            f"{sm.instance_count} x {replicas // sm.instance_count} per instance)"
        )
    spec = instance_spec(sm.instance_type)
    if effective.runtime.precision == "mixed_bfloat16" and spec and spec.gpu and not spec.bf16:
        problems.append(
            f"runtime.precision=mixed_bfloat16 but {sm.instance_type} has {spec.gpu} GPUs "
            "without native bfloat16; use mixed_float16"
        )

    prefixes = [p for p in (i.config_prefix() for i in sm.inputs.values()) if p]
    for where, value in _path_values(effective.model_dump(mode="json")):
        if any(path_under(value, p) is not None for p in prefixes):
            continue
        if value.startswith("/opt/ml/"):
            continue  # already a container path
        problems.append(
            f"{where}={value!r} is not provided by any sagemaker.inputs channel; add an input "
            "whose path_in_config (or S3 uri / local path) covers it"
        )
    if problems:
        raise ConfigError("SageMaker job refused:\n  " + "\n  ".join(problems))


def transported_config(trainer_config: TrainerConfig, sm: SageMakerConfig) -> TrainerConfig:
    """The config that travels as JSON: this SageMaker section, its distribution backend."""
    raw = trainer_config.to_dict()
    raw["sagemaker"] = sm.model_dump(mode="json", exclude_none=True)
    raw.setdefault("distributed", {})["backend"] = sm.backend
    return TrainerConfig.from_dict(raw, source="sagemaker job config")


# --------------------------------------------------------------------------- the job
class SageMakerJob:
    """One albertkit run as a SageMaker training job.

    Build it with :func:`to_sagemaker`. ``plan()`` is pure; ``fit()`` submits.

    Example:
        >>> job = to_sagemaker(cfg, instance_count=2, distribution={"kind": "horovod"})
        >>> job.plan()["ResourceConfig"]          # doctest: +SKIP
        >>> job.fit(wait=False).status()          # doctest: +SKIP
        'InProgress'
    """

    def __init__(self, trainer_config: TrainerConfig, sagemaker_config: SageMakerConfig):
        check_job(trainer_config, sagemaker_config)
        self.sagemaker_config = sagemaker_config
        self.trainer_config = transported_config(trainer_config, sagemaker_config)
        self.job_name: str | None = None
        self.submitted_request: dict[str, Any] | None = None
        self._boto_session = None

    # ------------------------------------------------------------------ pure parts
    def hyperparameters(self) -> dict[str, str]:
        """The job's hyperparameters: the config file name plus scalar overrides, each named
        by its config path with ``__`` for ``.`` (``optimizer__learning_rate``), because the
        SDK's driver turns every name into a shell variable."""
        hps = {CONFIG_HYPERPARAMETER: CONFIG_FILE}
        hps.update(
            {
                hyperparameter_key(k): hyperparameter_text(v)
                for k, v in self.sagemaker_config.hyperparameters.items()
            }
        )
        return hps

    def metric_definitions(self) -> list[dict[str, str]]:
        return metric_definitions(self.trainer_config.task)

    def _staging(self) -> tuple[str, str | None]:
        return split_s3_uri(self.sagemaker_config.output_path)  # type: ignore[arg-type]

    def _upload_uri(self, job_name: str, channel: str, local: Path | None = None) -> str:
        bucket, prefix = self._staging()
        key = f"{self.sagemaker_config.base_job_name}/{job_name}/input/{channel}"
        if prefix:
            key = f"{prefix}/{key}"
        if local is not None and local.is_file():
            key = f"{key}/{local.name}"
        return f"s3://{bucket}/{key}"

    def _channel(self, name: str, job_name: str) -> dict[str, Any]:
        spec = self.sagemaker_config.inputs[name]
        if spec.kind == "fsx_lustre":
            return {
                "ChannelName": name,
                "DataSource": {
                    "FileSystemDataSource": {
                        "FileSystemId": spec.file_system_id,
                        "FileSystemAccessMode": spec.access_mode,
                        "FileSystemType": "FSxLustre",
                        "DirectoryPath": spec.directory_path,
                    }
                },
                "InputMode": "File",
            }
        if spec.kind == "s3":
            uri, mode, dist = spec.uri, spec.input_mode, spec.distribution
        else:  # local: the SDK uploads it next to the source code
            uri, mode, dist = self._upload_uri(job_name, name, Path(spec.path)), "File", None
        return {
            "ChannelName": name,
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": uri,
                    "S3DataDistributionType": dist or "FullyReplicated",
                }
            },
            "InputMode": mode,
        }

    def _sdk_channel(self, name: str, job_name: str) -> dict[str, Any]:
        return {
            "ChannelName": name,
            "DataSource": {
                "S3DataSource": {
                    "S3DataType": "S3Prefix",
                    "S3Uri": self._upload_uri(job_name, name),
                    "S3DataDistributionType": "FullyReplicated",
                }
            },
            "InputMode": "File",
        }

    def plan(self, job_name: str | None = None) -> dict[str, Any]:
        """The CreateTrainingJob request (boto3 shape), built without any AWS call.

        ``job_name`` defaults to ``<base_job_name>-<timestamp>`` like the SDK's; the S3 URIs
        of the uploaded source and local inputs depend on it.
        """
        sm = self.sagemaker_config
        name = job_name or job_name_for(sm.base_job_name)
        algorithm = {
            "TrainingInputMode": "File",
            "TrainingImage": sm.image_uri,
            "MetricDefinitions": self.metric_definitions(),
            "ContainerEntrypoint": list(_SDK_ENTRYPOINT),
            "ContainerArguments": list(_SDK_ARGUMENTS),
        }
        channels = [self._channel(c, name) for c in sm.inputs]
        channels += [self._sdk_channel(_SDK_CODE_CHANNEL, name)]
        channels += [self._sdk_channel(_SDK_DRIVERS_CHANNEL, name)]
        resources: dict[str, Any] = {
            "InstanceType": sm.instance_type,
            "InstanceCount": sm.instance_count,
            "VolumeSizeInGB": sm.volume_size_gb,
        }
        if sm.keep_alive_seconds:
            resources["KeepAlivePeriodInSeconds"] = sm.keep_alive_seconds
        stopping: dict[str, Any] = {"MaxRuntimeInSeconds": sm.max_run_seconds}
        if sm.spot:
            stopping["MaxWaitTimeInSeconds"] = sm.max_wait_seconds
        request: dict[str, Any] = {
            "TrainingJobName": name,
            "HyperParameters": self.hyperparameters(),
            "AlgorithmSpecification": algorithm,
            "RoleArn": sm.role_arn,
            "InputDataConfig": channels,
            "OutputDataConfig": {"S3OutputPath": sm.output_path, "CompressionType": "GZIP"},
            "ResourceConfig": resources,
        }
        if sm.subnets:
            request["VpcConfig"] = {
                "SecurityGroupIds": list(sm.security_group_ids),
                "Subnets": list(sm.subnets),
            }
        request["StoppingCondition"] = stopping
        if sm.tags:
            request["Tags"] = [{"Key": k, "Value": v} for k, v in sm.tags.items()]
        if sm.spot:
            request["EnableManagedSpotTraining"] = True
        if sm.encrypt_inter_container_traffic:
            request["EnableInterContainerTrafficEncryption"] = True
        if sm.checkpoint_s3_uri:
            request["CheckpointConfig"] = {
                "S3Uri": sm.checkpoint_s3_uri,
                "LocalPath": sm.checkpoint_local_path,
            }
        if sm.tensorboard_s3_uri:
            request["TensorBoardOutputConfig"] = {
                "S3OutputPath": sm.tensorboard_s3_uri,
                "LocalPath": self.tensorboard_local_path,
            }
        if sm.environment:
            request["Environment"] = dict(sm.environment)
        return request

    @property
    def tensorboard_local_path(self) -> str:
        """Where the container writes TensorBoard files (synced to ``tensorboard_s3_uri``)."""
        return posixpath.join(self.sagemaker_config.checkpoint_local_path, TENSORBOARD_SUBDIR)

    def stage_source(self, directory: Path) -> Path:
        """Write the source directory SageMaker uploads: entry script, config JSON and
        (``ship_source``) this albertkit package, so the container runs the same code."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(directory / ENTRY_SCRIPT, _ENTRY_SCRIPT_TEXT)
        self.trainer_config.to_json(directory / CONFIG_FILE)
        if self.sagemaker_config.ship_source:
            package = Path(__file__).resolve().parents[1]
            shutil.copytree(
                package,
                directory / "albertkit",
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
        return directory

    # ------------------------------------------------------------------ submission
    def _sessions(self, boto_session=None):
        try:
            import boto3
            from sagemaker.core.helper.session_helper import Session
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError(_SDK_INSTALL_HINT) from e
        boto_session = boto_session or self._boto_session
        if boto_session is None:
            boto_session = boto3.Session(region_name=self.sagemaker_config.region)
        bucket, prefix = self._staging()
        session = Session(
            boto_session=boto_session, default_bucket=bucket, default_bucket_prefix=prefix or None
        )
        return boto_session, session

    def stage_driver(self, directory: Path) -> Path:
        """Write the Horovod launcher the SDK uploads and runs on every host (see
        ``albertkit.sagemaker.mpi_driver`` for why it replaces the SDK's MPI driver), with
        a key pair made for this job only (SSH between the job's hosts)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(__file__).with_name("mpi_driver.py"), directory / DRIVER_SCRIPT)
        write_job_ssh_key(directory / SSH_KEY_DIR)
        return directory

    def model_trainer(self, source_dir: Path, session, driver_dir: Path | None = None):
        """The configured ``sagemaker.train.ModelTrainer`` (for tuners and pipelines too).

        ``source_dir`` comes from ``stage_source``; ``driver_dir`` from ``stage_driver``
        (Horovod jobs only)."""
        from sagemaker.core.training.configs import (
            Channel,
            CheckpointConfig,
            Compute,
            DataSource,
            FileSystemDataSource,
            InputData,
            MetricDefinition,
            Networking,
            OutputDataConfig,
            S3DataSource,
            SourceCode,
            StoppingCondition,
            Tag,
            TensorBoardOutputConfig,
        )
        from sagemaker.train import ModelTrainer

        sm = self.sagemaker_config
        inputs: list = []
        for name, spec in sm.inputs.items():
            if spec.kind == "fsx_lustre":
                source = FileSystemDataSource(
                    file_system_id=spec.file_system_id,
                    file_system_type="FSxLustre",
                    directory_path=spec.directory_path,
                    file_system_access_mode=spec.access_mode,
                )
                inputs.append(
                    Channel(
                        channel_name=name,
                        data_source=DataSource(file_system_data_source=source),
                        input_mode="File",
                    )
                )
            elif spec.kind == "s3":
                source = S3DataSource(
                    s3_data_type="S3Prefix",
                    s3_uri=spec.uri,
                    s3_data_distribution_type=spec.distribution,
                )
                inputs.append(
                    Channel(
                        channel_name=name,
                        data_source=DataSource(s3_data_source=source),
                        input_mode=spec.input_mode,
                    )
                )
            else:
                inputs.append(
                    InputData(channel_name=name, data_source=str(Path(spec.path).resolve()))
                )
        distributed = None
        if sm.distribution is not None and sm.distribution.kind == "horovod":
            if driver_dir is None:
                raise ValueError("a Horovod job needs driver_dir (see stage_driver)")
            distributed = _horovod_driver_config(
                driver_dir, sm.processes_per_host, list(sm.distribution.mpi_options)
            )
        networking = None
        if sm.subnets or sm.encrypt_inter_container_traffic:
            networking = Networking(
                subnets=list(sm.subnets) or None,
                security_group_ids=list(sm.security_group_ids) or None,
                enable_inter_container_traffic_encryption=sm.encrypt_inter_container_traffic
                or None,
            )
        trainer = ModelTrainer(
            sagemaker_session=session,
            role=sm.role_arn,
            base_job_name=sm.base_job_name,
            training_image=sm.image_uri,
            source_code=SourceCode(source_dir=str(source_dir), entry_script=ENTRY_SCRIPT),
            distributed=distributed,
            compute=Compute(
                instance_type=sm.instance_type,
                instance_count=sm.instance_count,
                volume_size_in_gb=sm.volume_size_gb,
                keep_alive_period_in_seconds=sm.keep_alive_seconds or None,
                enable_managed_spot_training=True if sm.spot else None,
            ),
            networking=networking,
            stopping_condition=StoppingCondition(
                max_runtime_in_seconds=sm.max_run_seconds,
                max_wait_time_in_seconds=sm.max_wait_seconds if sm.spot else None,
            ),
            output_data_config=OutputDataConfig(
                s3_output_path=sm.output_path, compression_type="GZIP"
            ),
            input_data_config=inputs or None,
            checkpoint_config=(
                CheckpointConfig(s3_uri=sm.checkpoint_s3_uri, local_path=sm.checkpoint_local_path)
                if sm.checkpoint_s3_uri
                else None
            ),
            environment=dict(sm.environment),
            hyperparameters=self.hyperparameters(),
            tags=[Tag(key=k, value=v) for k, v in sm.tags.items()] or None,
        )
        trainer = trainer.with_metric_definitions(
            [MetricDefinition(name=m["Name"], regex=m["Regex"]) for m in self.metric_definitions()]
        )
        if sm.tensorboard_s3_uri:
            trainer = trainer.with_tensorboard_output_config(
                TensorBoardOutputConfig(
                    s3_output_path=sm.tensorboard_s3_uri, local_path=self.tensorboard_local_path
                )
            )
        return trainer

    def fit(self, wait: bool = True, logs: bool = True, boto_session=None) -> SageMakerJob:
        """Upload the source, submit the job and (``wait``) follow it to the end, streaming
        its logs. Returns ``self``; ``self.job_name`` names the job."""
        boto_session, session = self._sessions(boto_session)
        self._boto_session = boto_session
        event = "provide-client-params.sagemaker.CreateTrainingJob"
        hook_id = f"albertkit-{uuid.uuid4().hex}"

        def capture(params, **_):
            self.submitted_request = json.loads(json.dumps(params, default=str))
            self.job_name = params.get("TrainingJobName")
            self._warn_on_drift()

        boto_session.events.register(event, capture, unique_id=hook_id)
        try:
            with tempfile.TemporaryDirectory(prefix="albertkit-sm-") as tmp:
                source = self.stage_source(Path(tmp) / "source")
                driver = self.stage_driver(Path(tmp) / "driver")
                trainer = self.model_trainer(source, session, driver)
                trainer.train(wait=wait, logs=logs)
        finally:
            boto_session.events.unregister(event, unique_id=hook_id)
        return self

    def _warn_on_drift(self) -> None:
        sent = self.submitted_request or {}
        planned = self.plan(job_name=sent.get("TrainingJobName"))
        differing = sorted(k for k in set(sent) | set(planned) if sent.get(k) != planned.get(k))
        if differing:
            log.warning(
                "the submitted CreateTrainingJob request differs from plan() in %s (SageMaker "
                "SDK defaults from a config file, or an SDK change)",
                ", ".join(differing),
            )

    # ------------------------------------------------------------------ following
    def _handle(self) -> TrainingJobHandle:
        if self.job_name is None:
            raise RuntimeError("the job has not been submitted yet: call fit() first")
        return TrainingJobHandle(self.job_name, self._boto_session)

    def describe(self) -> dict[str, Any]:
        return self._handle().describe()

    def status(self) -> str:
        return self._handle().status()

    def wait(self, logs: bool = True) -> None:
        self._handle().wait(logs=logs)

    def stop(self) -> None:
        self._handle().stop()


class TrainingJobHandle:
    """A submitted (or already running) training job, found by name.

    Example:
        >>> job = attach("albertkit-20250101120000")     # doctest: +SKIP
        >>> job.status(); job.wait(logs=True)             # doctest: +SKIP
    """

    def __init__(self, job_name: str, boto_session=None):
        self.job_name = job_name
        self._boto_session = boto_session

    def _resource(self):
        try:
            from sagemaker.core.resources import TrainingJob
        except ImportError as e:  # pragma: no cover
            raise ImportError(_SDK_INSTALL_HINT) from e
        return TrainingJob.get(training_job_name=self.job_name, session=self._boto_session)

    def _client(self):
        import boto3

        return (self._boto_session or boto3.Session()).client("sagemaker")

    def describe(self) -> dict[str, Any]:
        return self._client().describe_training_job(TrainingJobName=self.job_name)

    def status(self) -> str:
        """``InProgress`` | ``Completed`` | ``Failed`` | ``Stopping`` | ``Stopped``."""
        return self.describe()["TrainingJobStatus"]

    def wait(self, logs: bool = True) -> None:
        """Block until the job ends, streaming its CloudWatch logs when ``logs``."""
        self._resource().wait(logs=logs)

    def stop(self) -> None:
        self._resource().stop()


def _horovod_driver_config(driver_dir: Path, processes_per_host: int, mpi_options: list[str]):
    """A ``sagemaker.train.distributed.DistributedConfig`` that runs albertkit's Horovod
    launcher (uploaded from ``driver_dir``) instead of the SDK's MPI driver."""
    from pydantic import PrivateAttr
    from sagemaker.train.distributed import DistributedConfig

    class AlbertkitHorovod(DistributedConfig):
        process_count_per_node: int
        mpi_additional_options: list[str] | None = None
        _driver_dir: str = PrivateAttr("")

        @property
        def driver_dir(self) -> str:
            return self._driver_dir

        @property
        def driver_script(self) -> str:
            return DRIVER_SCRIPT

    config = AlbertkitHorovod(
        process_count_per_node=processes_per_host, mpi_additional_options=mpi_options or None
    )
    config._driver_dir = str(driver_dir)
    return config


def attach(job_name: str, boto_session=None) -> TrainingJobHandle:
    """Follow a training job submitted earlier (by this or another process)."""
    return TrainingJobHandle(job_name, boto_session)


def to_sagemaker(config: TrainerConfig, **overrides: Any) -> SageMakerJob:
    """The SageMaker job for ``config``: ``config.sagemaker`` updated by ``overrides``
    (``instance_type="ml.p4d.24xlarge"``, ``instance_count=8``, ``spot=True``, ...).

    Raises ``ConfigError`` naming every field that is wrong, before any AWS call.
    """
    base = config.sagemaker.model_dump(exclude_unset=True) if config.sagemaker else {}
    merged = {**base, **overrides}
    if merged.get("distribution") is None and config.distributed.backend != "single":
        # The training config already names the backend: run it that way on SageMaker too.
        merged["distribution"] = {"kind": config.distributed.backend}
    try:
        sm = SageMakerConfig.model_validate(merged)
    except ValidationError as e:
        lines = [
            f"  sagemaker.{'.'.join(str(p) for p in err['loc']) or '<root>'}: "
            f"{err['msg'].removeprefix('Value error, ')}"
            for err in e.errors()
        ]
        raise ConfigError("invalid SageMaker settings:\n" + "\n".join(lines)) from None
    return SageMakerJob(config, sm)


_ENTRY_SCRIPT_TEXT = '''"""SageMaker entry script written by albertkit: runs albertkit.sagemaker.entrypoint."""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if (HERE / "albertkit" / "__init__.py").is_file():
    sys.path.insert(0, str(HERE))  # the albertkit source shipped with the job wins

from albertkit.sagemaker.entrypoint import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
'''


# --------------------------------------------------------------------------- CLI
_ENV_FIELDS: dict[str, tuple[str, str]] = {
    "ALBERTKIT_SM_BUCKET": ("bucket", "str"),
    "ALBERTKIT_SM_ROLE_ARN": ("role_arn", "str"),
    "ALBERTKIT_SM_IMAGE_URI": ("image_uri", "str"),
    "ALBERTKIT_SM_REGION": ("region", "str"),
    "ALBERTKIT_SM_OUTPUT_PATH": ("output_path", "str"),
    "ALBERTKIT_SM_CHECKPOINT_S3_URI": ("checkpoint_s3_uri", "str"),
    "ALBERTKIT_SM_TENSORBOARD_S3_URI": ("tensorboard_s3_uri", "str"),
    "ALBERTKIT_SM_INSTANCE_TYPE": ("instance_type", "str"),
    "ALBERTKIT_SM_INSTANCE_COUNT": ("instance_count", "int"),
    "ALBERTKIT_SM_SUBNETS": ("subnets", "list"),
    "ALBERTKIT_SM_SECURITY_GROUP_IDS": ("security_group_ids", "list"),
}


def sagemaker_defaults_from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """SageMakerConfig defaults from ``ALBERTKIT_SM_*`` variables (the CLI passes
    ``os.environ``). Lists are comma-separated. The config file and ``--set`` win."""
    out: dict[str, Any] = {}
    for var, (field, kind) in _ENV_FIELDS.items():
        text = environ.get(var, "").strip()
        if not text:
            continue
        if kind == "list":
            out[field] = [p.strip() for p in text.split(",") if p.strip()]
        elif kind == "int":
            # a bad value is reported by validation, naming the field, when `launch` runs
            out[field] = int(text) if text.isdigit() else text
        else:
            out[field] = text
    return out


def load_launch_config(
    path: str | Path, overrides: list[str], env_defaults: Mapping[str, Any] | None = None
) -> TrainerConfig:
    """Read a YAML config with environment defaults under its ``sagemaker`` section."""
    import yaml

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}:{where}: malformed YAML") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    section = raw.get("sagemaker") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: sagemaker must be a mapping")
    raw["sagemaker"] = {**dict(env_defaults or {}), **section}
    return TrainerConfig.from_dict(apply_overrides(raw, overrides), source=str(path))


def add_parser(
    subparsers, env_defaults: Mapping[str, Any] | None = None
) -> argparse.ArgumentParser:
    """Add ``albertkit launch`` to an argparse ``subparsers`` object. ``env_defaults`` is
    ``sagemaker_defaults_from_env(os.environ)`` (read by cli.py, not here)."""
    p = subparsers.add_parser(
        "launch",
        help="run a config as a SageMaker training job",
        description="Submit a training config as a SageMaker training job (SDK v3).",
    )
    p.add_argument("--config", required=True, help="YAML config with a sagemaker: section")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dotted override, e.g. sagemaker.instance_count=2 or optimizer.learning_rate=1e-3",
    )
    p.add_argument("--dry-run", action="store_true", help="print the request, submit nothing")
    p.add_argument("--no-wait", action="store_true", help="return once the job is created")
    p.set_defaults(func=run_launch, sagemaker_env_defaults=dict(env_defaults or {}))
    return p


def run_launch(args: argparse.Namespace) -> int:
    """``albertkit launch``: dry run prints ``plan()`` as JSON; otherwise submit."""
    try:
        cfg = load_launch_config(args.config, args.overrides, args.sagemaker_env_defaults)
        job = to_sagemaker(cfg)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(json.dumps(job.plan(), indent=2))
        return 0
    job.fit(wait=not args.no_wait)
    print(f"training job: {job.job_name}")
    if args.no_wait:
        print(f"status: {job.status()}")
        return 0
    status = job.status()
    print(f"status: {status}")
    return 0 if status == "Completed" else 1
