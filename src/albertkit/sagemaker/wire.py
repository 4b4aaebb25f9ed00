"""What may travel in a SageMaker request, and how names travel: secrets are refused in
tags, hyperparameters and environment variables (anyone who may call DescribeTrainingJob or
list tags sees them), and dotted config paths are written as shell-safe hyperparameter names.

Example:
    >>> hyperparameter_key("optimizer.learning_rate")
    'optimizer__learning_rate'
    >>> config_path("optimizer__learning_rate"), hyperparameter_text(True)
    ('optimizer.learning_rate', 'true')
    >>> secret_name_word("WANDB_API_KEY"), secret_name_word("TOKENIZERS_PARALLELISM")
    ('KEY', None)
"""

from __future__ import annotations

import re

HyperparameterValue = str | bool | int | float

# Secrets must never travel in the request: tags, hyperparameters and environment variables
# are all visible to anyone who may call DescribeTrainingJob or list tags.
# Values that are credentials whatever their name: AWS access key ids, PEM private keys,
# URLs with a user:password part, and the token formats of common services (GitHub, Hugging
# Face, OpenAI, Slack, Google API keys).
_SECRET_VALUE = re.compile(
    r"(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@:]+:[^\s/@]+@"
    r"|\b(?:gh[oprsu]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z]{30,}"
    r"|sk-[A-Za-z0-9_\-]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}|AIza[0-9A-Za-z_\-]{35})"
)
# Names that hold secrets: a whole word of the name (split at "_", "-", ".", spaces and
# camelCase humps) is one of these, so WANDB_API_KEY, GITHUB_PAT or dbPassword are refused
# while TOKENIZERS_PARALLELISM (a tokenizers setting) or KEYBOARD_LAYOUT are not.
_SECRET_NAME_WORDS = frozenset({
    "KEY", "KEYS", "APIKEY", "ACCESSKEY", "SECRETKEY", "PRIVATEKEY",
    "TOKEN", "TOKENS", "AUTHTOKEN", "ACCESSTOKEN",
    "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE",
    "PAT", "AUTH", "CREDENTIAL", "CREDENTIALS", "CREDS",
})
_NAME_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# A hyperparameter override is a dotted config path (optimizer.learning_rate). On the wire the
# dots become "__": the SageMaker SDK's container driver exports every hyperparameter as the
# shell variable SM_HP_<KEY> and sources that file under `set -e`, and a dot in a variable
# name stops the job before training ("not a valid identifier").
HYPERPARAMETER_SEPARATOR = "__"
_PATH_PART = r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*"  # no "__", so the encoding reverses
_DOTTED_PATH = re.compile(rf"^{_PATH_PART}(?:\.{_PATH_PART})*$")


def secret_name_word(name: str) -> str | None:
    """The word of ``name`` that marks it as holding a secret, or None."""
    for word in _NAME_WORD.findall(name):
        if word.upper() in _SECRET_NAME_WORDS:
            return word
    return None


def secret_value_kind(value: str) -> bool:
    """True when ``value`` looks like a credential (see ``_SECRET_VALUE``)."""
    return _SECRET_VALUE.search(value) is not None


def hyperparameter_key(path: str) -> str:
    """The request's name for the override of dotted config ``path``
    (``optimizer.learning_rate`` -> ``optimizer__learning_rate``): a valid shell name."""
    return path.replace(".", HYPERPARAMETER_SEPARATOR)


def config_path(key: str) -> str:
    """The dotted config path a hyperparameter name stands for (inverse of
    :func:`hyperparameter_key`; dotted names, e.g. from an older job, pass unchanged)."""
    return key.replace(HYPERPARAMETER_SEPARATOR, ".")


def hyperparameter_text(value: HyperparameterValue) -> str:
    """The string SageMaker stores for a hyperparameter value (JSON for non-strings)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def is_dotted_path(key: str) -> bool:
    """Whether ``key`` is a dotted config path that :func:`hyperparameter_key` can encode and
    :func:`config_path` decode back (no ``__`` inside a part)."""
    return _DOTTED_PATH.match(key) is not None
