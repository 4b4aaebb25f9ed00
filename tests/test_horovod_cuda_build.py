"""The CUDA compiler the training image builds Horovod's kernels with (scripts/build_horovod.sh).

Horovod's kernels must need no newer NVIDIA driver than TensorFlow's own CUDA code: their
compiler's major release must be TensorFlow's. The slow test assembles that compiler
(``--cuda-tree``: Debian's nvidia-cuda-toolkit package and NVIDIA's CUDA 12 wheels, both
downloaded) and compiles Horovod 0.28.1's own ``cuda_kernels.cu`` for every compute
capability the Dockerfile asks for, then reads the architectures back from the object file.
No GPU is needed for any of it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from albertkit.sagemaker.gpu_driver import minimum_driver, tensorflow_build_info

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "build_horovod.sh"
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def _script_setting(name: str) -> str:
    match = re.search(rf'^{name}="(?:\$\{{{name}:-)?([^"}}]+)\}}?"', SCRIPT.read_text(), re.M)
    assert match, f"{name} not set in {SCRIPT}"
    return match.group(1)


def _dockerfile_cc_list() -> list[str]:
    match = re.search(r"HOROVOD_BUILD_CUDA_CC_LIST=([0-9,]+)", DOCKERFILE.read_text())
    assert match, "docker/Dockerfile: no HOROVOD_BUILD_CUDA_CC_LIST"
    return match.group(1).split(",")


def _run(args: list[str], env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run(["bash", str(SCRIPT), "--python", sys.executable, *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_horovod_kernels_need_no_newer_driver_than_tensorflow():
    compiler = _script_setting("CUDA_COMPILER_VERSION")
    info = tensorflow_build_info()
    assert info is not None and info.tensorflow_cuda_version, "TensorFlow's build info names no CUDA"
    tf_cuda = info.tensorflow_cuda_version
    assert compiler.split(".")[0] == tf_cuda.split(".")[0], (compiler, tf_cuda)
    assert minimum_driver(compiler) == minimum_driver(tf_cuda) == "525.60.13"
    # the image asks for V100 (7.0) through H100 (9.0); CUDA 12 compiles all of them
    assert _dockerfile_cc_list() == ["70", "75", "80", "86", "89", "90"]
    for pinned in ("CUDA_TOOLKIT_DEB_SHA256", "CUDA_DEV_DEB_SHA256"):
        assert re.fullmatch(r"[0-9a-f]{64}", _script_setting(pinned))
    # both packages of the one Debian CUDA release the compiler comes from
    assert f"_{compiler}~" in _script_setting("CUDA_TOOLKIT_DEB")
    assert _script_setting("CUDA_DEV_DEB").split("~")[1] == _script_setting("CUDA_TOOLKIT_DEB").split("~")[1]


def test_cuda_tree_refuses_an_existing_folder(tmp_path):
    (tmp_path / "mine.txt").write_text("not albertkit's")
    result = _run(["--cuda-tree", str(tmp_path)], timeout=60)
    assert result.returncode == 1
    assert f"{tmp_path} already exists" in result.stderr
    assert (tmp_path / "mine.txt").read_text() == "not albertkit's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_cuda_tree_refuses_a_package_whose_checksum_differs(tmp_path):
    if shutil.which("dpkg-deb") is None:
        pytest.fail("dpkg-deb is needed by scripts/build_horovod.sh --cuda-tree (apt-get install dpkg)")
    pool = tmp_path / "pool"
    pool.mkdir()
    impostor = pool / _script_setting("CUDA_TOOLKIT_DEB")
    impostor.write_bytes(b"!<arch>\nnot the package\n")
    tree = tmp_path / "tree"
    result = _run(["--cuda-tree", str(tree)], env={"CUDA_DEB_POOL": pool.as_uri()}, timeout=60)
    assert result.returncode != 0
    wrong = hashlib.sha256(impostor.read_bytes()).hexdigest()
    assert f"SHA-256 {wrong}, expected {_script_setting('CUDA_TOOLKIT_DEB_SHA256')}" in result.stderr
    assert not tree.exists() and not Path(f"{tree}.download").exists()  # nothing left behind


@pytest.mark.slow
def test_cuda_tree_compiles_horovods_kernels_for_every_image_gpu(tmp_path):
    if shutil.which("dpkg-deb") is None:
        pytest.fail("dpkg-deb is needed by scripts/build_horovod.sh --cuda-tree (apt-get install dpkg)")
    tree = tmp_path / "cuda"
    result = _run(["--cuda-tree", str(tree)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert not Path(f"{tree}.download").exists()  # the downloads are gone
    nvcc = tree / "bin" / "nvcc"
    version = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True)
    compiler = _script_setting("CUDA_COMPILER_VERSION")
    assert f"V{compiler}" in version.stdout

    # Horovod's own kernels, from its source distribution
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary",
                    ":all:", "-d", str(tmp_path), "horovod==0.28.1"], check=True, timeout=300)
    with tarfile.open(tmp_path / "horovod-0.28.1.tar.gz") as sdist:
        sdist.extractall(tmp_path, filter="data")
    source = tmp_path / "horovod-0.28.1" / "horovod" / "common" / "ops" / "cuda" / "cuda_kernels.cu"
    arches = _dockerfile_cc_list()
    gencode = [f"-gencode=arch=compute_{cc},code=sm_{cc}" for cc in arches]
    obj = tmp_path / "cuda_kernels.o"
    compiled = subprocess.run([str(nvcc), "-std=c++14", "-c", str(source), "-o", str(obj), *gencode],
                              capture_output=True, text=True, timeout=600)
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    listing = subprocess.run([str(tree / "bin" / "cuobjdump"), "--list-elf", str(obj)],
                             capture_output=True, text=True, check=True).stdout
    assert sorted(re.findall(r"\.sm_(\d+)\.cubin", listing)) == sorted(arches)
