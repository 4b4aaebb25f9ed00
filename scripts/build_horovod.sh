#!/usr/bin/env bash
# Build and install Horovod 0.28.1 against the TensorFlow of one Python environment.
#
# Horovod's last release (0.28.1, 2023) predates TensorFlow 2.21. It still builds, once three
# header locations it expects are supplied on CPLUS_INCLUDE_PATH:
#   (a) tensorflow/compiler/xla/client/xla_builder.h moved to xla/hlo/builder/xla_builder.h
#       (TF >= 2.17): a one-line forwarding header in a temporary shim folder;
#   (b) <tf>/include/external/highwayhash and (c) <tf>/include/external/farmhash_archive/src,
#       which TF's headers include by their short names.
# The build is sourced from PyPI with --no-build-isolation so that it compiles against the
# TensorFlow already installed (an isolated build would pull a second, different TF).
#
# Used by .ci/run, by docker/Dockerfile and by users:
#   scripts/build_horovod.sh                      # CPU + Gloo, into the active `python`
#   scripts/build_horovod.sh --python /work/venv/bin/python --verify
#   scripts/build_horovod.sh --gpu --mpi          # GPU image: NCCL all-reduce, Open MPI
#
# Options (each also settable by environment variable):
#   --python PATH   interpreter whose environment gets Horovod       (PYTHON, default: python3)
#   --gpu           NCCL GPU operations; needs CUDA + NCCL            (HOROVOD_BUILD_GPU=1)
#                   (NCCL found via HOROVOD_NCCL_HOME / the CUDA paths, as Horovod documents)
#   --mpi           require MPI (mpicc on PATH); default: Gloo only   (HOROVOD_BUILD_MPI=1)
#   --force         rebuild even if horovod.tensorflow already imports
#   --verify        afterwards run `horovodrun -np 2 --gloo` on a two-rank all-reduce (CPU)
#   -h, --help      this text
#
# Needs: a C++17 compiler (g++), make, cmake >= 3.13 (installed from PyPI into the
# environment when missing), TensorFlow already installed. Takes about 3.5 minutes on 2 cores.
set -euo pipefail

HOROVOD_VERSION="0.28.1"
PY="${PYTHON:-python3}"
GPU="${HOROVOD_BUILD_GPU:-0}"
MPI="${HOROVOD_BUILD_MPI:-0}"
FORCE=0
VERIFY=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
die() { echo "build_horovod.sh: error: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) [[ $# -ge 2 ]] || die "--python needs a path"; PY="$2"; shift 2 ;;
    --python=*) PY="${1#*=}"; shift ;;
    --gpu) GPU=1; shift ;;
    --mpi) MPI=1; shift ;;
    --force) FORCE=1; shift ;;
    --verify) VERIFY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

command -v "$PY" >/dev/null 2>&1 || die "python interpreter '$PY' not found (use --python PATH)"
PY="$(command -v "$PY")"
BIN_DIR="$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))')"

verify() {
  local hvdrun="$BIN_DIR/horovodrun"
  [[ -x "$hvdrun" ]] || die "horovodrun not found next to $PY (expected $hvdrun)"
  local probe
  probe="$(mktemp --suffix=.py)"
  # shellcheck disable=SC2064
  trap "rm -f '$probe'" RETURN
  cat >"$probe" <<'EOF'
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
import horovod.tensorflow as hvd

hvd.init()
total = hvd.allreduce(tf.constant([float(hvd.rank() + 1)]), op=hvd.Sum)
expected = hvd.size() * (hvd.size() + 1) / 2
assert abs(float(total[0]) - expected) < 1e-6, (float(total[0]), expected)
print(f"rank {hvd.rank()}/{hvd.size()}: allreduce ok ({float(total[0])})", flush=True)
EOF
  echo "build_horovod.sh: verifying: horovodrun -np 2 --gloo (CPU)"
  CUDA_VISIBLE_DEVICES="" timeout 180 "$hvdrun" -np 2 -H localhost:2 --gloo "$PY" "$probe"
}

if [[ "$FORCE" != 1 ]] && "$PY" -c "import horovod.tensorflow" >/dev/null 2>&1; then
  have="$("$PY" -c 'import horovod; print(horovod.__version__)')"
  echo "build_horovod.sh: horovod $have already imports with TensorFlow in $PY; skipping build (--force rebuilds)"
  if [[ "$VERIFY" == 1 ]]; then verify; fi
  exit 0
fi

# --------------------------------------------------------------------------- prerequisites
TF_DIR="$("$PY" -c 'import os, tensorflow as tf; print(os.path.dirname(tf.__file__))' 2>/dev/null)" \
  || die "TensorFlow does not import in $PY: install albertkit's dependencies first"
TF_INC="$TF_DIR/include"
[[ -f "$TF_INC/xla/hlo/builder/xla_builder.h" ]] \
  || die "$TF_INC/xla/hlo/builder/xla_builder.h missing: this recipe is for TensorFlow >= 2.17 (found $("$PY" -c 'import tensorflow as tf; print(tf.__version__)'))"
for d in "$TF_INC/external/highwayhash" "$TF_INC/external/farmhash_archive/src"; do
  [[ -d "$d" ]] || die "expected TensorFlow header folder $d is missing"
done
command -v "${CXX:-g++}" >/dev/null 2>&1 || die "no C++ compiler (${CXX:-g++}); Debian: apt-get install g++"
command -v make >/dev/null 2>&1 || die "make not found; Debian: apt-get install make"

cmake_ok() {
  command -v cmake >/dev/null 2>&1 || return 1
  local v
  v="$(cmake --version | head -n1 | awk '{print $3}')"
  [[ "$(printf '%s\n3.13\n' "$v" | sort -V | head -n1)" == "3.13" ]]
}
if ! cmake_ok; then
  echo "build_horovod.sh: cmake >= 3.13 not on PATH: installing it from PyPI into $PY's environment"
  "$PY" -m pip install --no-cache-dir "cmake>=3.13,<4"
  export PATH="$BIN_DIR:$PATH"
  cmake_ok || die "cmake still unusable after pip install"
fi
# Horovod's setup.py imports these at build time (build isolation is off).
"$PY" -m pip install --no-cache-dir -q "setuptools" "wheel" "packaging" "psutil" "pyyaml" "cloudpickle"

# --------------------------------------------------------------------------- header shim
SHIM="$(mktemp -d -t horovod-tf-shim.XXXXXX)"
trap 'rm -rf "$SHIM"' EXIT
mkdir -p "$SHIM/tensorflow/compiler/xla/client"
echo '#include "xla/hlo/builder/xla_builder.h"' >"$SHIM/tensorflow/compiler/xla/client/xla_builder.h"
export CPLUS_INCLUDE_PATH="$SHIM:$TF_INC/external/highwayhash:$TF_INC/external/farmhash_archive/src${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"

# --------------------------------------------------------------------------- build
export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_GLOO=1
if [[ "$GPU" == 1 ]]; then
  export HOROVOD_GPU_OPERATIONS=NCCL
else
  export HOROVOD_CPU_OPERATIONS="${HOROVOD_CPU_OPERATIONS:-GLOO}"
fi
if [[ "$MPI" == 1 ]]; then
  command -v mpicc >/dev/null 2>&1 || die "--mpi given but mpicc is not on PATH (Debian: apt-get install libopenmpi-dev openmpi-bin)"
  export HOROVOD_WITH_MPI=1
else
  export HOROVOD_WITHOUT_MPI=1
fi
export MAKEFLAGS="${MAKEFLAGS:--j$(nproc)}"

echo "build_horovod.sh: building horovod==$HOROVOD_VERSION for $PY (TensorFlow at $TF_DIR; gpu=$GPU mpi=$MPI)"
start=$SECONDS
"$PY" -m pip install --no-build-isolation --no-cache-dir "horovod==$HOROVOD_VERSION"
"$PY" -c "import horovod.tensorflow" || die "horovod installed but horovod.tensorflow does not import"
echo "build_horovod.sh: built and installed horovod==$HOROVOD_VERSION in $((SECONDS - start)) s"
"$BIN_DIR/horovodrun" --check-build || true

if [[ "$VERIFY" == 1 ]]; then verify; fi
