"""Submitting a :class:`~albertkit.sagemaker.plan.JobPlan` and following the job.

``to_sagemaker(config, **overrides)`` returns a :class:`SageMakerJob`: the checked plan plus
``fit()``, which uploads the staged source and submits it through the SageMaker SDK v3
``ModelTrainer`` (and, when waiting, streams the CloudWatch logs), and ``status()``,
``wait()``, ``stop()``. ``attach(name)`` follows a job that is already running. The SDK is
imported only here and only when used (the ``sagemaker`` extra: ``pip install -e
'.[sagemaker]'`` in a clone of this repository).

Example (the request of a two-host Horovod job, built without any AWS call; ``fit`` submits
it, which needs an AWS account, so that line is skipped):
    >>> tiny = {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
    ...         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
    >>> cfg = TrainerConfig.from_dict({
    ...     "model": tiny, "runtime": {"micro_batch_size": 4, "global_batch_size": 64},
    ...     "data": {"kind": "synthetic", "seq_length": 16, "max_predictions_per_seq": 2},
    ...     "sagemaker": {"role_arn": "arn:aws:iam::123456789012:role/albertkit",
    ...                   "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:1",
    ...                   "output_path": "s3://my-bucket/runs"}})
    >>> job = to_sagemaker(cfg, instance_count=2, distribution={"kind": "horovod"})
    >>> request = job.plan(job_name="albertkit-demo")
    >>> request["ResourceConfig"]
    {'InstanceType': 'ml.p4d.24xlarge', 'InstanceCount': 2, 'VolumeSizeInGB': 100}
    >>> request["HyperParameters"], [c["ChannelName"] for c in request["InputDataConfig"]]
    ({'config': 'albertkit_config.json'}, ['code', 'sm_drivers'])
    >>> job.status()
    Traceback (most recent call last):
    ...
    RuntimeError: the job has not been submitted yet: call fit() first
    >>> job.fit(wait=False).status()  # doctest: +SKIP
    'InProgress'
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from albertkit.config import TrainerConfig
from albertkit.sagemaker.config import SageMakerConfig
from albertkit.sagemaker.defaults import resolve_sagemaker_config, sagemaker_defaults_from_env
from albertkit.sagemaker.entry_script import ENTRY_SCRIPT
from albertkit.sagemaker.mpi_driver import DRIVER_SCRIPT
from albertkit.sagemaker.plan import JobPlan

log = logging.getLogger(__name__)

_SDK_INSTALL_HINT = (
    "submitting needs the SageMaker SDK v3 and boto3: pip install -e '.[sagemaker]' in a "
    "clone of the albertkit repository (albertkit is not on PyPI)"
)


class SageMakerJob(JobPlan):
    """One albertkit run as a SageMaker training job: the plan, submitted with ``fit()``.

    Build it with :func:`to_sagemaker`. ``plan()`` is pure; ``fit()`` submits.
    """

    def __init__(self, trainer_config: TrainerConfig, sagemaker_config: SageMakerConfig):
        super().__init__(trainer_config, sagemaker_config)
        self.job_name: str | None = None
        self.submitted_request: dict[str, Any] | None = None
        self._boto_session = None

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

    Example (attaching makes no AWS call; asking the job's status does, so it is skipped):
        >>> job = attach("albertkit-20250101120000")
        >>> job.job_name
        'albertkit-20250101120000'
        >>> job.status()  # doctest: +SKIP
        'InProgress'
        >>> job.wait(logs=True)  # doctest: +SKIP
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
        """Ask SageMaker to stop the job (its status becomes ``Stopping``, then ``Stopped``)."""
        self._client().stop_training_job(TrainingJobName=self.job_name)

    def logs(self, follow: bool = False, poll: float = 5.0) -> Iterator[tuple[str, str]]:
        """``(stream name, message)`` for the job's CloudWatch log events, one stream per
        host. ``follow`` keeps reading until the job ends; otherwise it returns once it has
        read what exists."""
        import boto3

        from albertkit.sagemaker.joblogs import log_events

        client = (self._boto_session or boto3.Session()).client("logs")
        return log_events(client, self.job_name, follow=follow, status=self.status, poll=poll)


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


def to_sagemaker(
    config: TrainerConfig, *, env_defaults: Mapping[str, Any] | None = None, **overrides: Any
) -> SageMakerJob:
    """The SageMaker job for ``config``: ``overrides`` (``instance_type="ml.p4d.24xlarge"``,
    ``instance_count=8``, ``spot=True``, ...) over its ``sagemaker:`` section over the
    ``ALBERTKIT_SM_*`` environment defaults over the built-in ones, resolved by
    :func:`albertkit.sagemaker.defaults.resolve_sagemaker_config` exactly as for
    ``albertkit launch``.

    ``env_defaults``: the environment's defaults as
    :func:`~albertkit.sagemaker.defaults.sagemaker_defaults_from_env` returns them; None (the
    default) reads them from ``os.environ`` here, ``{}`` ignores the environment.

    Raises ``ConfigError`` naming every field that is wrong, before any AWS call.
    """
    if env_defaults is None:
        env_defaults = sagemaker_defaults_from_env(os.environ)  # the Python edge reads it here
    return SageMakerJob(config, resolve_sagemaker_config(config, overrides, env_defaults))
