"""Slurm's time-limit warning (SIGUSR1): checkpoint, `scontrol requeue`, exact resume.

A fake `scontrol` (named by ALBERTKIT_SCONTROL) records its arguments and answers
`show job` with the Requeue/BatchFlag the test asks for."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import threading
import time

import numpy as np
import pytest

from albertkit.config import TrainerConfig
from albertkit.distributed.requeue import SCONTROL_ENV, requeue_job, wants_requeue
from albertkit.training.hooks import stop_on_signals
from albertkit.training.trainer import AlbertTrainer
from test_faults import cli, latest_step, raw_config, weights, write_config

JOB = "4242"


def fake_scontrol(tmp_path, requeue="1", batch="1", fail_requeue=False):
    """A scontrol that appends its arguments to calls.txt; returns (its path, calls file)."""
    calls = tmp_path / "calls.txt"
    script = tmp_path / "scontrol"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{calls}"\n'
        'if [ "$1" = show ]; then\n'
        f'  echo "JobId=$4 JobName=t Requeue={requeue} Restarts=0 BatchFlag={batch}"\n'
        "fi\n"
        + ('if [ "$1" = requeue ]; then echo "Invalid job state" >&2; exit 1; fi\n'
           if fail_requeue else "")
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, calls


def recorded(calls):
    return calls.read_text().splitlines() if calls.exists() else []


def env_with(script, **extra):
    return {"SLURM_JOB_ID": JOB, SCONTROL_ENV: str(script), "PATH": os.environ["PATH"], **extra}


# ---------------------------------------------------------------- the decision
def test_auto_requeues_a_requeueable_batch_job(tmp_path):
    script, calls = fake_scontrol(tmp_path)
    assert requeue_job("auto", env_with(script)) is True
    assert recorded(calls) == [f"show job -o {JOB}", f"requeue {JOB}"]


@pytest.mark.parametrize("requeue,batch", [("0", "1"), ("1", "0")])
def test_auto_leaves_a_job_slurm_would_not_requeue(tmp_path, requeue, batch):
    script, calls = fake_scontrol(tmp_path, requeue=requeue, batch=batch)
    assert requeue_job("auto", env_with(script)) is False
    assert recorded(calls) == [f"show job -o {JOB}"]


def test_always_and_never_do_not_ask_slurm(tmp_path):
    script, calls = fake_scontrol(tmp_path, requeue="0")
    assert requeue_job("never", env_with(script)) is False
    assert recorded(calls) == []
    assert requeue_job("always", env_with(script)) is True
    assert recorded(calls) == [f"requeue {JOB}"]


def test_outside_slurm_nothing_runs(tmp_path):
    script, calls = fake_scontrol(tmp_path)
    env = env_with(script)
    del env["SLURM_JOB_ID"]
    assert not wants_requeue("always", env) and not requeue_job("auto", env)
    assert recorded(calls) == []


def test_failed_requeue_is_logged_not_raised(tmp_path, caplog):
    script, calls = fake_scontrol(tmp_path, fail_requeue=True)
    assert requeue_job("always", env_with(script)) is False
    assert "Invalid job state" in caplog.text and "submit the same job again" in caplog.text
    missing = env_with(tmp_path / "no-such-scontrol")
    assert requeue_job("always", missing) is False


def test_sigusr1_sets_the_stop_event_and_is_recorded():
    event, received, received_at = threading.Event(), [], []
    before = signal.getsignal(signal.SIGUSR1)
    with stop_on_signals(event, received, received_at):
        sent = time.time()
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.time() + 5
        while not event.is_set() and time.time() < deadline:
            time.sleep(0.01)
    assert event.is_set() and received == [signal.SIGUSR1]
    assert len(received_at) == 1 and sent <= received_at[0] <= time.time()
    assert signal.getsignal(signal.SIGUSR1) is before


def test_config_field_values():
    cfg = raw_config("/tmp/unused")
    assert TrainerConfig.model_validate(cfg).distributed.slurm_requeue == "auto"
    cfg["distributed"] = {"slurm_requeue": "sometimes"}
    with pytest.raises(Exception, match="slurm_requeue"):
        TrainerConfig.model_validate(cfg)


# ---------------------------------------------------------------- end to end
@pytest.mark.slow
def test_sigusr1_checkpoints_requeues_and_resumes_bit_identically(tmp_path):
    steps = 60
    reference = tmp_path / "reference"
    AlbertTrainer(TrainerConfig.model_validate(raw_config(reference, max_steps=steps))).fit()

    script, calls = fake_scontrol(tmp_path)
    run = tmp_path / "slurm"
    cfg_path = write_config(tmp_path, run, max_steps=steps)
    env = {**os.environ, "SLURM_JOB_ID": JOB, SCONTROL_ENV: str(script),
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    proc = subprocess.Popen(cli(cfg_path), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while latest_step(run) < 10 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "training finished before the signal"
    proc.send_signal(signal.SIGUSR1)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "interrupted" and 10 <= summary["step"] < steps
    assert latest_step(run) == summary["step"]
    assert recorded(calls) == [f"show job -o {JOB}", f"requeue {JOB}"]
    assert f"Slurm job {JOB} requeued" in err
    assert re.search(rf"stop checkpoint of step {summary['step']} on disk \d+\.\d s after the "
                     "signal", err), err[-2000:]

    # Slurm starts the batch script again: the same command resumes and finishes.
    again = subprocess.run(cli(cfg_path), env=env, capture_output=True, text=True,
                           timeout=400)
    assert again.returncode == 0, again.stderr[-2000:]
    final = json.loads((run / "summary.json").read_text())
    assert final["status"] == "completed" and final["resumed_from_step"] == summary["step"]
    assert recorded(calls) == [f"show job -o {JOB}", f"requeue {JOB}"]  # no second requeue
    step_a, wa = weights(reference)
    step_b, wb = weights(run)
    assert step_a == step_b == steps
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)
