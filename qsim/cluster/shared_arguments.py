"""The shared arguments of a Dask pool's tasks (qsim.cluster.distributed.Task.shared): the large
read-only values many tasks pass (a network's weights, a model) sent to the cluster once, in one
bundle task, and each task's arguments with a `Ref` to the bundle in their place. A worker
fetches a bundle on its first task that needs it and keeps it while its future lives."""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

SHARE_MIN_BYTES = 64 * 1024     # smaller arrays travel inside their task, not worth a reference


@dataclass(frozen=True)
class Ref:
    """Stands for the shared value at `index` of the run's bundle in a task's arguments, or
    (`kept`) of the bundle the pool keeps across runs (DaskPool.keep)."""
    index: int
    kept: bool = False


def map_shared(args: tuple, shared: tuple[int, ...], fn: Callable[[Any], Any]) -> tuple:
    """`args` with `fn` applied to the values at positions `shared` (to each item of a list or
    tuple there: Task.shared)."""
    args = list(args)
    for i in shared:
        value = args[i]
        args[i] = type(value)(map(fn, value)) if isinstance(value, (list, tuple)) else fn(value)
    return tuple(args)


def bundle(*values: Any) -> tuple:
    """The task whose result is a run's shared values: the scheduler keeps its input, so a
    bundle lost with its worker is made again, like any task's result."""
    return values


class SharedArguments:
    """The shared arguments of a run's tasks (Task.shared): every distinct object (by identity)
    once in one bundle task, and each task's arguments with `Ref`s in their place. One task
    for all of them: each Dask task costs milliseconds of scheduler and client time, and a
    ResNet sweep shares ~40 values."""

    def __init__(self, client, tasks: Sequence, retries: int, kept: "SharedArguments | None" = None):
        """`tasks`: qsim.cluster.distributed.Task's (their `args` and `shared` are read)."""
        self.client = client
        self.index: dict[int, int] = {}
        self.kept = kept            # values kept across runs (DaskPool.keep): referred to, not sent
        values: list = []

        def collect(item: Any) -> None:
            if self._shareable(item) and id(item) not in self.index and not self._is_kept(item):
                self.index[id(item)] = len(values)
                values.append(item)       # kept alive (in the task) for the run: ids stay unique
        for task in tasks:
            map_shared(task.args, task.shared, collect)
        self.future = None
        if values:
            import dask      # deferred: only Dask pools get here
            # the bundle is large on purpose: it replaces the same data in every task
            with dask.config.set({"distributed.admin.large-graph-warning-threshold": "4GiB"}):
                self.future = client.submit(bundle, *values, key=f"shared-{uuid.uuid4().hex}",
                                            pure=False, retries=retries)

    @staticmethod
    def _shareable(value: Any) -> bool:
        return value is not None and not (isinstance(value, np.ndarray) and value.nbytes < SHARE_MIN_BYTES)

    def _is_kept(self, value: Any) -> bool:
        return self.kept is not None and id(value) in self.kept.index

    def _ref(self, value: Any) -> Any:
        if not self._shareable(value):
            return value
        if self._is_kept(value):
            return Ref(self.kept.index[id(value)], kept=True)
        if id(value) not in self.index:         # a streamed task's own value: it travels with it
            return value
        return Ref(self.index[id(value)])

    def args_of(self, task) -> tuple:
        """(args with Refs, shared positions, bundle future, kept bundle future) for
        _call_on_worker; a task refers to the kept bundle only when it passes a kept value."""
        if not task.shared or (self.future is None and self.kept is None):
            return task.args, (), (), ()
        args = map_shared(task.args, task.shared, self._ref)
        refs: list[Ref] = []
        map_shared(args, task.shared, lambda v: refs.append(v) if isinstance(v, Ref) else None)
        if not refs:
            return task.args, (), (), ()
        run = self.future if any(not r.kept for r in refs) else ()
        kept = self.kept.future if any(r.kept for r in refs) else ()
        return args, task.shared, run, kept

    def release(self) -> None:
        if self.future is not None:
            self.future.release()
