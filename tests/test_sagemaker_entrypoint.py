"""The container entry point, in a temporary directory laid out like /opt/ml."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from albertkit.config import ConfigError, TrainerConfig
from albertkit.sagemaker import entrypoint as ep
from albertkit.sagemaker import plan as smplan
from albertkit.sagemaker import submit as smsubmit
from albertkit.sagemaker.cluster import read_sagemaker_cluster
from albertkit.sagemaker.config import SageMakerConfig

ROLE = "arn:aws:iam::123456789012:role/albertkit-sagemaker"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest"
NET = {"subnets": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]}


def tiny_config(data: dict | None = None, **sagemaker) -> TrainerConfig:
    return TrainerConfig.from_dict(
        {
            "run_dir": "runs/local-only",
            "model": {
                "size": "tiny",
                "vocab_size": 101,
                "hidden_size": 32,
                "embedding_size": 16,
                "num_attention_heads": 2,
                "intermediate_size": 64,
                "max_position_embeddings": 64,
            },
            "data": data
            or {
                "kind": "synthetic",
                "seq_length": 32,
                "max_predictions_per_seq": 5,
                "num_examples": 64,
                "eval_examples": 16,
            },
            "optimizer": {"kind": "lamb", "learning_rate": 1e-3, "schedule": {"warmup_steps": 2}},
            "runtime": {
                "micro_batch_size": 4,
                "global_batch_size": 8,
                "max_steps": 8,
                "eval_every_steps": 0,
                "eval_steps": 2,
                "xla": False,
            },
            "checkpoint": {"every_steps": 3, "keep_last": 2},
            "logging": {"log_every_steps": 2},
            "sagemaker": {
                "role_arn": ROLE,
                "image_uri": IMAGE,
                "output_path": "s3://bkt/out",
                "ship_source": False,
                **sagemaker,
            },
        }
    )


def opt_ml(
    tmp_path: Path, job: smsubmit.SageMakerJob, channels: tuple[str, ...] = ()
) -> tuple[Path, dict]:
    """Lay out <tmp>/opt/ml as SageMaker does and return (root, SM_* environment)."""
    root = tmp_path / "opt" / "ml"
    job.stage_source(root / "input" / "data" / "code")
    for name in channels:
        (root / "input" / "data" / name).mkdir(parents=True)
    config = root / "input" / "config"
    config.mkdir(parents=True)
    (config / "hyperparameters.json").write_text(json.dumps(job.hyperparameters()))
    environ = {
        "SM_HOSTS": '["algo-1"]',
        "SM_CURRENT_HOST": "algo-1",
        "SM_NUM_GPUS": "0",
        "SM_MODEL_DIR": str(root / "model"),
        "SM_OUTPUT_DATA_DIR": str(root / "output" / "data"),
        "SM_SOURCE_DIR": str(root / "input" / "data" / "code"),
        "SM_HPS": json.dumps(job.hyperparameters()),
        **{f"SM_CHANNEL_{c.upper()}": str(root / "input" / "data" / c) for c in channels},
    }
    return root, environ


# --------------------------------------------------------------------------- pure parts
def test_container_config_rewrites_paths_and_applies_overrides(tmp_path):
    data = {
        "kind": "tfrecord",
        "seq_length": 32,
        "max_predictions_per_seq": 5,
        "train_files": ["data/pretrain/train-*.tfrecord", "data/pretrain"],
        "eval_files": ["s3://bkt/eval/eval-0.tfrecord"],
        "tokenizer": "data/pretrain-tokenizer/spm",
    }
    cfg = tiny_config(
        data,
        inputs={
            "train": {
                "kind": "fsx_lustre",
                "file_system_id": "fs-0123456789abcdef0",
                "mount_name": "mnt",
                "path_in_config": "./data/pretrain/",
            },
            "eval": {"kind": "s3", "uri": "s3://bkt/eval"},
            "tok": {
                "kind": "s3",
                "uri": "s3://bkt/tok",
                "path_in_config": "data/pretrain-tokenizer",
            },
        },
        hyperparameters={"optimizer.learning_rate": 0.002, "runtime.max_steps": 6},
        **NET,
    )
    job = smsubmit.to_sagemaker(cfg)
    root, environ = opt_ml(tmp_path, job, channels=("train", "eval", "tok"))
    env = ep.read_container_env(environ, root, ["--runtime.max_steps", "7"])
    inside = ep.container_config(env)
    ch = root / "input" / "data"
    assert inside.data.train_files == [f"{ch}/train/train-*.tfrecord", f"{ch}/train"]
    assert inside.data.eval_files == [f"{ch}/eval/eval-0.tfrecord"]
    assert str(inside.data.tokenizer) == f"{ch}/tok/spm"  # not swallowed by data/pretrain
    assert inside.run_dir == root / "checkpoints"
    assert inside.optimizer.learning_rate == 0.002
    assert inside.runtime.max_steps == 7  # the command line (MPI driver) wins
    assert inside.logging.progress_bar is False  # log lines feed the metric regexes
    assert SageMakerConfig.from_trainer_config(inside) == job.sagemaker_config

    environ.pop("SM_CHANNEL_TOK")
    (ch / "tok").rmdir()
    with pytest.raises(ConfigError, match=r"channel 'tok' is missing"):
        ep.container_config(ep.read_container_env(environ, root))


def test_hyperparameter_sources(tmp_path):
    job = smsubmit.to_sagemaker(tiny_config(), hyperparameters={"runtime.seed": 3})
    root, environ = opt_ml(tmp_path, job)
    (root / "input" / "config" / "hyperparameters.json").unlink()
    env = ep.read_container_env(environ, root)  # falls back to SM_HPS (already decoded JSON)
    assert env.hyperparameters == {"config": "albertkit_config.json", "runtime.seed": "3"}
    assert ep.container_config(env).runtime.seed == 3
    assert ep.parse_cli_hyperparameters(["--a", "1", "--b=x y", "--flag"]) == {
        "a": "1",
        "b": "x y",
        "flag": "true",
    }
    with pytest.raises(ConfigError, match="unexpected argument 'stray'"):
        ep.parse_cli_hyperparameters(["stray"])


def test_multiworker_tf_config_and_ranks(tmp_path):
    job = smsubmit.to_sagemaker(
        tiny_config(),
        instance_count=2,
        distribution={"kind": "tf_multiworker", "port": 23456},
        instance_type="ml.m5.xlarge",
    )
    root, environ = opt_ml(tmp_path, job)
    environ.update(SM_HOSTS='["algo-2", "algo-1"]', SM_CURRENT_HOST="algo-2")
    env = ep.read_container_env(environ, root)
    cfg = ep.container_config(env)
    assert cfg.distributed.backend == "tf_multiworker"
    assert json.loads(ep.process_environment(cfg, env)["TF_CONFIG"]) == {
        "cluster": {"worker": ["algo-1:23456", "algo-2:23456"]},
        "task": {"type": "worker", "index": 1},
    }
    assert not ep.is_chief(cfg, env)
    environ["SM_CURRENT_HOST"] = "algo-1"
    assert ep.is_chief(cfg, ep.read_container_env(environ, root))

    hvd = smsubmit.to_sagemaker(
        tiny_config(),
        instance_count=2,
        distribution={"kind": "horovod", "processes_per_host": 1},
        instance_type="ml.m5.xlarge",
    )
    root2, environ2 = opt_ml(tmp_path / "h", hvd)
    environ2.update(
        SM_HOSTS='["algo-1", "algo-2"]',
        OMPI_COMM_WORLD_RANK="1",
        OMPI_COMM_WORLD_LOCAL_RANK="0",
        OMPI_COMM_WORLD_SIZE="2",
    )
    env2 = ep.read_container_env(environ2, root2)
    cfg2 = ep.container_config(env2)
    assert (env2.rank, env2.local_rank, env2.world_size) == (1, 0, 2)
    assert not ep.is_chief(cfg2, env2) and ep.process_environment(cfg2, env2) == {}


def test_bad_config_writes_the_failure_file(tmp_path):
    job = smsubmit.to_sagemaker(tiny_config())
    root, environ = opt_ml(tmp_path, job)
    (root / "input" / "data" / "code" / smplan.CONFIG_FILE).write_text("{not json")
    assert ep.main([], environ, root) == 2
    assert "malformed JSON" in (root / "output" / "failure").read_text()


def test_entry_script_runs_main(tmp_path, monkeypatch):
    """The generated albertkit_entry.py imports the shipped package first and exits with main()."""
    import runpy
    import sys

    job = smsubmit.to_sagemaker(tiny_config(), ship_source=True)
    src = job.stage_source(tmp_path / "code")
    seen = {}
    monkeypatch.setattr(ep, "main", lambda argv: seen.setdefault("argv", argv) and 0)
    monkeypatch.setattr(sys, "argv", [str(src / smplan.ENTRY_SCRIPT), "--config", "x.json"])
    monkeypatch.setattr(sys, "path", list(sys.path))
    with pytest.raises(SystemExit):
        runpy.run_path(str(src / smplan.ENTRY_SCRIPT), run_name="__main__")
    assert seen["argv"] == ["--config", "x.json"]
    assert sys.path[0] == str(src)  # the shipped albertkit wins over the image's


def test_horovod_driver_launches_every_host(monkeypatch):
    """albertkit's MPI driver starts hosts x processes_per_host ranks (the SDK's own driver
    would pass the per-host count as -np), with the SDK's mpirun options and our args."""
    sdk = pytest.importorskip("sagemaker.train.constants")
    from albertkit.sagemaker import mpi_driver

    for name in ("common", "distributed_drivers"):  # the SDK's helper packages, fresh
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("SM_CURRENT_INSTANCE_TYPE", "ml.p4d.24xlarge")
    monkeypatch.setenv("SM_NETWORK_INTERFACE_NAME", "eth0")
    environ = {
        "SM_HOSTS": '["algo-2", "algo-1"]',
        "SM_CURRENT_HOST": "algo-2",
        "SM_NUM_GPUS": "8",
        "SM_DISTRIBUTED_CONFIG": json.dumps(
            {"process_count_per_node": 8, "mpi_additional_options": ["-x", "NCCL_DEBUG"]}
        ),
        "SM_ENTRY_SCRIPT": "albertkit_entry.py",
        "SM_HPS": json.dumps({"config": "albertkit_config.json", "runtime.seed": 3}),
    }
    assert mpi_driver.layout(environ) == (["algo-1", "algo-2"], 8)
    cmd = mpi_driver.mpirun_command(environ, sdk.SM_DRIVERS_LOCAL_PATH)
    assert cmd[0] == "mpirun"
    assert cmd[cmd.index("-np") + 1] == "16"
    assert cmd[cmd.index("--host") + 1] == "algo-1:8,algo-2:8"
    assert "--allow-run-as-root" in cmd and "FI_PROVIDER=efa" in cmd  # the SDK's settings
    assert cmd[cmd.index("--bind-to") : cmd.index("--bind-to") + 6] == [
        "--bind-to",
        "none",
        "--map-by",
        "slot",
        "-x",
        "NCCL_DEBUG",
    ]
    tail = cmd[cmd.index("mpi4py") - 1 :]
    assert tail == [
        "-m",
        "mpi4py",
        "albertkit_entry.py",
        "--config",
        "albertkit_config.json",
        "--runtime.seed",
        "3",
    ]
    no_config = {**environ, "SM_DISTRIBUTED_CONFIG": "{}", "SM_NUM_GPUS": "4"}
    assert mpi_driver.layout(no_config) == (["algo-1", "algo-2"], 4)


# --------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_tiny_job_end_to_end_resumes_and_exports(tmp_path):
    from albertkit.training.trainer import AlbertTrainer

    job = smsubmit.to_sagemaker(tiny_config(), hyperparameters={"runtime.seed": 7})
    root, environ = opt_ml(tmp_path, job)
    env = ep.read_container_env(environ, root)

    # A first attempt was spot-interrupted at step 4: SageMaker restores its checkpoints to
    # /opt/ml/checkpoints before the restarted container starts.
    first = AlbertTrainer(ep.container_config(env)).fit(until_step=4)
    assert first.summary["status"] == "interrupted"
    assert (root / "checkpoints" / "checkpoints").is_dir()

    assert ep.main([], environ, root) == 0
    summary = json.loads((root / "output" / "data" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["step"] == 8
    assert summary["resumed_from_step"] == 4
    model = root / "model"
    assert (model / "hf" / "config.json").is_file()
    assert (model / "hf" / "model.safetensors").is_file()
    assert any((model / "albertkit").iterdir())
    assert json.loads((model / "summary.json").read_text()) == summary
    metrics = (root / "checkpoints" / "metrics.jsonl").read_text()
    assert '"step": 8' in metrics
    assert TrainerConfig.from_yaml(root / "checkpoints" / "config.yaml").runtime.seed == 7


def test_each_job_carries_its_own_ssh_key_and_installs_it(tmp_path):
    from cryptography.hazmat.primitives import serialization

    from albertkit.sagemaker import mpi_driver

    job = smsubmit.to_sagemaker(tiny_config(), instance_type="ml.m5.xlarge", instance_count=2,
                             distribution={"kind": "horovod", "processes_per_host": 1})
    first = job.stage_driver(tmp_path / "d1") / mpi_driver.SSH_KEY_DIR
    second = job.stage_driver(tmp_path / "d2") / mpi_driver.SSH_KEY_DIR
    private = (first / "id_ed25519").read_bytes()
    assert private != (second / "id_ed25519").read_bytes()  # a new key per staging
    assert (first / "id_ed25519").stat().st_mode & 0o077 == 0
    key = serialization.load_ssh_private_key(private, password=None)
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert (first / "id_ed25519.pub").read_bytes().startswith(public)

    ssh = tmp_path / "root-ssh"
    assert mpi_driver.install_job_ssh_key(first, ssh)
    assert mpi_driver.install_job_ssh_key(first, ssh)  # idempotent: one authorized line
    assert (ssh / "id_ed25519").read_bytes() == private
    assert (ssh / "id_ed25519").stat().st_mode & 0o777 == 0o600
    assert (ssh / "authorized_keys").read_text().count("ssh-ed25519") == 1
    assert not mpi_driver.install_job_ssh_key(tmp_path / "no-key", tmp_path / "other")


# --------------------------------------------------------------------------- SM_* -> TF_CONFIG
# The one reader of SM_HOSTS / SM_CURRENT_HOST (albertkit.sagemaker.cluster) is what the entry
# point's process_environment and the MPI driver use. A TF_CONFIG already in the environment
# winning over SageMaker's variables is the distributed layer's rule (tests/test_distributed.py).
def test_tf_config_built_from_sagemaker_hosts():
    from albertkit.distributed.multiworker import cluster_position, tf_config_from_environ

    env = {"SM_HOSTS": '["algo-2", "algo-1", "algo-3"]', "SM_CURRENT_HOST": "algo-2"}
    cfg = read_sagemaker_cluster(env).tf_config(port=2222)
    assert cfg == {
        "cluster": {"worker": ["algo-1:2222", "algo-2:2222", "algo-3:2222"]},
        "task": {"type": "worker", "index": 1},
    }
    assert cluster_position(cfg) == (1, 3)
    # every host computes the same cluster, and exactly one of them is rank 0
    clusters = [read_sagemaker_cluster({**env, "SM_CURRENT_HOST": h})
                for h in ("algo-1", "algo-2", "algo-3")]
    assert [cluster_position(c.tf_config(2222))[0] for c in clusters] == [0, 1, 2]
    assert [c.rank for c in clusters] == [0, 1, 2]
    # what the entry point writes is exactly what the distributed layer reads back
    assert tf_config_from_environ({"TF_CONFIG": json.dumps(cfg)}) == cfg
    one = {"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1"}
    assert read_sagemaker_cluster(one).tf_config(2222) is None
    assert read_sagemaker_cluster({}).tf_config(2222) is None
    assert read_sagemaker_cluster({}).hosts == ["algo-1"]


def test_container_reads_the_hosts_from_resourceconfig_without_sm_hosts(tmp_path):
    job = smsubmit.to_sagemaker(tiny_config())
    root, environ = opt_ml(tmp_path, job)
    del environ["SM_HOSTS"], environ["SM_CURRENT_HOST"]
    (root / "input" / "config" / "resourceconfig.json").write_text(
        json.dumps({"current_host": "algo-2", "hosts": ["algo-2", "algo-1"]}))
    env = ep.read_container_env(environ, root)
    assert (env.hosts, env.current_host, env.cluster.rank) == (["algo-1", "algo-2"], "algo-2", 1)
    (root / "input" / "config" / "resourceconfig.json").write_text('{"hosts": [\n}')
    with pytest.raises(ConfigError, match=r"resourceconfig\.json: line 2, column 1: malformed JSON"):
        ep.read_container_env(environ, root)


@pytest.mark.parametrize("env, match", [
    ({"SM_HOSTS": '["algo-1", "algo-2"]'}, "SM_CURRENT_HOST is not set"),
    ({"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-9"}, "'algo-9' is not in"),
    ({"SM_HOSTS": "algo-1,algo-2"}, "SM_HOSTS: malformed JSON"),
    ({"SM_HOSTS": '{"a": 1}'}, "must be a JSON list"),
])
def test_bad_sagemaker_host_lists_name_the_variable(env, match, tmp_path):
    from albertkit.sagemaker import mpi_driver

    with pytest.raises(ConfigError, match=match):
        read_sagemaker_cluster(env)
    # the production paths: the container entry point and the Horovod launcher
    with pytest.raises(ConfigError, match=match):
        ep.read_container_env(env, tmp_path)
    with pytest.raises(ConfigError, match=match):
        mpi_driver.layout(env)


def test_staged_mpi_driver_reads_hosts_with_its_own_copy_of_the_reader(tmp_path):
    """The driver runs outside albertkit's package: staging puts the cluster reader beside it."""
    import subprocess

    from albertkit.sagemaker.cluster import CLUSTER_MODULE

    job = smsubmit.to_sagemaker(tiny_config(), instance_type="ml.m5.xlarge", instance_count=2,
                                distribution={"kind": "horovod", "processes_per_host": 1})
    staged = job.stage_driver(tmp_path / "drivers")
    assert (staged / CLUSTER_MODULE).is_file()
    code = ("import albertkit_mpi_driver as d; "
            "print(d.read_sagemaker_cluster.__module__, d.layout({'SM_HOSTS': '[\"b\", \"a\"]', "
            "'SM_CURRENT_HOST': 'b', 'SM_NUM_GPUS': '2'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=staged, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert out.split(None, 1) == ["albertkit_cluster", "(['a', 'b'], 2)\n"]


def test_multiworker_port_is_defined_once():
    from albertkit.sagemaker.config import MULTIWORKER_PORT, MultiWorkerDistribution

    assert MultiWorkerDistribution().port == MULTIWORKER_PORT
    src = Path(__file__).resolve().parents[1] / "src" / "albertkit"
    holders = [p.relative_to(src).as_posix() for p in src.rglob("*.py")
               if "12355" in p.read_text(encoding="utf-8")]
    assert holders == ["sagemaker/config.py"], holders
    assert not [p for p in (src / "distributed").rglob("*.py") if "SM_" in p.read_text()]
