"""The SageMaker SDK v3's own container driver scripts, run without an image.

ModelTrainer uploads these scripts (the `sm_drivers` channel) and makes the container run
`/bin/bash -c "chmod +x .../sm_train.sh && .../sm_train.sh"`. Two ways that chain used to
kill or cripple an albertkit job, shown here with the SDK's real files:

* every hyperparameter becomes `export SM_HP_<NAME>=...` in a file that sm_train.sh sources
  under `set -e`, so a name that is not a shell identifier ends the job before training;
* the bash that is PID 1 swallows SIGTERM, so a job stop or spot interruption never reached
  the trainer, unless the image's container-start hook (docker/container_start.sh) forwards it.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from albertkit.sagemaker import entrypoint as ep
from albertkit.sagemaker import plan as smplan
from albertkit.sagemaker import submit as smsubmit

sm_train = pytest.importorskip("sagemaker.train")
from sagemaker.train import templates as sdk_templates  # noqa: E402

from test_sagemaker_entrypoint import opt_ml, tiny_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SDK_DRIVERS = Path(sm_train.__file__).resolve().parent / "container_drivers"
HOOK = ROOT / "docker" / "container_start.sh"


def sdk_environment_file(tmp_path: Path, hyperparameters: dict[str, str]) -> Path:
    """Run the SDK's scripts/environment.py (its set_env) and return the file it writes."""
    drivers = tmp_path / "sm_drivers"
    shutil.copytree(SDK_DRIVERS, drivers, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "sm_training.env"
    resource = {
        "current_host": "algo-1",
        "current_instance_type": "ml.g5.xlarge",
        "hosts": ["algo-1", "algo-2"],
        "network_interface_name": "eth0",
    }
    code = textwrap.dedent(
        f"""
        import runpy
        env = runpy.run_path({str(drivers / "scripts" / "environment.py")!r})
        env["set_env"](resource_config={resource!r},
                       input_data_config={{"train": {{"TrainingInputMode": "File"}}}},
                       hyperparameters_config={hyperparameters!r},
                       output_file={str(out)!r})
        """
    )
    subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        env={**os.environ, "TRAINING_JOB_NAME": "albertkit-test"},
        timeout=120,
    )
    return out


def source_like_sm_train(env_file: Path) -> subprocess.CompletedProcess:
    # sm_train.sh: `set -e` ... `source /opt/ml/input/sm_training.env`
    return subprocess.run(
        ["bash", "-c", f"set -e; source {env_file}; echo \"hp=$SM_HP_OPTIMIZER__LEARNING_RATE\""],
        capture_output=True,
        text=True,
        timeout=30,
    )


# --------------------------------------------------------------------------- hyperparameters
def test_planned_hyperparameters_survive_the_sdk_environment_script(tmp_path):
    job = smsubmit.to_sagemaker(
        tiny_config(), hyperparameters={"optimizer.learning_rate": 0.002, "runtime.seed": 3}
    )
    hps = job.plan(job_name="albertkit-test")["HyperParameters"]
    assert hps["optimizer__learning_rate"] == "0.002" and "optimizer.learning_rate" not in hps
    result = source_like_sm_train(sdk_environment_file(tmp_path, hps))
    assert result.returncode == 0, result.stderr
    assert "hp=0.002" in result.stdout


def test_a_dotted_name_would_stop_sm_train(tmp_path):
    # what the request used to carry: the job died here, before training
    env_file = sdk_environment_file(tmp_path, {"config": "c.json", "optimizer.learning_rate": "1"})
    result = source_like_sm_train(env_file)
    assert result.returncode != 0
    assert "not a valid identifier" in result.stderr


def test_encoded_override_reaches_the_config_through_the_driver_arguments(tmp_path):
    job = smsubmit.to_sagemaker(tiny_config(), hyperparameters={"optimizer.learning_rate": 0.002})
    root, environ = opt_ml(tmp_path, job)
    # the SDK's drivers pass SM_HPS on the command line (hyperparameters_to_cli_args)
    sys.path.insert(0, str(SDK_DRIVERS))
    try:
        from common.utils import hyperparameters_to_cli_args
    finally:
        sys.path.remove(str(SDK_DRIVERS))
    (root / "input" / "config" / "hyperparameters.json").unlink()
    argv = hyperparameters_to_cli_args(json.loads(environ.pop("SM_HPS")))
    assert "--optimizer__learning_rate" in argv
    cfg = ep.container_config(ep.read_container_env(environ, root, argv))
    assert cfg.optimizer.learning_rate == 0.002


# --------------------------------------------------------------------------- SIGTERM
STAND_IN_TRAINER = """
import os, signal, sys, time
from albertkit.sagemaker.entrypoint import registered_trainer

got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(1))
with registered_trainer(os.environ):
    print("trainer ready", flush=True)
    end = time.monotonic() + 60
    while not got and time.monotonic() < end:
        time.sleep(0.05)
    with open(sys.argv[-1], "w") as f:
        f.write("SIGTERM" if got else "no signal")
sys.exit(143 if got else 0)
"""


def run_as_container(tmp_path: Path, with_hook: bool) -> tuple[subprocess.Popen, int, Path]:
    """Start the SDK's real sm_train.sh chain with bash as PID 1 of a fresh PID namespace
    and /opt/ml mounted from tmp_path (as SageMaker starts a job); return (unshare process,
    host pid of that PID 1, marker file)."""
    opt = tmp_path / "opt-ml"
    code = opt / "input" / "data" / "code"
    drivers = opt / "input" / "data" / "sm_drivers"
    config = opt / "input" / "config"
    for d in (code, config, opt / "output" / "data", opt / "model"):
        d.mkdir(parents=True)
    shutil.copytree(SDK_DRIVERS, drivers, ignore=shutil.ignore_patterns("__pycache__"))
    (drivers / "sourcecode.json").write_text(json.dumps({"entry_script": "trainer.py"}))
    (drivers / "distributed.json").write_text("null")
    train_sh = sdk_templates.TRAIN_SCRIPT_TEMPLATE.format(
        working_dir="cd /opt/ml/input/data/code\n",
        install_requirements="",
        execute_driver=sdk_templates.EXECUTE_BASIC_SCRIPT_DRIVER,
    )
    (drivers / "sm_train.sh").write_text(train_sh)
    (code / "trainer.py").write_text(STAND_IN_TRAINER)
    (config / "resourceconfig.json").write_text(
        json.dumps(
            {
                "current_host": "algo-1",
                "current_instance_type": "ml.m5.xlarge",
                "hosts": ["algo-1"],
                "network_interface_name": "eth0",
            }
        )
    )
    (config / "inputdataconfig.json").write_text("{}")
    marker = tmp_path / "marker"
    (config / "hyperparameters.json").write_text(json.dumps({"marker": str(marker)}))
    trainers = tmp_path / "trainers"
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": str(ROOT / "src"),
        "TRAINING_JOB_NAME": "albertkit-signal-test",
        "ALBERTKIT_TRAINER_DIR": str(trainers),
        "HOME": str(tmp_path),
        "HOOK": str(HOOK) if with_hook else "",
    }
    # PID 1 is exactly SageMaker's entry point: /bin/bash -c "<ContainerArguments[1]>". The
    # setup shell before it must not read the hook (it is PID 1 until it execs), so BASH_ENV
    # is set only for the exec'd bash, as the image's ENV sets it for the real one.
    pid1 = smplan._SDK_ARGUMENTS[1]
    setup = (
        f"mount -t tmpfs tmpfs /opt && mkdir /opt/ml && mount --bind {opt} /opt/ml "
        f'&& if [ -n "$HOOK" ]; then export BASH_ENV="$HOOK"; fi '
        f"&& exec /bin/bash -c {json.dumps(pid1)}"
    )
    proc = subprocess.Popen(
        ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "/bin/bash", "-c", setup],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # the handshake: the stand-in trainer says it is ready once its handler is installed
    # (and, with the hook, it has registered itself), so PID 1 and the whole chain run
    _wait_for_output(proc, "trainer ready", timeout=120)
    if with_hook:
        assert any(trainers.iterdir()), "the trainer is ready but did not register"
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert children, "unshare has no PID 1"
    return proc, int(children[0]), marker


def _wait_for_output(proc: subprocess.Popen, text: str, timeout: float) -> str:
    """Read ``proc``'s output (from its file descriptor, as ``communicate`` later does) until
    it holds ``text``; fail with what it printed if it exits or the time runs out first."""
    fd, seen = proc.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        readable, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        chunk = os.read(fd, 65536) if readable else b""
        if not chunk:
            why = "exited" if readable else f"printed nothing more for {timeout} s"
            raise AssertionError(f"waiting for {text!r}, the process {why}:\n{seen.decode()}")
        seen += chunk
    return seen.decode()


def _signals(pid: int, field: str) -> set[int]:
    """The signal numbers of a ``/proc/<pid>/status`` mask (``SigCgt``: caught, ``SigPnd``
    and ``ShdPnd``: pending)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            mask = int(line.split()[1], 16)
            return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.fixture
def needs_namespaces():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("needs root and unshare (PID and mount namespaces) like CI has")


def test_sigterm_to_pid1_reaches_the_trainer_with_the_image_hook(tmp_path, needs_namespaces):
    proc, pid1, marker = run_as_container(tmp_path, with_hook=True)
    try:
        assert signal.SIGTERM in _signals(pid1, "SigCgt")  # the hook's trap
        start = time.monotonic()
        os.kill(pid1, signal.SIGTERM)  # what `docker stop` does
        out, _ = proc.communicate(timeout=60)
        elapsed = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
    assert marker.read_text() == "SIGTERM", out
    assert "SIGTERM forwarded to 1 trainer" in out
    # the chain unwinds with the trainer's status, well inside SageMaker's 120 s grace period
    assert proc.returncode == 143, out
    assert elapsed < 30, elapsed
    assert not any((tmp_path / "trainers").iterdir())  # the trainer deregistered


def test_without_the_hook_pid1_bash_swallows_sigterm(tmp_path, needs_namespaces):
    proc, pid1, marker = run_as_container(tmp_path, with_hook=False)
    try:
        os.kill(pid1, signal.SIGTERM)
        # PID 1 of a namespace receives only the signals it has a handler for, and bash
        # without the hook has none for SIGTERM: the kernel dropped it inside kill(), so
        # nothing is pending and nothing can react later (no need to wait and see)
        assert signal.SIGTERM not in _signals(pid1, "SigCgt")
        assert signal.SIGTERM not in _signals(pid1, "SigPnd") | _signals(pid1, "ShdPnd")
        assert proc.poll() is None  # nobody reacted: SageMaker would SIGKILL after the grace
        assert not marker.exists()
    finally:
        os.kill(pid1, signal.SIGKILL)  # from the parent namespace, as SageMaker does at the end
        proc.wait(timeout=30)
    assert not marker.exists()
