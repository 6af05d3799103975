"""A setting read from the environment on every call, or once for a block of calls.

The executor asks for the thread count and the tensor-size limit a few times per op; each
asks os.environ (2-3 us a lookup). `PinnedSetting.pinned()` reads the setting once at the start
of a block (one inference) and answers from that inside it: a cache of the environment's value,
so a change inside the block applies from the next block on. An inner block keeps the outer
value (a control-flow body's run inside an inference); another Python thread that ends its
block sooner only sends the lookups back to the environment (never a wrong value).
"""
from __future__ import annotations

import contextlib
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class PinnedSetting(Generic[T]):
    def __init__(self, read: Callable[[], T]):
        self._read = read
        self._value: T | None = None

    def get(self) -> T:
        value = self._value
        return self._read() if value is None else value

    @contextlib.contextmanager
    def pinned(self) -> Iterator[None]:
        if self._value is not None:
            yield
            return
        self._value = self._read()
        try:
            yield
        finally:
            self._value = None
