"""`qsim check`: parse and compose a model and print a summary of its graph (or located errors)."""
from __future__ import annotations

import argparse

from ..errors import UsageError
from ..skriptnd.check import check_model

NAME = "check"
HELP = "parse and compose a model (.sknd, model folder, graph.nnef, .tgz) and summarize it, or report located errors"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a .sknd file, a folder with main.sknd or graph.nnef, or a .tgz/.tar")
    parser.add_argument("--all", action="store_true", help="compose every graph of the main module")
    parser.add_argument("--graph", help="compose the graph of this name (default: the first)")
    parser.add_argument("--keep", help="comma-separated compound operators to keep whole, e.g. nn.softmax")


def run(args: argparse.Namespace) -> int:
    keep = [k.strip() for k in (args.keep or "").split(",") if k.strip()]
    if args.keep is not None and not keep:
        raise UsageError(f"--keep {args.keep!r} names no operator",
                         hint="give comma-separated operator names, e.g. --keep nn.softmax,nn.conv")
    print(check_model(args.model, all_graphs=args.all, graph=args.graph, keep=keep))
    return 0
