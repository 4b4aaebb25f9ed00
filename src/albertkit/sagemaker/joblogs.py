"""Reading a training job's CloudWatch logs: one stream per host, under
``/aws/sagemaker/TrainingJobs`` with names ``<job name>/algo-<n>-<id>``.

The SDK's ``TrainingJob.wait(logs=True)`` prints the same events, but only while it waits,
through its own process-wide client (the default region, not the job's session) and rich
markup; :func:`log_events` reads them through the caller's boto3 session and either returns
once it has printed what exists (``follow=False``) or keeps polling until the job ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
TERMINAL_STATUSES = frozenset({"Completed", "Failed", "Stopped"})


def log_events(
    logs_client,
    job_name: str,
    *,
    follow: bool = False,
    status: Callable[[], str] | None = None,
    poll: float = 5.0,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[tuple[str, str]]:
    """``(stream name, message)`` for every log event of ``job_name``, stream by stream in
    name order, oldest first. With ``follow`` it polls every ``poll`` seconds, picking up new
    streams and events, until ``status()`` is terminal, then yields what is left and returns.
    """
    if follow and status is None:
        raise ValueError("follow=True needs status, to know when the job has ended")
    tokens: dict[str, str | None] = {}
    while True:
        # Read the status before the events: the lines written before the job ended are
        # then all in CloudWatch by the time this last round reads them.
        ended = not follow or status() in TERMINAL_STATUSES
        for name in _stream_names(logs_client, job_name):
            tokens.setdefault(name, None)
        for name in sorted(tokens):
            yield from _new_events(logs_client, name, tokens)
        if ended:
            return
        sleep(poll)


def _stream_names(logs_client, job_name: str) -> list[str]:
    """The job's log streams; none before its first host writes (the log group itself may
    not exist yet in a new account)."""
    from botocore.exceptions import ClientError

    names: list[str] = []
    kwargs = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": f"{job_name}/"}
    try:
        while True:
            page = logs_client.describe_log_streams(**kwargs)
            names.extend(s["logStreamName"] for s in page.get("logStreams", []))
            if not page.get("nextToken"):
                return names
            kwargs["nextToken"] = page["nextToken"]
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
            return names
        raise


def _new_events(
    logs_client, stream: str, tokens: dict[str, str | None]
) -> Iterator[tuple[str, str]]:
    """The events of ``stream`` after ``tokens[stream]``; advances the token."""
    while True:
        kwargs = {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True}
        if tokens[stream]:
            kwargs["nextToken"] = tokens[stream]
        page = logs_client.get_log_events(**kwargs)
        token = page.get("nextForwardToken")
        events = page.get("events", [])
        for event in events:
            yield stream, event.get("message", "").rstrip("\n")
        if not events or token == tokens[stream]:
            tokens[stream] = token or tokens[stream]
            return
        tokens[stream] = token
