"""Pydantic validation errors as messages that name the field, one line per problem.

Used for the config root and for extension sections validated elsewhere (``prefix`` puts the
section's name in front of every field: ``sagemaker.instance_count``).

Example:
    >>> from pydantic import BaseModel
    >>> class Section(BaseModel):
    ...     steps: int
    >>> try:
    ...     Section.model_validate({"steps": "many"})
    ... except ValidationError as e:
    ...     print(format_validation_errors(e, prefix="runtime"))
      runtime.steps: Input should be a valid integer, unable to parse string as an integer (got 'many')
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from albertkit.errors import ConfigError


def _location(err: dict[str, Any], prefix: str) -> str:
    parts = [prefix] if prefix else []
    parts += map(str, err["loc"])
    return ".".join(parts) or "<root>"


def format_validation_errors(e: ValidationError, prefix: str = "") -> str:
    """Every problem of ``e`` as an indented ``field.path: message (got value)`` line."""
    lines = []
    for err in e.errors():
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "union_tag_not_found":  # a section of a tagged union without kind
            msg = f"missing {err['ctx']['discriminator']}, which selects the section's type"
        got = err.get("input")
        shown = "" if isinstance(got, dict) else f" (got {got!r})"
        lines.append(f"  {_location(err, prefix)}: {msg}{shown}")
    return "\n".join(lines)


def first_error(e: ValidationError) -> str:
    """The first problem of ``e`` on one line."""
    return format_validation_errors(e).splitlines()[0].strip()


def invalid_configuration(source: str, e: ValidationError, prefix: str = "") -> ConfigError:
    """The ``ConfigError`` for an invalid config from ``source`` (a file name, usually)."""
    details = format_validation_errors(e, prefix)
    # one problem stays on the one line the CLI prints; several get a line each
    details = " " + details.strip() if "\n" not in details else "\n" + details
    return ConfigError(f"{source}: invalid configuration:{details}")
