"""SageMaker integration.

* :mod:`albertkit.sagemaker.config` / :mod:`~albertkit.sagemaker.defaults` -- the
  ``sagemaker:`` config section and its defaults from the environment;
* :mod:`albertkit.sagemaker.plan` -- the job as a pure, checked CreateTrainingJob request;
* :mod:`albertkit.sagemaker.submit` -- submitting it and following the job;
* :mod:`albertkit.sagemaker.entry_script` / :mod:`~albertkit.sagemaker.entrypoint` /
  :mod:`~albertkit.sagemaker.mpi_driver` -- the container side: the uploaded entry script,
  the SM_* environment to a finished model, the per-host Horovod launcher;
* :mod:`albertkit.sagemaker.gpu_driver` -- the NVIDIA driver the image's CUDA code needs,
  checked by the entry point before any data, model or TensorFlow work.
"""
