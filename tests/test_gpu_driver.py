"""The NVIDIA driver check: the minimum table, the image description, a fake ``nvidia-smi``
first on PATH, forward compatibility, and the SageMaker entry point that runs the check
before TensorFlow."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from albertkit.errors import GpuDriverError
from albertkit.sagemaker import entrypoint as ep
from albertkit.sagemaker import gpu_driver as gd
from albertkit.sagemaker.plan import CONFIG_FILE

IMAGE = {"horovod_cuda_version": "13.0", "tensorflow_cuda_version": "12.5.1",
         "tensorflow_cudnn_version": "9", "horovod_version": "0.28.1"}
SMI_ARGS = "--query-gpu=driver_version --format=csv,noheader"


def fake_smi(tmp_path: Path, stdout: str, code: int = 0) -> str:
    """A directory holding an ``nvidia-smi`` that prints ``stdout`` (only when asked with the
    query the check uses) and exits ``code``; returns it, for PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'[ "$*" = "{SMI_ARGS}" ] || {{ echo "unexpected arguments: $*" >&2; exit 64; }}\n'
        f"printf '%s' '{stdout}'\n"
        f"exit {code}\n"
    )
    script.chmod(0o755)
    return str(bin_dir)


def image_info(tmp_path: Path, **values) -> str:
    path = tmp_path / "image-info.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**IMAGE, **values}))
    return str(path)


def environ_with(tmp_path: Path, smi_stdout: str | None, code: int = 0, **info) -> dict:
    """PATH with a fake nvidia-smi (or an empty directory: none) and an image description."""
    if smi_stdout is None:
        (tmp_path / "empty").mkdir(parents=True, exist_ok=True)
        path = str(tmp_path / "empty")
    else:
        path = fake_smi(tmp_path, smi_stdout, code)
    return {"PATH": path, gd.IMAGE_INFO_ENV: image_info(tmp_path, **info)}


@pytest.fixture
def albertkit_warnings(monkeypatch, caplog):
    """The albertkit logger's records in caplog (the console setup stops its propagation)."""
    monkeypatch.setattr(logging.getLogger("albertkit"), "propagate", True)
    caplog.set_level(logging.DEBUG, logger="albertkit")
    return caplog


# --------------------------------------------------------------------------- the table
def test_minimum_driver_per_cuda_release():
    assert gd.minimum_driver("13.0") == gd.minimum_driver("13.2.1") == "580.65.06"
    assert gd.minimum_driver("12.0") == gd.minimum_driver("12.9.1") == "525.60.13"
    assert gd.minimum_driver("12") == "525.60.13"
    assert gd.minimum_driver("11.8") == "450.80.02"
    assert gd.minimum_driver("11.0.3") == "450.36.06"  # before minor version compatibility
    assert gd.minimum_driver("14.0") is None and gd.minimum_driver("10.2") is None
    with pytest.raises(ValueError, match="not a version"):
        gd.minimum_driver("twelve")
    # versions compare as numbers, not as text
    assert gd.version_tuple("580.9") < gd.version_tuple("580.65.06")
    assert gd.version_tuple("1000.1") > gd.version_tuple("580.65.06")


def test_requirement_is_the_highest_minimum_and_horovod_counts_only_when_loaded():
    info = gd.ImageInfo(**IMAGE)
    need = gd.driver_requirement(info)
    assert need.minimum == "580.65.06"
    assert need.reason == "Horovod's CUDA kernels were built with CUDA 13.0"
    assert [(cuda, minimum) for _, cuda, minimum in need.parts] == [
        ("13.0", "580.65.06"), ("12.5.1", "525.60.13")]
    tf_only = gd.driver_requirement(info, horovod=False)
    assert (tf_only.minimum, tf_only.reason) == ("525.60.13",
                                                 "TensorFlow was built for CUDA 12.5.1")
    # a Horovod built with CUDA 12 (a local toolkit) needs no more than TensorFlow
    assert gd.driver_requirement(gd.ImageInfo(horovod_cuda_version="12.4",
                                              tensorflow_cuda_version="12.5.1")
                                 ).minimum == "525.60.13"
    assert gd.driver_requirement(gd.ImageInfo()).minimum is None


# --------------------------------------------------------------------------- the image
def test_image_info_is_read_from_the_file_the_environment_names(tmp_path):
    assert gd.read_image_info({gd.IMAGE_INFO_ENV: str(tmp_path / "absent.json")}) is None
    path = image_info(tmp_path, horovod_cuda_version=None)
    info = gd.read_image_info({gd.IMAGE_INFO_ENV: path})
    assert info == gd.ImageInfo(None, "12.5.1", "9", "0.28.1", source=path)
    assert gd.image_info_path({}) == Path(gd.DEFAULT_IMAGE_INFO)


@pytest.mark.parametrize(("text", "match"), [
    ("{not json", r"image-info\.json: not JSON"),
    ("[1, 2]", r"image-info\.json: expected a JSON object"),
    ('{"horovod_cuda_version": 13}', r"horovod_cuda_version=13 should be a version string"),
    ('{"tensorflow_cuda_version": "cuda12"}', r"tensorflow_cuda_version='cuda12' is not a"),
])
def test_a_broken_image_description_names_the_file_and_key(tmp_path, text, match):
    path = tmp_path / "image-info.json"
    path.write_text(text)
    with pytest.raises(GpuDriverError, match=match):
        gd.read_image_info({gd.IMAGE_INFO_ENV: str(path)})


def test_tensorflow_build_info_is_read_without_importing_tensorflow():
    probe = ("import sys; from albertkit.sagemaker import gpu_driver as gd; "
             "info = gd.tensorflow_build_info(); "
             "print(info and info.tensorflow_cuda_version, 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    expected = build.get("cuda_version") if build.get("is_cuda_build") else None
    assert out == [str(expected), "False"]


def test_build_info_literal_in_both_layouts():
    new = "build_info = {'cuda_version': '12.5.1', 'is_cuda_build': True}\n"
    old = ("import collections\nbuild_info = collections.OrderedDict([('cuda_version', '11.2'),"
           " ('is_cuda_build', True)])\n")
    assert gd._literal_build_info(new)["cuda_version"] == "12.5.1"
    assert gd._literal_build_info(old)["cuda_version"] == "11.2"
    with pytest.raises(ValueError):
        gd._literal_build_info("x = 1\n")


# --------------------------------------------------------------------------- nvidia-smi
def test_installed_driver_is_the_oldest_gpu_s(tmp_path):
    assert gd.installed_driver({"PATH": fake_smi(tmp_path, "580.82.07\n575.57.08\n")}) == \
        "575.57.08"


def test_no_nvidia_smi_or_no_gpu_checks_nothing(tmp_path, albertkit_warnings):
    environ = environ_with(tmp_path, None)
    assert gd.installed_driver(environ) is None
    assert gd.check_driver(environ) == "NVIDIA driver: none found, not checked"
    no_gpu = environ_with(tmp_path / "cpu", "No devices were found\n", code=6)
    assert gd.check_driver(no_gpu) == "NVIDIA driver: none found, not checked"
    assert not [r for r in albertkit_warnings.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(("stdout", "code", "said"), [
    ("[N/A]\n", 0, "'[N/A]', not a driver version"),
    ("Failed to initialize NVML: Driver/library version mismatch\n", 9, "exited 9: Failed"),
])
def test_nvidia_smi_garbage_or_failure_warns_and_skips(tmp_path, albertkit_warnings, stdout,
                                                       code, said):
    """Decided: the check is skipped with a warning that quotes nvidia-smi, and the job goes
    on (CUDA reports a real mismatch at its first kernel); refusing a job over a tool's odd
    output would stop jobs that may well run."""
    environ = environ_with(tmp_path, stdout, code=code)
    assert gd.check_driver(environ) == "NVIDIA driver: none found, not checked"
    warnings = [r.getMessage() for r in albertkit_warnings.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "NVIDIA driver not checked" in warnings[0]
    assert said in warnings[0]


# --------------------------------------------------------------------------- the check
def test_too_old_a_driver_is_refused_in_one_line_naming_both_versions(tmp_path):
    environ = environ_with(tmp_path, "535.183.01\n")
    with pytest.raises(GpuDriverError) as err:
        gd.check_driver(environ)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("NVIDIA driver 535.183.01 on this machine is older than "
                              "580.65.06, the minimum for this image (Horovod's CUDA kernels "
                              "were built with CUDA 13.0)")
    assert "R580 or newer" in message and "forward compatibility" in message


def test_a_new_enough_driver_passes(tmp_path):
    assert gd.check_driver(environ_with(tmp_path, "580.65.06\n")).startswith(
        "NVIDIA driver 580.65.06: meets the minimum 580.65.06")
    # without Horovod's kernels, TensorFlow's CUDA 12 minimum applies
    assert "meets the minimum 525.60.13" in gd.check_driver(
        environ_with(tmp_path / "tf", "535.183.01\n"), horovod=False)
    with pytest.raises(GpuDriverError, match="NVIDIA driver 520.61.05 .* older than 525.60.13"):
        gd.check_driver(environ_with(tmp_path / "old", "520.61.05\n"), horovod=False)


def test_forward_compatibility_libcuda_is_held_to_the_minimum_instead(tmp_path):
    compat = tmp_path / "usr" / "local" / "cuda" / "compat"
    compat.mkdir(parents=True)
    (compat / "libcuda.so.580.95.05").write_bytes(b"")
    environ = {**environ_with(tmp_path, "535.183.01\n"),
               "LD_LIBRARY_PATH": f"{tmp_path / 'nothing'}:{compat}"}
    assert gd.forward_compat_driver(environ) == ("580.95.05", compat)
    outcome = gd.check_driver(environ)
    assert "535.183.01 with forward-compatibility libcuda 580.95.05" in outcome
    old = tmp_path / "old" / "compat"
    old.mkdir(parents=True)
    (old / "libcuda.so.575.57.08").write_bytes(b"")
    with pytest.raises(GpuDriverError, match=r"libcuda 575\.57\.08 in .* older than 580\.65\.06"):
        gd.check_driver({**environ, "LD_LIBRARY_PATH": str(old)})
    # a libcuda outside a compat directory is the driver's own: not forward compatibility
    plain = tmp_path / "lib"
    plain.mkdir()
    (plain / "libcuda.so.580.95.05").write_bytes(b"")
    assert gd.forward_compat_driver({"LD_LIBRARY_PATH": str(plain)}) is None


def test_report_names_the_cuda_versions_and_the_minimum(tmp_path, capsys):
    environ = environ_with(tmp_path, None)
    assert gd.main(["--report"], environ) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "Horovod 0.28.1 CUDA kernels built with CUDA 13.0; TensorFlow built for CUDA 12.5.1, "
        "cuDNN 9; minimum NVIDIA driver 580.65.06 (R580), 525.60.13 for jobs without Horovod",
        "installed NVIDIA driver: none found (no nvidia-smi or no GPU)",
    ]
    environ = environ_with(tmp_path / "gpu", "535.183.01\n")
    assert gd.main(["--report"], environ) == 0  # a report, not a check
    assert capsys.readouterr().out.splitlines()[1] == \
        "installed NVIDIA driver: 535.183.01 (OLDER than the minimum)"
    assert gd.main(["--check"], environ) == 2
    assert "older than 580.65.06" in capsys.readouterr().err
    assert gd.main(["--check", "--no-horovod"], environ) == 0
    # not albertkit's image: the in-image check fails
    assert gd.main(["--report"], {gd.IMAGE_INFO_ENV: str(tmp_path / "absent.json")}) == 1
    assert "no image description at" in capsys.readouterr().err


# --------------------------------------------------------------------------- entry point
def container(tmp_path: Path, backend: str) -> tuple[Path, dict]:
    """<tmp>/opt/ml with a shipped config of ``backend`` and the SM_* environment."""
    root = tmp_path / "opt" / "ml"
    code = root / "input" / "data" / "code"
    code.mkdir(parents=True)
    tiny = {"size": "tiny", "vocab_size": 101, "hidden_size": 32, "embedding_size": 16,
            "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
    raw = {"model": tiny, "distributed": {"backend": backend},
           "data": {"kind": "synthetic", "seq_length": 16, "max_predictions_per_seq": 2}}
    (code / CONFIG_FILE).write_text(json.dumps(raw))
    return root, {"SM_HOSTS": '["algo-1"]', "SM_CURRENT_HOST": "algo-1", "SM_NUM_GPUS": "8"}


@pytest.fixture
def tensorflow_start(monkeypatch):
    """Stands in for the entry point's TensorFlow start: records that it was reached and
    stops the job there."""
    import albertkit.tfstart

    reached = []

    def start(quiet=True):
        reached.append(True)
        raise ep.ConfigError("reached the TensorFlow start")

    monkeypatch.setattr(albertkit.tfstart, "start_tensorflow", start)
    return reached


def test_entry_point_refuses_an_old_driver_before_tensorflow(tmp_path, tensorflow_start):
    root, environ = container(tmp_path, "horovod")
    environ.update(environ_with(tmp_path, "535.183.01\n"))
    assert ep.main([], environ, root) == 2
    failure = (root / "output" / "failure").read_text()
    assert failure.startswith("NVIDIA driver 535.183.01 on this machine is older than 580.65.06")
    assert tensorflow_start == []


def test_entry_point_goes_on_with_a_new_enough_driver(tmp_path, tensorflow_start):
    root, environ = container(tmp_path, "horovod")
    environ.update(environ_with(tmp_path, "580.82.07\n"))
    assert ep.main([], environ, root) == 2
    assert (root / "output" / "failure").read_text() == "reached the TensorFlow start"
    # a multi-worker job never loads Horovod's kernels: TensorFlow's CUDA 12 minimum applies
    root, environ = container(tmp_path / "mw", "tf_multiworker")
    environ.update(environ_with(tmp_path / "mw", "535.183.01\n"))
    assert ep.main([], environ, root) == 2
    assert (root / "output" / "failure").read_text() == "reached the TensorFlow start"
    assert tensorflow_start == [True, True]


def test_entry_script_process_exits_with_one_line(tmp_path):
    """The whole process, as SageMaker runs it: non-zero exit, one error line on stderr that
    names both versions, and TensorFlow never imported."""
    root, environ = container(tmp_path, "horovod")
    environ.update(environ_with(tmp_path, "535.183.01\n"))
    probe = ("import json, sys; from albertkit.sagemaker import entrypoint as ep; "
             "code = ep.main([], json.loads(sys.argv[1]), sys.argv[2]); "
             "print('tensorflow' in sys.modules); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe, json.dumps(environ), str(root)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stdout.strip() == "False"
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, done.stderr
    assert " ERROR NVIDIA driver 535.183.01 " in errors[0] and "580.65.06" in errors[0]
