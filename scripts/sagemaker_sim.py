"""Host-side half of scripts/simulate_sagemaker.sh: stage a job as SageMaker would, check it.

``stage``: builds a tiny albertkit config (TFRecords made here from English prose that ships
with Python, a tokenizer trained on it), turns it into a job with ``to_sagemaker`` and submits
it with the SageMaker SDK v3 against moto (in-process AWS; nothing leaves the machine). What
the SDK uploaded (the source code and its ``sm_drivers`` channel, the data channel) is read
back from moto's S3, and ``/opt/ml`` is laid out for each host of the request the way
SageMaker lays it out: ``input/config/{resourceconfig,hyperparameters,inputdataconfig}.json``,
``input/data/<channel>/``, ``checkpoints/``, ``model/``, ``output/``. ``run.json`` holds what
the container starts with: the request's ContainerEntrypoint + ContainerArguments and its
Environment.

``check``: what a finished (or stopped) run must show: the model in albertkit and Hugging
Face formats, every metric line caught by the request's MetricDefinitions, the dotted
hyperparameter override in the resolved config, the checkpoint and status of a stopped run,
and bit-identical final weights of two runs.

    python scripts/sagemaker_sim.py stage --work W --name horovod --backend horovod
    python scripts/sagemaker_sim.py check --work W --name horovod --expect completed
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

HOSTS = ("algo-1", "algo-2")
INSTANCE_TYPE = "ml.m5.xlarge"  # CPU instances: one process per host
BUCKET = "albertkit-sim"
REGION = "us-east-1"
LEARNING_RATE_OVERRIDE = 0.0007  # sent as the dotted hyperparameter optimizer.learning_rate
MAX_STEPS = 40
VOCAB_SIZE = 600


def _run(argv: list[str]) -> None:
    from albertkit.cli import main

    code = main(argv)
    if code:
        raise SystemExit(f"albertkit {' '.join(argv)} failed ({code})")


def make_data(work: Path) -> Path:
    """Tokenizer + pretraining TFRecords in ``work/data`` (reused when present)."""
    data = work / "data"
    if (data / "records" / "manifest.json").is_file():
        return data
    import pydoc_data.topics

    data.mkdir(parents=True, exist_ok=True)
    text = data / "corpus.txt"
    docs = [" ".join(t.split()) for t in pydoc_data.topics.topics.values()]
    text.write_text("\n".join(d for d in docs if len(d) > 200)[:400_000], encoding="utf-8")
    _run(["train-tokenizer", str(text), "--out", str(data / "tokenizer"), "--vocab-size", str(VOCAB_SIZE)])
    _run(["prepare-data", str(text), "--tokenizer", str(data / "tokenizer"),
          "--out", str(data / "records"), "--seq-length", "64",
          "--max-predictions-per-seq", "8", "--dupe-factor", "2", "--eval-fraction", "0.05",
          "--num-workers", "1", "--no-progress"])
    return data


def tiny_config(data: Path, backend: str, max_steps: int):
    from albertkit.config import TrainerConfig

    vocab = VOCAB_SIZE
    return TrainerConfig.from_dict({
        "run_dir": "runs/sim",
        "model": {"size": "tiny", "vocab_size": vocab, "hidden_size": 64, "embedding_size": 32,
                  "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128,
                  "max_position_embeddings": 64},
        "data": {"kind": "tfrecord", "seq_length": 64, "max_predictions_per_seq": 8,
                 "train_files": ["data/sim/records/train-*.tfrecord"],
                 "eval_files": ["data/sim/records/eval-*.tfrecord"],
                 "tokenizer": "data/sim/tokenizer", "shuffle_buffer": 256},
        "optimizer": {"kind": "lamb", "learning_rate": 1e-3, "schedule": {"warmup_steps": 4}},
        "runtime": {"micro_batch_size": 8, "global_batch_size": 16, "max_steps": max_steps,
                    "eval_every_steps": 20, "eval_steps": 2, "xla": False, "seed": 7},
        "distributed": {"backend": backend},
        "checkpoint": {"every_steps": 10, "keep_last": 3},
        "logging": {"log_every_steps": 1},
        "sagemaker": {
            "bucket": BUCKET,
            "role_arn": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
            "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:sim",
            "output_path": "s3://{bucket}/output",
            "checkpoint_s3_uri": "s3://{bucket}/checkpoints/sim",
            "base_job_name": "albertkit-sim",
            "instance_type": INSTANCE_TYPE,
            "instance_count": len(HOSTS),
            "distribution": ({"kind": "horovod", "processes_per_host": 1}
                             if backend == "horovod" else {"kind": "tf_multiworker"}),
            "inputs": {"train": {"kind": "local", "path": str(data), "path_in_config": "data/sim"}},
            "hyperparameters": {"optimizer.learning_rate": LEARNING_RATE_OVERRIDE},
            "environment": {"TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"},
        },
    })


def _offline_aws(tmp: Path) -> None:
    """Fake credentials, SDK config isolated, telemetry off: moto answers everything."""
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ROLE_ARN", "AWS_ENDPOINT_URL",
                "AWS_WEB_IDENTITY_TOKEN_FILE"):
        os.environ.pop(var, None)
    sdk_config = tmp / "sagemaker-config.yaml"
    sdk_config.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n"
                          "      TelemetryOptOut: true\n")
    os.environ.update({
        "AWS_DEFAULT_REGION": REGION, "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_CONFIG_FILE": str(tmp / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "none"), "SAGEMAKER_VALIDATE_ROLE": "false",
        "SAGEMAKER_USER_CONFIG_OVERRIDE": str(sdk_config),
        "SAGEMAKER_ADMIN_CONFIG_OVERRIDE": str(sdk_config),
    })


def _download(s3, uri: str, dest: Path) -> None:
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    found = False
    for page in pages:
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix):].lstrip("/") or Path(obj["Key"]).name
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, obj["Key"], str(target))
            found = True
    if not found:
        raise SystemExit(f"nothing uploaded under {uri}")


def stage(args: argparse.Namespace) -> int:
    import boto3
    import moto

    from albertkit.sagemaker.submit import to_sagemaker

    work = Path(args.work).resolve()
    data = make_data(work)
    cfg = tiny_config(data, args.backend, args.max_steps)
    job = to_sagemaker(cfg)
    out = work / args.name
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory() as tmp:
        _offline_aws(Path(tmp))
        with moto.mock_aws():
            session = boto3.Session(region_name=REGION)
            session.client("iam").create_role(RoleName="albertkit-sagemaker",
                                              AssumeRolePolicyDocument="{}")
            session.client("s3").create_bucket(Bucket=BUCKET)
            job.fit(wait=False, logs=False, boto_session=session)
            request = job.submitted_request
            s3 = session.client("s3")
            for host in HOSTS:
                opt = out / host / "opt" / "ml"
                for channel in request["InputDataConfig"]:
                    uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
                    _download(s3, uri, opt / "input" / "data" / channel["ChannelName"])
    planned = job.plan(job_name=request["TrainingJobName"])
    differing = sorted(k for k in set(planned) | set(request) if planned.get(k) != request.get(k))
    # moto keeps neither Environment nor the MetricDefinitions as sent; the rest must agree
    assert set(differing) <= {"Environment", "AlgorithmSpecification"}, differing
    request = {**request, "Environment": planned.get("Environment", {}),
               "AlgorithmSpecification": planned["AlgorithmSpecification"]}
    algo = request["AlgorithmSpecification"]
    for host in HOSTS:
        opt = out / host / "opt" / "ml"
        config = opt / "input" / "config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "resourceconfig.json").write_text(json.dumps({
            "current_host": host, "current_instance_type": INSTANCE_TYPE,
            "current_group_name": "homogeneousCluster", "hosts": list(HOSTS),
            "instance_groups": [{"instance_group_name": "homogeneousCluster",
                                 "instance_type": INSTANCE_TYPE, "hosts": list(HOSTS)}],
            "network_interface_name": "eth0"}))
        (config / "hyperparameters.json").write_text(json.dumps(request["HyperParameters"]))
        (config / "inputdataconfig.json").write_text(json.dumps({
            c["ChannelName"]: {"TrainingInputMode": c.get("InputMode", "File"),
                               "S3DistributionType": "FullyReplicated",
                               "RecordWrapperType": "None"}
            for c in request["InputDataConfig"]}))
        for d in ("model", "output/data", "checkpoints"):
            (opt / d).mkdir(parents=True, exist_ok=True)
    (out / "request.json").write_text(json.dumps(request, indent=2))
    env = {"TRAINING_JOB_NAME": request["TrainingJobName"], **request.get("Environment", {})}
    (out / "run.json").write_text(json.dumps({
        "entrypoint": algo["ContainerEntrypoint"], "arguments": algo["ContainerArguments"],
        "environment": env, "checkpoint_local_path": request["CheckpointConfig"]["LocalPath"],
        "hosts": list(HOSTS)}, indent=2))
    # what the shell script needs, one value per line (no JSON parser in bash)
    (out / "run.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    (out / "command").write_text("\n".join(algo["ContainerEntrypoint"]
                                           + algo["ContainerArguments"]) + "\n")
    print(f"staged {request['TrainingJobName']} ({args.backend}) in {out}")
    return 0


# --------------------------------------------------------------------------- checks
def _weights(model_dir: Path) -> dict:
    from safetensors.numpy import load_file

    return load_file(str(model_dir / "hf" / "model.safetensors"))


def check(args: argparse.Namespace) -> int:
    import yaml

    out = Path(args.work).resolve() / args.name
    request = json.loads((out / "request.json").read_text())
    master = out / HOSTS[0] / "opt" / "ml"
    problems: list[str] = []

    def need(ok: bool, text: str) -> None:
        print(("  ok   " if ok else "  FAIL ") + text)
        if not ok:
            problems.append(text)

    summary_path = master / "output" / "data" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    need(summary.get("status") == args.expect,
         f"summary status {summary.get('status')!r} (expected {args.expect!r})")
    # (c) the dotted override travelled as optimizer__learning_rate and reached the config
    resolved = master / "output" / "data" / "config.yaml"
    lr = yaml.safe_load(resolved.read_text())["optimizer"]["learning_rate"] \
        if resolved.is_file() else None
    need("optimizer__learning_rate" in request["HyperParameters"]
         and lr == LEARNING_RATE_OVERRIDE,
         f"hyperparameter optimizer__learning_rate -> config optimizer.learning_rate={lr}")
    if args.expect == "completed":
        model = master / "model"
        need((model / "albertkit").is_dir() and any((model / "albertkit").iterdir()),
             "model/albertkit written")
        hf = model / "hf"
        need(all((hf / f).is_file() for f in ("config.json", "model.safetensors")),
             "model/hf has config.json + model.safetensors")
        need(any(hf.glob("*tokenizer*")) or (hf / "spiece.model").is_file(),
             "model/hf has the tokenizer")
        need(not any((out / HOSTS[1] / "opt" / "ml" / "model").iterdir()),
             "only the chief writes the model")
    else:
        steps = sorted(int(m.group(1)) for p in (master / "checkpoints").rglob("*")
                       if (m := re.search(r"(?:ckpt|step)[-_]?(\d+)", p.name)))
        need(bool(steps), f"checkpoints written: steps {sorted(set(steps))}")
        need(summary.get("step", 0) in steps,
             f"a checkpoint at the interrupted step {summary.get('step')}")
    # (a) every metric log line is caught by the request's MetricDefinitions
    log_text = (out / f"{HOSTS[0]}.log").read_text(errors="replace")
    definitions = [(d["Name"], re.compile(d["Regex"]))
                   for d in request["AlgorithmSpecification"]["MetricDefinitions"]]
    lines = [ln for ln in log_text.splitlines() if "albertkit step=" in ln
             or "albertkit eval step=" in ln]
    missed, caught, matched_defs = [], 0, set()
    for line in lines:
        kind = "eval" if "albertkit eval step=" in line else "train"
        body = line[line.index("albertkit "):]
        values = dict(kv.split("=", 1) for kv in body.split() if "=" in kv)
        for name, regex in definitions:
            prefix, key = name.split(":", 1)
            if prefix != kind or key not in values:
                continue
            m = regex.search(line)
            if m and float(m.group(1)) == float(values[key]):
                caught += 1
                matched_defs.add(name)
            else:
                missed.append(f"{name} in {line.strip()[:120]}")
    need(bool(lines) and not missed,
         f"{len(lines)} metric lines, {caught} values caught by {len(matched_defs)} "
         f"definitions, {len(missed)} missed" + (f": {missed[:3]}" if missed else ""))
    if args.same_as:
        other = Path(args.work).resolve() / args.same_as / HOSTS[0] / "opt" / "ml" / "model"
        import numpy as np

        a, b = _weights(master / "model"), _weights(other)
        same = a.keys() == b.keys() and all(
            a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a)
        need(same, f"final weights bit-identical to run {args.same_as!r} ({len(a)} tensors)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("stage")
    s.add_argument("--work", required=True)
    s.add_argument("--name", required=True)
    s.add_argument("--backend", choices=["horovod", "tf_multiworker"], required=True)
    s.add_argument("--max-steps", type=int, default=MAX_STEPS)
    s.set_defaults(func=stage)
    c = sub.add_parser("check")
    c.add_argument("--work", required=True)
    c.add_argument("--name", required=True)
    c.add_argument("--expect", choices=["completed", "interrupted"], default="completed")
    c.add_argument("--same-as", help="another run whose final weights must be identical")
    c.set_defaults(func=check)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
