"""`qsim selftest`: seeded checks that this installation's kernels compute the right bits."""
from __future__ import annotations

import argparse
import sys

from ..selftest.runner import run_selftest
from .arguments import whole_number

NAME = "selftest"
HELP = "check the compiled kernels against the numpy reference on seeded random cases"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=whole_number(0), default=0, help="random seed (default 0)")


def run(args: argparse.Namespace) -> int:
    return 0 if run_selftest(seed=args.seed, out=sys.stdout) else 1
