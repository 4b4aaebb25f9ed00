"""Start TensorFlow in the processes albertkit owns: lean, and quiet unless asked otherwise.

**Lean.** When they are installed, TensorFlow 2.21 and Keras 3 import optional packages at
``import tensorflow`` for features a training process never uses: scikit-learn (Keras's
scikit-learn wrappers), pandas and, through it, pyarrow (Keras's array slicing of DataFrames),
matplotlib (Keras's image-gallery plots) and SciPy (the legacy ``tf.keras`` engine's sparse
input check). Each guards the import and carries on without it. Measured with all five
installed (ALBERT-base seq 128, quiet machine; docs/performance-log.md): 713 MiB resident
after a plain ``import tensorflow``, 557 MiB after this function; 2,406 against 2,231 MiB peak.
:func:`start_tensorflow` holds them back for the import only (an entry of ``None`` in
``sys.modules``) and removes the entries afterwards, so a later
``import pandas`` (albertkit's own reports, a user's code) works as usual; only those Keras
features (``keras.wrappers.SKLearnClassifier``, DataFrames passed to ``Model.fit``, image
galleries) are unavailable in such a process.

**Quiet.** TensorFlow 2.21 logs through absl before its own log level applies: on a machine
without a GPU, ``import tensorflow`` writes "All log messages before absl::InitializeLog() ..."
and "Could not find cuda drivers on your machine" (once per library that carries the CUDA
stub) whatever ``TF_CPP_MIN_LOG_LEVEL`` says, and the first device query writes "failed call
to cuInit" as an ERROR. None of it is actionable on a CPU machine, and on a GPU machine the same
facts are in albertkit's own start line (device, precision, XLA plan). With ``quiet=True`` the
import and the device query run with the process's standard error (file descriptor 2, where
the C++ code writes) pointed at a temporary file; what was written there is logged at DEBUG
level, and if the import fails it is written to standard error before the exception
propagates, so a broken installation still explains itself.

The CLI's TensorFlow commands call it (quiet unless ``--debug``), as do the benchmark's
albertkit worker and the SageMaker entry point (not quiet: a job's log keeps everything). The
Python API changes nothing in a user's process.

Example (the first call imports TensorFlow, unless something already did; later calls return
``""`` at once, and no held-back package stays blocked):
    >>> _ = start_tensorflow(quiet=True)
    >>> "tensorflow" in sys.modules, start_tensorflow(quiet=True)
    (True, '')
    >>> [name for name in UNUSED_OPTIONAL_PACKAGES if name in sys.modules and not sys.modules[name]]
    []
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

log = logging.getLogger("albertkit")

# Imported by TensorFlow / Keras when installed, guarded, never used by a training process.
UNUSED_OPTIONAL_PACKAGES = ("sklearn", "pandas", "pyarrow", "matplotlib", "scipy")


def start_tensorflow(quiet: bool = True) -> str:
    """Import TensorFlow without :data:`UNUSED_OPTIONAL_PACKAGES` and list its devices; with
    ``quiet``, fd 2 is captured meanwhile. Returns what the C++ code wrote there (also logged
    at DEBUG; ``""`` when not quiet). A second call does nothing and returns ``""``."""
    if "tensorflow" in sys.modules:
        return ""
    held = [m for m in UNUSED_OPTIONAL_PACKAGES if m not in sys.modules]
    for name in held:
        sys.modules[name] = None  # `import name` raises ImportError: the guarded path
    try:
        return _import_quietly() if quiet else _import()
    finally:
        for name in held:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def _import() -> str:
    import tensorflow as tf

    tf.config.list_physical_devices()
    return ""


def _import_quietly() -> str:
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        failed = True
        try:
            _import()
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", "replace")
            if failed and text:
                sys.stderr.write(text)
                sys.stderr.flush()
    for line in text.splitlines():
        log.debug("tensorflow start: %s", line)
    return text
