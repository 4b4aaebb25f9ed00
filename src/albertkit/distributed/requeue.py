"""Putting a Slurm batch job back in the queue after its stop checkpoint.

A job submitted with ``--signal=USR1@N`` gets SIGUSR1 ``N`` seconds before its time limit.
Training then stops like on SIGTERM (all ranks agree on the step, the chief writes the
checkpoint), and the chief calls :func:`requeue_job` with ``distributed.slurm_requeue``:

* ``never``: never requeue;
* ``always``: requeue whenever the process runs in a Slurm job (``SLURM_JOB_ID``);
* ``auto`` (the default): requeue when Slurm says the job may be requeued, i.e.
  ``scontrol show job`` reports ``Requeue=1`` (``sbatch --requeue`` or the cluster's
  ``JobRequeue=1``) and ``BatchFlag=1`` (only batch jobs can be requeued).

Requeueing is ``scontrol requeue <job id>``; Slurm then ends the job's steps and starts the
batch script again later, and the same command resumes from the checkpoint. The
``scontrol`` run is ``$ALBERTKIT_SCONTROL`` when set (tests put a fake one there), else
``scontrol`` on ``PATH``. A failed ``scontrol`` is logged, never raised: the checkpoint is
written and a later start of the same command still resumes.

This module imports only the standard library: it needs no TensorFlow.

Example:
    >>> wants_requeue("never", {"SLURM_JOB_ID": "7"})
    False
    >>> wants_requeue("always", {})
    False
    >>> parse_show_job("JobId=7 JobName=x Requeue=1 Restarts=0 BatchFlag=1")["Requeue"]
    '1'
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping

log = logging.getLogger("albertkit")

SCONTROL_ENV = "ALBERTKIT_SCONTROL"  # the scontrol to run (default: scontrol on PATH)
MODES = ("auto", "always", "never")


def scontrol_command(environ: Mapping[str, str] | None = None) -> str:
    """The ``scontrol`` to run: ``$ALBERTKIT_SCONTROL`` or ``scontrol``."""
    env = os.environ if environ is None else environ
    return env.get(SCONTROL_ENV) or "scontrol"


def parse_show_job(text: str) -> dict[str, str]:
    """``Key=Value`` pairs of ``scontrol show job`` (one line or several)."""
    out: dict[str, str] = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if eq and key not in out:
            out[key] = value
    return out


def _scontrol(args: list[str], environ: Mapping[str, str]) -> subprocess.CompletedProcess | None:
    cmd = [scontrol_command(environ), *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              env=dict(environ))
    except (OSError, subprocess.TimeoutExpired) as e:
        log.error("cannot run %s: %s", " ".join(cmd), e)
        return None


def wants_requeue(mode: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``mode`` (``auto``, ``always``, ``never``) asks this Slurm job to be requeued.

    Outside a Slurm job (no ``SLURM_JOB_ID``) the answer is always False. ``auto`` asks
    ``scontrol show job`` (False when it fails)."""
    env = os.environ if environ is None else environ
    job_id = env.get("SLURM_JOB_ID")
    if mode == "never" or not job_id:
        return False
    if mode == "always":
        return True
    if mode != "auto":
        raise ValueError(f"slurm_requeue must be one of {MODES}, got {mode!r}")
    done = _scontrol(["show", "job", "-o", job_id], env)
    if done is None or done.returncode != 0:
        log.warning("scontrol show job %s failed; not requeueing", job_id)
        return False
    fields = parse_show_job(done.stdout)
    if fields.get("Requeue") == "1" and fields.get("BatchFlag", "1") != "0":
        return True
    log.info("Slurm job %s is not requeueable (Requeue=%s BatchFlag=%s): not requeueing; "
             "submit with sbatch --requeue or set distributed.slurm_requeue=always", job_id,
             fields.get("Requeue", "?"), fields.get("BatchFlag", "?"))
    return False


def requeue_job(mode: str, environ: Mapping[str, str] | None = None) -> bool:
    """Requeue this Slurm job when ``mode`` asks for it (:func:`wants_requeue`); returns
    whether ``scontrol requeue`` succeeded."""
    env = os.environ if environ is None else environ
    if not wants_requeue(mode, env):
        return False
    job_id = env["SLURM_JOB_ID"]
    done = _scontrol(["requeue", job_id], env)
    if done is None or done.returncode != 0:
        err = (done.stderr or done.stdout).strip() if done is not None else ""
        log.error("scontrol requeue %s failed%s; the checkpoint is written: submit the "
                  "same job again to resume", job_id, f": {err}" if err else "")
        return False
    log.warning("Slurm job %s requeued: it resumes from this checkpoint when it starts again",
                job_id)
    return True
