"""Resource limits that bad or hostile input must not get past.

A model text, a tensor file or a container decides how much memory qsim would allocate and
how deep its parsers would recurse. These limits are checked *before* allocating or
descending, so a 28 MB archive that unpacks to 6 GiB, or a `real[100000, 100000]` constant,
is refused with a message naming the limit instead of exhausting the machine.

- `max_tensor_bytes()`: the largest single tensor, constant, tile result or container member
  qsim materialises. Default 4 GiB; set by the environment variable QSIM_MAX_TENSOR_BYTES
  (bytes, or with a K/M/G/T suffix, powers of 1024) or by the CLI's `--max-tensor-bytes`,
  which sets the same variable for the run.
- `max_memory()`: one budget for everything a command holds at once, not only per tensor: the
  constants an import folds, the tensors live while a graph runs (the executor knows which),
  the images a calibration folder decodes. Default: half the memory this process may use
  (physical memory, or a cgroup or address-space limit if lower); set by QSIM_MAX_MEMORY or
  the CLI's `--max-memory`. Code that holds data counts it in a `MemoryUse`; while one is
  active (`counting`), `check_tensor_size` also refuses a tensor that would take the use past
  the budget, before it is allocated, naming what holds the memory and how to raise the budget.
- `MAX_NESTING_DEPTH`: how deeply a model text may nest expressions (parentheses, operator
  chains, blocks). Deeper documents are refused with their location; recursion depth of the
  Python interpreter never decides whether a document loads.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import re
import resource

from .errors import DataError, UsageError
from .pinned import PinnedSetting

DEFAULT_MAX_TENSOR_BYTES = 4 << 30
MAX_TENSOR_BYTES_ENV = "QSIM_MAX_TENSOR_BYTES"
MAX_MEMORY_ENV = "QSIM_MAX_MEMORY"
# the default budget's share of the memory the process may use: the rest is for Python, numpy,
# the kernels' scratch and what the budget does not count (model files, reports)
DEFAULT_MEMORY_SHARE = 0.5

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


def usable_memory() -> int:
    """The memory this process may use: physical memory, or less under a cgroup (v2 or v1)
    memory limit or an address-space limit (ulimit -v)."""
    candidates = []
    try:
        candidates.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            candidates.append(int(text))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
        candidates.append(soft)
    return min(candidates) if candidates else 8 << 30


def _read_max_memory() -> int:
    text = os.environ.get(MAX_MEMORY_ENV)
    if text is None or text.strip() == "":
        return max(1 << 30, int(usable_memory() * DEFAULT_MEMORY_SHARE))
    return parse_byte_size(text, MAX_MEMORY_ENV)


_max_memory = PinnedSetting(_read_max_memory)


def max_memory() -> int:
    """The budget for everything a command holds at once (environment, else half of usable memory)."""
    return _max_memory.get()


def pinned_max_memory():
    """max_memory() read once for the block (the executor's op loop)."""
    return _max_memory.pinned()


class MemoryUse:
    """Bytes one part of a command holds (an import's constants, a run's live tensors, decoded
    images), checked against max_memory() before each new allocation. `start`: bytes an outer
    use already holds (a control-flow body runs inside an inference)."""

    def __init__(self, holder: str, start: int = 0):
        self.holder = holder
        self.held = int(start)

    def check(self, nbytes: int, what: str, location=None) -> None:
        """Refuses `what` (nbytes more) if it would take the use past the budget."""
        limit = max_memory()
        if self.held + nbytes > limit:
            raise DataError(
                f"{what} would take {format_bytes(nbytes)} more, with {format_bytes(self.held)} already "
                f"held by {self.holder}: over the {format_bytes(limit)} memory budget of this command",
                location=location,
                hint=f"if this is intended, raise the budget with --max-memory or the {MAX_MEMORY_ENV} "
                     f"environment variable (e.g. 32G; the default is half of the memory this process "
                     f"may use)")

    def add(self, nbytes: int) -> None:
        self.held += int(nbytes)

    def remove(self, nbytes: int) -> None:
        self.held -= int(nbytes)


_active_use: contextvars.ContextVar[MemoryUse | None] = contextvars.ContextVar("qsim_memory_use", default=None)


def active_use() -> MemoryUse | None:
    """The MemoryUse check_tensor_size consults now, if any."""
    return _active_use.get()


@contextlib.contextmanager
def counting(use: MemoryUse):
    """Makes `use` the one check_tensor_size consults inside the block (and the budget pinned)."""
    token = _active_use.set(use)
    try:
        with pinned_max_memory():
            yield use
    finally:
        _active_use.reset(token)


def format_bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def check_tensor_size(shape, itemsize: int, what: str, location=None) -> int:
    """Refuses a tensor of `shape` with `itemsize`-byte elements if it exceeds the limit.

    `shape` may hold any Python ints (negative or huge extents are refused too); the product
    is computed in Python integers, so it never wraps. Inside `counting(use)`, a tensor that
    would take `use` past the memory budget is refused too. Returns the size in bytes.
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
    use = _active_use.get()
    if use is not None:
        use.check(size, f"{what} of shape {list(shape)}", location)
    return size
