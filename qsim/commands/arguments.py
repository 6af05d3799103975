"""Argument types and path lists shared by several commands' `add_arguments`/`run`."""
from __future__ import annotations

import argparse

from ..errors import UsageError


def whole_number(minimum: int):
    """An argparse type: a whole number >= minimum (argparse reports others with exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is less than {minimum}")
        return value
    parse.__name__ = f"whole number >= {minimum}"
    return parse


def input_files(specs: list[str] | None) -> list[tuple[str, str]]:
    """The files `--input [NAME=]X.npy` options may name, as (what, path) inputs of a command
    (outpath.check_output refuses an output that would replace one of them)."""
    pairs = []
    for spec in specs or []:
        pairs.append(("--input", spec))
        _, sep, path = spec.partition("=")
        if sep:
            pairs.append(("--input", path))
    return pairs


def add_pool_arguments(p: argparse.ArgumentParser, what: str = "the layers (of every sweep point)") -> None:
    """--workers and --scheduler: where a command's tasks run (qsim.cluster.distributed.open_pool)."""
    p.add_argument("--workers", type=int, metavar="N",
                   help=f"run {what} as tasks on N local Dask worker processes (default: one per "
                        "core; at most 4 per core; 1: in this process, no cluster)")
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="run the tasks on an existing Dask cluster, the address `dask scheduler` "
                        "prints (default: $QSIM_SCHEDULER, unless --workers is given)")


def pool_scheduler(args: argparse.Namespace) -> str | None:
    """The scheduler argument of open_pool: an explicit --workers N wins over $QSIM_SCHEDULER
    (a default); both options together are a usage error."""
    if args.workers is None:
        return args.scheduler
    if args.scheduler is not None:
        raise UsageError("--workers and --scheduler do not combine",
                         hint="--workers N starts N local worker processes; --scheduler runs on "
                              "the workers of an existing cluster")
    return ""
