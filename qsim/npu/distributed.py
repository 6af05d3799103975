"""Where the NPU's independent work runs: in this process, or as tasks on dask.distributed.

A `Task` is a module-level function and its arguments (both picklable), so the same task
runs unchanged in this process or on any worker; results come back in submission order,
so a run's outcome never depends on which worker finished first.

- `InProcess` (one worker): runs the tasks in order, here; no cluster, nothing to start.
- `DaskPool`: a `LocalCluster` of worker processes (the engines hold the GIL, so threads
  would not overlap), or the cluster behind an existing scheduler address. On Linux the
  local workers are forked from this process: they start with qsim, numpy, the engines and
  the Verilator builds this process already looked up, in ~0.5 s for two workers instead of
  ~5 s for spawned ones that import all of it again (measured, docs/scale.md). A task that
  raises an unexpected exception is resubmitted `TASK_RETRIES` times; a task whose worker
  process dies is rescheduled by the scheduler (up to `distributed.scheduler.allowed-failures`
  deaths). A `QsimError` (a mismatch, an unsupported layer) is deterministic: it is returned
  as a value and raised here once, never retried.
"""
from __future__ import annotations

import os
import sys
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..errors import QsimError, UnsupportedError, UsageError

SCHEDULER_ENV = "QSIM_SCHEDULER"
TASK_RETRIES = 2
IN_FLIGHT_PER_WORKER = 4        # tasks submitted ahead per worker: keeps every worker fed
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Task:
    fn: Callable[..., Any]      # module-level, so workers import it by name
    args: tuple
    label: str                  # names the task in Dask's dashboard and logs
    cost: float = 0.0           # relative work estimate: a pool starts the costliest tasks first


@dataclass(frozen=True)
class _Failed:
    """A task's QsimError carried back as a value (so Dask does not retry it)."""
    error: QsimError


def _call(fn: Callable, args: tuple) -> Any:
    try:
        return fn(*args)
    except QsimError as error:
        return _Failed(error)


def _unwrap(value: Any) -> Any:
    if isinstance(value, _Failed):
        raise value.error
    return value


class InProcess:
    """Runs every task here, in order: the `--workers 1` path."""
    workers = 1
    what = "in this process"

    def run(self, tasks: list[Task], on_done: Callable[[], None] | None = None) -> list:
        results = []
        for task in tasks:
            results.append(_unwrap(_call(task.fn, task.args)))
            if on_done is not None:
                on_done()
        return results


class DaskPool:
    """Runs tasks on a dask.distributed cluster through `client`."""

    def __init__(self, client, what: str):
        self.client = client
        self.what = what                # for progress lines: "LocalCluster of 2 worker processes"

    @property
    def workers(self) -> int:
        return max(1, len(self.client.nthreads()))

    def run(self, tasks: list[Task], on_done: Callable[[], None] | None = None) -> list:
        from distributed import KilledWorker, as_completed
        # At most IN_FLIGHT_PER_WORKER tasks per worker are submitted at a time: a task carries
        # its own data (no scattered inputs, so a task whose worker died can be rerun anywhere
        # from the scheduler's copy), and a large sweep's data must not all wait in the
        # scheduler's memory. Results are fetched as tasks finish and stored by index, so the
        # outcome (and which of several failures is raised) does not depend on timing.
        # Unique keys: Dask must never merge two tasks of different runs; the label keeps
        # the dashboard readable.
        # Costliest first (longest-processing-time order): a long task started last would
        # leave the other workers idle while it finishes. Ties keep submission order.
        results: list = [None] * len(tasks)
        queue = iter(sorted(range(len(tasks)), key=lambda i: -tasks[i].cost))
        running = as_completed(loop=self.client.loop, with_results=False)
        index_of = {}

        def submit_next() -> None:
            i = next(queue, None)
            if i is not None:
                t = tasks[i]
                future = self.client.submit(_call, t.fn, t.args, key=f"{t.label}-{uuid.uuid4().hex}",
                                            retries=TASK_RETRIES, pure=False)
                index_of[future.key] = i
                running.add(future)

        for _ in range(max(1, self.workers) * IN_FLIGHT_PER_WORKER):
            submit_next()
        try:
            for future in running:
                results[index_of.pop(future.key)] = future.result()
                future.release()
                if on_done is not None:
                    on_done()
                submit_next()
        except KilledWorker as error:
            raise UnsupportedError(f"a simulation task killed every Dask worker that ran it ({error})",
                                   hint="a worker may run out of memory: use fewer --workers per "
                                        "machine, or more memory per worker") from None
        finally:
            running.clear()
        return [_unwrap(r) for r in results]


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def scheduler_address(scheduler: str | None) -> str | None:
    """The Dask scheduler to use: `scheduler`, else $QSIM_SCHEDULER, else None (local)."""
    return scheduler or os.environ.get(SCHEDULER_ENV) or None


@contextmanager
def open_pool(workers: int | None = None, scheduler: str | None = None) -> Iterator[InProcess | DaskPool]:
    """The pool a command runs its tasks on: `scheduler` (or $QSIM_SCHEDULER) names an existing
    Dask cluster; else `workers` processes (default: one per core) on a LocalCluster, or this
    process alone for one worker."""
    scheduler = scheduler_address(scheduler)
    if workers is not None and workers < 1:
        raise UsageError(f"--workers {workers}: need at least 1", hint="--workers 1 runs in this process")
    if scheduler is None and (workers or default_workers()) == 1:
        yield InProcess()
        return
    try:
        from distributed import Client
    except ImportError:
        raise UsageError("parallel simulation needs dask.distributed",
                         hint='pip install "dask[distributed]", or run with --workers 1') from None
    if scheduler is not None:
        if "://" not in scheduler:
            raise UsageError(f"Dask scheduler address {scheduler!r} has no protocol",
                             hint="give it as tcp://HOST:PORT")
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as error:
            raise UsageError(f"cannot reach the Dask scheduler at {scheduler} ({error})",
                             hint=f"start one with `dask scheduler` and `dask worker {scheduler}`, or "
                                  f"unset {SCHEDULER_ENV} and drop --scheduler to use local workers") from None
        with client:
            yield DaskPool(client, f"Dask cluster at {scheduler}")
        return
    count = workers or default_workers()
    client = _start_local_cluster(count)
    try:
        yield DaskPool(client, f"LocalCluster of {count} worker processes")
    finally:
        client.close()
        client.cluster.close()


def _start_local_cluster(count: int):
    """A client of a new LocalCluster (`client.cluster`) of `count` one-thread worker processes.
    On Linux the workers are forked (module docstring). Forking is safe here because the start
    is synchronous: this process's other threads (the cluster's event loop, which forks) hold
    no lock the children could inherit locked, as the calling thread only waits. A worker the
    nanny restarts later (after it died) is spawned as Dask's configuration says."""
    import logging

    import dask
    from distributed import Client, LocalCluster
    method = "fork" if sys.platform.startswith("linux") else \
        dask.config.get("distributed.worker.multiprocessing-method")
    try:
        # dashboard on any free port: the scheduler serves HTTP anyway, and two commands (or
        # test runs) on one machine must not fight over the default 8787
        with dask.config.set({"distributed.worker.multiprocessing-method": method}):
            cluster = LocalCluster(n_workers=count, threads_per_worker=1, processes=True,
                                   dashboard_address=":0", silence_logs=logging.ERROR)
    except (RuntimeError, OSError, TimeoutError) as error:
        raise UnsupportedError(f"could not start a local Dask cluster of {count} worker processes ({error})",
                               hint="run in this process with --workers 1; from a script, start the "
                                    "cluster under `if __name__ == \"__main__\":`") from None
    return Client(cluster)
