"""Resource limits that bad or hostile input must not get past.

A model text, a tensor file or a container decides how much memory qsim would allocate and
how deep its parsers would recurse. These limits are checked *before* allocating or
descending, so a 28 MB archive that unpacks to 6 GiB, or a `real[100000, 100000]` constant,
is refused with a message naming the limit instead of exhausting the machine.

- `max_tensor_bytes()`: the largest single tensor, constant, tile result or container member
  qsim materialises. Default 4 GiB; set by the environment variable QSIM_MAX_TENSOR_BYTES
  (bytes, or with a K/M/G/T suffix, powers of 1024) or by the CLI's `--max-tensor-bytes`,
  which sets the same variable for the run.
- `MAX_NESTING_DEPTH`: how deeply a model text may nest expressions (parentheses, operator
  chains, blocks). Deeper documents are refused with their location; recursion depth of the
  Python interpreter never decides whether a document loads.
"""
from __future__ import annotations

import os
import re

from .errors import DataError, UsageError
from .pinned import PinnedSetting

DEFAULT_MAX_TENSOR_BYTES = 4 << 30
MAX_TENSOR_BYTES_ENV = "QSIM_MAX_TENSOR_BYTES"

# Expression and block nesting a model text may have. Real models nest a few levels; 200
# leaves room for generated code while keeping every recursive pass far below Python's
# default recursion limit (1000 frames, several frames per level).
MAX_NESTING_DEPTH = 200

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_byte_size(text: str, what: str = MAX_TENSOR_BYTES_ENV) -> int:
    """'4G', '512M', '1000000' -> bytes. Raises UsageError naming `what` on anything else."""
    match = re.fullmatch(r"\s*(\d{1,15})\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if match is None or int(match.group(1)) <= 0:
        raise UsageError(f"{what} = {text!r} is not a positive size in bytes",
                         hint="write a whole number of bytes, optionally with K, M, G or T "
                              "(powers of 1024), e.g. 4G")
    return int(match.group(1)) * _SUFFIXES[match.group(2).upper()]


def _read_max_tensor_bytes() -> int:
    text = os.environ.get(MAX_TENSOR_BYTES_ENV)
    if text is None or text.strip() == "":
        return DEFAULT_MAX_TENSOR_BYTES
    return parse_byte_size(text)


_max_tensor_bytes = PinnedSetting(_read_max_tensor_bytes)


def max_tensor_bytes() -> int:
    """The current limit on one tensor's size in bytes (environment, else 4 GiB)."""
    return _max_tensor_bytes.get()


def pinned_max_tensor_bytes():
    """max_tensor_bytes() read once for the block: the executor's op loop (qsim/pinned.py)."""
    return _max_tensor_bytes.pinned()


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def check_tensor_size(shape, itemsize: int, what: str, location=None) -> int:
    """Refuses a tensor of `shape` with `itemsize`-byte elements if it exceeds the limit.

    `shape` may hold any Python ints (negative or huge extents are refused too); the product
    is computed in Python integers, so it never wraps. Returns the size in bytes.
    """
    count = 1
    for extent in shape:
        extent = int(extent)
        if extent < 0:
            raise DataError(f"{what} has a negative extent {extent} in shape {list(shape)}",
                            location=location, hint="extents must be 0 or more")
        count *= extent
    size = count * int(itemsize)
    limit = max_tensor_bytes()
    if size > limit:
        raise DataError(
            f"{what} of shape {list(shape)} would take {format_bytes(size)}, over the "
            f"{format_bytes(limit)} limit on one tensor",
            location=location,
            hint=f"if this is intended, raise the limit with --max-tensor-bytes or the "
                 f"{MAX_TENSOR_BYTES_ENV} environment variable (e.g. 16G)")
    return size
