"""The command line every measurement script starts from."""

from __future__ import annotations

import argparse


def script_parser(doc: str) -> argparse.ArgumentParser:
    """The argument parser a benchmark script starts from: its description is the first
    paragraph of ``doc`` (the rest stays as written), and it takes the step's shape,
    ``--size`` (tiny), ``--seq-length`` (128) and ``--micro-batch`` (32)."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="tiny")
    p.add_argument("--seq-length", type=int, default=128)
    p.add_argument("--micro-batch", type=int, default=32)
    return p
