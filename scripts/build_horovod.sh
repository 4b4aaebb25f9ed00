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
#                   (NCCL found via HOROVOD_NCCL_HOME / the CUDA paths, as Horovod documents).
#                   Without a CUDA toolkit (no HOROVOD_CUDA_HOME, no nvcc on PATH) the
#                   compiler comes from the CUDA 13 compiler wheels (scratch only) and the
#                   runtime + NCCL from the CUDA 12 wheels `tensorflow[and-cuda]` installed,
#                   assembled into a temporary CUDA tree; both are linked dynamically.
#   --mpi           require MPI (mpicc on PATH); default: Gloo only   (HOROVOD_BUILD_MPI=1)
#                   (HOROVOD_GLOO=0 with --mpi leaves Gloo out)
#   --force         rebuild even if horovod.tensorflow already imports (the wheel cache is
#                   still used; HOROVOD_WHEEL_CACHE=0 compiles from source)
#   HOROVOD_WHEEL_CACHE  folder of CPU wheels built earlier, one per TensorFlow/Python/flags key
#                   (default ~/.cache/albertkit/horovod-wheels; 0 turns it off)
#   --verify        afterwards run `horovodrun -np 2 --gloo` on a two-rank all-reduce (CPU)
#   --info FILE     after a successful build, write what it was built with to FILE as JSON
#                   (HOROVOD_BUILD_INFO): horovod_version, horovod_cuda_version (the release
#                   of the nvcc that compiled Horovod's CUDA kernels; null without --gpu),
#                   tensorflow_cuda_version and tensorflow_cudnn_version (TensorFlow's own
#                   build, tf.sysconfig.get_build_info(); null for a CPU TensorFlow). The
#                   image keeps it as /etc/albertkit/image-info.json
#   -h, --help      this text
#
# GPU builds are patched for TensorFlow >= 2.18, whose shared objects no longer define
# stream_executor::gpu::AsGpuStreamValue (Horovod's mpi_ops.cc declares and calls it, so the
# library would build and then fail to load): the patched source asks the Stream for its
# platform handle instead (Stream::platform_specific_handle().stream, the cudaStream_t).
#
# Needs: a C++17 compiler (g++), make, cmake >= 3.13 (installed from PyPI into the
# environment when missing), TensorFlow already installed. Takes about 3.5 minutes on 2 cores.
set -euo pipefail

HOROVOD_VERSION="0.28.1"
# CUDA compiler used when the environment has only TensorFlow's CUDA 12 wheels (see
# cuda_tree_from_wheels). CUDA 13 compiles for compute capability 7.5 and newer only.
CUDA_COMPILER_VERSION="${CUDA_COMPILER_VERSION:-13.0.88}"
CUDA_CCCL_VERSION="${CUDA_CCCL_VERSION:-13.0.85}"  # libcu++ headers (nv/target) of that release
PY="${PYTHON:-python3}"
GPU="${HOROVOD_BUILD_GPU:-0}"
MPI="${HOROVOD_BUILD_MPI:-0}"
FORCE=0
VERIFY=0
INFO="${HOROVOD_BUILD_INFO:-}"
NVCC=""   # the CUDA compiler of a --gpu build, for --info

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
    --info) [[ $# -ge 2 ]] || die "--info needs a file"; INFO="$2"; shift 2 ;;
    --info=*) INFO="${1#*=}"; shift ;;
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

# --------------------------------------------------------------------------- build record
write_info() {
  # nvcc --version ends with "Cuda compilation tools, release 13.0, V13.0.88" + a build line
  local cuda=""
  if [[ -n "$NVCC" ]]; then
    cuda="$("$NVCC" --version | sed -n 's/.*release [0-9.]*, V\([0-9][0-9.]*\).*/\1/p' | head -n1)"
    [[ -n "$cuda" ]] || die "--info: cannot read the release from $NVCC --version"
  fi
  mkdir -p "$(dirname "$INFO")"
  "$PY" - "$INFO" "$cuda" <<'INFO'
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod
import tensorflow as tf

path, cuda = sys.argv[1], sys.argv[2]
build = tf.sysconfig.get_build_info()
info = {
    "horovod_version": horovod.__version__,
    "horovod_cuda_version": cuda or None,
    "tensorflow_version": tf.__version__,
    "tensorflow_cuda_version": build.get("cuda_version"),
    "tensorflow_cudnn_version": build.get("cudnn_version"),
}
tmp = f"{path}.partial"
with open(tmp, "w", encoding="utf-8") as f:
    json.dump(info, f, indent=2)
    f.write("\n")
os.replace(tmp, path)
print(f"build_horovod.sh: build record {path}: {json.dumps(info)}")
INFO
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
export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
# Gloo (horovodrun --gloo) unless HOROVOD_GLOO=0: an MPI build (the SageMaker image) does
# not need it, and it is half of the compile time.
if [[ "${HOROVOD_GLOO:-1}" == 0 ]]; then
  [[ "$MPI" == 1 ]] || die "HOROVOD_GLOO=0 needs --mpi (no controller otherwise)"
  export HOROVOD_WITHOUT_GLOO=1
else
  export HOROVOD_WITH_GLOO=1
fi
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

# --------------------------------------------------------------------------- GPU: CUDA from wheels
cuda_tree_from_wheels() {
  # A CUDA tree for Horovod's build out of pip wheels. The CUDA 12 wheels that TensorFlow
  # installs carry the runtime, NCCL and their headers but, in every 12.x release on PyPI,
  # only ptxas of the compiler; the CUDA 13 compiler wheels (nvidia-cuda-nvcc, -nvvm, -crt,
  # -runtime for the matching headers) are complete. So: compiler and headers from CUDA 13,
  # downloaded into the build's scratch folder only, and the libraries Horovod links (the
  # CUDA runtime, NCCL) from TensorFlow's CUDA 12 wheels, so the process loads one of each.
  # nvcc finds cicc and its headers relative to itself (nvcc.profile: TOP = bin/..).
  local nv tree d f name cu13
  nv="$("$PY" -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null)" \
    || die "--gpu: no CUDA toolkit and no nvidia-* wheels in $PY (pip install 'tensorflow[and-cuda]')"
  [[ -f "$nv/nccl/include/nccl.h" ]] || die "--gpu: $nv/nccl/include/nccl.h missing (pip install nvidia-nccl-cu12)"
  [[ -f "$nv/cuda_runtime/lib/libcudart.so.12" ]] || die "--gpu: $nv/cuda_runtime/lib/libcudart.so.12 missing"
  cu13="$SHIM/cu13-wheels"
  "$PY" -m pip install --no-cache-dir -q --no-deps --target "$cu13" \
    "nvidia-cuda-nvcc==$CUDA_COMPILER_VERSION" "nvidia-nvvm==$CUDA_COMPILER_VERSION" \
    "nvidia-cuda-crt==$CUDA_COMPILER_VERSION" "nvidia-cuda-runtime==$CUDA_COMPILER_VERSION" \
    "nvidia-cuda-cccl==$CUDA_CCCL_VERSION" >&2
  tree="$cu13/nvidia/cu13"
  [[ -x "$tree/bin/nvcc" && -x "$tree/nvvm/bin/cicc" ]] || die "--gpu: the CUDA compiler wheels lack nvcc/cicc"
  # link against TensorFlow's CUDA 12 runtime, never the compiler wheels' own shared one
  # (its static archives stay: CMake's compiler check links a test program with them)
  mkdir -p "$tree/lib64"
  mv "$tree"/lib/*.a "$tree/lib64/"
  rm -rf "$tree/lib"
  ln -s "$nv/cuda_runtime/lib/libcudart.so.12" "$tree/lib64/libcudart.so"
  for f in "$nv"/nccl/lib/libnccl.so*; do ln -s "$f" "$tree/lib64/${f##*/}"; done
  [[ -e "$tree/lib64/libnccl.so" ]] || ln -s "$nv/nccl/lib/libnccl.so.2" "$tree/lib64/libnccl.so"
  ln -s "$nv/nccl/include/nccl.h" "$tree/include/nccl.h"
  [[ -e "$nv/nccl/include/nccl_net.h" ]] && ln -s "$nv/nccl/include/nccl_net.h" "$tree/include/nccl_net.h"
  echo "$tree"
}

# --------------------------------------------------------------------------- source + patch
SRC="$SHIM/src"
mkdir -p "$SRC"
if [[ "$GPU" == 1 ]]; then
  if [[ -z "${HOROVOD_CUDA_HOME:-}" ]] && ! command -v nvcc >/dev/null 2>&1; then
    CUDA_TREE="$(cuda_tree_from_wheels)"
    if [[ ",${HOROVOD_BUILD_CUDA_CC_LIST:-}," == *",70,"* ]]; then
      echo "build_horovod.sh: CUDA 13 has no compute capability 7.0 (V100): dropped from HOROVOD_BUILD_CUDA_CC_LIST" >&2
      HOROVOD_BUILD_CUDA_CC_LIST="$(echo ",$HOROVOD_BUILD_CUDA_CC_LIST," | sed 's/,70,/,/; s/^,//; s/,$//')"
      export HOROVOD_BUILD_CUDA_CC_LIST
    fi
    export HOROVOD_CUDA_HOME="$CUDA_TREE" CUDA_HOME="$CUDA_TREE" CUDAToolkit_ROOT="$CUDA_TREE"
    export PATH="$CUDA_TREE/bin:$PATH"
    export HOROVOD_NCCL_INCLUDE="$CUDA_TREE/include" HOROVOD_NCCL_LIB="$CUDA_TREE/lib64"
    export HOROVOD_NCCL_LINK=SHARED
    # the wheels carry no static CUDA runtime: link libcudart.so.12, as TensorFlow does
    CUDA_RUNTIME=Shared
    echo "build_horovod.sh: CUDA from the nvidia-* wheels: $("$CUDA_TREE/bin/nvcc" --version | tail -n1)"
  fi
  # the compiler CMake's CUDA language check picks: HOROVOD_CUDA_HOME's, else nvcc on PATH
  if [[ -n "${HOROVOD_CUDA_HOME:-}" && -x "$HOROVOD_CUDA_HOME/bin/nvcc" ]]; then
    NVCC="$HOROVOD_CUDA_HOME/bin/nvcc"
  else
    NVCC="$(command -v nvcc || true)"
  fi
  "$PY" -m pip download --no-deps --no-binary :all: --no-cache-dir -q -d "$SRC" "horovod==$HOROVOD_VERSION"
  tar -xzf "$SRC/horovod-$HOROVOD_VERSION.tar.gz" -C "$SRC"
  HVD_SRC="$SRC/horovod-$HOROVOD_VERSION"
  "$PY" - "$HVD_SRC" "${CUDA_RUNTIME:-}" <<'PATCH'
import pathlib, re, sys
root, runtime = pathlib.Path(sys.argv[1]), sys.argv[2]
ops = root / "horovod" / "tensorflow" / "mpi_ops.cc"
text = ops.read_text()
declaration = re.compile(
    r"// Forward declaration of AsGpuStreamValue\nnamespace stream_executor \{\nnamespace gpu \{\n"
    r"GpuStreamHandle AsGpuStreamValue\(Stream\* stream\);\n\} // namespace stream_executor\n"
    r"\} // namespace gpu\n")
text, n = declaration.subn("", text)
assert n == 1, "mpi_ops.cc: AsGpuStreamValue declaration not found (not Horovod 0.28.1?)"
calls = text.count("stream_executor::gpu::AsGpuStreamValue(")
assert calls >= 1, "mpi_ops.cc: no AsGpuStreamValue call"
text = text.replace("stream_executor::gpu::AsGpuStreamValue(", "HorovodGpuStream(")
helper = (
    "\n// TensorFlow >= 2.18 no longer exports stream_executor::gpu::AsGpuStreamValue; the\n"
    "// Stream hands out its native handle itself.\n"
    "static inline GpuStreamHandle HorovodGpuStream(stream_executor::Stream* stream) {\n"
    "  return static_cast<GpuStreamHandle>(stream->platform_specific_handle().stream);\n"
    "}\n"
)
anchor = "#endif // HAVE_GPU\n"
index = text.index(anchor) + len(anchor)
text = text[:index] + "#if HAVE_GPU" + helper + "#endif // HAVE_GPU\n" + text[index:]
ops.write_text(text)
print(f"build_horovod.sh: patched {ops.name}: {calls} AsGpuStreamValue calls")
# The XLA custom-call variant of the ops (xla_mpi_ops.cc, built with GPU support only,
# HOROVOD_ENABLE_XLA_OPS) is written against XLA APIs TensorFlow 2.21 no longer has
# (xla::StatusOr...). albertkit all-reduces outside XLA-compiled functions, so it is left out.
tf_cmake = root / "horovod" / "tensorflow" / "CMakeLists.txt"
text = tf_cmake.read_text()
line = 'list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")'
assert line in text, "horovod/tensorflow/CMakeLists.txt: xla_mpi_ops.cc source line not found"
tf_cmake.write_text(text.replace(line, "# " + line + "  # left out by albertkit (TF 2.21)"))
print("build_horovod.sh: XLA custom-call ops left out (xla_mpi_ops.cc)")
if runtime:
    cmake = root / "CMakeLists.txt"
    text = cmake.read_text()
    old = 'set(CMAKE_CUDA_RUNTIME_LIBRARY "Static")'
    assert old in text, "CMakeLists.txt: CUDA runtime default not found"
    cmake.write_text(text.replace(old, f'set(CMAKE_CUDA_RUNTIME_LIBRARY "{runtime}")'))
    print(f"build_horovod.sh: CUDA runtime linked {runtime.lower()}")
PATCH
  TARGET="$HVD_SRC"
else
  TARGET="horovod==$HOROVOD_VERSION"
fi

# CPU builds are kept as wheels, keyed by everything the binary depends on (Horovod, TensorFlow
# and Python versions, the controller and operation flags), so a second environment on the same
# machine (CI's fresh venv, a new clone) installs in seconds instead of compiling for minutes.
# HOROVOD_WHEEL_CACHE=0 turns this off; GPU builds are never cached (their CUDA tree varies).
CACHE_ROOT="${HOROVOD_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/albertkit/horovod-wheels}"
CACHE_DIR=""
if [[ "$GPU" != 1 && "$CACHE_ROOT" != 0 ]]; then
  key="$("$PY" -c 'import sys, tensorflow as tf; print(f"py{sys.version_info[0]}.{sys.version_info[1]}-tf{tf.__version__}")' 2>/dev/null)"
  CACHE_DIR="$CACHE_ROOT/horovod-$HOROVOD_VERSION-$key-mpi$MPI-gloo${HOROVOD_GLOO:-1}-${HOROVOD_CPU_OPERATIONS}"
  cached="$(ls "$CACHE_DIR"/horovod-*.whl 2>/dev/null | head -n1 || true)"
  if [[ -n "$cached" ]]; then
    echo "build_horovod.sh: installing the wheel built earlier for this environment: $cached"
    if "$PY" -m pip install -q --no-cache-dir --force-reinstall --no-deps "$cached" \
        && "$PY" -c "import horovod.tensorflow" >/dev/null 2>&1; then
      echo "build_horovod.sh: horovod==$HOROVOD_VERSION installed from the wheel cache ($CACHE_ROOT)"
      if [[ -n "$INFO" ]]; then write_info; fi
      if [[ "$VERIFY" == 1 ]]; then verify; fi
      exit 0
    fi
    echo "build_horovod.sh: the cached wheel does not import here: building again" >&2
  fi
fi

echo "build_horovod.sh: building horovod==$HOROVOD_VERSION for $PY (TensorFlow at $TF_DIR; gpu=$GPU mpi=$MPI)"
start=$SECONDS
if [[ -n "$CACHE_DIR" ]]; then
  WHEELS="$(mktemp -d -t horovod-wheel.XXXXXX)"
  "$PY" -m pip wheel --no-deps --no-build-isolation --no-cache-dir -w "$WHEELS" "$TARGET"
  built="$(ls "$WHEELS"/horovod-*.whl | head -n1)"
  "$PY" -m pip install --no-cache-dir "$built"
  # into the cache atomically: copy beside, then rename
  mkdir -p "$CACHE_DIR"
  cp "$built" "$CACHE_DIR/.${built##*/}.partial" && mv "$CACHE_DIR/.${built##*/}.partial" "$CACHE_DIR/${built##*/}"
  rm -rf "$WHEELS"
else
  "$PY" -m pip install --no-build-isolation --no-cache-dir "$TARGET"
fi
"$PY" -c "import horovod.tensorflow" || die "horovod installed but horovod.tensorflow does not import"
if [[ "$GPU" == 1 ]]; then
  # every CUDA/NCCL symbol the library needs must resolve against what the image loads
  # (the CUDA 12 runtime and NCCL of TensorFlow's wheels), not only at first use on a GPU
  lib="$("$PY" -c 'import glob, os, horovod; print(glob.glob(os.path.join(os.path.dirname(horovod.__file__), "tensorflow", "mpi_lib*.so"))[0])')"
  missing="$(LD_LIBRARY_PATH="$TF_DIR:${LD_LIBRARY_PATH:-}" ldd -r "$lib" 2>&1 | grep -iE 'undefined symbol: .*(cuda|nccl)' || true)"
  [[ -z "$missing" ]] || die "$lib has unresolved CUDA/NCCL symbols:
$missing"
  ldd "$lib" | grep -E 'cudart|nccl' || true
fi
echo "build_horovod.sh: built and installed horovod==$HOROVOD_VERSION in $((SECONDS - start)) s"
"$BIN_DIR/horovodrun" --check-build || true

if [[ -n "$INFO" ]]; then write_info; fi

if [[ "$VERIFY" == 1 ]]; then verify; fi
