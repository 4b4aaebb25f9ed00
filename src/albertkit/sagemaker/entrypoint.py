"""The container side of a SageMaker job: from SM_* variables and /opt/ml to a finished model.

SageMaker (through the SDK v3 driver) runs ``albertkit_entry.py`` from the uploaded source,
once per host, or under ``mpirun`` once per GPU for Horovod. This module then:

1. reads the SageMaker environment (``SM_HOSTS``, ``SM_CURRENT_HOST``, ``SM_NUM_GPUS``,
   ``SM_CHANNEL_*``, ``SM_MODEL_DIR``, ``SM_OUTPUT_DATA_DIR``, the hyperparameters from
   ``/opt/ml/input/config/hyperparameters.json`` / ``SM_HPS`` / the command line);
2. installs the plugin wheels shipped with the job (``sagemaker.plugins``,
   :mod:`albertkit.sagemaker.shipping`), so that the config's plugin parts are found when it
   is first parsed; loads the shipped config JSON, applies the dotted hyperparameter
   overrides, rewrites the data paths to the channel directories and sets ``run_dir`` to the
   checkpoint directory
   (SageMaker syncs it to ``checkpoint_s3_uri`` and restores it after a spot interruption,
   so ``AlbertTrainer`` resumes by itself);
3. for multi-worker training, translates ``SM_HOSTS``/``SM_CURRENT_HOST`` (read once, by
   :mod:`albertkit.sagemaker.cluster`) into ``TF_CONFIG`` (the distributed layer reads
   nothing SageMaker-specific); Horovod pins one GPU per local rank itself
   (``albertkit.distributed.horovod``);
4. trains, then (chief only) writes the model in albertkit and Hugging Face formats to
   ``SM_MODEL_DIR`` (``model.tar.gz``) and the summary to ``SM_OUTPUT_DATA_DIR``.

Between steps 2 and 3, before any data is read, a model built or TensorFlow imported, the
instance's NVIDIA driver is checked against the CUDA code the job loads
(:mod:`albertkit.sagemaker.gpu_driver`): a driver too old fails the job at once, in one line
that SageMaker also shows as the job's FailureReason.

Everything is parameterised by ``root_dir`` (default ``/opt/ml``) and an ``environ`` mapping,
so tests run it in a temporary directory laid out like ``/opt/ml``.

Example (a container laid out in ``opt/ml`` of the working directory, the second of two hosts;
``main`` would train there, which takes longer than a test should, so it is skipped):
    >>> code = Path("opt/ml/input/data/code")
    >>> code.mkdir(parents=True)
    >>> tiny = {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
    ...         "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
    >>> raw = {"model": tiny, "distributed": {"backend": "tf_multiworker"},
    ...        "data": {"kind": "synthetic", "seq_length": 16, "max_predictions_per_seq": 2}}
    >>> _ = (code / CONFIG_FILE).write_text(json.dumps(raw))
    >>> environ = {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2"}
    >>> env = read_container_env(environ, "opt/ml", ["--runtime.max_steps", "3"])
    >>> env.hosts, env.hyperparameters
    (['algo-1', 'algo-2'], {'runtime.max_steps': '3'})
    >>> cfg = container_config(env)
    >>> cfg.runtime.max_steps, str(cfg.run_dir), cfg.logging.progress_bar, is_chief(cfg, env)
    (3, 'opt/ml/checkpoints', False, False)
    >>> json.loads(process_environment(cfg, env)["TF_CONFIG"])["task"]
    {'type': 'worker', 'index': 1}
    >>> main(["--runtime.max_steps", "3"], environ, "opt/ml")  # doctest: +SKIP
    0
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import posixpath
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from albertkit.config import TrainerConfig, apply_overrides
from albertkit.config.registry import limit_plugins, plugin_names
from albertkit.distributed.cluster import launcher_cluster
from albertkit.errors import ConfigError, GpuDriverError
from albertkit.fileio import read_json
from albertkit.sagemaker.cluster import SageMakerCluster, read_sagemaker_cluster
from albertkit.sagemaker.config import CONFIG_HYPERPARAMETER, MULTIWORKER_PORT, SageMakerConfig
from albertkit.sagemaker.gpu_driver import check_driver
from albertkit.sagemaker.plan import CONFIG_FILE, path_under
from albertkit.sagemaker.shipping import install_shipped_plugins
from albertkit.sagemaker.wire import config_path, hyperparameter_text

log = logging.getLogger("albertkit")

SAGEMAKER_ROOT = "/opt/ml"
EXIT_INTERRUPTED = 143  # 128 + SIGTERM: stopped or spot-interrupted, checkpoint written
# The image's container-start hook (docker/container_start.sh) forwards SIGTERM to the PIDs
# named in this directory; the hook creates it on every host, so ranks that MPI starts over
# ssh (without the hook's environment) find it too.
TRAINER_DIR_ENV = "ALBERTKIT_TRAINER_DIR"
DEFAULT_TRAINER_DIR = "/run/albertkit/trainers"


@dataclass(frozen=True)
class ContainerEnv:
    """What SageMaker tells the container, with every path under ``root``."""

    root: Path
    cluster: SageMakerCluster
    num_gpus: int
    channels: dict[str, Path]
    model_dir: Path
    output_data_dir: Path
    code_dir: Path
    hyperparameters: dict[str, str]
    rank: int
    local_rank: int
    world_size: int

    @property
    def hosts(self) -> list[str]:
        """Every host of the job, sorted (the same list on every host)."""
        return self.cluster.hosts

    @property
    def current_host(self) -> str:
        return self.cluster.current_host

    def container_path(self, path: str) -> Path:
        """``/opt/ml/x`` -> ``<root>/x`` (identity when root is /opt/ml)."""
        rest = path_under(path, SAGEMAKER_ROOT)
        return self.root / rest if rest is not None else Path(path)


def parse_cli_hyperparameters(argv: list[str]) -> dict[str, str]:
    """``--key value`` pairs, as the SDK drivers pass hyperparameters on the command line."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--") or len(token) == 2:
            raise ConfigError(f"entry point: unexpected argument {token!r} (expected --key value)")
        key = token[2:]
        if "=" in key:
            key, _, value = key.partition("=")
            i += 1
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            value = argv[i + 1]
            i += 2
        else:
            value = "true"
            i += 1
        out[key] = value
    return out


def read_container_env(
    environ: Mapping[str, str],
    root_dir: str | os.PathLike = SAGEMAKER_ROOT,
    argv: list[str] | None = None,
) -> ContainerEnv:
    """Collect the SageMaker environment (variables, then the /opt/ml files as fallback)."""
    root = Path(root_dir)

    def path_var(name: str, default: Path) -> Path:
        return Path(environ[name]) if environ.get(name) else default

    resource_file = root / "input" / "config" / "resourceconfig.json"
    resource = None
    if not (environ.get("SM_HOSTS") or "").strip() and resource_file.is_file():
        resource = read_json(resource_file, "SageMaker resource config")
    cluster = read_sagemaker_cluster(environ, resource)

    data_dir = root / "input" / "data"
    channels: dict[str, Path] = {}
    if data_dir.is_dir():
        channels.update({p.name: p for p in data_dir.iterdir() if p.is_dir()})
    for key, value in environ.items():
        if key.startswith("SM_CHANNEL_") and key != "SM_CHANNELS":
            channels[key[len("SM_CHANNEL_") :].lower()] = Path(value)

    hps: dict[str, str] = {}
    hp_file = root / "input" / "config" / "hyperparameters.json"
    if hp_file.is_file():
        raw_hps = read_json(hp_file, "SageMaker hyperparameters file")
        hps.update({k: str(v) for k, v in raw_hps.items()})
    elif environ.get("SM_HPS"):
        hps.update(
            {
                k: hyperparameter_text(v) if not isinstance(v, dict | list) else json.dumps(v)
                for k, v in json.loads(environ["SM_HPS"]).items()
            }
        )
    hps.update(parse_cli_hyperparameters(list(argv or [])))
    # the request names overrides optimizer__learning_rate; the config wants the dotted path
    hps = {config_path(k): v for k, v in hps.items()}

    launched = launcher_cluster(environ)
    return ContainerEnv(
        root=root,
        cluster=cluster,
        num_gpus=int(environ.get("SM_NUM_GPUS") or 0),
        channels=channels,
        model_dir=path_var("SM_MODEL_DIR", root / "model"),
        output_data_dir=path_var("SM_OUTPUT_DATA_DIR", root / "output" / "data"),
        code_dir=path_var("SM_SOURCE_DIR", data_dir / "code"),
        hyperparameters=hps,
        # mpirun tells each Horovod process its place; without MPI there is one per host.
        rank=launched.rank if launched else 0,
        local_rank=launched.local_rank if launched else 0,
        world_size=launched.world_size if launched else 1,
    )


def _rewrite_paths(node: Any, mapping: list[tuple[str, Path]]) -> Any:
    if isinstance(node, dict):
        return {k: _rewrite_paths(v, mapping) for k, v in node.items()}
    if isinstance(node, list):
        return [_rewrite_paths(v, mapping) for v in node]
    if isinstance(node, str):
        for prefix, target in mapping:
            rest = path_under(node, prefix)
            if rest is not None:
                return str(target / rest) if rest else str(target)
    return node


def container_config(env: ContainerEnv) -> TrainerConfig:
    """The run's config inside the container: shipped JSON + hyperparameter overrides, data
    paths rewritten to the channels, ``run_dir`` = the (synced) checkpoint directory."""
    hps = dict(env.hyperparameters)
    config_name = hps.pop(CONFIG_HYPERPARAMETER, CONFIG_FILE)
    path = env.code_dir / config_name
    raw = read_json(path, "config file in the job's source")
    raw = apply_overrides(raw, [f"{k}={v}" for k, v in hps.items()])

    try:
        sm = SageMakerConfig.model_validate(raw.get("sagemaker") or {})
    except ValidationError as e:
        raise ConfigError(f"{path}: invalid sagemaker section: {e}") from None
    mapping: list[tuple[str, Path]] = []
    for name, spec in sm.inputs.items():
        prefix = spec.config_prefix()
        if not prefix:
            continue
        if name not in env.channels:
            raise ConfigError(
                f"sagemaker.inputs.{name}: channel {name!r} is missing in the container "
                f"(have: {sorted(env.channels)})"
            )
        mapping.append((prefix, env.channels[name]))
    # longest prefix first, so nested inputs map to the most specific channel
    mapping.sort(key=lambda item: len(posixpath.normpath(item[0])), reverse=True)
    body = {k: v for k, v in raw.items() if k not in ("sagemaker", "run_dir")}
    raw = {**raw, **_rewrite_paths(body, mapping)}

    raw["run_dir"] = str(env.container_path(sm.checkpoint_local_path))
    # No terminal in a training job: print the log lines (SageMaker's metric regexes read
    # them from the logs) instead of a progress bar.
    raw.setdefault("logging", {})["progress_bar"] = False
    return TrainerConfig.from_dict(raw, source=str(path))


def process_environment(cfg: TrainerConfig, env: ContainerEnv) -> dict[str, str]:
    """Variables this process must set before TensorFlow starts."""
    out: dict[str, str] = {}
    sm = SageMakerConfig.from_trainer_config(cfg)
    dist = sm.distribution if sm else None
    if cfg.distributed.backend == "tf_multiworker" and len(env.hosts) > 1:
        port = dist.port if dist is not None and dist.kind == "tf_multiworker" else MULTIWORKER_PORT
        out["TF_CONFIG"] = json.dumps(env.cluster.tf_config(port))
    return out


def is_chief(cfg: TrainerConfig, env: ContainerEnv) -> bool:
    """Rank 0 of the job: writes the model and the summary."""
    if cfg.distributed.backend == "horovod":
        return env.rank == 0
    return env.cluster.rank == 0


@contextlib.contextmanager
def registered_trainer(environ: Mapping[str, str]) -> Iterator[Path | None]:
    """Name this process in the trainer directory while it runs, so that a SIGTERM sent to the
    container's PID 1 (a job stop, a spot interruption) reaches it and it can checkpoint.

    Outside the image (no such directory) this does nothing.
    """
    directory = Path(environ.get(TRAINER_DIR_ENV) or DEFAULT_TRAINER_DIR)
    registered: Path | None = None
    if directory.is_dir():
        try:
            registered = directory / str(os.getpid())
            registered.touch()
        except OSError as e:
            log.warning("cannot register for signal forwarding in %s: %s", directory, e)
            registered = None
    try:
        yield registered
    finally:
        if registered is not None:
            registered.unlink(missing_ok=True)


def _copy(src: Path, dst: Path) -> None:
    if src.is_file():
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def run(env: ContainerEnv, apply_environment: bool = True) -> int:
    """Train inside the container described by ``env``; returns the process exit code."""
    from albertkit.training.trainer import AlbertTrainer

    cfg = container_config(env)
    extra = process_environment(cfg, env)
    if apply_environment and extra:
        os.environ.update(extra)
    chief = is_chief(cfg, env)
    backend = cfg.distributed.backend
    if backend == "horovod" and env.num_gpus and env.world_size > len(env.hosts) * env.num_gpus:
        log.warning(
            "%d Horovod processes on %d hosts with %d GPUs each: GPUs are shared",
            env.world_size,
            len(env.hosts),
            env.num_gpus,
        )
    # GPU pinning (Horovod: one GPU per local rank) happens where the backend is built,
    # in albertkit.distributed.horovod, before any other TensorFlow work.
    if chief:
        log.info(
            "SageMaker: host %s of %s, backend=%s, run_dir=%s, channels=%s",
            env.current_host,
            env.hosts,
            backend,
            cfg.run_dir,
            sorted(env.channels),
        )

    trainer = AlbertTrainer(cfg).fit()
    summary = trainer.summary or {}
    if not chief:
        return 0
    run_dir = Path(cfg.run_dir)
    for name in ("summary.json", "config.yaml", "metrics.jsonl"):
        _copy(run_dir / name, env.output_data_dir / name)
    if summary.get("status") == "interrupted":
        log.warning(
            "training was interrupted at step %s; checkpoint kept in %s, no model exported",
            summary.get("step"),
            run_dir,
        )
        return EXIT_INTERRUPTED
    env.model_dir.mkdir(parents=True, exist_ok=True)
    # a restarted job may find its own earlier exports here: replace those (only those)
    trainer.export(env.model_dir / "albertkit", format="albertkit", overwrite=True)
    trainer.export(env.model_dir / "hf", format="hf", overwrite=True)
    _copy(run_dir / "summary.json", env.model_dir / "summary.json")
    log.info("model written to %s (albertkit/ and hf/)", env.model_dir)
    return 0


def main(
    argv: list[str] | None = None,
    environ: Mapping[str, str] | None = None,
    root_dir: str | os.PathLike = SAGEMAKER_ROOT,
) -> int:
    """Entry point of ``albertkit_entry.py``; ``argv`` holds the SDK's ``--key value`` pairs."""
    from albertkit.tfstart import start_tensorflow
    from albertkit.training.run_logger import setup_console_logging

    setup_console_logging()
    environ = os.environ if environ is None else environ
    try:
        env = read_container_env(environ, root_dir, argv)
        # the plugins shipped with the job (sagemaker.plugins), before the config is first
        # parsed: that parse is when the registry looks for plugins, once per process
        installed = install_shipped_plugins(env.code_dir)
        if installed is not None and environ is os.environ:  # for processes this one starts
            before = [p for p in [os.environ.get("PYTHONPATH")] if p]
            os.environ["PYTHONPATH"] = os.pathsep.join([str(installed), *before])
        # the plugins this job may load (ALBERTKIT_PLUGINS=name,...; all when unset)
        limit_plugins(plugin_names(environ.get("ALBERTKIT_PLUGINS")))
        # before the data, the model or TensorFlow: an NVIDIA driver too old for the CUDA code
        # this job loads fails here in one line, not at its first kernel launch (only the
        # horovod backend loads Horovod's kernels, whose CUDA may need a newer driver)
        check_driver(environ, horovod=container_config(env).distributed.backend == "horovod")
        start_tensorflow(quiet=False)  # lean; a job's log keeps TensorFlow's own lines
        with registered_trainer(environ):
            return run(env)
    except (ConfigError, GpuDriverError) as e:
        log.error("%s", e)
        failure = Path(root_dir) / "output" / "failure"
        try:
            # SageMaker shows this file's text as the job's FailureReason
            failure.parent.mkdir(parents=True, exist_ok=True)
            failure.write_text(str(e)[:1024], encoding="utf-8")
        except OSError:
            pass
        return 2


if __name__ == "__main__":  # `python -m albertkit.sagemaker.entrypoint` (the image's `train`)
    import sys

    sys.exit(main(sys.argv[1:]))
