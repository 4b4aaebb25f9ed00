"""albertkit's processes start TensorFlow lean (without the optional packages it would pull
in) and, from the CLI, without its C++ start-up lines unless --debug; a broken TensorFlow still
explains itself."""

from __future__ import annotations

import ast
import json
import os
import random
import re
import subprocess
import sys
import textwrap

# Lines TensorFlow 2.21 writes on a machine without a GPU, whatever TF_CPP_MIN_LOG_LEVEL says
# (absl logs before TensorFlow's level applies), and the ERROR line of the first device query.
BANNERS = ("absl::InitializeLog", "Could not find cuda drivers", "failed call to cuInit")


def _run(args, env_extra=None, **kw):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(env_extra or {})
    env = {k: v for k, v in env.items() if v is not None}  # None: not set at all
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=300, **kw)


def _banners(text: str) -> list[str]:
    return [b for b in BANNERS if b in text]


def test_cli_hides_tensorflow_start_lines_unless_debug(tmp_path):
    plain = _run(["-c", "import tensorflow as tf; tf.config.list_physical_devices()"],
                 {"TF_CPP_MIN_LOG_LEVEL": "2"})
    assert _banners(plain.stderr), (
        "TensorFlow printed none of its start-up lines here: albertkit.tfstart may no longer "
        f"be needed (stderr: {plain.stderr[-500:]!r})")
    cmd = ["-m", "albertkit.cli", "export", str(tmp_path / "no-such-run"), str(tmp_path / "out")]
    quiet = _run(cmd)
    assert quiet.returncode == 2
    assert "error:" in quiet.stderr  # our own message still reaches the user
    assert _banners(quiet.stderr) == [], quiet.stderr
    debug = _run(["-m", "albertkit.cli", "--debug", *cmd[2:]])
    assert debug.returncode != 0
    assert _banners(debug.stderr), debug.stderr


def _fake_tensorflow(root, body: str) -> dict:
    pkg = root / "tensorflow"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    return {"PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def test_start_tensorflow_captures_start_lines_and_returns_them(tmp_path):
    env = _fake_tensorflow(tmp_path, """
        import os, types
        os.write(2, b"C++ banner line\\n")
        config = types.SimpleNamespace(
            list_physical_devices=lambda: os.write(2, b"device query line\\n"))
    """)
    code = ("from albertkit.tfstart import start_tensorflow\n"
            "text = start_tensorflow(quiet=True)\n"
            "print(repr(text))\n"
            "print(repr(start_tensorflow(quiet=True)))\n")
    r = _run(["-c", code], env)
    assert r.returncode == 0, r.stderr
    assert "banner" not in r.stderr and "device query" not in r.stderr
    first, second = r.stdout.splitlines()
    assert "C++ banner line" in first and "device query line" in first
    assert second == "''"  # already started: nothing done


def test_start_tensorflow_shows_what_a_broken_tensorflow_wrote(tmp_path):
    env = _fake_tensorflow(tmp_path, """
        import os
        os.write(2, b"libtensorflow_framework.so.2: cannot open shared object file\\n")
        raise ImportError("broken installation")
    """)
    r = _run(["-c", "from albertkit.tfstart import start_tensorflow; start_tensorflow()"], env)
    assert r.returncode == 1
    assert "cannot open shared object file" in r.stderr
    assert "ImportError: broken installation" in r.stderr


_LOADED = ("import sys, importlib.util\n"
           "from albertkit.tfstart import UNUSED_OPTIONAL_PACKAGES as P\n"
           "print([m for m in P if importlib.util.find_spec(m)])\n"
           "print([m for m in P if sys.modules.get(m) is not None])\n")


def test_start_tensorflow_leaves_unused_optional_packages_out():
    plain = _run(["-c", "import tensorflow\n" + _LOADED], {"TF_CPP_MIN_LOG_LEVEL": "3"})
    installed, loaded = (ast.literal_eval(line) for line in plain.stdout.splitlines())
    assert "sklearn" in installed  # the test extra installs scikit-learn
    assert loaded, "a plain import pulls in none of them: albertkit.tfstart's list is stale"
    lean = _run(["-c", "from albertkit.tfstart import start_tensorflow\n"
                       "start_tensorflow(quiet=False)\n" + _LOADED +
                       "import sklearn, scipy.sparse, tensorflow as tf\n"
                       "print(tf.reduce_sum(tf.ones([3])).numpy())\n"],
                {"TF_CPP_MIN_LOG_LEVEL": "3"})
    assert lean.returncode == 0, lean.stderr
    installed_l, loaded_l, total = lean.stdout.splitlines()
    assert ast.literal_eval(loaded_l) == []
    assert total == "3.0"  # and they still import afterwards (the line above ran)


# ------------------------------------------------------------------ a TensorFlow-only install
TORCH_NOTICE = "PyTorch was not found"
# albertkit's own stderr lines: its log records, and the CLI's one error line with its hint
ALBERTKIT_LINE = re.compile(r"\d\d:\d\d:\d\d (DEBUG|INFO|WARNING|ERROR) |error: |\(run with --debug")
# The CLI in a process where `import torch` fails, as in an installation without PyTorch
WITHOUT_TORCH = ("import sys; sys.modules['torch'] = None; from albertkit.cli import main; "
                 "sys.exit(main(sys.argv[1:]))")


def _run_without_torch(*argv, cwd):
    return _run(["-c", WITHOUT_TORCH, *map(str, argv)],
                {"TRANSFORMERS_NO_ADVISORY_WARNINGS": None}, cwd=cwd)


def _foreign_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip() and not ALBERTKIT_LINE.match(ln)]


def test_tensorflow_only_install_sees_nothing_before_albertkit(tmp_path):
    """transformers' "PyTorch was not found" notice (and TensorFlow's start-up lines) are held
    back: a command's stderr holds albertkit's lines only, unless --debug."""
    plain = _run(["-c", "import sys; sys.modules['torch'] = None; import transformers"],
                 {"TRANSFORMERS_NO_ADVISORY_WARNINGS": None})
    assert TORCH_NOTICE in plain.stderr, (
        "transformers no longer prints its notice without PyTorch: the quiet setting in "
        f"albertkit.cli.quiet_imports may no longer be needed (stderr: {plain.stderr!r})")

    corpus = tmp_path / "corpus.txt"
    words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "a", "cat", "sat",
             "on", "mat", "while", "birds", "sing", "in", "trees", "and", "rivers", "flow"]
    rng = random.Random(0)
    corpus.write_text("\n".join(" ".join(rng.choice(words) for _ in range(12)).capitalize() + "."
                                for _ in range(400)), encoding="utf-8")
    # train-tokenizer saves a Hugging Face directory through transformers (no TensorFlow)
    quiet = _run_without_torch("train-tokenizer", corpus, "--out", "tok", "--vocab-size", "45",
                               cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert TORCH_NOTICE not in quiet.stderr
    assert _foreign_lines(quiet.stderr) == [], quiet.stderr
    debug = _run_without_torch("--debug", "train-tokenizer", corpus, "--out", "tok-debug",
                               "--vocab-size", "45", cwd=tmp_path)
    assert debug.returncode == 0, debug.stderr
    assert TORCH_NOTICE in debug.stderr  # --debug shows everything

    # finetune starts TensorFlow, then loads the tokenizer through transformers; the error
    # (a tokenizer larger than the model) comes after both imports
    squad = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
        "context": "Paris is in France.",
        "qas": [{"id": "q1", "question": "Where is Paris?", "is_impossible": False,
                 "answers": [{"text": "France", "answer_start": 12}]}]}]}]}
    (tmp_path / "train.json").write_text(json.dumps(squad), encoding="utf-8")
    config = {"run_dir": str(tmp_path / "run"), "model": {"size": "tiny", "vocab_size": 30},
              "data": {"kind": "squad", "version": "2.0", "train_file": "train.json",
                       "tokenizer": str(tmp_path / "tok"), "max_seq_length": 48,
                       "doc_stride": 16, "max_query_length": 12}}
    (tmp_path / "cfg.json").write_text(json.dumps(config), encoding="utf-8")
    run = _run_without_torch("finetune", "squad", "-c", "cfg.json", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "has 45 tokens but model.vocab_size=30" in run.stderr  # transformers loaded it
    assert TORCH_NOTICE not in run.stderr
    assert _banners(run.stderr) == [], run.stderr
    assert _foreign_lines(run.stderr) == [], run.stderr
