"""``albertkit jobs status|logs|stop NAME`` against moto: nothing leaves the machine."""

from __future__ import annotations

import contextlib
import json
import time

import pytest

boto3 = pytest.importorskip("boto3")
moto = pytest.importorskip("moto")

from albertkit.cli import main  # noqa: E402
from albertkit.sagemaker.joblogs import LOG_GROUP, log_events  # noqa: E402
from conftest import refuse_network  # noqa: E402

REGION = "us-east-1"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest"
BUCKET = "albertkit-test-bucket"
_AWS_VARS = (
    "AWS_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL",
    "ALBERTKIT_SM_REGION",
)


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No AWS configuration from the machine, and any network connection fails the test."""
    for var in _AWS_VARS + ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    attempts = refuse_network(monkeypatch)
    yield
    assert attempts == [], f"network access attempted: {attempts}"


@pytest.fixture
def aws(isolated, monkeypatch):
    """Fake credentials, moto running; yields a boto3 session in the test region."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with moto.mock_aws():
        yield boto3.Session(region_name=REGION)


def create_job(session, name: str, instance_count: int = 1) -> dict:
    sm = session.client("sagemaker")
    sm.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": IMAGE, "TrainingInputMode": "File"},
        RoleArn="arn:aws:iam::123456789012:role/albertkit-sagemaker",
        OutputDataConfig={"S3OutputPath": f"s3://{BUCKET}/albertkit"},
        ResourceConfig={
            "InstanceType": "ml.p4d.24xlarge",
            "InstanceCount": instance_count,
            "VolumeSizeInGB": 100,
        },
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
    )
    return sm.describe_training_job(TrainingJobName=name)


def moto_job(name: str):
    """moto's record of a training job, to put it in the states moto never reaches."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sagemaker.models import sagemaker_backends

    return sagemaker_backends[DEFAULT_ACCOUNT_ID][REGION].training_jobs[name]


def write_logs(session, stream: str, messages: list[str]):
    """Put ``messages`` in ``stream``, timestamped now (CloudWatch refuses old events)."""
    start_ms = int(time.time() * 1000)
    logs = session.client("logs")
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=LOG_GROUP)
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
    logs.put_log_events(
        logGroupName=LOG_GROUP,
        logStreamName=stream,
        logEvents=[{"timestamp": start_ms + i, "message": m} for i, m in enumerate(messages)],
    )


# ------------------------------------------------------------------ status
def test_status_prints_a_table_of_the_job(aws, capsys):
    create_job(aws, "albertkit-status-1")
    assert main(["jobs", "status", "albertkit-status-1"]) == 0
    out = capsys.readouterr().out
    assert "albertkit-status-1" in out
    lines = {ln.split("  ", 1)[0].strip(): ln.split("  ", 1)[1].strip() for ln in out.splitlines()}
    assert lines["status"] == "Completed"  # moto completes jobs at once
    assert lines["secondary status"] == "Completed"
    assert lines["instances"] == "1 x ml.p4d.24xlarge"
    assert lines["model artifacts"].startswith(f"s3://{BUCKET}/albertkit/")
    assert lines["model artifacts"].endswith("model.tar.gz")
    assert "created" in lines and "ended" in lines
    assert "failure reason" not in lines


def test_status_shows_the_failure_reason(aws, capsys):
    create_job(aws, "albertkit-failed-1")
    job = moto_job("albertkit-failed-1")
    job.training_job_status = "Failed"
    job.failure_reason = "AlgorithmError: loss is NaN at step 12"
    assert main(["jobs", "status", "albertkit-failed-1"]) == 0
    out = capsys.readouterr().out
    assert "Failed" in out
    assert "failure reason" in out and "loss is NaN at step 12" in out


def test_status_json_is_the_description(aws, capsys):
    desc = create_job(aws, "albertkit-json-1")
    assert main(["jobs", "status", "albertkit-json-1", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["TrainingJobName"] == "albertkit-json-1"
    assert printed["TrainingJobStatus"] == desc["TrainingJobStatus"]
    assert printed["ModelArtifacts"] == desc["ModelArtifacts"]
    assert printed["CreationTime"] == desc["CreationTime"].isoformat()
    assert "ResponseMetadata" not in printed


# ------------------------------------------------------------------ stop
def test_stop_stops_a_running_job(aws, capsys, monkeypatch):
    """moto has no StopTrainingJob: the one call is answered here, as SageMaker does (the
    job's status becomes Stopping), and the request is recorded."""
    create_job(aws, "albertkit-running-1")
    job = moto_job("albertkit-running-1")
    job.training_job_status = "InProgress"
    job.secondary_status = "Training"
    stopped: list[str] = []

    from moto.sagemaker.responses import SageMakerResponse

    def stop_training_job(self):
        name = json.loads(self.body)["TrainingJobName"]
        stopped.append(name)
        target = self.sagemaker_backend.training_jobs[name]
        target.training_job_status = "Stopping"
        target.secondary_status = "Stopping"
        return "{}"

    monkeypatch.setattr(SageMakerResponse, "stop_training_job", stop_training_job, raising=False)
    assert main(["jobs", "status", "albertkit-running-1"]) == 0
    assert "InProgress" in capsys.readouterr().out

    assert main(["jobs", "stop", "albertkit-running-1"]) == 0
    out = capsys.readouterr().out
    assert stopped == ["albertkit-running-1"]
    assert "stopping training job albertkit-running-1" in out
    assert "Stopping" in out

    job.training_job_status = "Stopped"
    assert main(["jobs", "status", "albertkit-running-1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.split() == ["status", "Stopped"] for ln in lines)


def test_stop_of_an_ended_job_says_so(aws, capsys):
    create_job(aws, "albertkit-done-1")  # Completed in moto; moto has no StopTrainingJob
    assert main(["jobs", "stop", "albertkit-done-1"]) == 0
    assert "has already ended (Completed): nothing to stop" in capsys.readouterr().out


# ------------------------------------------------------------------ logs
def test_logs_print_the_events_of_the_job(aws, capsys):
    create_job(aws, "albertkit-logs-1")
    write_logs(aws, "albertkit-logs-1/algo-1-1700000000", ["step 1 loss 10.5", "step 2 loss 9.8"])
    write_logs(aws, "albertkit-other-9/algo-1-1700000000", ["not this job"])
    assert main(["jobs", "logs", "albertkit-logs-1", "--no-follow"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["step 1 loss 10.5", "step 2 loss 9.8"]


def test_logs_of_several_hosts_name_the_host(aws, capsys):
    create_job(aws, "albertkit-logs-2", instance_count=2)
    write_logs(aws, "albertkit-logs-2/algo-2-1700000000", ["worker up"])
    write_logs(aws, "albertkit-logs-2/algo-1-1700000000", ["chief up", "step 1"])
    # follow: the job is already Completed, so it reads once and returns
    assert main(["jobs", "logs", "albertkit-logs-2", "--poll", "0"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "[algo-1-1700000000] chief up",
        "[algo-1-1700000000] step 1",
        "[algo-2-1700000000] worker up",
    ]
    assert "Completed" in captured.err


def test_logs_before_any_stream_exists(aws, capsys):
    create_job(aws, "albertkit-logs-3")  # no log group at all yet
    assert main(["jobs", "logs", "albertkit-logs-3", "--no-follow"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no log events yet" in captured.err


def test_following_reads_new_lines_until_the_job_ends(aws):
    """log_events with follow: new events and new streams appear between polls; the lines
    written before the job ended are all read, nothing twice."""
    name = "albertkit-follow-1"
    write_logs(aws, f"{name}/algo-1-1", ["a1"])
    statuses = iter(["InProgress", "InProgress", "Completed"])
    rounds: list[int] = []

    def sleep(_seconds):
        rounds.append(len(rounds))
        if len(rounds) == 1:
            write_logs(aws, f"{name}/algo-1-1", ["a2", "a3"])
        else:
            write_logs(aws, f"{name}/algo-2-1", ["b1"])

    got = list(
        log_events(
            aws.client("logs"), name, follow=True, status=lambda: next(statuses), sleep=sleep
        )
    )
    assert rounds == [0, 1]
    assert got == [
        (f"{name}/algo-1-1", "a1"),
        (f"{name}/algo-1-1", "a2"),
        (f"{name}/algo-1-1", "a3"),
        (f"{name}/algo-2-1", "b1"),
    ]


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize("action", ["status", "logs", "stop"])
def test_an_unknown_job_is_one_error_line(aws, capsys, action):
    assert main(["jobs", action, "albertkit-no-such-job"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    first = captured.err.splitlines()[0]
    assert first.startswith("error: no SageMaker training job named 'albertkit-no-such-job'")


def test_no_credentials_is_one_clear_error(isolated, capsys):
    assert main(["jobs", "status", "albertkit-any"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0].startswith("error: no AWS credentials found")
    assert "Traceback" not in err
