"""The training image and the CloudFormation stack: linted, and checked for what SageMaker
needs and for the reference system's mistakes (a security group open to the world)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "docker" / "Dockerfile"
TEMPLATE = ROOT / "infra" / "albertkit.yaml"


def lint(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "lint_infra.sh"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_lint_infra_passes():
    result = lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "clean" in result.stdout


def test_lint_infra_fails_on_findings(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN cd /tmp && pip install requests\n")
    result = lint("--dockerfile", str(bad))
    assert result.returncode != 0
    assert "DL3006" in result.stdout + result.stderr  # untagged base image
    template = tmp_path / "broken.yaml"
    template.write_text(
        "AWSTemplateFormatVersion: '2010-09-09'\nResources:\n  Bucket:\n    Type: AWS::S3::Bukket\n"
    )
    result = lint("--templates", str(template))
    assert result.returncode != 0 and "E3006" in result.stdout + result.stderr


# --------------------------------------------------------------------------- Dockerfile
def instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), " ".join(rest.split())))
    return out


def test_dockerfile_has_what_sagemaker_needs():
    ins = instructions()
    run = " ".join(rest for op, rest in ins if op == "RUN")
    env = " ".join(rest for op, rest in ins if op == "ENV")
    base = next(rest for op, rest in ins if op == "ARG" and rest.startswith("BASE_IMAGE="))
    # a Debian base reproducible from Debian's packages (scripts/build_image.sh bootstraps it
    # when no registry is reachable); CUDA, cuDNN and NCCL come as TensorFlow's pip wheels,
    # never from apt (NVIDIA's images hold their NCCL packages: installing libnccl fails)
    assert base == "BASE_IMAGE=debian:bookworm-slim"
    assert "libnccl" not in run and "nvidia/cuda" not in DOCKERFILE.read_text().split("FROM")[1]
    for package in ("python3", "openmpi-bin", "libopenmpi-dev", "openssh-server", "libfabric1"):
        assert re.search(rf"(?<![\w-]){re.escape(package)}(?![\w-])", run), package
    # sshd for mpirun between hosts: a run dir, root by key only, and NO key in the image:
    # host keys are made at container start, the client key per job
    assert "/var/run/sshd" in run and "PermitRootLogin prohibit-password" in run
    assert "rm -f /etc/ssh/ssh_host_*" in run
    assert "ssh-keygen" not in run and "id_ed25519" not in run and "id_rsa" not in run
    # Horovod from the repository's recipe, with NCCL and MPI
    assert "source=scripts/build_horovod.sh" in run  # bind-mounted into the build step
    assert re.search(r"build_horovod\.sh .*--gpu --mpi", run)
    script = (ROOT / "scripts" / "build_horovod.sh").read_text()
    assert "--gpu)" in script and "--mpi)" in script and "HOROVOD_GPU_OPERATIONS=NCCL" in script
    assert "AsGpuStreamValue" in script and "platform_specific_handle" in script
    # the SDK driver runs `python3`/`pip` from PATH and imports paramiko; MPI uses mpi4py
    assert "PATH=/opt/albertkit/bin" in env
    assert "import albertkit, horovod.tensorflow, mpi4py, paramiko, tensorflow" in run
    assert "/usr/local/bin/train" in run and "albertkit.sagemaker.entrypoint" in run
    assert "/opt/ml/checkpoints" in run
    assert not any(op in ("ENTRYPOINT", "CMD") for op, _ in ins)  # SageMaker sets them
    # the container-start hook (SIGTERM forwarding, host keys) is the last ENV, after all RUNs
    last_run = max(i for i, (op, _) in enumerate(ins) if op == "RUN")
    hook_env = [i for i, (op, rest) in enumerate(ins) if op == "ENV" and "BASH_ENV=" in rest]
    assert hook_env and hook_env[0] > last_run
    # dependencies before albertkit's source, so a code change rebuilds only the last layer
    copies = [i for i, (op, rest) in enumerate(ins) if op == "COPY"]
    src_copy = next(i for i in copies if ins[i][1].startswith(". /opt/albertkit-src"))
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore and "!src/" in ignore and "!docker/" in ignore  # context = the code
    horovod = next(i for i, (op, rest) in enumerate(ins) if op == "RUN" and "build_horovod" in rest)
    assert horovod < src_copy


def test_image_requirements_follow_pyproject():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = pyproject["project"]["dependencies"]
    lines = [
        line.strip()
        for line in (ROOT / "docker" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for dep in wanted:
        if dep.startswith("tensorflow=="):
            assert f"tensorflow[and-cuda]=={dep.split('==')[1]}" in lines
        else:
            assert dep in lines, f"docker/requirements.txt lacks {dep} (pyproject.toml)"
    assert any(line.startswith("mpi4py==") for line in lines)
    assert any(line.startswith("paramiko") for line in lines)


# --------------------------------------------------------------------------- template
class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {f"!{suffix}": value}


_CfnLoader.add_multi_constructor("!", _tag)


@pytest.fixture(scope="module")
def template() -> dict:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # noqa: S506 (safe loader subclass)


def of_type(template: dict, kind: str) -> dict[str, dict]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def test_network_is_closed(template):
    text = TEMPLATE.read_text()
    assert "0.0.0.0/0" not in text and "::/0" not in text
    (sg_name,) = of_type(template, "AWS::EC2::SecurityGroup")
    sg = template["Resources"][sg_name]["Properties"]
    assert "SecurityGroupIngress" not in sg  # only the self rule below
    ingress = of_type(template, "AWS::EC2::SecurityGroupIngress")
    assert [r["Properties"]["SourceSecurityGroupId"] for r in ingress.values()] == [
        {"!Ref": sg_name}
    ]
    egress = of_type(template, "AWS::EC2::SecurityGroupEgress")
    assert [r["Properties"]["DestinationSecurityGroupId"] for r in egress.values()] == [
        {"!Ref": sg_name}
    ]
    (s3_rule,) = sg["SecurityGroupEgress"]
    assert s3_rule["FromPort"] == s3_rule["ToPort"] == 443 and "DestinationPrefixListId" in s3_rule
    assert not of_type(template, "AWS::EC2::InternetGateway")
    assert not of_type(template, "AWS::EC2::NatGateway")
    subnet = next(iter(of_type(template, "AWS::EC2::Subnet").values()))["Properties"]
    assert subnet["MapPublicIpOnLaunch"] is False


def test_bucket_and_file_system(template):
    ((bucket_name, bucket),) = of_type(template, "AWS::S3::Bucket").items()
    props = bucket["Properties"]
    assert all(props["PublicAccessBlockConfiguration"].values())
    assert len(props["PublicAccessBlockConfiguration"]) == 4
    rule = props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")
    assert bucket["DeletionPolicy"] == "Retain"
    policy = next(iter(of_type(template, "AWS::S3::BucketPolicy").values()))["Properties"]
    deny = policy["PolicyDocument"]["Statement"][0]
    assert deny["Effect"] == "Deny" and deny["Condition"]["Bool"]["aws:SecureTransport"] == "false"
    fsx = next(iter(of_type(template, "AWS::FSx::FileSystem").values()))["Properties"]
    assert fsx["FileSystemType"] == "LUSTRE"
    assert fsx["LustreConfiguration"]["ImportPath"] == {"!Sub": f"s3://${{{bucket_name}}}/data"}
    assert fsx["SecurityGroupIds"] == [{"!Ref": "TrainingSecurityGroup"}]
    repo = next(iter(of_type(template, "AWS::ECR::Repository").values()))["Properties"]
    assert repo["ImageScanningConfiguration"]["ScanOnPush"] is True


def test_lustre_is_created_after_the_security_group_rules(template):
    # FSx refuses a group without Lustre traffic between members (port 988); the rules are
    # separate resources, so the file system must wait for them (a CloudFormation race)
    ((_, fsx),) = of_type(template, "AWS::FSx::FileSystem").items()
    groups = {g["!Ref"] for g in fsx["Properties"]["SecurityGroupIds"]}
    rules = {
        name
        for kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
        for name, r in of_type(template, kind).items()
        if r["Properties"]["GroupId"].get("!Ref") in groups
    }
    assert rules
    depends = fsx.get("DependsOn", [])
    depends = [depends] if isinstance(depends, str) else depends
    assert rules <= set(depends), f"FSx DependsOn {depends}, rules {sorted(rules)}"


def test_s3_endpoint_admits_only_the_project_bucket_and_image_layers(template):
    ((_, endpoint),) = of_type(template, "AWS::EC2::VPCEndpoint").items()
    statements = endpoint["Properties"]["PolicyDocument"]["Statement"]
    resources = []
    for s in statements:
        assert s["Effect"] == "Allow"
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        assert all(a.startswith("s3:") and "*" not in a for a in actions), s
        resources += s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
    assert "*" not in resources
    for r in resources:
        assert "DataBucket" in str(r) or "starport-layer-bucket" in str(r), r


def test_execution_role_is_least_privilege(template):
    role = next(iter(of_type(template, "AWS::IAM::Role").values()))["Properties"]
    trust = role["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "sagemaker.amazonaws.com"}]
    assert "ManagedPolicyArns" not in role  # no AmazonSageMakerFullAccess
    statements = [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]
    for s in statements:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        assert all("*" not in a for a in actions), s
        assert s["Effect"] == "Allow"
        if any(a.startswith("s3:") for a in actions):
            resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
            assert resources != ["*"] and all("DataBucket" in str(r) for r in resources), s
        if s["Resource"] == "*":
            # only actions without resource-level permissions, or with a condition
            assert "Condition" in s or all(
                a.startswith(("ec2:Describe", "fsx:Describe", "ecr:GetAuthorizationToken"))
                for a in actions
            ), s


def test_docs_walk_through_the_stack():
    docs = (ROOT / "docs" / "sagemaker.md").read_text()
    for step in (
        "aws cloudformation deploy",
        "infra/albertkit.yaml",
        "docker build",
        "docker push",
        "albertkit prepare-data",
        "albertkit launch",
        "tensorboard",
        "describe-managed-prefix-lists",
        "--dry-run",
    ):
        assert step in docs, step


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_lint_script_is_executable():
    assert os.access(ROOT / "scripts" / "lint_infra.sh", os.X_OK)
