"""The NVIDIA driver the image's GPU code needs, and the check a job runs before anything else.

A GPU instance brings its own NVIDIA driver; the image brings CUDA code built with some CUDA
toolkit. Since CUDA 11 a driver runs code built with any toolkit of its own major release or
an older one (NVIDIA's "minor version compatibility"), never code of a newer major release:
that code fails at its first kernel launch, after the data was read and the model built, with
an error that does not say "driver". albertkit's image holds two pieces of CUDA code:

* TensorFlow's kernels and the CUDA 12 libraries of its ``tensorflow[and-cuda]`` wheels;
* Horovod's few kernels (fusion-buffer copies, scaling), compiled when the image is built.
  ``scripts/build_horovod.sh`` compiles them with CUDA 12.4, TensorFlow's major release, so
  they need no newer driver than TensorFlow (R525). (Images built by earlier versions of the
  script compiled them with CUDA 13 and needed R580; the image's record says which.)

The image build records both in ``/etc/albertkit/image-info.json`` (``horovod_cuda_version``,
``tensorflow_cuda_version``, ``tensorflow_cudnn_version``, ``horovod_version``;
``$ALBERTKIT_IMAGE_INFO`` names another file). The minimum driver is the highest minimum over
the CUDA versions named there (:data:`MINIMUM_DRIVER`); Horovod's counts only for a job that
uses the horovod backend, the only one that loads its kernels. Without that file (a run
outside albertkit's image) only TensorFlow's CUDA version is known, read from its build
information without importing it.

:func:`check_driver` compares the minimum with the driver ``nvidia-smi`` reports and raises
:class:`~albertkit.errors.GpuDriverError`, one line naming both versions, when the driver is
older. The SageMaker entry point calls it once it has read the job's config (local files),
before any data is read, a model built or TensorFlow imported. It checks nothing where
nothing can be checked: no ``nvidia-smi`` on ``PATH`` or no GPU (a CPU instance); when
``nvidia-smi`` fails or prints something that is not a version, a warning names what it
printed and the job goes on (CUDA then reports a mismatch itself, at its first kernel).

Forward compatibility: NVIDIA's ``cuda-compat`` package puts a newer ``libcuda.so`` (user-mode
driver) in a ``compat`` directory; on data-center GPUs it runs newer CUDA code on an older
kernel driver. When a directory named ``compat`` on ``LD_LIBRARY_PATH`` holds
``libcuda.so.<version>``, that version must meet the minimum instead of the kernel driver's
(whether NVIDIA supports the pairing is then CUDA's to say, at initialisation).

This module imports nothing but the standard library and :mod:`albertkit.errors`.

In the image (the build's in-image checks run the first line)::

    python -m albertkit.sagemaker.gpu_driver --report   # the image's CUDA versions and minimum
    python -m albertkit.sagemaker.gpu_driver --check    # the entry point's check, exit 2 if old
    python -m albertkit.sagemaker.gpu_driver --check --no-horovod   # ... for other backends

Example:
    >>> minimum_driver("12.5.1"), minimum_driver("13.0"), minimum_driver("11.0")
    ('525.60.13', '580.65.06', '450.36.06')
    >>> info = ImageInfo(horovod_cuda_version="13.0", tensorflow_cuda_version="12.5.1")
    >>> need = driver_requirement(info)
    >>> need.minimum, need.reason
    ('580.65.06', "Horovod's CUDA kernels were built with CUDA 13.0")
    >>> version_tuple("580.65.06") > version_tuple("535.230.02")
    True
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from albertkit.errors import GpuDriverError

log = logging.getLogger("albertkit")

IMAGE_INFO_ENV = "ALBERTKIT_IMAGE_INFO"
DEFAULT_IMAGE_INFO = "/etc/albertkit/image-info.json"
IMAGE_INFO_KEYS = ("horovod_cuda_version", "tensorflow_cuda_version",
                   "tensorflow_cudnn_version", "horovod_version")
NVIDIA_SMI_TIMEOUT_SECONDS = 30  # a wedged driver makes nvidia-smi hang, not fail
DOC_POINTER = 'docs/sagemaker.md, "The GPU driver"'

# Minimum Linux driver (x86_64) for CUDA code built with a toolkit of each release: with
# minor version compatibility (CUDA 11 onwards) one minimum covers a whole major release;
# 11.0 predates it and needs only its own GA driver. A row (major, None) covers every minor
# of that major without a row of its own. Sources: NVIDIA, "CUDA Compatibility", section
# "Minor Version Compatibility", table "CUDA Toolkit 11.x, 12.x, and 13.x Driver Version
# Ranges" (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html:
# 13.x >= 580, 12.x >= 525, 11.x >= 450), with the exact versions from the CUDA Toolkit
# release notes' table "CUDA Toolkit and Minimum Required Driver Version for CUDA Minor
# Version Compatibility" (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/): 12.x
# 525.60.13, 11.1-11.8 450.80.02, 11.0 450.36.06; for 13.x, 580.65.06 is the R580 driver
# CUDA 13.0 was released with, the first of that branch.
MINIMUM_DRIVER: dict[tuple[int, int | None], str] = {
    (11, 0): "450.36.06",
    (11, None): "450.80.02",
    (12, None): "525.60.13",
    (13, None): "580.65.06",
}

_VERSION = re.compile(r"^\d+(\.\d+)*$")
_COMPAT_LIBCUDA = re.compile(r"^libcuda\.so\.(\d+(?:\.\d+)+)$")


def version_tuple(text: str) -> tuple[int, ...]:
    """``"580.65.06"`` -> ``(580, 65, 6)``; raises ``ValueError`` for anything else."""
    text = str(text).strip()
    if not _VERSION.match(text):
        raise ValueError(f"{text!r} is not a version like 580.65.06")
    return tuple(int(part) for part in text.split("."))


def minimum_driver(cuda_version: str) -> str | None:
    """The minimum Linux driver for code built with CUDA ``cuda_version`` ("12.5.1", "13.0");
    ``None`` for a major release :data:`MINIMUM_DRIVER` does not know. Raises ``ValueError``
    for a string that is not a version."""
    parts = version_tuple(cuda_version)
    major, minor = parts[0], (parts[1] if len(parts) > 1 else None)
    return MINIMUM_DRIVER.get((major, minor)) or MINIMUM_DRIVER.get((major, None))


# --------------------------------------------------------------------------- the image
@dataclass(frozen=True)
class ImageInfo:
    """What the image build recorded about the image's CUDA code (``None`` = not recorded;
    ``horovod_cuda_version`` is ``None`` too for a Horovod built without CUDA)."""

    horovod_cuda_version: str | None = None
    tensorflow_cuda_version: str | None = None
    tensorflow_cudnn_version: str | None = None
    horovod_version: str | None = None
    source: str = ""  # the file it was read from, or how it was learnt


def image_info_path(environ: Mapping[str, str]) -> Path:
    return Path(environ.get(IMAGE_INFO_ENV) or DEFAULT_IMAGE_INFO)


def read_image_info(environ: Mapping[str, str] | None = None) -> ImageInfo | None:
    """The image's ``image-info.json``, or ``None`` when there is none. Raises
    :class:`GpuDriverError` naming the file and the key for a file that is not what the
    image build writes (a broken build, which its in-image checks catch)."""
    path = image_info_path(os.environ if environ is None else environ)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise GpuDriverError(f"{path}: cannot read the image description: {e}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise GpuDriverError(f"{path}: not JSON ({e})") from None
    if not isinstance(raw, dict):
        raise GpuDriverError(f"{path}: expected a JSON object with {', '.join(IMAGE_INFO_KEYS)}")
    values: dict[str, str | None] = {}
    for key in IMAGE_INFO_KEYS:
        value = raw.get(key)
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise GpuDriverError(f"{path}: {key}={value!r} should be a version string or null")
        if key.endswith("cuda_version") and value is not None:
            try:
                version_tuple(value)
            except ValueError:
                raise GpuDriverError(f"{path}: {key}={value!r} is not a version like 12.5.1"
                                     ) from None
        values[key] = value.strip() if value is not None else None
    return ImageInfo(**values, source=str(path))


def tensorflow_build_info() -> ImageInfo | None:
    """TensorFlow's CUDA and cuDNN versions from its build information file, read as text
    (importing TensorFlow would load the CUDA libraries this check runs before); ``None``
    when TensorFlow is not installed, is a CPU build, or the file cannot be read."""
    spec = importlib.util.find_spec("tensorflow")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "python" / "platform" / "build_info.py"
        try:
            info = _literal_build_info(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            continue
        cuda = info.get("cuda_version")
        if info.get("is_cuda_build") and isinstance(cuda, str) and _VERSION.match(cuda):
            cudnn = info.get("cudnn_version")
            return ImageInfo(tensorflow_cuda_version=cuda,
                             tensorflow_cudnn_version=cudnn if isinstance(cudnn, str) else None,
                             source=str(path))
    return None


def _literal_build_info(text: str) -> dict:
    """The ``build_info`` mapping of TensorFlow's ``build_info.py``: a dict literal, or an
    ``OrderedDict([...])`` of pairs in older releases."""
    for node in ast.parse(text).body:
        if not (isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "build_info" for t in node.targets)):
            continue
        value = node.value
        if isinstance(value, ast.Call) and value.args:  # collections.OrderedDict([...])
            value = value.args[0]
        result = ast.literal_eval(value)
        return dict(result)
    raise ValueError("no build_info assignment")


# --------------------------------------------------------------------------- the requirement
@dataclass(frozen=True)
class DriverRequirement:
    """The minimum driver over the image's CUDA code; ``parts`` lists (what, CUDA version,
    its minimum) for each piece, ``reason`` names the piece that sets the minimum."""

    minimum: str | None
    reason: str
    parts: list[tuple[str, str, str | None]] = field(default_factory=list)


def driver_requirement(info: ImageInfo, horovod: bool = True) -> DriverRequirement:
    """The highest minimum over the CUDA versions ``info`` names; Horovod's only with
    ``horovod`` (a job that does not use the horovod backend never loads its kernels). A CUDA
    major release the table does not know is listed with minimum ``None`` and logged."""
    pieces = [("Horovod's CUDA kernels were built with CUDA",
               info.horovod_cuda_version if horovod else None),
              ("TensorFlow was built for CUDA", info.tensorflow_cuda_version)]
    parts: list[tuple[str, str, str | None]] = []
    best: tuple[tuple[int, ...], str, str] | None = None
    for what, cuda in pieces:
        if cuda is None:
            continue
        minimum = minimum_driver(cuda)
        parts.append((what, cuda, minimum))
        if minimum is None:
            log.warning("no minimum NVIDIA driver known for CUDA %s (%s); albertkit's table "
                        "(albertkit/sagemaker/gpu_driver.py) needs a row for it", cuda, what)
            continue
        if best is None or version_tuple(minimum) > best[0]:
            best = (version_tuple(minimum), minimum, f"{what} {cuda}")
    if best is None:
        return DriverRequirement(None, "no CUDA version known", parts)
    return DriverRequirement(best[1], best[2], parts)


def image_requirement(environ: Mapping[str, str] | None = None, horovod: bool = True
                      ) -> tuple[ImageInfo | None, DriverRequirement]:
    """The image's description (or TensorFlow's build information outside the image) and
    the driver its CUDA code needs (Horovod's kernels included with ``horovod``)."""
    info = read_image_info(environ)
    if info is None:
        info = tensorflow_build_info()
    if info is None:
        return None, DriverRequirement(None, "no image description and no CUDA build of "
                                             "TensorFlow found")
    return info, driver_requirement(info, horovod)


# --------------------------------------------------------------------------- the machine
def installed_driver(environ: Mapping[str, str] | None = None) -> str | None:
    """The NVIDIA driver version ``nvidia-smi`` reports (the oldest, should GPUs differ), or
    ``None``: no ``nvidia-smi`` on ``PATH``, no GPU, or output that is not a version (logged
    as a warning naming it)."""
    environ = os.environ if environ is None else environ
    smi = shutil.which("nvidia-smi", path=environ.get("PATH", os.defpath))
    if smi is None:
        log.debug("no nvidia-smi on PATH: no NVIDIA driver to check (a CPU instance)")
        return None
    cmd = [smi, "--query-gpu=driver_version", "--format=csv,noheader"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=NVIDIA_SMI_TIMEOUT_SECONDS, env=dict(environ), check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        log.warning("NVIDIA driver not checked: %s failed: %s", smi, e)
        return None
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    said = (lines or done.stderr.strip().splitlines() or ["no output"])[0]
    if "no devices were found" in said.lower():
        log.debug("nvidia-smi: no GPU on this machine: no NVIDIA driver to check")
        return None
    if done.returncode != 0 or not lines:
        log.warning("NVIDIA driver not checked: %s exited %d: %s", smi, done.returncode,
                    said[:200])
        return None
    try:
        return min(lines, key=version_tuple)
    except ValueError:
        log.warning("NVIDIA driver not checked: %s printed %r, not a driver version",
                    " ".join(cmd), lines[0][:200])
        return None


def forward_compat_driver(environ: Mapping[str, str] | None = None) -> tuple[str, Path] | None:
    """The version and directory of a forward-compatibility ``libcuda.so.<version>`` in a
    directory named ``compat`` on ``LD_LIBRARY_PATH`` (the first one, as the loader would
    find it), or ``None``."""
    environ = os.environ if environ is None else environ
    for entry in (environ.get("LD_LIBRARY_PATH") or "").split(":"):
        directory = Path(entry)
        if not entry or "compat" not in directory.parts:
            continue
        try:
            names = sorted(p.name for p in directory.iterdir())
        except OSError:
            continue
        for name in names:
            match = _COMPAT_LIBCUDA.match(name)
            if match:
                return match.group(1), directory
    return None


# --------------------------------------------------------------------------- the check
def check_driver(environ: Mapping[str, str] | None = None, horovod: bool = True) -> str:
    """Refuse a driver older than the image's CUDA code needs (Horovod's kernels counted
    only with ``horovod``); returns what was found (also logged).

    Raises :class:`GpuDriverError` with one line that names the installed and the minimum
    driver and the way out. Without ``nvidia-smi``, a GPU, or a known minimum it checks
    nothing and says so.
    """
    environ = os.environ if environ is None else environ
    installed = installed_driver(environ)
    if installed is None:
        return "NVIDIA driver: none found, not checked"
    _, need = image_requirement(environ, horovod)
    if need.minimum is None:
        outcome = f"NVIDIA driver {installed}: not checked ({need.reason})"
        log.debug("%s", outcome)
        return outcome
    compat = forward_compat_driver(environ)
    if compat is not None:
        version, directory = compat
        if version_tuple(version) < version_tuple(need.minimum):
            raise GpuDriverError(
                f"the forward-compatibility libcuda {version} in {directory} is older than "
                f"{need.minimum}, the minimum NVIDIA driver for this image ({need.reason}); "
                f"use a cuda-compat package whose libcuda is {need.minimum} or newer "
                f"({DOC_POINTER})")
        outcome = (f"NVIDIA driver {installed} with forward-compatibility libcuda {version} "
                   f"from {directory}: meets the minimum {need.minimum} ({need.reason})")
        log.info("%s", outcome)
        return outcome
    if version_tuple(installed) < version_tuple(need.minimum):
        branch = need.minimum.split(".")[0]
        raise GpuDriverError(
            f"NVIDIA driver {installed} on this machine is older than {need.minimum}, the "
            f"minimum for this image ({need.reason}); run on an instance whose driver is "
            f"R{branch} or newer, or use an image that ships and enables CUDA forward "
            f"compatibility ({DOC_POINTER})")
    outcome = f"NVIDIA driver {installed}: meets the minimum {need.minimum} ({need.reason})"
    log.info("%s", outcome)
    return outcome


def report_lines(environ: Mapping[str, str] | None = None) -> list[str]:
    """The image's CUDA versions and minimum driver (first line) and the installed driver
    (second line), for the image build's in-image checks and for people."""
    environ = os.environ if environ is None else environ
    info, need = image_requirement(environ)
    facts = []
    if info is not None:
        if info.horovod_cuda_version:
            horovod = f"Horovod {info.horovod_version} " if info.horovod_version else "Horovod "
            facts.append(f"{horovod}CUDA kernels built with CUDA {info.horovod_cuda_version}")
        elif info.horovod_version:
            facts.append(f"Horovod {info.horovod_version} without CUDA kernels")
        if info.tensorflow_cuda_version:
            cudnn = (f", cuDNN {info.tensorflow_cudnn_version}"
                     if info.tensorflow_cudnn_version else "")
            facts.append(f"TensorFlow built for CUDA {info.tensorflow_cuda_version}{cudnn}")
    if need.minimum is not None:
        facts.append(f"minimum NVIDIA driver {need.minimum} (R{need.minimum.split('.')[0]})")
        if info is not None:
            without = driver_requirement(info, horovod=False).minimum
            if without is not None and without != need.minimum:
                facts[-1] += f", {without} for jobs without Horovod"
    else:
        facts.append(f"minimum NVIDIA driver unknown ({need.reason})")
    lines = ["; ".join(facts)]
    installed = installed_driver(environ)
    if installed is None:
        lines.append("installed NVIDIA driver: none found (no nvidia-smi or no GPU)")
    elif need.minimum is None:
        lines.append(f"installed NVIDIA driver: {installed}")
    else:
        verdict = ("meets the minimum" if version_tuple(installed) >= version_tuple(need.minimum)
                   else "OLDER than the minimum")
        lines.append(f"installed NVIDIA driver: {installed} ({verdict})")
    return lines


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """``--report``: print :func:`report_lines`, exit 1 when the image description is missing
    or unreadable (the in-image check of the build). ``--check``: :func:`check_driver`,
    exit 2 with its one-line error."""
    parser = argparse.ArgumentParser(prog="python -m albertkit.sagemaker.gpu_driver",
                                     description="The NVIDIA driver albertkit's image needs.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--report", action="store_true",
                      help="print the image's CUDA versions, minimum and installed driver")
    mode.add_argument("--check", action="store_true",
                      help="exit 2 with one line when the installed driver is too old")
    parser.add_argument("--no-horovod", action="store_true",
                        help="with --check: a job that does not load Horovod's CUDA kernels")
    args = parser.parse_args(argv)
    environ = os.environ if environ is None else environ
    try:
        if args.check:
            print(check_driver(environ, horovod=not args.no_horovod))
            return 0
        if read_image_info(environ) is None:
            print(f"error: no image description at {image_info_path(environ)} (not albertkit's "
                  f"image? ${IMAGE_INFO_ENV} names another file)", file=sys.stderr)
            return 1
        print("\n".join(report_lines(environ)))
        return 0
    except GpuDriverError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2 if args.check else 1


if __name__ == "__main__":
    sys.exit(main())
