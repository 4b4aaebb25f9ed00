"""The hosts of a SageMaker job, read once: ``SM_HOSTS`` / ``SM_CURRENT_HOST`` as a typed view.

Every host of a job computes the same sorted host list, so "rank" (the host's place in it)
and "chief" (rank 0) agree everywhere. The container entry point
(:mod:`albertkit.sagemaker.entrypoint`) and the Horovod launcher
(:mod:`albertkit.sagemaker.mpi_driver`) both read the cluster here.

The TF_CONFIG layout itself is albertkit's one cluster value,
:class:`albertkit.distributed.cluster.ClusterInfo` (shared with Slurm and the local launcher).

The MPI driver runs outside albertkit's package, so ``albertkit.sagemaker.plan`` stages a
copy of this file beside it (``CLUSTER_MODULE``); it therefore imports nothing at module
level but the standard library and albertkit's error class (when albertkit is installed);
the driver reads only the host list, and ``tf_config`` imports the cluster value when
called.

Example:
    >>> c = read_sagemaker_cluster({"SM_HOSTS": '["algo-2", "algo-1"]', "SM_CURRENT_HOST": "algo-2"})
    >>> c.hosts, c.rank, c.tf_config(2222)["task"]
    (['algo-1', 'algo-2'], 1, {'type': 'worker', 'index': 1})
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

try:
    from albertkit.errors import ConfigError
except ImportError:  # pragma: no cover - the staged copy in an image without albertkit
    ConfigError = ValueError  # type: ignore[misc, assignment]

if TYPE_CHECKING:
    from albertkit.distributed.cluster import ClusterInfo

CLUSTER_MODULE = "albertkit_cluster.py"  # the staged copy's name beside the MPI driver
DEFAULT_HOSTS = ["algo-1"]  # a container started without SageMaker's variables


@dataclass(frozen=True)
class SageMakerCluster:
    """The job's hosts (sorted, the same on every host) and the one this process runs on."""

    hosts: list[str]
    current_host: str

    @property
    def rank(self) -> int:
        """This host's place in the sorted host list; host 0 is the chief."""
        return self.hosts.index(self.current_host)

    @property
    def size(self) -> int:
        return len(self.hosts)

    def cluster_info(self, port: int) -> ClusterInfo:
        """This host's place as albertkit's cluster value: one worker per host on ``port``."""
        from albertkit.distributed.cluster import ClusterInfo

        return ClusterInfo.one_per_host(self.hosts, self.current_host, port, source="sagemaker")

    def tf_config(self, port: int) -> dict[str, Any] | None:
        """TF_CONFIG for MultiWorkerMirroredStrategy: one worker per host on ``port``, worker
        0 (the chief) the first host in sorted order; None for a single host."""
        return self.cluster_info(port).tf_config()


def read_sagemaker_cluster(
    environ: Mapping[str, str], resource_config: Mapping[str, Any] | None = None
) -> SageMakerCluster:
    """The cluster from ``SM_HOSTS`` (a JSON list) and ``SM_CURRENT_HOST``.

    Without ``SM_HOSTS``, ``resource_config`` (the parsed
    ``/opt/ml/input/config/resourceconfig.json``: ``hosts``, ``current_host``) is used, and
    without that one host, ``algo-1``. Every problem is a ConfigError naming the variable.
    """
    hosts_text = (environ.get("SM_HOSTS") or "").strip()
    current = (environ.get("SM_CURRENT_HOST") or "").strip()
    source = "SM_HOSTS"
    if hosts_text:
        try:
            hosts = json.loads(hosts_text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"SM_HOSTS: malformed JSON ({e.msg}): {hosts_text!r}") from None
    elif resource_config is not None:
        source = "resourceconfig.json hosts"
        hosts = resource_config.get("hosts")
        current = str(resource_config.get("current_host") or current)
        hosts_text = json.dumps(hosts)
    else:
        hosts = list(DEFAULT_HOSTS)
    if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) for h in hosts):
        raise ConfigError(f"{source}: must be a JSON list of host names, got {hosts_text!r}")
    if not current:
        if len(hosts) > 1:
            raise ConfigError(
                f"SM_HOSTS={hosts_text} names several hosts but SM_CURRENT_HOST is not set"
            )
        current = hosts[0]
    hosts = sorted(hosts)
    if current not in hosts:
        raise ConfigError(f"SM_CURRENT_HOST={current!r} is not in SM_HOSTS={hosts}")
    return SageMakerCluster(hosts=hosts, current_host=current)
