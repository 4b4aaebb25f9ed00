"""Secrets stay out of SageMaker requests (environment, hyperparameters, tags), and the
``sagemaker`` section stays out of run directories and exports."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from albertkit.sagemaker.config import SageMakerConfig

ROLE = "arn:aws:iam::123456789012:role/albertkit"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:latest"


def validate(**kw) -> SageMakerConfig:
    return SageMakerConfig.model_validate(
        {"role_arn": ROLE, "image_uri": IMAGE, "output_path": "s3://bucket/a", **kw})


SECRET_NAMES = ["WANDB_API_KEY", "OPENAI_API_KEY", "GITHUB_PAT", "HF_TOKEN", "DB_PASSWORD",
                "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "MY_AUTH", "GOOGLE_APPLICATION_CREDENTIALS", "SSH_PRIVATE_KEY", "apiKey",
                "hfToken", "NPM_AUTH_TOKEN", "SMTP_PASSWD"]
HARMLESS_NAMES = ["TOKENIZERS_PARALLELISM", "KEYBOARD_LAYOUT", "PATH_PREFIX", "AUTHOR",
                  "TF_CPP_MIN_LOG_LEVEL", "NCCL_DEBUG", "PYTHONHASHSEED", "MONKEYPATCH",
                  "OMP_NUM_THREADS", "PASSTHROUGH"]
SECRET_VALUES = [
    "AKIAABCDEFGHIJKLMNOP",
    "-----BEGIN RSA PRIVATE KEY-----",
    "https://alice:s3cr3t@example.com/repo.git",
    "postgres://user:pw@db.internal:5432/x",
    "ghp_" + "a1B2" * 9,
    "github_pat_" + "A1b2C3d4E5" * 3,
    "hf_" + "abcdEFGHijklMNOPqrstUVWXyzabcdEF",
    "sk-" + "proj-AbCdEf0123456789xyzXYZ",
    "xoxb-1234567890-abcdefghij",
]
HARMLESS_VALUES = ["https://example.com/a@b", "s3://bucket/key", "false", "user@example.com",
                   "http://localhost:6006", "sk-learn", "hf_home"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names_refused_in_environment_and_tags(name):
    with pytest.raises(ValidationError, match=rf"environment\['{name}'\] looks like a secret"):
        validate(environment={name: "x"})
    with pytest.raises(ValidationError, match=rf"tags\['{name}'\] looks like a secret"):
        validate(tags={name: "x"})


@pytest.mark.parametrize("name", HARMLESS_NAMES)
def test_harmless_names_pass(name):
    cfg = validate(environment={name: "1"}, tags={name: "1"})
    assert cfg.environment == {name: "1"}


@pytest.mark.parametrize("value", SECRET_VALUES)
def test_credential_values_refused_everywhere(value):
    with pytest.raises(ValidationError, match=r"environment\['NOTE'\] holds what looks like a "
                       "credential"):
        validate(environment={"NOTE": value})
    with pytest.raises(ValidationError, match=r"hyperparameters\['data.tokenizer'\] holds what "
                       "looks like a credential"):
        validate(hyperparameters={"data.tokenizer": value})
    tag_value = value if "://" in value or value.startswith(("AKIA", "gh", "hf", "sk", "xo")) \
        else None
    if tag_value is not None:  # tag values may only hold [\w\s.:/=+\-@]
        with pytest.raises(ValidationError, match=r"tags\['note'\] holds what looks like a "
                           "credential"):
            validate(tags={"note": tag_value})


@pytest.mark.parametrize("value", HARMLESS_VALUES)
def test_harmless_values_pass(value):
    validate(environment={"NOTE": value}, hyperparameters={"data.tokenizer": value},
             tags={"note": value})


def test_config_paths_with_token_in_their_name_stay_usable_as_hyperparameters():
    cfg = validate(hyperparameters={"data.masking.mask_token_prob": 0.8})
    assert cfg.hyperparameters == {"data.masking.mask_token_prob": 0.8}


# ====================================================================== run dirs, exports
def test_sagemaker_section_never_reaches_run_dir_or_exports(tmp_path):
    """The job settings (environment, tags, hyperparameters) describe how to submit a run,
    not the run: they must not be copied into config.yaml, the job output or an export
    (model.tar.gz), where whoever gets the model would read them."""
    from albertkit.config import TrainerConfig
    from albertkit.training.export import export_run
    from albertkit.training.trainer import AlbertTrainer

    marker = "NCCL_SOCKET_IFNAME_MARKER"
    raw = {
        "run_dir": str(tmp_path / "run"),
        "model": {"size": "tiny", "vocab_size": 200, "hidden_size": 32, "embedding_size": 16,
                  "num_attention_heads": 2, "intermediate_size": 64,
                  "max_position_embeddings": 64},
        "data": {"kind": "synthetic", "seq_length": 32, "max_predictions_per_seq": 4,
                 "num_examples": 64},
        "optimizer": {"kind": "adamw", "learning_rate": 1e-3},
        "runtime": {"micro_batch_size": 2, "global_batch_size": 2, "max_steps": 1,
                    "eval_every_steps": 0, "xla": False},
        "checkpoint": {"every_steps": 1},
        "logging": {"progress_bar": False, "tensorboard": False},
        "sagemaker": {"role_arn": ROLE, "image_uri": IMAGE, "output_path": "s3://bucket/a",
                      "environment": {marker: "eth0"}, "tags": {"team": "tag-marker-xyz"},
                      "hyperparameters": {"runtime.seed": 7}},
    }
    cfg = TrainerConfig.from_dict(raw)
    AlbertTrainer(cfg).fit()
    outputs = [tmp_path / "run"]
    for fmt in ("albertkit", "hf"):
        outputs.append(export_run(tmp_path / "run", tmp_path / f"export-{fmt}", format=fmt))
    for root in outputs:
        for path in root.rglob("*"):
            if path.is_file() and path.suffix in (".yaml", ".json", ".jsonl", ".txt", ".md"):
                text = path.read_text(encoding="utf-8", errors="replace")
                for needle in (marker, "tag-marker-xyz", "role_arn", "sagemaker:",
                               '"sagemaker"'):
                    assert needle not in text, f"{needle} in {path}"
