#!/bin/bash
# Make albertkit's virtual environment once on shared storage (FSx for Lustre at /fsx on
# HyperPod), as HyperPod lifecycle scripts do for their software: every node then activates
# the same venv and nothing is installed per node. Safe to run on several nodes at once
# (a lock on /fsx lets one build it) and again later (a finished venv is kept).
# Used by examples/slurm/hyperpod_pretrain.sbatch (its VENV); configs stay under
# examples/configs/ (e.g. examples/configs/pretrain_base.yaml).
#
#   srun -N1 bash examples/slurm/setup_venv_on_shared_storage.sh          # once, from the head node
#   ALBERTKIT_SRC=/fsx/albertkit bash examples/slurm/setup_venv_on_shared_storage.sh
#   HOROVOD=1 bash ...   # also build Horovod with MPI and NCCL (needs mpicc and CUDA)
set -euo pipefail

VENV=${VENV:-/fsx/venvs/albertkit}
ALBERTKIT_SRC=${ALBERTKIT_SRC:-}       # a checkout to install editable; default: from PyPI
PYTHON=${PYTHON:-python3}

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if [ -f "$VENV/.albertkit-ready" ]; then
  echo "venv ready: $VENV"
  exit 0
fi
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --upgrade pip
if [ -n "$ALBERTKIT_SRC" ]; then
  "$VENV/bin/pip" install -e "$ALBERTKIT_SRC"
else
  "$VENV/bin/pip" install albertkit
fi
if [ "${HOROVOD:-0}" = 1 ]; then
  HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_GPU_OPERATIONS=NCCL \
    "$VENV/bin/pip" install --no-cache-dir horovod
fi
"$VENV/bin/albertkit" doctor --json > "$VENV/doctor.json" || true
touch "$VENV/.albertkit-ready"
echo "venv made: $VENV (activate with: source $VENV/bin/activate)"
