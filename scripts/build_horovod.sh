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
#                   compiler is CUDA 12.4's (see --cuda-tree; scratch only) and the runtime +
#                   NCCL come from the CUDA 12 wheels `tensorflow[and-cuda]` installed,
#                   assembled into a temporary CUDA tree; both are linked dynamically.
#   --cuda-tree DIR only assemble that CUDA 12 compiler tree in DIR (a new folder) and exit:
#                   nvcc, cicc and the binary tools from Debian's non-free package
#                   nvidia-cuda-toolkit 12.4.131 (downloaded from the Debian mirror, checked
#                   against its pinned SHA-256, unpacked with dpkg-deb, never installed), the
#                   matching headers and libdevice from the nvidia-cuda-nvcc-cu12,
#                   -runtime-cu12 and -cccl-cu12 wheels. No CUDA 12 release on PyPI ships
#                   nvcc itself (only ptxas). The two static archives every nvcc link
#                   takes (CMake's compiler check links a program: libcudart_static.a,
#                   libcudadevrt.a) come from Debian's nvidia-cuda-dev of the same release
#                   (a 0.9 GB download, 2 files kept). CUDA_DEB_POOL names another copy of
#                   Debian's pool folder for both (a mirror, snapshot.debian.org once
#                   trixie moves on); their SHA-256 must match.
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
# cuda12_compiler_tree). Its major release is TensorFlow's (12), so Horovod's kernels need no
# newer driver than TensorFlow's own (R525, NVIDIA's minor version compatibility); it compiles
# for compute capability 5.0 to 9.0, V100 (7.0) included.
CUDA_COMPILER_VERSION="12.4.131"   # nvcc, cicc, ptxas and the crt headers
CUDA_RUNTIME_HEADERS_VERSION="12.4.127"  # cuda_runtime.h & co. (the library linked is TF's)
CUDA_CCCL_VERSION="12.4.127.post1"  # libcu++ headers (nv/target); 12.4.127 itself is yanked
CUDA_DEB_POOL="${CUDA_DEB_POOL:-http://deb.debian.org/debian/pool/non-free/n/nvidia-cuda-toolkit}"
CUDA_TOOLKIT_DEB="nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb"  # nvcc, cicc, ptxas, ...
CUDA_TOOLKIT_DEB_SHA256="cd5fe85aee38d108b315f408a688641478f2402622a10c677478eb7a6c4e5319"
CUDA_DEV_DEB="nvidia-cuda-dev_12.4.127~12.4.1-2_amd64.deb"  # libcudart_static.a, libcudadevrt.a
CUDA_DEV_DEB_SHA256="d846838f914a0176948d48a8bcade5d6dbcccb5c9374343f6475f5503f173ee0"
CUDA_TREE_ONLY=""
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
    --cuda-tree) [[ $# -ge 2 ]] || die "--cuda-tree needs a folder"; CUDA_TREE_ONLY="$2"; shift 2 ;;
    --cuda-tree=*) CUDA_TREE_ONLY="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

command -v "$PY" >/dev/null 2>&1 || die "python interpreter '$PY' not found (use --python PATH)"
PY="$(command -v "$PY")"
BIN_DIR="$("$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))')"

# --------------------------------------------------------------------------- CUDA 12 compiler
fetch_deb() {
  # fetch_deb NAME SHA256 DIR TREE: $CUDA_DEB_POOL/NAME into DIR/NAME, checked against SHA256;
  # on failure DIR and TREE (both made by cuda12_compiler_tree) are removed.
  # urllib, not curl: the image's build stage has Python but no curl; PIP_CERT (a proxy's CA
  # bundle, as for pip) is honoured; the pinned SHA-256 is what makes the download trusted.
  local name="$1" sha="$2" dl="$3" tree="$4"
  if ! "$PY" - "$CUDA_DEB_POOL/$name" "$dl/$name" "$sha" <<'FETCH'
import hashlib, os, ssl, sys, urllib.request
url, path, want = sys.argv[1:4]
context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
digest = hashlib.sha256()
with urllib.request.urlopen(url, timeout=120, context=context) as response, open(path + ".partial", "wb") as out:
    while chunk := response.read(1 << 20):
        digest.update(chunk)
        out.write(chunk)
if digest.hexdigest() != want:
    sys.exit(f"build_horovod.sh: error: {url}: SHA-256 {digest.hexdigest()}, expected {want}")
os.replace(path + ".partial", path)
FETCH
  then
    rm -rf "$dl" "$tree"  # both made by cuda12_compiler_tree
    die "--cuda-tree: no $name from $CUDA_DEB_POOL"
  fi
}

cuda12_compiler_tree() {
  # A CUDA 12.4 compiler tree in $1 (created; must not exist yet) in the standard layout nvcc
  # expects (bin/, nvvm/bin/cicc, nvvm/libdevice, include/; nvcc.profile: TOP = bin/..). Its
  # lib64/ holds only the two static archives nvcc links by default; the libraries Horovod
  # links come from TensorFlow's wheels. Downloads go to $1.download, removed afterwards.
  local tree="$1" dl="$1.download" deb tk b w
  [[ ! -e "$tree" ]] || die "--cuda-tree: $tree already exists (give a new folder)"
  [[ ! -e "$dl" ]] || die "--cuda-tree: $dl already exists (remove it, or give another folder)"
  command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb not found: the CUDA 12 compiler is unpacked from Debian's nvidia-cuda-toolkit package (Debian/Ubuntu: apt-get install dpkg)"
  mkdir -p "$dl" "$tree/bin" "$tree/nvvm/bin" "$tree/include" "$tree/lib64"
  fetch_deb "$CUDA_TOOLKIT_DEB" "$CUDA_TOOLKIT_DEB_SHA256" "$dl" "$tree"
  fetch_deb "$CUDA_DEV_DEB" "$CUDA_DEV_DEB_SHA256" "$dl" "$tree"
  deb="$dl/$CUDA_TOOLKIT_DEB"
  dpkg-deb -x "$deb" "$dl/deb"
  tk="$dl/deb/usr/lib/nvidia-cuda-toolkit"
  [[ -x "$tk/bin/nvcc" && -x "$tk/bin/cicc" ]] || die "--cuda-tree: $CUDA_TOOLKIT_DEB holds no nvcc/cicc"
  cp "$tk/bin/nvcc" "$tree/bin/"
  cp -r "$tk/bin/crt" "$tree/bin/"          # link.stub, prelink.stub (device linking)
  cp "$tk/bin/cicc" "$tree/nvvm/bin/"
  for b in ptxas fatbinary nvlink cudafe++ bin2c nvprune cuobjdump; do
    cp "$dl/deb/usr/bin/$b" "$tree/bin/"
  done
  # --occurrence: tar stops once both archives are out, about a third of the way into the
  # 0.9 GB package (6 s instead of 19 s, 12 CPU-s instead of 37, on a 2-core AMD EPYC), and
  # dpkg-deb then ends on a closed pipe: tar's status and the two files are what count.
  local arch_dir="$dl/deb/usr/lib/x86_64-linux-gnu" unpacked=0
  set +o pipefail
  dpkg-deb --fsys-tarfile "$dl/$CUDA_DEV_DEB" 2>"$dl/dpkg-deb.err" \
    | tar --occurrence -x -C "$dl/deb" \
      ./usr/lib/x86_64-linux-gnu/libcudart_static.a ./usr/lib/x86_64-linux-gnu/libcudadevrt.a \
    || unpacked=$?
  set -o pipefail
  if [[ "$unpacked" != 0 || ! -f "$arch_dir/libcudart_static.a" || ! -f "$arch_dir/libcudadevrt.a" ]]; then
    cat "$dl/dpkg-deb.err" >&2
    rm -rf "$dl" "$tree"
    die "--cuda-tree: $CUDA_DEV_DEB holds no libcudart_static.a / libcudadevrt.a"
  fi
  cp "$arch_dir/libcudart_static.a" "$arch_dir/libcudadevrt.a" "$tree/lib64/"
  "$PY" -m pip install --no-cache-dir -q --no-deps --target "$dl/wheels" \
    "nvidia-cuda-nvcc-cu12==$CUDA_COMPILER_VERSION" \
    "nvidia-cuda-runtime-cu12==$CUDA_RUNTIME_HEADERS_VERSION" \
    "nvidia-cuda-cccl-cu12==$CUDA_CCCL_VERSION" >&2
  w="$dl/wheels/nvidia"
  cp -r "$w/cuda_nvcc/nvvm/libdevice" "$tree/nvvm/"
  cp -r "$w/cuda_nvcc/include/." "$w/cuda_runtime/include/." "$w/cuda_cccl/include/." "$tree/include/"
  rm -f "$tree/include/__init__.py"
  cat >"$tree/bin/nvcc.profile" <<'PROFILE'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"
PROFILE
  rm -rf "$dl"
  "$tree/bin/nvcc" --version | grep -q "release ${CUDA_COMPILER_VERSION%.*}, V$CUDA_COMPILER_VERSION" \
    || die "--cuda-tree: $tree/bin/nvcc is not CUDA $CUDA_COMPILER_VERSION: $("$tree/bin/nvcc" --version | tail -n2)"
  echo "build_horovod.sh: CUDA $CUDA_COMPILER_VERSION compiler tree in $tree" >&2
}

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
  # nvcc --version ends with "Cuda compilation tools, release 12.4, V12.4.131" + a build line
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

if [[ -n "$CUDA_TREE_ONLY" ]]; then
  cuda12_compiler_tree "$CUDA_TREE_ONLY"
  exit 0
fi

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
  # A CUDA tree for Horovod's build: the CUDA 12 compiler (cuda12_compiler_tree), and the
  # libraries Horovod links (the CUDA runtime, NCCL) from TensorFlow's CUDA 12 wheels, so the
  # process loads one of each and needs no newer driver than TensorFlow does.
  local nv tree f
  nv="$("$PY" -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null)" \
    || die "--gpu: no CUDA toolkit and no nvidia-* wheels in $PY (pip install 'tensorflow[and-cuda]')"
  [[ -f "$nv/nccl/include/nccl.h" ]] || die "--gpu: $nv/nccl/include/nccl.h missing (pip install nvidia-nccl-cu12)"
  [[ -f "$nv/cuda_runtime/lib/libcudart.so.12" ]] || die "--gpu: $nv/cuda_runtime/lib/libcudart.so.12 missing"
  tree="$SHIM/cuda12"
  cuda12_compiler_tree "$tree"
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
