#!/usr/bin/env bash
# Build the albertkit training image (docker/Dockerfile) and check it.
#
#   scripts/build_image.sh                       # albertkit:latest with docker, else buildah
#   scripts/build_image.sh --tag 123456789012.dkr.ecr.us-east-1.amazonaws.com/albertkit:v1
#   scripts/build_image.sh --check-only          # only run the in-image checks
#
# Engine: docker when a docker daemon answers, otherwise buildah (installed with apt-get when
# missing and running as root; storage driver vfs and chroot isolation, which work inside
# an unprivileged container or a VM without overlay support; BUILDAH_STORAGE_DRIVER and
# BUILDAH_ISOLATION override).
#
# Base image: debian:bookworm-slim. When it cannot be pulled (no registry access), the same
# Debian release is bootstrapped from Debian's package mirror with debootstrap
# (--variant=minbase) and stored locally under that name, so the Dockerfile is unchanged.
#
# Checks inside the built image: TensorFlow imports; horovod.tensorflow imports with
# nccl_built() and mpi_built() true (the NCCL/CUDA library loads without a GPU); mpi4py and
# paramiko import; /etc/albertkit/image-info.json records the CUDA release Horovod's kernels
# were compiled with, TensorFlow's CUDA/cuDNN build versions and the Horovod version, and
# `python -m albertkit.sagemaker.gpu_driver --report` prints the minimum NVIDIA driver they
# need; `albertkit --help` works; no SSH private key is in the image.
#
# Options:
#   --tag NAME        image name                                  (default: albertkit:latest)
#   --engine E        docker | buildah                            (default: auto)
#   --base IMAGE      base image                                  (default: debian:bookworm-slim)
#   --mirror URL      Debian mirror for the bootstrap     (default: http://deb.debian.org/debian)
#   --ca-bundle FILE  CA bundle for pip inside the build, for TLS-intercepting proxies; passed
#                     as a build secret, never stored in the image    (default: $PIP_CERT)
#   --jobs N          parallel compile jobs for Horovod                       (default: 2)
#   --layers          buildah: cache one layer per instruction (default with overlay storage;
#                     off with vfs, where each layer is a full copy of the file system, and
#                     buildah keeps a working container, another full copy, per instruction
#                     until the build ends: with vfs, --layers needs about 80 GB free)
#   --check-only      skip the build, check an existing image
#   -h, --help        this text
#
# Times measured with buildah/vfs on a 2-core machine that other jobs were loading (load
# average 8-12): base bootstrap about 1 min; Debian packages about 3 min; the Python layer
# (about 3.5 GB of wheels, 7.9 GB installed) about 20 min, mostly writing and committing the
# layer; Horovod with NCCL, MPI and CUDA kernels about 15 min. With docker's overlay storage
# and an idle machine, expect much less; a change under src/ rebuilds only the last layer.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG="albertkit:latest"
ENGINE=""
BASE="debian:bookworm-slim"
MIRROR="http://deb.debian.org/debian"
CA_BUNDLE="${PIP_CERT:-}"
JOBS=2
CHECK_ONLY=0
LAYERS=""
STORAGE="${BUILDAH_STORAGE_DRIVER:-vfs}"
ISOLATION="${BUILDAH_ISOLATION:-chroot}"

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { echo "build_image.sh: error: $*" >&2; exit 1; }
say() { echo "build_image.sh: $*"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --tag) TAG="${2:?--tag needs a value}"; shift 2 ;;
    --engine) ENGINE="${2:?--engine needs a value}"; shift 2 ;;
    --base) BASE="${2:?--base needs a value}"; shift 2 ;;
    --mirror) MIRROR="${2:?--mirror needs a value}"; shift 2 ;;
    --ca-bundle) CA_BUNDLE="${2:?--ca-bundle needs a value}"; shift 2 ;;
    --jobs) JOBS="${2:?--jobs needs a value}"; shift 2 ;;
    --layers) LAYERS=true; shift ;;
    --check-only) CHECK_ONLY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

apt_install() {
  [[ $(id -u) -eq 0 ]] || die "$* missing and not root: install $* (Debian/Ubuntu: apt-get install $*)"
  command -v apt-get >/dev/null 2>&1 || die "$* missing and no apt-get: install $* by hand"
  say "installing $* with apt-get"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if [[ -z "$ENGINE" ]]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    ENGINE=docker
  else
    ENGINE=buildah
  fi
fi
case "$ENGINE" in
  docker) ;;
  buildah) command -v buildah >/dev/null 2>&1 || apt_install buildah ;;
  *) die "--engine must be docker or buildah" ;;
esac
B=(buildah --storage-driver "$STORAGE")

image_exists() {
  if [[ "$ENGINE" == docker ]]; then docker image inspect "$1" >/dev/null 2>&1
  else "${B[@]}" inspect --type image "$1" >/dev/null 2>&1; fi
}

# --------------------------------------------------------------------------- base image
bootstrap_base() {
  # The same Debian release the registry image is made from, straight from the mirror.
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  local suite="${BASE##*:}"
  suite="${suite%-slim}"
  say "bootstrapping $BASE from $MIRROR (debootstrap --variant=minbase $suite)"
  if [[ "$ENGINE" == docker ]]; then
    local root
    root="$(mktemp -d -t albertkit-base.XXXXXX)"
    debootstrap --variant=minbase "$suite" "$root" "$MIRROR" >/dev/null
    tar -C "$root" -c . | docker import - "$BASE" >/dev/null
    rm -rf "$root"
  else
    local ctr mnt
    ctr="$("${B[@]}" from scratch)"
    mnt="$("${B[@]}" mount "$ctr")"
    debootstrap --variant=minbase "$suite" "$mnt" "$MIRROR" >/dev/null
    rm -rf "$mnt"/var/cache/apt/archives/*.deb "$mnt"/var/lib/apt/lists/*
    "${B[@]}" umount "$ctr" >/dev/null
    "${B[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --cmd bash "$ctr"
    "${B[@]}" commit --rm -q "$ctr" "$BASE" >/dev/null
  fi
}

ensure_base() {
  if image_exists "$BASE"; then
    say "base image $BASE is present"
    return
  fi
  if [[ "$ENGINE" == docker ]]; then
    docker pull -q "$BASE" >/dev/null 2>&1 && return
  else
    "${B[@]}" pull -q "docker.io/library/$BASE" >/dev/null 2>&1 \
      && "${B[@]}" tag "docker.io/library/$BASE" "$BASE" && return
  fi
  say "cannot pull $BASE"
  bootstrap_base
}

# --------------------------------------------------------------------------- build
build() {
  local secret_src
  secret_src="$(mktemp -t albertkit-ca.XXXXXX)"
  # shellcheck disable=SC2064
  trap "rm -f '$secret_src'" RETURN
  if [[ -n "$CA_BUNDLE" ]]; then
    [[ -s "$CA_BUNDLE" ]] || die "--ca-bundle $CA_BUNDLE is missing or empty"
    cat "$CA_BUNDLE" >"$secret_src"
  fi
  local args=(-f docker/Dockerfile -t "$TAG" --build-arg "BASE_IMAGE=$BASE"
    --build-arg "BUILD_JOBS=$JOBS" --secret "id=pip_ca,src=$secret_src")
  say "building $TAG with $ENGINE"
  if [[ "$ENGINE" == docker ]]; then
    DOCKER_BUILDKIT=1 docker build "${args[@]}" .
  else
    # --layers keeps one cached layer per step, so a change to src/ rebuilds only the last
    # one; but with vfs storage every layer is a full copy of the file system (~9 GB each
    # after the Python layer), so vfs builds commit only the final image unless --layers is
    # given. The docker format keeps the SHELL instruction (bash), which OCI cannot record.
    local layers="$LAYERS"
    [[ -n "$layers" ]] || { [[ "$STORAGE" == vfs ]] && layers=false || layers=true; }
    say "buildah storage $STORAGE, isolation $ISOLATION, --layers=$layers"
    "${B[@]}" bud --format docker --layers="$layers" --isolation "$ISOLATION" --pull-never \
      "${args[@]}" .
  fi
}

# --------------------------------------------------------------------------- checks
CHECK_PY='
import os, subprocess, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
import horovod
import horovod.tensorflow as hvd
import mpi4py, paramiko  # noqa: F401  (the SDK MPI driver needs both)
import mlflow, pynvml, sagemaker_mlflow  # noqa: F401  (logging.mlflow, NVML sampling)
print("tensorflow", tf.__version__, "| horovod", horovod.__version__,
      "| nccl_built", hvd.nccl_built(), "| mpi_built", hvd.mpi_built(), "| cuda_built", hvd.cuda_built())
assert hvd.nccl_built(), "horovod was built without NCCL"
assert hvd.mpi_built(), "horovod was built without MPI"
import json
info = json.load(open("/etc/albertkit/image-info.json", encoding="utf-8"))
keys = ("horovod_cuda_version", "tensorflow_cuda_version", "tensorflow_cudnn_version",
        "horovod_version")
assert all(info.get(k) for k in keys), f"/etc/albertkit/image-info.json lacks {keys}: {info}"
assert info["horovod_version"] == horovod.__version__, info
print("image-info.json:", ", ".join(f"{k}={info[k]}" for k in keys))
# the CUDA releases the image was built with and the NVIDIA driver they need
subprocess.run([sys.executable, "-m", "albertkit.sagemaker.gpu_driver", "--report"], check=True)
subprocess.run(["albertkit", "--help"], check=True, stdout=subprocess.DEVNULL)
print("albertkit --help: ok")
keys = [p for p in ("/root/.ssh/id_rsa", "/root/.ssh/id_ed25519", "/root/.ssh/id_ecdsa")
        if os.path.exists(p)]
hostkeys = [p for p in os.listdir("/etc/ssh") if p.startswith("ssh_host_")]
assert not keys and not hostkeys, f"SSH keys baked into the image: {keys + hostkeys}"
print("no SSH private key in the image: ok")
'

check() {
  say "checking $TAG"
  if [[ "$ENGINE" == docker ]]; then
    docker run --rm --entrypoint python "$TAG" -c "$CHECK_PY"
  else
    local ctr status=0
    ctr="$("${B[@]}" from --pull-never "$TAG")"
    "${B[@]}" run --isolation "$ISOLATION" "$ctr" -- python -c "$CHECK_PY" || status=$?
    "${B[@]}" rm "$ctr" >/dev/null
    [[ $status -eq 0 ]] || die "in-image checks failed"
  fi
  say "in-image checks passed"
}

size_of() {
  if [[ "$ENGINE" == docker ]]; then docker image inspect -f '{{.Size}}' "$TAG"
  else "${B[@]}" images --noheading --format '{{.Size}}' "$TAG"; fi
}

start=$SECONDS
if [[ "$CHECK_ONLY" != 1 ]]; then
  ensure_base
  build
  say "built $TAG in $((SECONDS - start)) s"
fi
check
say "image $TAG: $(size_of) (uncompressed)"
