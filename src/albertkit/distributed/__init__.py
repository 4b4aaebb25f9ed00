"""Data-parallel backends behind one :class:`~albertkit.distributed.base.Distributor` interface.

``build_distributor(cfg.distributed)`` returns the backend the config names. Horovod and
the multi-worker strategy are imported only when chosen. ``launch_local(cli_command(argv),
nproc, backend)`` runs an ``albertkit`` command as ``nproc`` cooperating local processes
(what ``--nproc`` does).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from albertkit.config import DistributedConfig
from albertkit.distributed.base import Distributor
from albertkit.distributed.launch import cli_command, launch_local


def build_distributor(cfg: DistributedConfig, environ: Mapping[str, str] | None = None
                      ) -> Distributor:
    """The backend named by ``cfg.backend``.

    ``environ`` (default ``os.environ``) is where a launched process learns its place in
    the job: ``TF_CONFIG`` for ``tf_multiworker`` (on SageMaker the entry point writes it
    from the host list); Horovod reads its own variables set by horovodrun/mpirun.
    Build it before any other TensorFlow work (GPU pinning, collective setup).
    """
    backend = cfg.backend
    if backend == "single":
        from albertkit.distributed.single import SingleProcess

        return SingleProcess()
    if backend == "horovod":
        from albertkit.distributed.horovod import HorovodDistributor

        return HorovodDistributor(fp16_compression=cfg.fp16_compression)
    if backend == "tf_multiworker":
        from albertkit.distributed.multiworker import (
            MultiWorkerDistributor,
            tf_config_from_environ,
        )

        environ = os.environ if environ is None else environ
        return MultiWorkerDistributor(tf_config_from_environ(environ),
                                      fp16_compression=cfg.fp16_compression)
    raise ValueError(f"distributed.backend={backend!r} is not one of single, horovod, "
                     "tf_multiworker")


__all__ = ["Distributor", "build_distributor", "cli_command", "launch_local"]
