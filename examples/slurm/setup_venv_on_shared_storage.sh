#!/bin/bash
# Make albertkit's virtual environment once on shared storage (FSx for Lustre at /fsx on
# HyperPod), as HyperPod lifecycle scripts do for their software: every node then activates
# the same venv and nothing is installed per node. Safe to run on several nodes at once
# (a lock on /fsx lets one build it) and again later (a finished venv is kept).
# Used by examples/slurm/hyperpod_pretrain.sbatch (its VENV); configs stay under
# examples/configs/ (e.g. examples/configs/pretrain_base.yaml).
#
# albertkit is installed from the clone of its repository this script sits in (albertkit is
# not on PyPI); keep that clone on /fsx too, so the editable install is seen by every node.
#
#   srun -N1 bash /fsx/albertkit/examples/slurm/setup_venv_on_shared_storage.sh   # once
#   ALBERTKIT_SRC=/fsx/other-clone bash .../setup_venv_on_shared_storage.sh
#   HOROVOD=1 bash ...        # also Horovod, Gloo only (plain srun)
#   HOROVOD=gpu-mpi bash ...  # Horovod with NCCL and MPI (needs CUDA and mpicc; srun --mpi=pmix)
set -euo pipefail

VENV=${VENV:-/fsx/venvs/albertkit}
# the checkout to install (editable); default: the one holding this script
ALBERTKIT_SRC=${ALBERTKIT_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
PYTHON=${PYTHON:-python3}

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if [ -f "$VENV/.albertkit-ready" ]; then
  echo "venv ready: $VENV"
  exit 0
fi
# only a venv this script started and did not finish is made again; anything else at $VENV
# is someone else's and stays
if [ -e "$VENV" ] && [ ! -f "$VENV/.albertkit-building" ]; then
  echo "error: $VENV exists and was not made by this script: set VENV to another path" >&2
  exit 2
fi
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
touch "$VENV/.albertkit-building"
"$VENV/bin/pip" install --upgrade pip
# TensorFlow with the CUDA libraries it was built against (as nvidia-* wheels)
"$VENV/bin/pip" install "tensorflow[and-cuda]==2.21.*"
[ -f "$ALBERTKIT_SRC/pyproject.toml" ] || {
  echo "error: ALBERTKIT_SRC=$ALBERTKIT_SRC is not a clone of albertkit (no pyproject.toml)" >&2
  exit 2
}
"$VENV/bin/pip" install -e "$ALBERTKIT_SRC"
# Horovod through the repository's build recipe (it compiles against this venv's TensorFlow)
case "${HOROVOD:-0}" in
  0) ;;
  1) bash "$ALBERTKIT_SRC/scripts/build_horovod.sh" --python "$VENV/bin/python" ;;
  gpu-mpi) bash "$ALBERTKIT_SRC/scripts/build_horovod.sh" --python "$VENV/bin/python" --gpu --mpi ;;
  *) echo "error: HOROVOD=$HOROVOD: expected 0, 1 or gpu-mpi" >&2; exit 2 ;;
esac
"$VENV/bin/albertkit" doctor --json > "$VENV/doctor.json" || true
rm "$VENV/.albertkit-building"
touch "$VENV/.albertkit-ready"
echo "venv made: $VENV (activate with: source $VENV/bin/activate)"
