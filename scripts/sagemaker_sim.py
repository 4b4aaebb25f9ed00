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
    work = Path(args.work).resolve()
    data = make_data(work)
    cfg = tiny_config(data, args.backend, args.max_steps)
    submit_and_lay_out(cfg, work / args.name)
    return 0


def submit_and_lay_out(cfg, out: Path, before_submit=None) -> dict:
    """Submit ``to_sagemaker(cfg)`` to moto and lay out ``/opt/ml`` of each host in ``out``.

    ``before_submit(s3)`` runs inside the same moto account first (objects a channel reads).
    Returns the request as SageMaker received it.
    """
    import boto3
    import moto

    from albertkit.sagemaker.submit import to_sagemaker

    job = to_sagemaker(cfg)
    if out.exists():
        shutil.rmtree(out)
    hosts = [f"algo-{i + 1}" for i in range(job.sagemaker_config.instance_count)]
    with tempfile.TemporaryDirectory() as tmp:
        _offline_aws(Path(tmp))
        with moto.mock_aws():
            session = boto3.Session(region_name=REGION)
            session.client("iam").create_role(RoleName="albertkit-sagemaker",
                                              AssumeRolePolicyDocument="{}")
            s3 = session.client("s3")
            s3.create_bucket(Bucket=BUCKET)
            if before_submit is not None:
                before_submit(s3)
            job.fit(wait=False, logs=False, boto_session=session)
            request = job.submitted_request
            for host in hosts:
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
    instance_type = request["ResourceConfig"]["InstanceType"]
    for host in hosts:
        opt = out / host / "opt" / "ml"
        config = opt / "input" / "config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "resourceconfig.json").write_text(json.dumps({
            "current_host": host, "current_instance_type": instance_type,
            "current_group_name": "homogeneousCluster", "hosts": hosts,
            "instance_groups": [{"instance_group_name": "homogeneousCluster",
                                 "instance_type": instance_type, "hosts": hosts}],
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
        "environment": env,
        "checkpoint_local_path": request.get("CheckpointConfig", {}).get("LocalPath"),
        "hosts": hosts}, indent=2))
    # what the shell script needs, one value per line (no JSON parser in bash)
    (out / "run.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    (out / "command").write_text("\n".join(algo["ContainerEntrypoint"]
                                           + algo["ContainerArguments"]) + "\n")
    (out / "hosts").write_text("\n".join(hosts) + "\n")
    print(f"staged {request['TrainingJobName']} ({len(hosts)} x {instance_type}) in {out}")
    return request


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


# --------------------------------------------------------------------------- (e) the chain
# prepare-data -> pretraining job (Horovod over MPI, 2 hosts) -> its model.tar.gz -> a SQuAD
# job (1 host, as docs/sagemaker.md's fine-tuning config) whose only model input is that
# artifact -> `albertkit evaluate` with the official metric -> `albertkit export`. The user's
# files live in WORK/chain (the "project directory" the commands run in); the shell script
# runs the albertkit commands, this half writes the files and stages and checks the jobs.
CHAIN = "chain"
PRETRAIN_JOB = "albertkit-chain-pretrain"
# where the user unpacks the pretraining job's model.tar.gz in S3 (docs/sagemaker.md, 5.)
MODEL_PREFIX = f"models/{PRETRAIN_JOB}"

# A hand-made SQuAD v2.0 file (official JSON layout): three paragraphs, answerable questions
# and questions without an answer. The dev file asks other questions about the same text.
_PARAGRAPHS = [
    ("Copper_Bridge",
     "The copper bridge over the Lenne was opened in 1911 by the engineer Marta Quist. It is "
     "140 metres long and carries a narrow road and two footpaths. The bridge was painted green "
     "in 1960 and closed to lorries in 1998.",
     [("Who opened the copper bridge?", "Marta Quist"), ("How long is the bridge?", "140 metres"),
      ("Which river does the bridge cross?", "Lenne"), ("Who paid for the bridge?", None)],
     [("When was the bridge opened?", "1911"), ("What colour was the bridge painted?", "green"),
      ("How many lorries cross each day?", None)]),
    ("Salt_Library",
     "The salt library of Orvik holds 9000 books about the sea. It was founded in 1872 by the "
     "captain Elias Brandt, who gave his own charts to it. Readers may borrow three books at a "
     "time, and the reading room opens at eight in the morning.",
     [("How many books does the salt library hold?", "9000"),
      ("Who founded the salt library?", "Elias Brandt"),
      ("When does the reading room open?", "eight in the morning"),
      ("How much does a library card cost?", None)],
     [("When was the library founded?", "1872"), ("How many books may a reader borrow?", "three"),
      ("Who runs the library today?", None)]),
    ("Northern_Orchard",
     "The northern orchard grows apples and pears on a hill above the town. It has 420 trees, "
     "the oldest planted in 1898. Every autumn the growers press cider in a stone barn, and the "
     "harvest festival is held on the last Saturday of September.",
     [("How many trees does the orchard have?", "420"),
      ("Where do the growers press cider?", "a stone barn"),
      ("What does the orchard grow?", "apples and pears"),
      ("Who owns the orchard?", None)],
     [("When was the oldest tree planted?", "1898"),
      ("When is the harvest festival held?", "the last Saturday of September"),
      ("How much cider is pressed?", None)]),
]


def _squad_json(split: int) -> dict:
    data = []
    for n, (title, context, *questions) in enumerate(_PARAGRAPHS):
        qas = []
        for i, (question, answer) in enumerate(questions[split]):
            qa = {"id": f"{'td'[split]}{n}-{i}", "question": question, "answers": [],
                  "is_impossible": answer is None}
            if answer is not None:
                qa["answers"] = [{"text": answer, "answer_start": context.index(answer)}]
            qas.append(qa)
        data.append({"title": title, "paragraphs": [{"context": context, "qas": qas}]})
    return {"version": "v2.0", "data": data}


def _sagemaker_section(job: str, count: int) -> dict:
    # the infra stack's values (bucket, role, image) a user exports as ALBERTKIT_SM_*; written
    # into the file here because to_sagemaker() of the Python API does not read them
    section = {
        "bucket": BUCKET,
        "role_arn": "arn:aws:iam::123456789012:role/albertkit-sagemaker",
        "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:sim",
        "output_path": "s3://{bucket}/output",
        "base_job_name": job,
        "instance_type": INSTANCE_TYPE,
        "instance_count": count,
        "environment": {"TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"},
    }
    if count > 1:
        section["distribution"] = {"kind": "horovod", "processes_per_host": 1}
    return section


def chain_files(args: argparse.Namespace) -> int:
    """The user's files: corpus, SQuAD files and the two job configs (YAML)."""
    import pydoc_data.topics

    import yaml

    root = Path(args.work).resolve() / CHAIN
    root.mkdir(parents=True, exist_ok=True)
    docs = [" ".join(t.split()) for t in pydoc_data.topics.topics.values()]
    corpus = "\n".join(d for d in docs if len(d) > 200)[:400_000]
    # the SQuAD text too, so the tokenizer has its words (as examples/finetune_squad.py does)
    squad_text = [c for _, c, *_ in _PARAGRAPHS] + [
        q for *_, train, dev in _PARAGRAPHS for q, _ in train + dev]
    (root / "corpus.txt").write_text(corpus + "\n" + "\n".join(squad_text) + "\n",
                                     encoding="utf-8")
    squad = root / "data" / "squad"
    squad.mkdir(parents=True, exist_ok=True)
    for split, name in ((0, "train-v2.0.json"), (1, "dev-v2.0.json")):
        (squad / name).write_text(json.dumps(_squad_json(split), indent=1), encoding="utf-8")

    # 1. pretraining: the local config of docs/howto/pretrain-locally.md (tiny sizes) with the
    #    sagemaker: section of examples/configs/sagemaker_pretrain_base.yaml (2 CPU hosts;
    #    the data channel is `local`, uploaded by the SDK, since FSx cannot be simulated)
    pre = {
        "run_dir": "runs/chain-pretrain",
        "model": {"size": "tiny", "vocab_size": VOCAB_SIZE, "hidden_size": 64,
                  "embedding_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                  "intermediate_size": 128, "max_position_embeddings": 64},
        "data": {"kind": "tfrecord", "train_files": ["data/pretrain/train-*.tfrecord"],
                 "eval_files": ["data/pretrain/eval-*.tfrecord"], "seq_length": 64,
                 "max_predictions_per_seq": 8, "shuffle_buffer": 256},
        "optimizer": {"kind": "lamb", "learning_rate": 1e-3, "schedule": {"warmup_steps": 4}},
        "runtime": {"micro_batch_size": 8, "global_batch_size": 16, "max_steps": args.max_steps,
                    "eval_every_steps": 20, "eval_steps": 2, "xla": False, "seed": 7},
        "distributed": {"backend": "horovod"},
        "checkpoint": {"every_steps": 10, "keep_last": 3},
        "logging": {"log_every_steps": 1},
        "sagemaker": {**_sagemaker_section(PRETRAIN_JOB, len(HOSTS)),
                      "checkpoint_s3_uri": "s3://{bucket}/checkpoints/chain-pretrain",
                      "inputs": {"train": {"kind": "local", "path": "data/pretrain",
                                           "path_in_config": "data/pretrain"}}},
    }
    if args.tokenizer_from == "channel":
        # what the refusal of a config naming data.tokenizer outside every channel asks for
        pre["data"]["tokenizer"] = "tokenizer"
        pre["sagemaker"]["inputs"]["tokenizer"] = {"kind": "local", "path": "tokenizer",
                                                   "path_in_config": "tokenizer"}
    # 2. SQuAD: examples/configs/sagemaker_finetune_squad.yaml, tiny; the model channel is the
    #    hf/ directory of the pretraining job's model.tar.gz unpacked to S3, and the tokenizer
    #    is the one in that directory: no other model or tokenizer input
    ft = {
        "run_dir": "runs/chain-squad",
        "model": {"size": "tiny", "load_from": "pretrained/chain"},
        "data": {"kind": "squad", "version": "2.0",
                 "train_file": "data/squad/train-v2.0.json",
                 "eval_file": "data/squad/dev-v2.0.json",
                 "max_seq_length": 64, "doc_stride": 24, "max_query_length": 16},
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3,
                      "schedule": {"warmup_fraction": 0.1}},
        "runtime": {"micro_batch_size": 8, "global_batch_size": 8, "max_steps": args.squad_steps,
                    "eval_every_steps": args.squad_steps // 2, "xla": False, "seed": 7},
        "checkpoint": {"every_steps": args.squad_steps // 2, "keep_best": True},
        "logging": {"log_every_steps": 2},
        "sagemaker": {**_sagemaker_section("albertkit-chain-squad", 1),
                      "inputs": {
                          "squad": {"kind": "s3", "uri": "s3://{bucket}/squad",
                                    "path_in_config": "data/squad"},
                          "model": {"kind": "s3", "uri": f"s3://{{bucket}}/{MODEL_PREFIX}/hf",
                                    "path_in_config": "pretrained/chain"}}},
    }
    if args.tokenizer_from == "channel":
        ft["data"]["tokenizer"] = "pretrained/chain"  # the HF directory's tokenizer files
    for name, cfg in (("pretrain.yaml", pre), ("squad.yaml", ft)):
        (root / name).write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    print(f"wrote {root}/corpus.txt, data/squad/*.json, pretrain.yaml, squad.yaml "
          f"(tokenizer from: {args.tokenizer_from})")
    return 0


def chain_stage(args: argparse.Namespace) -> int:
    """Stage one job of the chain from the user's YAML (run in WORK/chain, like a user)."""
    from albertkit.config import TrainerConfig

    work = Path(args.work).resolve()
    root = work / CHAIN
    os.chdir(root)  # the config's relative paths are the user's project paths
    cfg = TrainerConfig.from_yaml(root / f"{args.job}.yaml")
    before = None
    if args.job == "squad":
        artifact = Path(args.artifact).resolve()

        def before(s3) -> None:
            # the user's side between the jobs: SageMaker stored the pretraining job's
            # model.tar.gz under its output path; it is unpacked to S3 (docs/sagemaker.md, 5.)
            # and the SQuAD files are copied there (`aws s3 cp/sync`)
            import tarfile

            s3.upload_file(str(artifact), BUCKET,
                           f"output/{args.pretrain_job}/output/model.tar.gz")
            with tempfile.TemporaryDirectory() as tmp:
                s3.download_file(BUCKET, f"output/{args.pretrain_job}/output/model.tar.gz",
                                 f"{tmp}/model.tar.gz")
                with tarfile.open(f"{tmp}/model.tar.gz") as tar:
                    tar.extractall(f"{tmp}/model", filter="data")
                for f in sorted(Path(tmp, "model").rglob("*")):
                    if f.is_file():
                        rel = f.relative_to(Path(tmp, "model")).as_posix()
                        s3.upload_file(str(f), BUCKET, f"{MODEL_PREFIX}/{rel}")
            for f in sorted((root / "data" / "squad").glob("*.json")):
                s3.upload_file(str(f), BUCKET, f"squad/{f.name}")
    request = submit_and_lay_out(cfg, work / f"chain-{args.job}", before)
    channels = sorted(c["ChannelName"] for c in request["InputDataConfig"])
    print(f"channels: {', '.join(channels)}")
    return 0


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def chain_check(args: argparse.Namespace) -> int:
    """What docs/sagemaker.md promises after each job of the chain."""
    import yaml

    work = Path(args.work).resolve()
    root = work / CHAIN
    out = work / f"chain-{args.job}"
    request = json.loads((out / "request.json").read_text())
    hosts = (out / "hosts").read_text().split()
    master = out / hosts[0] / "opt" / "ml"
    problems: list[str] = []

    def need(ok: bool, text: str) -> None:
        print(("  ok   " if ok else "  FAIL ") + text)
        if not ok:
            problems.append(text)

    summary_path = master / "output" / "data" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    need(summary.get("status") == "completed", f"summary status {summary.get('status')!r}")
    model = master / "model"
    hf = model / "hf"
    need((model / "albertkit").is_dir() and any((model / "albertkit").iterdir()),
         "model/albertkit written")
    need(all((hf / f).is_file() for f in ("config.json", "model.safetensors")),
         "model/hf has config.json + model.safetensors")
    tokenizer = root / "tokenizer" / "spiece.model"  # what `albertkit train-tokenizer` wrote
    hf_tok = hf / "spiece.model"
    need(hf_tok.is_file() and _sha(hf_tok) == _sha(tokenizer),
         "model/hf carries the tokenizer the data was prepared with (spiece.model sha256 "
         + ("equal" if hf_tok.is_file() and _sha(hf_tok) == _sha(tokenizer) else
            "differs" if hf_tok.is_file() else "missing: no tokenizer in the artifact") + ")")
    for h in hosts[1:]:
        need(not any((out / h / "opt" / "ml" / "model").iterdir()), f"{h} wrote no model")
    losses = [json.loads(ln) for ln in (master / "output" / "data" / "metrics.jsonl")
              .read_text().splitlines() if ln.strip()] \
        if (master / "output" / "data" / "metrics.jsonl").is_file() else []
    train = [r for r in losses if "loss" in r and r.get("kind", "train") == "train"]
    if train:
        print(f"  loss: step {train[0].get('step')} {train[0]['loss']:.4f} -> "
              f"step {train[-1].get('step')} {train[-1]['loss']:.4f}")
    resolved = yaml.safe_load((master / "output" / "data" / "config.yaml").read_text()) \
        if (master / "output" / "data" / "config.yaml").is_file() else {}
    channels = sorted(c["ChannelName"] for c in request["InputDataConfig"])
    if args.job == "pretrain":
        need(len(hosts) == 2 and request["ResourceConfig"]["InstanceCount"] == 2,
             f"2 hosts ({', '.join(hosts)})")
        need(resolved.get("distributed", {}).get("backend") == "horovod",
             "the job ran Horovod (distributed.backend in the resolved config)")
        log_text = (out / f"{hosts[0]}.log").read_text(errors="replace")
        need("mpirun" in log_text or "horovod" in log_text.lower(), "the MPI driver started the ranks")
    else:
        need(len(hosts) == 1, "1 host (docs/sagemaker.md's fine-tuning config: one instance)")
        model_channels = [c for c in channels if c not in ("code", "sm_drivers", "squad")]
        need(model_channels == ["model"], f"channels {channels}: the only model input is 'model'")
        uri = next(c["DataSource"]["S3DataSource"]["S3Uri"] for c in request["InputDataConfig"]
                   if c["ChannelName"] == "model")
        need(uri.endswith(f"{MODEL_PREFIX}/hf"), f"model channel {uri} = the artifact's hf/")
        got = master / "input" / "data" / "model"
        artifact = work / "chain-pretrain" / "algo-1" / "opt" / "ml" / "model" / "hf"
        same = sorted(p.relative_to(got).as_posix() for p in got.rglob("*") if p.is_file()) == \
            sorted(p.relative_to(artifact).as_posix() for p in artifact.rglob("*") if p.is_file()) \
            and all(_sha(p) == _sha(artifact / p.relative_to(got)) for p in got.rglob("*")
                    if p.is_file())
        need(same, "the model channel's files are byte-identical to hf/ of the pretraining "
                   "job's model.tar.gz")
        data = resolved.get("data", {})
        need(data.get("tokenizer") in (None, "/opt/ml/input/data/model")
             and resolved.get("model", {}).get("load_from") == "/opt/ml/input/data/model",
             f"in the job: model.load_from={resolved.get('model', {}).get('load_from')}, "
             f"data.tokenizer={data.get('tokenizer')} (unset: the model's own)")
        run_tok = master / "checkpoints" / "tokenizer" / "spiece.model"
        need(run_tok.is_file() and _sha(run_tok) == _sha(tokenizer),
             "the run's tokenizer (run_dir/tokenizer) is the prepared data's")
        evals = [r for r in losses if r.get("kind") == "eval" and "f1" in r]
        need(bool(evals), "the job evaluated with the official SQuAD metric: "
             + (", ".join(f"step {r.get('step')} exact={r.get('exact'):.2f} f1={r.get('f1'):.2f}"
                          for r in evals) if evals else "no eval record"))
    return 1 if problems else 0


def chain_check_local(args: argparse.Namespace) -> int:
    """After `albertkit evaluate` and `albertkit export` on the user's machine."""
    root = Path(args.work).resolve() / CHAIN
    problems = []

    def need(ok: bool, text: str) -> None:
        print(("  ok   " if ok else "  FAIL ") + text)
        if not ok:
            problems.append(text)

    tok = _sha(root / "tokenizer" / "spiece.model")
    exported = root / "exported" / "albert-squad"
    need((exported / "config.json").is_file() and (exported / "model.safetensors").is_file(),
         f"{exported} has config.json + model.safetensors")
    spm = exported / "spiece.model"
    need(spm.is_file() and _sha(spm) == tok, "the export carries the prepared data's tokenizer")
    config = json.loads((exported / "config.json").read_text()) \
        if (exported / "config.json").is_file() else {}
    need("AlbertForQuestionAnswering" in config.get("architectures", []),
         f"architectures {config.get('architectures')}")
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
    f = sub.add_parser("chain-files", help="(e) the user's corpus, SQuAD files and configs")
    f.add_argument("--work", required=True)
    f.add_argument("--max-steps", type=int, default=MAX_STEPS)
    f.add_argument("--squad-steps", type=int, default=20)
    f.add_argument("--tokenizer-from", choices=["manifest", "channel"], default="manifest",
                   help="manifest: the configs name no tokenizer (the prepared data's travels "
                        "with it and the model); channel: data.tokenizer + a tokenizer input "
                        "channel, and the SQuAD config names the model's directory")
    f.set_defaults(func=chain_files)
    s = sub.add_parser("chain-stage", help="(e) stage the pretraining or the SQuAD job")
    s.add_argument("--work", required=True)
    s.add_argument("--job", choices=["pretrain", "squad"], required=True)
    s.add_argument("--artifact", help="squad: the pretraining job's model.tar.gz")
    s.add_argument("--pretrain-job", default=PRETRAIN_JOB, help="squad: its job name")
    s.set_defaults(func=chain_stage)
    c = sub.add_parser("chain-check", help="(e) check a finished job of the chain")
    c.add_argument("--work", required=True)
    c.add_argument("--job", choices=["pretrain", "squad"], required=True)
    c.set_defaults(func=chain_check)
    c = sub.add_parser("chain-check-local", help="(e) check the local evaluate + export")
    c.add_argument("--work", required=True)
    c.set_defaults(func=chain_check_local)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
