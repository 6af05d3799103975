"""Argument types and path lists shared by several commands' `add_arguments`/`run`."""
from __future__ import annotations

import argparse


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
