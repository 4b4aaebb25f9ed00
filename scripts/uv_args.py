"""Print the `uv pip install` options that make uv install from where pip would.

pip reads its package sources from its configuration (pip.conf files and PIP_* variables:
index-url, extra-index-url, find-links, constraint, cert, default-timeout); uv reads none of
them. scripts/test.sh installs the test environment with uv (much faster: parallel downloads
and a shared cache), so it asks pip for its settings (`pip config list`) and passes them on.
The options come out NUL-separated, for `mapfile -d ''`; `--env` prints the environment
variables (NAME=VALUE, NUL-separated) for the cert and the timeout instead.

    python scripts/uv_args.py            # --extra-index-url URL ... -c FILE ...
    python scripts/uv_args.py --env      # SSL_CERT_FILE=... UV_HTTP_TIMEOUT=...
"""
from __future__ import annotations

import shlex
import subprocess
import sys

# pip's option -> uv's; pip's list options hold several values separated by whitespace
_OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
            "find-links": "--find-links", "constraint": "--constraint"}
_ENV = {"cert": "SSL_CERT_FILE", "default-timeout": "UV_HTTP_TIMEOUT"}


def pip_settings(listing: str) -> dict[str, list[str]]:
    """`pip config list` lines (``global.find-links='/opt/wheels'``, ``:env:.cert='...'``) ->
    {option: values}; a variable overrides the files, as in pip.

    >>> pip_settings("global.extra-index-url='file:///a file:///b'\\n:env:.timeout='9'")
    {'extra-index-url': ['file:///a', 'file:///b'], 'timeout': ['9']}
    """
    files: dict[str, list[str]] = {}
    env: dict[str, list[str]] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        option = key.rsplit(".", 1)[-1]
        target = env if key.startswith(":env:") else files
        target[option] = shlex.split(value)[0].split() if value.strip() else []
    return {**files, **env}


def uv_options(settings: dict[str, list[str]]) -> list[str]:
    """The uv options for pip's settings.

    >>> uv_options({"find-links": ["/w"], "constraint": ["/c.txt"], "cert": ["/x"]})
    ['--find-links', '/w', '--constraint', '/c.txt']
    """
    out: list[str] = []
    for option, flag in _OPTIONS.items():
        for value in settings.get(option, []):
            out += [flag, value]
    return out


def uv_environment(settings: dict[str, list[str]]) -> list[str]:
    """NAME=VALUE for pip's cert and timeout.

    >>> uv_environment({"cert": ["/etc/ca.crt"], "default-timeout": ["180"]})
    ['SSL_CERT_FILE=/etc/ca.crt', 'UV_HTTP_TIMEOUT=180']
    """
    return [f"{name}={settings[option][0]}" for option, name in _ENV.items()
            if settings.get(option)]


def main(argv: list[str]) -> int:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                             capture_output=True, text=True, check=True).stdout
    settings = pip_settings(listing)
    items = uv_environment(settings) if "--env" in argv else uv_options(settings)
    sys.stdout.write("".join(item + "\0" for item in items))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
