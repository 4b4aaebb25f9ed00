"""A SageMaker training job for an albertkit config, as a pure CreateTrainingJob request.

:class:`JobPlan` checks the training config and the SageMaker settings together (before any
AWS call, :func:`check_job`) and builds the request exactly as the SageMaker SDK v3 will send
it (``plan()``), plus the directories the SDK uploads (``stage_source``, ``stage_driver``).
Submitting is :mod:`albertkit.sagemaker.submit`.

How the config travels: the whole ``TrainerConfig`` is written as JSON into the uploaded
source directory; the hyperparameters carry only that file's name plus scalar overrides
named by their config path with ``__`` for ``.`` (``optimizer__learning_rate``), so a tuning
job can sweep them, the SDK's driver can export them as shell variables, and nothing secret
ends up in the request. The container side is ``albertkit.sagemaker.entrypoint``.

Checkpoints: a spot job without ``checkpoint_s3_uri`` (or any job with ``auto``) syncs them
to the run's own prefix, ``<output_path>/checkpoints/<run name>`` (:func:`run_name`: the job
name prefix and a hash of the training settings), which ``plan()`` shows.

Example:
    >>> from albertkit import TrainerConfig
    >>> from albertkit.sagemaker import to_sagemaker
    >>> cfg = TrainerConfig.model_validate({"data": {"kind": "synthetic"}, "sagemaker": {
    ...     "role_arn": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
    ...     "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest",
    ...     "output_path": "s3://my-bucket/albertkit"}})
    >>> request = to_sagemaker(cfg, instance_type="ml.g5.xlarge").plan(job_name="albertkit-1")
    >>> request["ResourceConfig"]["InstanceType"]
    'ml.g5.xlarge'
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import shutil
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albertkit.config import TrainerConfig
from albertkit.errors import ConfigError
from albertkit.fileio import atomic_write_text
from albertkit.hardware import DEFAULT_MFU, instance_spec
from albertkit.sagemaker.cluster import CLUSTER_MODULE
from albertkit.sagemaker.config import (
    AUTO_CHECKPOINT_URI,
    CONFIG_HYPERPARAMETER,
    SageMakerConfig,
)
from albertkit.sagemaker.entry_script import ENTRY_SCRIPT, ENTRY_SCRIPT_TEXT
from albertkit.sagemaker.mpi_driver import DRIVER_SCRIPT, SSH_KEY_DIR, write_job_ssh_key
from albertkit.sagemaker.wire import hyperparameter_key, hyperparameter_text
from albertkit.tasks import task_class
from albertkit.training.config_change import settings_fingerprint

if TYPE_CHECKING:
    from albertkit.plan import FleetPlan, PriceTable

# Names inside the uploaded source directory (the SDK's "code" channel).
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

log = logging.getLogger("albertkit")

# --------------------------------------------------------------------------- metrics
# albertkit.training.run_logger writes one line per log step and per evaluation, e.g.
#   albertkit step=120 loss=3.1415 mlm_accuracy=0.1234 sop_accuracy=0.6100 learning_rate=0.000500 seq_per_s=123.4
#   albertkit eval step=120 loss=2.9 mlm_accuracy=0.1500 sop_accuracy=0.6400
# SageMaker turns the first capture group of each regex into a CloudWatch metric.
# The names come from the task classes (their log_keys), the one place they are listed; a
# task's module is imported when a job of that task is planned, not for `albertkit --help`.
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
    keys = task_class(task).log_keys  # built-in or a plugin's; the registry names an unknown one
    train, evaluation = keys.train_lines, keys.eval
    out = [{"Name": f"train:{n}", "Regex": metric_regex(n)} for n in train]
    out += [{"Name": f"eval:{n}", "Regex": metric_regex(n, True)} for n in evaluation]
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
    if sm.spot and sm.checkpoint_s3_uri is None and sm.output_path is None:
        problems.append(
            "spot=true needs checkpoint_s3_uri: without checkpoints synced to S3 an interrupted "
            "spot job restarts from step 0 (set it, or sagemaker.output_path, under which the "
            "run gets its own prefix)")

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
    if effective.data.kind in ("user_pretraining", "user_classification"):
        problems.append(
            f"data.kind={effective.data.kind} trains on examples given in Python "
            "(AlbertTrainer(train_data=...)), which a job does not have: write them as files "
            "(albertkit prepare-data, or a TSV for classification) and use a data kind that "
            "reads files")
    # the container parses the config too: every plugin part must travel or be in the image
    from albertkit.sagemaker.shipping import plugin_problems  # on use: not for --help

    problems += plugin_problems(effective, sm)
    if problems:
        raise ConfigError("SageMaker job refused:\n  " + "\n  ".join(problems))


def job_config(trainer_config: TrainerConfig, sm: SageMakerConfig) -> TrainerConfig:
    """The training config the job runs, as far as it is known before submission: the
    transported config with the hyperparameter overrides applied (in the container its data
    paths are then rewritten to the channels and ``run_dir`` becomes the checkpoint
    directory, both of which a resume may change)."""
    cfg = transported_config(trainer_config, sm)
    if not sm.hyperparameters:
        return cfg
    overrides = [f"{k}={hyperparameter_text(v)}" for k, v in sm.hyperparameters.items()]
    return TrainerConfig.from_dict(cfg.to_dict(), overrides, "sagemaker.hyperparameters")


def run_name(trainer_config: TrainerConfig, sm: SageMakerConfig) -> str:
    """The name of the run a job continues: ``<base_job_name>-<8 hex digits>``, the digits a
    hash of the training settings a resume compares (model, optimizer, data, seed, batch
    sizes, precision, ...: ``albertkit.training.config_change``) and of the replica count.

    A job of the same config submitted again (after ``max_run_seconds``, a failure, a stop)
    gets the same name, so it finds the run's checkpoints; a variant (another learning rate,
    another instance count) gets its own. Raising ``runtime.max_steps``, evaluation, logging
    and checkpoint settings, and data paths keep the name, as they keep a local resume.
    """
    digest = settings_fingerprint(job_config(trainer_config, sm), replicas=sm.replicas)
    return f"{sm.base_job_name.replace('_', '-')}-{digest}"


def run_checkpoint_uri(trainer_config: TrainerConfig, sm: SageMakerConfig) -> str:
    """The run's own checkpoint prefix: ``<output_path>/checkpoints/<run name>``."""
    return f"{sm.output_path.rstrip('/')}/checkpoints/{run_name(trainer_config, sm)}"


def with_checkpoint_prefix(trainer_config: TrainerConfig, sm: SageMakerConfig) -> SageMakerConfig:
    """``sm`` with ``checkpoint_s3_uri`` filled in: the run's own prefix
    (:func:`run_checkpoint_uri`) when it says ``auto``, or is unset in a spot job (which must
    sync checkpoints); an explicit URI, or none for an on-demand job, is kept."""
    uri = sm.checkpoint_s3_uri
    if uri == AUTO_CHECKPOINT_URI or (uri is None and sm.spot):
        return sm.model_copy(update={"checkpoint_s3_uri": run_checkpoint_uri(trainer_config, sm)})
    return sm


def transported_config(trainer_config: TrainerConfig, sm: SageMakerConfig) -> TrainerConfig:
    """The config that travels as JSON: this SageMaker section, its distribution backend."""
    raw = trainer_config.to_dict()
    raw["sagemaker"] = sm.model_dump(mode="json", exclude_none=True)
    if sm.mlflow_tracking_uri:  # the job tracks the run there (logging.mlflow's other fields kept)
        logging_section = raw.setdefault("logging", {})
        logging_section["mlflow"] = {**(logging_section.get("mlflow") or {}),
                                     "tracking_uri": sm.mlflow_tracking_uri}
    raw.setdefault("distributed", {})["backend"] = sm.backend
    return TrainerConfig.from_dict(raw, source="sagemaker job config")


# --------------------------------------------------------------------------- the job
class JobPlan:
    """One albertkit run as a SageMaker training job, without AWS: checked at construction,
    ``plan()`` is the request, ``stage_source``/``stage_driver`` write what gets uploaded.

    :class:`albertkit.sagemaker.submit.SageMakerJob` adds submission and following.
    """

    def __init__(self, trainer_config: TrainerConfig, sagemaker_config: SageMakerConfig):
        check_job(trainer_config, sagemaker_config)
        sagemaker_config = with_checkpoint_prefix(trainer_config, sagemaker_config)
        self.sagemaker_config = sagemaker_config
        self.trainer_config = transported_config(trainer_config, sagemaker_config)

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

    def estimate(self, measured: Iterable[str] = (), prices: PriceTable | None = None,
                 mfu: float = DEFAULT_MFU, checkpoint_s: float | None = None) -> FleetPlan:
        """This job's hours and cost: its fleet (``instance_type`` x ``instance_count``)
        planned as ``albertkit plan --fleet TYPE:COUNT`` plans it (:mod:`albertkit.plan.fleet`;
        the same arguments); ``albertkit launch --dry-run`` prints it."""
        sm = self.sagemaker_config
        from albertkit.plan import plan_fleets  # on use: not for `albertkit --help`

        return plan_fleets(job_config(self.trainer_config, sm),
                           f"{sm.instance_type}:{sm.instance_count}", measured, prices, mfu,
                           checkpoint_s=checkpoint_s)

    @property
    def tensorboard_local_path(self) -> str:
        """Where the container writes TensorBoard files (synced to ``tensorboard_s3_uri``)."""
        return posixpath.join(self.sagemaker_config.checkpoint_local_path, TENSORBOARD_SUBDIR)

    def stage_source(self, directory: Path) -> Path:
        """Write the source directory SageMaker uploads: entry script, config JSON,
        (``ship_source``) this albertkit package, so the container runs the same code, and
        a wheel of each ``plugins`` directory in ``albertkit_plugins/``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(directory / ENTRY_SCRIPT, ENTRY_SCRIPT_TEXT)
        # the container needs the sagemaker section (channels, distribution), which the
        # config's own to_json leaves out
        shipped = {**self.trainer_config.to_dict(), "sagemaker": self.sagemaker_config.model_dump(
            mode="json", exclude_none=True)}
        atomic_write_text(directory / CONFIG_FILE, json.dumps(shipped, indent=2))
        if self.sagemaker_config.ship_source:
            package = Path(__file__).resolve().parents[1]
            shutil.copytree(
                package,
                directory / "albertkit",
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
        if self.sagemaker_config.plugins:  # installed by the entry point before it parses
            from albertkit.sagemaker.shipping import (
                PLUGIN_WHEEL_DIR,
                build_dependency_wheels,
                build_wheels,
            )

            wheels = build_wheels(self.sagemaker_config.plugins, directory / PLUGIN_WHEEL_DIR)
            build_dependency_wheels(wheels, directory / PLUGIN_WHEEL_DIR / "deps")
        return directory

    def stage_driver(self, directory: Path) -> Path:
        """Write the Horovod launcher the SDK uploads and runs on every host (see
        ``albertkit.sagemaker.mpi_driver`` for why it replaces the SDK's MPI driver), with
        a key pair made for this job only (SSH between the job's hosts)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(__file__).with_name("mpi_driver.py"), directory / DRIVER_SCRIPT)
        shutil.copyfile(Path(__file__).with_name("cluster.py"), directory / CLUSTER_MODULE)
        write_job_ssh_key(directory / SSH_KEY_DIR)
        return directory
