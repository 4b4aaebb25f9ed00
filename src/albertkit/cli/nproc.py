"""``--nproc N``: run a training command as N cooperating processes on this machine.

The launcher itself (free ports, one TF_CONFIG per process, ``horovodrun``, supervision) is
``albertkit.distributed.launch``; this is only its command-line argument.
"""

from __future__ import annotations

import argparse


def add_nproc_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--nproc N`` to a training subcommand (``--distributed`` picks the backend)."""
    parser.add_argument(
        "--nproc", type=int, default=None, metavar="N",
        help="start N processes of this command on this machine (debugging a distributed "
             "backend): tf_multiworker gets one TF_CONFIG per process on free localhost "
             "ports, horovod runs under `horovodrun -np N --gloo`")
