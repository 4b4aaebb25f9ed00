"""Every error albertkit raises on purpose, under one base class.

``except AlbertkitError`` catches any problem albertkit itself diagnosed (a bad config, a
damaged checkpoint, an unreadable corpus ...), as opposed to bugs and errors of the
libraries underneath. Each class also keeps the standard base it always had
(``ValueError`` for bad input, ``RuntimeError`` for a run that cannot go on), so callers
that catch those keep working.

Messages name the file, line, field or setting involved: the command line prints them as
one ``error: ...`` line.

This module imports nothing from albertkit, so every layer may raise these.

Example:
    >>> issubclass(ConfigError, AlbertkitError) and issubclass(ConfigError, ValueError)
    True
"""

from __future__ import annotations

__all__ = [
    "AlbertkitError",
    "ConfigError",
    "PluginError",
    "CorpusError",
    "TokenizerError",
    "LanguageError",
    "ProtobufError",
    "RecordError",
    "DataPreparationError",
    "DatasetError",
    "SquadFormatError",
    "GlueDataError",
    "SquadEvalError",
    "CheckpointError",
    "TrainingError",
    "GpuDriverError",
    "BenchmarkError",
    "ReportError",
]


class AlbertkitError(Exception):
    """Base of every error albertkit raises deliberately."""


# --------------------------------------------------------------------------- configuration
class ConfigError(AlbertkitError, ValueError):
    """A configuration problem, with a message that names the field, value and source."""


class PluginError(ConfigError):
    """A pluggable part that cannot be registered or used (two owners for one name, a plugin
    that fails to import): the message names the part, the entry point and its distribution."""


# --------------------------------------------------------------------------- data
class CorpusError(AlbertkitError, ValueError):
    """Unreadable input: the message names the file, the line and the setting involved."""


class TokenizerError(AlbertkitError, ValueError):
    """A tokenizer problem, with a message naming the file or setting."""


class LanguageError(AlbertkitError, ValueError):
    """An unknown language code, or a corpus that is not in the language given: the
    message names both (and the corpus's script shares) or lists the known codes."""


class ProtobufError(AlbertkitError, ValueError):
    """Bytes that are not the protobuf message they should be (a damaged model file)."""


class RecordError(AlbertkitError, ValueError):
    """A corrupt or truncated TFRecord file; the message names the file and byte offset."""


class DataPreparationError(AlbertkitError, ValueError):
    """Preparation cannot proceed; the message names the input, setting or directory."""


class DatasetError(AlbertkitError, ValueError):
    """Inconsistent files, manifest or arguments; the message names the file or argument."""


class SquadFormatError(AlbertkitError, ValueError):
    """A SQuAD file that does not follow the official format; the message names the record."""


class GlueDataError(AlbertkitError, ValueError):
    """A classification data file that cannot be used; the message names file and record."""


# --------------------------------------------------------------------------- evaluation
class SquadEvalError(AlbertkitError, ValueError):
    """Inputs to the SQuAD evaluation do not line up (missing predictions, bad files)."""


# --------------------------------------------------------------------------- training
class CheckpointError(AlbertkitError, RuntimeError):
    """A checkpoint that cannot be used (damaged, or from a different model)."""


class TrainingError(AlbertkitError, RuntimeError):
    """Training cannot continue (for example the loss stayed non-finite)."""


# --------------------------------------------------------------------------- environment
class GpuDriverError(AlbertkitError, RuntimeError):
    """The machine's NVIDIA driver is too old for the GPU code of the image (the message
    names both versions), or the image's own description of that code is unreadable."""


# --------------------------------------------------------------------------- tools
class BenchmarkError(AlbertkitError, RuntimeError):
    """A benchmark that cannot run as asked (message names the option and the reason)."""


class ReportError(AlbertkitError, ValueError):
    """The report cannot be made (no metrics, unreadable files); the message names the file."""
