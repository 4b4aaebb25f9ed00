"""SageMaker integration.

The public names (``__all__``) are importable from here: ``from albertkit.sagemaker import
to_sagemaker, attach``. Each is imported on first use, and the SageMaker SDK only when a job
is submitted or followed.

* :mod:`albertkit.sagemaker.config` / :mod:`~albertkit.sagemaker.defaults` -- the
  ``sagemaker:`` config section and its defaults from the environment;
* :mod:`albertkit.sagemaker.plan` -- the job as a pure, checked CreateTrainingJob request;
* :mod:`albertkit.sagemaker.submit` -- submitting it and following the job;
* :mod:`albertkit.sagemaker.shipping` -- the plugins a job ships (``sagemaker.plugins``, built
  into wheels, installed in the container) or finds in its image, and the refusal of a job
  that would have neither;
* :mod:`albertkit.sagemaker.entry_script` / :mod:`~albertkit.sagemaker.entrypoint` /
  :mod:`~albertkit.sagemaker.mpi_driver` -- the container side: the uploaded entry script,
  the SM_* environment to a finished model, the per-host Horovod launcher;
* :mod:`albertkit.sagemaker.gpu_driver` -- the NVIDIA driver the image's CUDA code needs,
  checked by the entry point before any data, model or TensorFlow work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from albertkit._lazy import lazy_exports

if TYPE_CHECKING:
    from albertkit.sagemaker.config import (
        FSxLustreInput,
        HorovodDistribution,
        LocalInput,
        MultiWorkerDistribution,
        S3Input,
        SageMakerConfig,
    )
    from albertkit.sagemaker.defaults import load_launch_config, sagemaker_defaults_from_env
    from albertkit.sagemaker.plan import JobPlan
    from albertkit.sagemaker.submit import SageMakerJob, TrainingJobHandle, attach, to_sagemaker

__all__ = [
    "FSxLustreInput",
    "HorovodDistribution",
    "JobPlan",
    "LocalInput",
    "MultiWorkerDistribution",
    "S3Input",
    "SageMakerConfig",
    "SageMakerJob",
    "TrainingJobHandle",
    "attach",
    "load_launch_config",
    "sagemaker_defaults_from_env",
    "to_sagemaker",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "FSxLustreInput": "config",
    "HorovodDistribution": "config",
    "JobPlan": "plan",
    "LocalInput": "config",
    "MultiWorkerDistribution": "config",
    "S3Input": "config",
    "SageMakerConfig": "config",
    "SageMakerJob": "submit",
    "TrainingJobHandle": "submit",
    "attach": "submit",
    "load_launch_config": "defaults",
    "sagemaker_defaults_from_env": "defaults",
    "to_sagemaker": "submit",
})
