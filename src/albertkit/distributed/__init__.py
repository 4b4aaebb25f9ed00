"""Data-parallel backends behind one :class:`~albertkit.distributed.base.Distributor` interface.

``build_distributor(cfg.distributed)`` returns the backend the config names. Horovod and
the multi-worker strategy are imported only when chosen. Where a process sits in its job
(TF_CONFIG, a Slurm step, or alone) is decided in :mod:`albertkit.distributed.cluster`.
``launch_local(cli_command(argv), nproc, backend)`` runs an ``albertkit`` command as
``nproc`` cooperating local processes (what ``--nproc`` does).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from albertkit.config import DistributedConfig
from albertkit.distributed.base import Distributor
from albertkit.distributed.cluster import cluster_from_environ
from albertkit.distributed.launch import cli_command, launch_local
from albertkit.distributed.startup import wait_for_all_ranks
from albertkit.errors import ConfigError

HOROVOD_UNDER_SRUN = (
    "Horovod under Slurm joins the step through Gloo when it is built with Gloo "
    "(horovod.tensorflow.gloo_built()); with the MPI controller it takes its ranks from MPI: "
    "start it with `srun --mpi=pmix` (or --mpi=pmi2, whichever `srun --mpi=list` offers and "
    "Open MPI was built with), with Horovod built with MPI (horovod.tensorflow.mpi_built()); "
    "or start it with horovodrun from a single task. See docs/slurm.md"
)


def build_distributor(cfg: DistributedConfig, environ: Mapping[str, str] | None = None
                      ) -> Distributor:
    """The backend named by ``cfg.backend``.

    ``environ`` (default ``os.environ``) is where a launched process learns its place in
    the job: ``TF_CONFIG`` for ``tf_multiworker`` (on SageMaker the entry point writes it
    from the host list; in a Slurm step without it, it is built from the allocation);
    Horovod reads its own variables set by horovodrun/mpirun, or MPI's under
    ``srun --mpi=pmix``; in a Slurm step of several tasks otherwise, each task joins through
    Horovod's Gloo controller (:mod:`albertkit.distributed.slurm_gloo`: the variables from
    the step, the first task serving the rendezvous). Where Horovod still sees another
    number of processes than the step has tasks, every task stops with a ConfigError saying
    how to start it; ``single`` in a step of several tasks is a ConfigError too. Build it
    before any other TensorFlow work (GPU pinning, collective setup).

    Before the backend starts, every process of a Slurm step (and every ``tf_multiworker``
    worker of a ``TF_CONFIG`` cluster) reports to rank 0
    (:func:`albertkit.distributed.startup.wait_for_all_ranks`): when one never comes within
    ``cfg.startup_timeout_s`` seconds, every process stops with one line naming it, instead
    of waiting inside the backend. Horovod's build is checked against the controller the
    environment asks for first (:func:`albertkit.distributed.horovod.check_horovod_build`).
    """
    backend = cfg.backend
    environ = os.environ if environ is None else environ
    if backend == "single":
        step = cluster_from_environ(environ)
        if step.source == "slurm" and step.world_size > 1:
            raise ConfigError(
                f"this Slurm step has {step.world_size} tasks but distributed.backend=single "
                "trains in one process: each task would train alone into the same run_dir. "
                "Use --distributed tf_multiworker or horovod, or start one task (srun -n1)")
        from albertkit.distributed.single import SingleProcess

        return SingleProcess()
    if backend == "horovod":
        from albertkit.distributed.horovod import (
            HorovodDistributor,
            check_horovod_build,
            import_horovod,
        )
        from albertkit.distributed.slurm_gloo import prepare_slurm_horovod

        hvd = import_horovod()
        check_horovod_build(environ, hvd)
        step = cluster_from_environ(environ)
        if step.source == "slurm":  # horovodrun and mpirun watch their processes themselves
            wait_for_all_ranks(step, cfg.startup_timeout_s)
        prepare_slurm_horovod(step, environ, hvd, timeout=cfg.startup_timeout_s)
        dist = HorovodDistributor(fp16_compression=cfg.fp16_compression)
        if step.source == "slurm" and step.world_size > 1 and dist.size != step.world_size:
            raise ConfigError(f"this Slurm step has {step.world_size} tasks but Horovod sees "
                              f"{dist.size} process(es). {HOROVOD_UNDER_SRUN}")
        return dist
    if backend == "tf_multiworker":
        wait_for_all_ranks(cluster_from_environ(environ), cfg.startup_timeout_s)
        from albertkit.distributed.multiworker import (
            MultiWorkerDistributor,
            tf_config_from_environ,
        )

        return MultiWorkerDistributor(tf_config_from_environ(environ),
                                      fp16_compression=cfg.fp16_compression)
    raise ValueError(f"distributed.backend={backend!r} is not one of single, horovod, "
                     "tf_multiworker")


__all__ = ["Distributor", "build_distributor", "cli_command", "launch_local"]
