"""Start TensorFlow quietly: its C++ start-up lines held back unless the user asks for them.

TensorFlow 2.21 logs through absl before its own log level applies: on a machine without a GPU,
``import tensorflow`` writes "All log messages before absl::InitializeLog() ..." and "Could not
find cuda drivers on your machine" (once per library that carries the CUDA stub) whatever
``TF_CPP_MIN_LOG_LEVEL`` says, and the first device query writes "failed call to cuInit" as an
ERROR. None of it is actionable on a CPU machine, and on a GPU machine the same facts are in
our own start line (device, precision, XLA plan).

:func:`quiet_start` imports TensorFlow and lists its devices with the process's standard error
(file descriptor 2, where the C++ code writes) pointed at a temporary file. What was written
there is logged at DEBUG level; if the import fails, it is written to standard error before
the exception propagates, so a broken installation still explains itself. The CLI calls it
unless ``--debug`` is given; the Python API never redirects anything.

Example:
    >>> quiet_start()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

log = logging.getLogger("albertkit")


def quiet_start() -> str:
    """Import TensorFlow and initialise its device list with fd 2 captured; return what the
    C++ code wrote (also logged at DEBUG). A second call does nothing and returns ``""``."""
    if "tensorflow" in sys.modules:
        return ""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        failed = True
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()
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
