"""SageMakerConfig: everything a SageMaker training job needs besides the training config.

It lives in the ``sagemaker:`` section of a config file (read with
``SageMakerConfig.from_trainer_config``, or passed as overrides to ``to_sagemaker``), so the
YAML file that was debugged locally also describes the cloud job. Everything here is
checked without any AWS call: combinations SageMaker would refuse (or accept and then fail
on hours later) are refused with a message that names the field and the value.

Nothing here reads the environment; ``albertkit launch`` and ``to_sagemaker`` take defaults
from ``ALBERTKIT_SM_*`` variables through ``albertkit.sagemaker.defaults`` (one resolver).

Example:
    >>> cfg = SageMakerConfig(
    ...     role_arn="arn:aws:iam::123456789012:role/albertkit-sagemaker",
    ...     image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest",
    ...     output_path="s3://my-bucket/albertkit",
    ...     instance_type="ml.p4d.24xlarge", instance_count=2,
    ...     distribution={"kind": "horovod"})
    >>> cfg.processes_per_host, cfg.replicas
    (8, 16)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from albertkit.config import TrainerConfig, invalid_configuration
from albertkit.config.base import Section
from albertkit.hardware import instance_spec
from albertkit.sagemaker.wire import (
    HyperparameterValue,
    hyperparameter_text,
    is_dotted_path,
    secret_name_word,
    secret_value_kind,
)

# Service limits of CreateTrainingJob (botocore's service model for sagemaker 2017-07-24 and
# https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html).
MAX_HYPERPARAMETERS = 100
MAX_HYPERPARAMETER_KEY = 256
MAX_HYPERPARAMETER_VALUE = 2500
MAX_ENVIRONMENT = 100
MAX_ENVIRONMENT_VALUE = 512
MAX_TAGS = 50
MAX_RUNTIME_SECONDS = 28 * 24 * 3600  # 28 days, the service maximum
MAX_KEEP_ALIVE_SECONDS = 21600  # ResourceConfig.KeepAlivePeriodInSeconds maximum
JOB_NAME_TIMESTAMP = 15  # "-YYYYmmddHHMMSS" appended by the SDK; names are <= 63 chars
RESERVED_CHANNELS = ("code", "sm_drivers")  # created by the SageMaker SDK for the source
CONFIG_HYPERPARAMETER = "config"  # the hyperparameter that names the config JSON
MULTIWORKER_PORT = 12355  # where tf_multiworker workers listen unless distribution.port says
# The config file section this schema validates (an extension section of TrainerConfig).
SECTION = "sagemaker"
SECTION_DESCRIPTION = (
    "SageMaker job settings (albertkit launch, to_sagemaker); unused by local runs."
)

# checkpoint_s3_uri's value for "the run's own prefix" (albertkit.sagemaker.plan derives it)
AUTO_CHECKPOINT_URI = "auto"
BUCKET_PLACEHOLDER = "{bucket}"  # stands for SageMakerConfig.bucket in any other value
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-/]+$")
_MLFLOW_ARN = re.compile(
    r"^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:mlflow-(tracking-server|app)/[A-Za-z0-9-]+$")
_CHANNEL = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
_JOB_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
_FSX_ID = re.compile(r"^fs-[0-9a-f]{8,17}$")
_ENV_KEY = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_TAG = re.compile(r"^[\w\s.:/=+\-@]*$")
_DistributionName = Annotated[str, Field(pattern=r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")]
_SECRET_ADVICE = (
    "it would be visible in DescribeTrainingJob. Give the execution role the permission "
    "instead, or read the secret from AWS Secrets Manager inside the job"
)



def _check_s3(field: str, value: str | None) -> str | None:
    # an unfilled {bucket} is reported by SageMakerConfig once everything else is checked
    probe = value.replace(BUCKET_PLACEHOLDER, "bucket") if value is not None else None
    if probe is not None and not _S3_URI.match(probe):
        raise ValueError(f"{field}={value!r} is not an S3 URI like s3://bucket/prefix")
    return value


# --------------------------------------------------------------------------- inputs
class S3Input(Section):
    """A channel downloaded from (``File``) or streamed from (``FastFile``) an S3 prefix.

    ``path_in_config`` is the path prefix the training config uses for this data; in the
    container every config path under it is rewritten to the channel directory. It defaults
    to the S3 URI itself, so configs may name ``s3://...`` files directly.
    """

    kind: Literal["s3"] = Field("s3", description="An S3 channel.")
    uri: str = Field(description="S3 prefix (or object) of the data, s3://bucket/prefix.")
    input_mode: Literal["File", "FastFile"] = Field(
        "File",
        description="File: copied to the instance's volume before training starts; FastFile: "
        "streamed from S3 as it is read.",
    )
    distribution: Literal["FullyReplicated", "ShardedByS3Key"] = Field(
        "FullyReplicated",
        description="FullyReplicated: every instance gets all objects; ShardedByS3Key: each "
        "instance gets a share of the objects.",
    )
    path_in_config: str | None = Field(
        None,
        description="Path prefix the training config uses for this data, rewritten to the "
        "channel directory in the container; null = uri.",
    )

    @field_validator("uri")
    @classmethod
    def _uri(cls, v: str) -> str:
        return _check_s3("uri", v)

    def config_prefix(self) -> str | None:
        return self.path_in_config or self.uri


class FSxLustreInput(Section):
    """A channel mounted from an FSx for Lustre file system (needs VPC subnets and groups).

    ``mount_name`` is the file system's Lustre mount name (``aws fsx describe-file-systems``
    -> ``LustreConfiguration.MountName``); ``directory`` a path inside it.
    """

    kind: Literal["fsx_lustre"] = Field(
        "fsx_lustre", description="A channel mounted from FSx for Lustre."
    )
    file_system_id: str = Field(description="The file system's id, fs-0123456789abcdef0.")
    mount_name: str = Field(
        ...,
        min_length=1,
        description="The file system's Lustre mount name (LustreConfiguration.MountName), "
        "without '/'.",
    )
    directory: str = Field("/", description="Directory inside the file system; / = its root.")
    access_mode: Literal["ro", "rw"] = Field(
        "ro", description="Mount read-only (ro) or read-write (rw)."
    )
    path_in_config: str | None = Field(
        None,
        description="Path prefix the training config uses for this data, rewritten to the "
        "channel directory in the container; null = no rewriting.",
    )

    @field_validator("file_system_id")
    @classmethod
    def _fs_id(cls, v: str) -> str:
        if not _FSX_ID.match(v):
            raise ValueError(f"file_system_id={v!r} is not an FSx id like fs-0123456789abcdef0")
        return v

    @field_validator("mount_name")
    @classmethod
    def _mount(cls, v: str) -> str:
        if "/" in v:
            raise ValueError(f"mount_name={v!r} must be the bare Lustre mount name, without '/'")
        return v

    @property
    def directory_path(self) -> str:
        """SageMaker's DirectoryPath: ``/<mount name>/<directory>``."""
        inner = "/".join(p for p in self.directory.split("/") if p)
        return f"/{self.mount_name}/{inner}" if inner else f"/{self.mount_name}"

    def config_prefix(self) -> str | None:
        return self.path_in_config


class LocalInput(Section):
    """A local file or directory, uploaded to S3 by the SageMaker SDK at submission (tests,
    small fine-tuning sets). ``path_in_config`` defaults to the local path."""

    kind: Literal["local"] = Field(
        "local", description="A local file or directory, uploaded at submission."
    )
    path: Path = Field(description="Local file or directory to upload.")
    path_in_config: str | None = Field(
        None,
        description="Path prefix the training config uses for this data, rewritten to the "
        "channel directory in the container; null = path.",
    )

    def config_prefix(self) -> str | None:
        return self.path_in_config or str(self.path)


InputConfig = Annotated[S3Input | FSxLustreInput | LocalInput, Field(discriminator="kind")]


# --------------------------------------------------------------------------- distribution
class HorovodDistribution(Section):
    """Horovod over MPI: ``processes_per_host`` processes on every instance (default: one per
    GPU, from albertkit's instance table). The image needs Open MPI, sshd and mpi4py."""

    kind: Literal["horovod"] = Field("horovod", description="Horovod over MPI.")
    processes_per_host: int | None = Field(
        None,
        gt=0,
        description="MPI processes (one GPU each) per instance; null = the instance type's GPU "
        "count from albertkit's instance table.",
    )
    mpi_options: list[str] = Field(
        [], description="Extra options for mpirun, e.g. ['-x', 'NCCL_DEBUG=INFO']."
    )


class MultiWorkerDistribution(Section):
    """``tf.distribute.MultiWorkerMirroredStrategy``: one process per instance using all its
    GPUs; the entry point builds TF_CONFIG from SM_HOSTS and listens on ``port``."""

    kind: Literal["tf_multiworker"] = Field(
        "tf_multiworker", description="tf.distribute.MultiWorkerMirroredStrategy."
    )
    port: int = Field(
        MULTIWORKER_PORT,
        ge=1024,
        le=65535,
        description="TCP port each worker listens on for the others (in TF_CONFIG).",
    )


DistributionConfig = Annotated[
    HorovodDistribution | MultiWorkerDistribution, Field(discriminator="kind")
]



# --------------------------------------------------------------------------- root
class SageMakerConfig(Section):
    """How an albertkit run executes as a SageMaker training job.

    Example:
        >>> SageMakerConfig(instance_type="ml.g5.12xlarge",
        ...                 distribution={"kind": "horovod"}).processes_per_host
        4
    """

    # identity and image
    bucket: str | None = Field(
        None,
        description="The project's S3 bucket; '{bucket}' in any other sagemaker value "
        "(s3://{bucket}/checkpoints/...) is replaced by it, so an example config names no "
        "bucket of its own ($ALBERTKIT_SM_BUCKET sets it for albertkit launch).",
    )
    role_arn: str | None = Field(
        None,
        description="IAM role the job runs as (arn:aws:iam::ACCOUNT:role/NAME); required to "
        "submit ($ALBERTKIT_SM_ROLE_ARN).",
    )
    image_uri: str | None = Field(
        None,
        description="Training image (ECR URI) with TensorFlow and albertkit's dependencies; "
        "required to submit ($ALBERTKIT_SM_IMAGE_URI).",
    )
    region: str | None = Field(
        None,
        description="AWS region of the job; null = boto3's default (AWS_DEFAULT_REGION, the "
        "profile's region).",
    )
    base_job_name: str = Field(
        "albertkit",
        min_length=1,
        max_length=63 - JOB_NAME_TIMESTAMP,
        description="Job name prefix; the job is named base_job_name-YYYYmmddHHMMSS (at most 63 characters).",
    )
    # compute
    instance_type: str = Field(
        "ml.p4d.24xlarge", description="SageMaker instance type of every host."
    )
    instance_count: int = Field(
        1, ge=1, description="Number of instances; more than 1 needs a distribution."
    )
    volume_size_gb: int = Field(
        100, ge=1, description="Storage volume per instance, in GB (File-mode channels land here)."
    )
    max_run_seconds: int = Field(
        2 * 24 * 3600,
        ge=1,
        le=MAX_RUNTIME_SECONDS,
        description="Run time limit in seconds; SageMaker stops the job after it (default 2 "
        "days).",
    )
    spot: bool = Field(
        False,
        description="Managed spot training; needs max_wait_seconds, and checkpoints synced to "
        "S3 (checkpoint_s3_uri, by default the run's own prefix).",
    )
    max_wait_seconds: int | None = Field(
        None,
        ge=1,
        description="Spot only: total time in seconds including waiting for capacity, at least "
        "max_run_seconds.",
    )
    keep_alive_seconds: int = Field(
        0,
        ge=0,
        le=MAX_KEEP_ALIVE_SECONDS,
        description="Warm pool: seconds the instances stay up for the next job; 0 = none (not "
        "with spot).",
    )
    distribution: DistributionConfig | None = Field(
        None,
        description="How processes are spread over the instances; null = one process "
        "(defaults to the config's distributed.backend when that is not single).",
    )
    # network
    subnets: list[str] = Field(
        [], description="VPC subnet ids; needed for FSx inputs, set together with "
        "security_group_ids.",
    )
    security_group_ids: list[str] = Field(
        [], description="VPC security group ids; set together with subnets."
    )
    encrypt_inter_container_traffic: bool = Field(
        False, description="Encrypt traffic between the job's instances (slower collectives)."
    )
    # data in and out
    inputs: dict[str, InputConfig] = Field(
        {},
        description="Input channels by name (mounted at /opt/ml/input/data/NAME): s3, "
        "fsx_lustre or local.",
    )
    output_path: str | None = Field(
        None,
        description="S3 prefix for the model artifact (model.tar.gz) and the uploaded source; "
        "required to submit ($ALBERTKIT_SM_OUTPUT_PATH).",
    )
    checkpoint_s3_uri: str | None = Field(
        None,
        description="S3 prefix that checkpoint_local_path is synced to and restored from (a "
        "restarted job resumes); 'auto' = the run's own prefix, output_path/checkpoints/"
        "<base_job_name>-<hash of the training settings>; null = auto with spot, else no sync.",
    )
    checkpoint_local_path: str = Field(
        "/opt/ml/checkpoints",
        description="Absolute container directory for checkpoints; the run directory in the job.",
    )
    tensorboard_s3_uri: str | None = Field(
        None,
        description="S3 prefix the job's TensorBoard files are copied to while it runs; null = "
        "none.",
    )
    mlflow_tracking_uri: str | None = Field(
        None,
        description="Where the job's logging.mlflow sends the run: a SageMaker managed MLflow "
        "tracking server ARN or an http(s) URL the job's network reaches; null = the "
        "config's own logging.mlflow.",
    )
    # job metadata
    tags: dict[str, str] = Field({}, description="AWS tags of the job (no secrets).")
    environment: dict[str, str] = Field(
        {},
        description="Environment variables in the container; names with a secret word "
        "(TOKEN, PASSWORD, ...) are refused.",
    )
    hyperparameters: dict[str, HyperparameterValue] = Field(
        {},
        description="Scalar config overrides by dotted path (optimizer.learning_rate: 1e-3), "
        "applied in the container.",
    )
    ship_source: bool = Field(
        True,
        description="Upload this checkout's albertkit package with the job, so the container "
        "runs the same code as the submitter.",
    )
    plugins: list[Path] = Field(
        [],
        description="Source directories of albertkit plugins (each with a pyproject.toml), built "
        "into wheels at submission, uploaded with the source and installed in the container "
        "before the config is parsed.",
    )
    image_plugins: list[_DistributionName] = Field(
        [],
        description="Distributions of albertkit plugins that image_uri's image already has "
        "installed; a part of the config from any other plugin must be shipped with plugins.",
    )

    # ------------------------------------------------------------------ the config section
    @classmethod
    def from_trainer_config(cls, cfg: TrainerConfig, source: str = "config"
                            ) -> SageMakerConfig | None:
        """The validated ``sagemaker:`` section of ``cfg``, or None when it has none.

        The config root keeps the section raw (it does not know this schema); this is where
        it is checked. Raises ``ConfigError`` naming each bad field (``sagemaker.<field>``).
        """
        raw = cfg.extension_section(SECTION)
        if raw is None:
            return None
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            raise invalid_configuration(source, e, prefix=SECTION) from None

    # ------------------------------------------------------------------ field checks
    @model_validator(mode="before")
    @classmethod
    def _fill_bucket(cls, data):
        """Replace ``{bucket}`` in every string value (nested inputs included)."""
        if not isinstance(data, dict):
            return data
        bucket = data.get("bucket")
        if bucket is not None and not _BUCKET.match(str(bucket)):
            raise ValueError(f"bucket={bucket!r} is not an S3 bucket name (no s3://, no '/')")
        if bucket is None:
            return data  # an unfilled placeholder is reported after the other checks

        def fill(node):
            if isinstance(node, dict):
                return {k: fill(v) for k, v in node.items()}
            if isinstance(node, list):
                return [fill(v) for v in node]
            if isinstance(node, str):
                return node.replace(BUCKET_PLACEHOLDER, bucket)
            return node

        return {k: (v if k == "bucket" else fill(v)) for k, v in data.items()}

    @field_validator("role_arn")
    @classmethod
    def _role(cls, v: str | None) -> str | None:
        if v is not None and not _ROLE_ARN.match(v):
            raise ValueError(
                f"role_arn={v!r} is not an IAM role ARN like arn:aws:iam::123456789012:role/name"
            )
        return v

    @field_validator("output_path", "checkpoint_s3_uri", "tensorboard_s3_uri")
    @classmethod
    def _s3(cls, v: str | None, info) -> str | None:
        if info.field_name == "checkpoint_s3_uri" and v == AUTO_CHECKPOINT_URI:
            return v
        return _check_s3(info.field_name, v)

    @field_validator("mlflow_tracking_uri")
    @classmethod
    def _mlflow_uri(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not (_MLFLOW_ARN.match(v) or v.startswith(("https://", "http://"))):
            raise ValueError(
                f"mlflow_tracking_uri={v!r} is neither a SageMaker MLflow tracking server ARN "
                "(arn:aws:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME, or "
                "mlflow-app/NAME) nor an http(s):// URL (a local path would stay inside the "
                "container)")
        if "@" in v.split("://", 1)[-1].split("/", 1)[0]:
            raise ValueError(f"mlflow_tracking_uri holds credentials; {_SECRET_ADVICE}")
        return v

    @field_validator("base_job_name")
    @classmethod
    def _job_name(cls, v: str) -> str:
        if not _JOB_NAME.match(v.replace("_", "-")):
            raise ValueError(
                f"base_job_name={v!r} may hold only letters, digits and '-' and must start and "
                "end with a letter or digit"
            )
        return v

    @field_validator("checkpoint_local_path")
    @classmethod
    def _ckpt_local(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"checkpoint_local_path={v!r} must be an absolute container path")
        return v

    @field_validator("inputs")
    @classmethod
    def _channels(cls, v: dict) -> dict:
        for name in v:
            if not _CHANNEL.match(name):
                raise ValueError(
                    f"inputs: channel name {name!r} may hold only letters, digits, '.', '-', '_' "
                    "(at most 64)"
                )
            if name in RESERVED_CHANNELS:
                raise ValueError(
                    f"inputs: channel name {name!r} is reserved for the uploaded source code"
                )
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: dict[str, str]) -> dict[str, str]:
        if len(v) > MAX_TAGS:
            raise ValueError(f"tags: {len(v)} tags, SageMaker allows at most {MAX_TAGS}")
        for key, value in v.items():
            if not (1 <= len(key) <= 128 and _TAG.match(key)) or key.lower().startswith("aws:"):
                raise ValueError(f"tags: invalid tag key {key!r}")
            if len(value) > 256 or not _TAG.match(value):
                raise ValueError(f"tags[{key!r}]: invalid tag value {value!r}")
            word = secret_name_word(key)
            if word is not None:
                raise ValueError(
                    f"tags[{key!r}] looks like a secret ({word!r} in its name); {_SECRET_ADVICE}"
                )
            if secret_value_kind(value):
                raise ValueError(
                    f"tags[{key!r}] holds what looks like a credential; {_SECRET_ADVICE}"
                )
        return v

    @field_validator("environment")
    @classmethod
    def _environment(cls, v: dict[str, str]) -> dict[str, str]:
        if len(v) > MAX_ENVIRONMENT:
            raise ValueError(f"environment: {len(v)} variables, SageMaker allows {MAX_ENVIRONMENT}")
        for key, value in v.items():
            if not _ENV_KEY.match(key):
                raise ValueError(f"environment: {key!r} is not a valid variable name")
            if len(value) > MAX_ENVIRONMENT_VALUE:
                raise ValueError(
                    f"environment[{key!r}]: value of {len(value)} characters exceeds "
                    f"SageMaker's {MAX_ENVIRONMENT_VALUE}"
                )
            word = secret_name_word(key)
            if word is not None:
                raise ValueError(
                    f"environment[{key!r}] looks like a secret ({word!r} in its name); "
                    f"{_SECRET_ADVICE}"
                )
            if secret_value_kind(value):
                raise ValueError(
                    f"environment[{key!r}] holds what looks like a credential; {_SECRET_ADVICE}"
                )
        return v

    @field_validator("hyperparameters")
    @classmethod
    def _hyperparameters(cls, v: dict[str, HyperparameterValue]) -> dict[str, HyperparameterValue]:
        # one slot is taken by the config path
        if len(v) > MAX_HYPERPARAMETERS - 1:
            raise ValueError(
                f"hyperparameters: {len(v)} overrides, SageMaker allows "
                f"{MAX_HYPERPARAMETERS - 1} besides {CONFIG_HYPERPARAMETER!r}"
            )
        for key, value in v.items():
            if key == CONFIG_HYPERPARAMETER or key.split(".")[0] == "sagemaker":
                raise ValueError(f"hyperparameters: {key!r} cannot be overridden per job")
            if not key or len(key) > MAX_HYPERPARAMETER_KEY:
                raise ValueError(
                    f"hyperparameters: key {key[:40]!r}... is longer than "
                    f"{MAX_HYPERPARAMETER_KEY} characters"
                )
            if not is_dotted_path(key):
                raise ValueError(
                    f"hyperparameters: key {key!r} is not a dotted config path like "
                    "optimizer.learning_rate (letters, digits, single '_' between words, '.')"
                )
            text = hyperparameter_text(value)
            if len(text) > MAX_HYPERPARAMETER_VALUE:
                raise ValueError(
                    f"hyperparameters[{key!r}]: value of {len(text)} characters exceeds "
                    f"SageMaker's limit of {MAX_HYPERPARAMETER_VALUE}; put it in the config "
                    "file instead (it travels as JSON in the uploaded source)"
                )
            # Keys are config paths, checked against the config before submission (some
            # fields have "token" in their name), so only the values are looked at.
            if secret_value_kind(text):
                raise ValueError(
                    f"hyperparameters[{key!r}] holds what looks like a credential; "
                    f"{_SECRET_ADVICE}"
                )
        return v

    # ------------------------------------------------------------------ combinations
    @model_validator(mode="after")
    def _combinations(self) -> SageMakerConfig:
        if bool(self.subnets) != bool(self.security_group_ids):
            raise ValueError(
                f"subnets={self.subnets} and security_group_ids={self.security_group_ids}: a VPC "
                "needs both (or neither)"
            )
        fsx = [name for name, i in self.inputs.items() if i.kind == "fsx_lustre"]
        if fsx and not self.subnets:
            raise ValueError(
                f"inputs {fsx} read FSx for Lustre, which SageMaker reaches only inside a VPC: "
                "set subnets (in the file system's availability zone) and security_group_ids"
            )
        if self.spot:
            if self.max_wait_seconds is None:
                raise ValueError(
                    f"spot=true needs max_wait_seconds (>= max_run_seconds={self.max_run_seconds}):"
                    " the total time including waiting for spot capacity"
                )
            if self.max_wait_seconds < self.max_run_seconds:
                raise ValueError(
                    f"max_wait_seconds={self.max_wait_seconds} is shorter than max_run_seconds="
                    f"{self.max_run_seconds}; SageMaker requires max wait >= max run"
                )
            if self.keep_alive_seconds:
                raise ValueError(
                    f"keep_alive_seconds={self.keep_alive_seconds} with spot=true: SageMaker "
                    "warm pools are not available for managed spot training"
                )
        elif self.max_wait_seconds is not None:
            raise ValueError(
                f"max_wait_seconds={self.max_wait_seconds} applies only to managed spot training "
                "(set spot: true, or remove max_wait_seconds)"
            )
        if self.instance_count > 1 and self.distribution is None:
            raise ValueError(
                f"instance_count={self.instance_count} needs a distribution "
                "({kind: horovod} or {kind: tf_multiworker})"
            )
        if self.distribution is not None and self.distribution.kind == "horovod":
            self.processes_per_host  # noqa: B018  (raises naming the instance type)
        unfilled = _placeholder_fields(self.model_dump(mode="json", exclude={"bucket"}))
        if unfilled:
            raise ValueError(
                f"{', '.join(unfilled)} use {BUCKET_PLACEHOLDER} but bucket is not set (in the "
                "config, --set sagemaker.bucket=NAME, or $ALBERTKIT_SM_BUCKET for albertkit "
                "launch)"
            )
        return self

    @model_validator(mode="after")
    def _spot_resumes_exactly(self) -> SageMakerConfig:
        """A spot job resumes after every interruption, so it must resume exactly: a
        multi-worker job with several GPUs per worker does not (docs/distributed.md, "Known
        limits")."""
        dist = self.distribution
        spec = instance_spec(self.instance_type)
        if (self.spot and dist is not None and dist.kind == "tf_multiworker"
                and spec is not None and spec.gpus > 1):
            raise ValueError(
                f"spot=true with distribution.kind=tf_multiworker on {self.instance_type} "
                f"({spec.gpus} GPUs per instance): after an interruption such a job does not "
                "resume at its place in the training data (the checkpoint's data position "
                "counts one replica per worker, each worker here feeds "
                f"{spec.gpus}); use distribution {{kind: horovod}} (one process per GPU, "
                "resumes exactly), or spot=false"
            )
        return self

    # ------------------------------------------------------------------ derived
    @property
    def processes_per_host(self) -> int:
        """Training processes per instance: Horovod's MPI slots, else 1."""
        dist = self.distribution
        if dist is None or dist.kind != "horovod":
            return 1
        if dist.processes_per_host is not None:
            return dist.processes_per_host
        spec = instance_spec(self.instance_type)
        if spec is None:
            raise ValueError(
                f"distribution.kind=horovod: instance_type={self.instance_type!r} is not in "
                "albertkit's instance table (albertkit/hardware.py), so the number "
                "of processes per host is unknown; set distribution.processes_per_host"
            )
        if spec.gpus == 0:
            raise ValueError(
                f"distribution.kind=horovod: instance_type={self.instance_type!r} has no GPU; "
                "set distribution.processes_per_host for CPU processes"
            )
        return spec.gpus

    @property
    def replicas(self) -> int:
        """Data-parallel model replicas in the whole job (for batch-size arithmetic)."""
        dist = self.distribution
        if dist is not None and dist.kind == "tf_multiworker":
            spec = instance_spec(self.instance_type)
            per_host = max(spec.gpus, 1) if spec is not None else 1
            return self.instance_count * per_host
        return self.instance_count * self.processes_per_host

    @property
    def backend(self) -> Literal["single", "horovod", "tf_multiworker"]:
        """The albertkit ``distributed.backend`` the job's processes use."""
        return "single" if self.distribution is None else self.distribution.kind


def _placeholder_fields(node, where: str = "") -> list[str]:
    """Dotted names of the values that still hold ``{bucket}``."""
    if isinstance(node, dict):
        return [f for k, v in node.items()
                for f in _placeholder_fields(v, f"{where}.{k}" if where else str(k))]
    if isinstance(node, list):
        return [f for i, v in enumerate(node) for f in _placeholder_fields(v, f"{where}[{i}]")]
    return [where] if isinstance(node, str) and BUCKET_PLACEHOLDER in node else []
