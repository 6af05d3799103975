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
  as a value and raised here once, never retried. An existing cluster is the user's: it is
  checked before any work (check_cluster: its scheduler and workers import this qsim code,
  a worker is there), its loss of every worker during a run ends the run after WORKER_WAIT_S
  (_WorkerWatch) instead of Dask's endless wait, and qsim never closes it.

Follow-ups (`FollowUp`): work that needs some tasks' results (a sweep point's report, once its
layers are in) is made here as soon as those results arrive and runs while the other tasks
still do: no barrier between phases. Shared arguments (`Task.shared`): the values many tasks
pass (a network's golden tensors and layer weights, the same for every sweep point) go to a
worker once, not once per task. On a Dask worker a task computes on one thread
(qsim.threads): the workers are the parallelism, and a worker's kernels or BLAS spreading over
all cores would fight the other workers for them.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import os
import sys
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..errors import QsimError, UnsupportedError, UsageError
from ..version import __version__
from .local_cluster import check_worker_count, default_workers, local_cluster
from .scheduler_address import check_address, probe_scheduler
from .shared_arguments import SHARE_MIN_BYTES, Ref, SharedArguments, bundle, map_shared  # noqa: F401 # re-exported: Task.shared is documented with it

SCHEDULER_ENV = "QSIM_SCHEDULER"
TASK_RETRIES = 2
IN_FLIGHT_PER_WORKER = 4        # tasks submitted ahead per worker: keeps every worker fed
CONNECT_TIMEOUT_S = 10.0
WORKER_WAIT_S = 60.0            # how long a command waits for an existing cluster's first worker


@dataclass(frozen=True)
class Task:
    fn: Callable[..., Any]      # module-level, so workers import it by name
    args: tuple
    label: str                  # names the task in Dask's dashboard and logs
    cost: float = 0.0           # relative work estimate: a pool starts the costliest tasks first
    # positions in `args` of large read-only values that other tasks of the run pass too (the
    # same object): a pool sends each distinct one to a worker once. A list or tuple there is
    # shared element by element; None and arrays under SHARE_MIN_BYTES travel with the task.
    shared: tuple[int, ...] = ()


@dataclass(frozen=True)
class FollowUp:
    """Tasks made, in the calling process, from the results of the tasks at `needs` (indices
    into the run's tasks) as soon as all of them are in. `make` gets those results in the order
    of `needs`. Follow-ups are made in list order, each after those before it that became
    ready at the same moment; a follow-up whose needed task failed is not made."""
    needs: Sequence[int]
    make: Callable[[list], list[Task]]


@dataclass(frozen=True)
class _Failed:
    """A task's QsimError carried back as a value (so Dask does not retry it)."""
    error: QsimError


def _call(fn: Callable, args: tuple) -> Any:
    try:
        return fn(*args)
    except QsimError as error:
        return _Failed(error)


_worker_threads_set_in: int | None = None     # the pid whose compute threads are set to one


def _call_on_worker(fn: Callable, args: tuple, shared: tuple[int, ...] = (), bundle: tuple = (),
                    code: tuple | None = None, kept: tuple = ()) -> Any:
    """`_call` on a Dask worker, with the `Ref`s at positions `shared` of `args` replaced by
    the values of the run's `bundle` or of the pool's `kept` bundle (which Dask resolved from
    their futures: a worker fetches each once and keeps it while the future lives: the run for
    `bundle`, the whole `keep` block for `kept`). One compute thread (module docstring), set once per
    process (a restarted worker is a new process). `code` is the submitting command's
    code_identity(): a worker that joined an existing cluster after the command checked it
    (check_cluster) and runs other qsim code fails the task with a clear error instead of
    computing results the serial run might not give."""
    if code is not None and code_identity()[:2] != code[:2]:
        return _Failed(_other_code_error(_this_worker(), code_identity(), code))
    global _worker_threads_set_in
    if _worker_threads_set_in != os.getpid():
        from ..threads import set_threads       # deferred: only worker processes need it
        set_threads(1)
        _worker_threads_set_in = os.getpid()
    if shared:
        args = map_shared(args, shared, lambda v: ((kept if v.kept else bundle)[v.index]
                                                   if isinstance(v, Ref) else v))
    return _call(fn, args)


def _unwrap(value: Any) -> Any:
    if isinstance(value, _Failed):
        raise value.error
    return value


def _make(follow: FollowUp, results: list) -> list[Task] | _Failed:
    try:
        return follow.make([results[i] for i in follow.needs])
    except QsimError as error:          # raised in its turn, after the tasks' own failures
        return _Failed(error)


def _raise_first_failure(results: list, later: list) -> None:
    """The first failure in canonical order (the tasks by index, then each follow-up's making
    and its tasks): the serial run stops at the same one."""
    for value in results:
        _unwrap(value)
    for made in later:
        for value in _unwrap(made):
            _unwrap(value)


class InProcess:
    """Runs every task here, in order: the `--workers 1` path."""
    workers = 1
    what = "in this process"
    same_machine = True         # the tasks see this machine's files (its Verilator build cache)

    def warm_up(self, fn: Callable[[], Any]) -> None:
        """Nothing to do: this process does the work itself, when it comes to it."""

    @contextmanager
    def keep(self, *values: Any) -> Iterator[None]:
        """Nothing to send: the tasks run here, on the values themselves (DaskPool.keep)."""
        yield

    def run(self, tasks: list[Task], on_done: Callable[[], None] | None = None) -> list:
        return self.run_with_follow_ups(tasks, (), on_done)[0]

    def run_stream(self, tasks: Iterable[Task], on_done: Callable[[], None] | None = None) -> list:
        """run, taking each task from the iterable when it comes to it (DaskPool.run_stream)."""
        return self.run_with_follow_ups(tasks, (), on_done)[0]

    def run_with_follow_ups(self, tasks: Iterable[Task], follow_ups: Sequence[FollowUp] = (),
                            on_done: Callable[[], None] | None = None) -> tuple[list, list[list]]:
        """The tasks' results in order, and each follow-up's tasks' results."""
        results = []
        for task in tasks:
            results.append(_unwrap(_call(task.fn, task.args)))
            if on_done is not None:
                on_done()
        later = []
        for follow in follow_ups:
            made = []
            for task in _unwrap(_make(follow, results)):
                made.append(_unwrap(_call(task.fn, task.args)))
                if on_done is not None:
                    on_done()
            later.append(made)
        return results, later


class DaskPool:
    """Runs tasks on a dask.distributed cluster through `client`."""

    def __init__(self, client, what: str, same_machine: bool):
        self.client = client
        self.what = what                # for progress lines: "LocalCluster of 2 worker processes"
        # the workers are this machine's processes (a LocalCluster): they share its Verilator
        # build cache, so a build the command makes first is one they all reuse; an existing
        # cluster's workers may be anywhere, and build in their own machine's cache
        self.same_machine = same_machine
        self.warming: list = []         # warm-up futures, held so that Dask does not drop them
        self._kept: SharedArguments | None = None

    @contextmanager
    def keep(self, *values: Any) -> Iterator[None]:
        """Within the block, every run's tasks that pass one of `values` (by identity, at a
        Task.shared position) refer to one copy sent to the cluster when the block starts, not
        to a copy sent again with each run: a job that runs its tasks in rounds (to bound the
        data in flight, qsim.quant.evaluation.distributed) ships its model once. A worker
        fetches the copy on its first such task and holds it until the block ends. Blocks do
        not nest."""
        if self._kept is not None:
            raise RuntimeError("DaskPool.keep blocks do not nest")
        self._kept = SharedArguments(self.client, [Task(bundle, values, "kept", shared=tuple(range(len(values))))],
                                     TASK_RETRIES)
        try:
            yield
        finally:
            self._kept.release()
            self._kept = None

    def warm_up(self, fn: Callable[[], Any]) -> None:
        """Runs `fn` (module-level, no arguments: e.g. importing a library the tasks will need)
        once on every worker now, ahead of any task, without waiting for it: the workers do it
        while this process still prepares the tasks."""
        for address in self.client.nthreads():
            self.warming.append(self.client.submit(fn, key=f"warm-up-{uuid.uuid4().hex}", pure=False,
                                                   workers=[address], allow_other_workers=False))

    @property
    def workers(self) -> int:
        return max(1, len(self.client.nthreads()))

    def run(self, tasks: list[Task], on_done: Callable[[], None] | None = None) -> list:
        return self.run_with_follow_ups(tasks, (), on_done)[0]

    def run_stream(self, tasks: Iterable[Task], on_done: Callable[[], None] | None = None) -> list:
        """The results of `tasks`, an iterable the run takes a task from only when a worker
        has room for one (IN_FLIGHT_PER_WORKER each): a job too large to hold all at once
        (an evaluation's samples) streams through in a bounded memory, without the idle tail
        of a barrier between rounds. In the iterable's order, costs not looked at; the shared
        values of its tasks are those of the `keep` block around it (others travel with
        each task)."""
        return self.run_with_follow_ups(iter(tasks), (), on_done)[0]

    def run_with_follow_ups(self, tasks: Sequence[Task] | Iterator[Task], follow_ups: Sequence[FollowUp] = (),
                            on_done: Callable[[], None] | None = None) -> tuple[list, list[list]]:
        from distributed import CancelledError, KilledWorker, as_completed
        # At most IN_FLIGHT_PER_WORKER tasks per worker are submitted at a time: a large
        # sweep's data must not all wait in the scheduler's memory. Results are fetched as
        # tasks finish and stored by index, so the outcome (and which of several failures is
        # raised) does not depend on timing.
        # Unique keys: Dask must never merge two tasks of different runs; the label keeps
        # the dashboard readable.
        # Costliest first (longest-processing-time order): a long task started last would
        # leave the other workers idle while it finishes. Ties keep submission order.
        # Follow-up tasks skip the queue (and run before queued work on their worker): they
        # were made from results, so the work they finish is what the run waits for.
        results: list = [None] * len(tasks) if isinstance(tasks, Sequence) else []
        later: list = [None] * len(follow_ups)
        missing = [set(f.needs) for f in follow_ups]
        waiting_on: dict[int, list[int]] = {}
        for j, follow in enumerate(follow_ups):
            for i in follow.needs:
                waiting_on.setdefault(i, []).append(j)
        if isinstance(tasks, Sequence):
            queue = ((i, tasks[i]) for i in sorted(range(len(tasks)), key=lambda i: -tasks[i].cost))
        else:       # a stream (run_stream): made as the run takes them, results appended
            queue = enumerate(tasks)
        running = as_completed(loop=self.client.loop, with_results=False)
        shared = SharedArguments(self.client, tasks if isinstance(tasks, Sequence) else [], TASK_RETRIES,
                                 self._kept)
        code = code_identity()
        place = {}                      # future key -> (index of task, None) or (follow-up, position)

        def submit(task: Task, where: tuple, priority: int = 0) -> None:
            args, positions, bundle, kept = shared.args_of(task)
            future = self.client.submit(_call_on_worker, task.fn, args, positions, bundle, code, kept,
                                        key=f"{task.label}-{uuid.uuid4().hex}", retries=TASK_RETRIES,
                                        pure=False, priority=priority)
            place[future.key] = where
            running.add(future)

        def submit_next() -> None:
            i, task = next(queue, (None, None))
            if task is not None:
                if i == len(results):
                    results.append(None)
                submit(task, (i, None))

        def make_ready(ready: list[int]) -> None:
            for j in sorted(ready):
                made = later[j] = _make(follow_ups[j], results)
                if isinstance(made, _Failed):
                    continue
                later[j] = [None] * len(made)
                for k, task in enumerate(made):
                    submit(task, (j, k), priority=1)

        make_ready([j for j, need in enumerate(missing) if not need])
        for _ in range(max(1, self.workers) * IN_FLIGHT_PER_WORKER):
            submit_next()
        watch = _WorkerWatch(self.client, self.what, running,
                             hint=f"start workers with `dask worker {self.client.scheduler.address}`"
                             if not self.same_machine else "a local worker died and its nanny could "
                             "not restart it (see the messages above): try fewer --workers")
        try:
            for future in running:
                i, k = place.pop(future.key)
                value = future.result()
                future.release()
                if k is not None:
                    later[i][k] = value
                else:
                    results[i] = value
                    submit_next()
                    ready = []
                    for j in waiting_on.get(i, ()):
                        missing[j].discard(i)
                        if not missing[j] and not any(isinstance(results[n], _Failed)
                                                      for n in follow_ups[j].needs):
                            ready.append(j)
                    make_ready(ready)
                if on_done is not None:
                    on_done()
        except KilledWorker as error:
            raise UnsupportedError(f"a simulation task killed every Dask worker that ran it ({error})",
                                   hint="a worker may run out of memory: use fewer --workers per "
                                        "machine, or more memory per worker") from None
        except CancelledError as error:
            if watch.gave_up is not None:       # it cancelled the tasks
                raise watch.gave_up from None
            # Dask cancels every task of a client that lost its scheduler (after trying to
            # reconnect for distributed.comm.timeouts.connect)
            reason = getattr(error, "reason", None) or "cancelled"
            raise UnsupportedError(f"the {self.what} dropped this run's tasks ({reason})",
                                   hint="the scheduler stopped, or the network to it failed; nothing "
                                        "was written: run the command again") from None
        finally:
            watch.stop()
            running.clear()
            shared.release()
        _raise_first_failure(results, [made if made is not None else [] for made in later])
        return results, later


@contextmanager
def _quiet_client_log() -> Iterator[None]:
    """Dask's client logs its failed reconnects to a lost scheduler with tracebacks; the run
    then fails with its own message (DaskPool.run_with_follow_ups), which says it better."""
    import logging
    log = logging.getLogger("distributed.client")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


class _WorkerWatch:
    """Watches, from a thread, that the cluster of a run has workers. Dask keeps tasks waiting
    for one forever (every worker died and none restarts: --no-nanny workers, a nanny that
    cannot start its worker, machines gone); after WORKER_WAIT_S without any worker, this
    cancels the run's tasks (`running`, an as_completed) and keeps the error for the run loop
    to raise (`gave_up`). Says on stderr when it starts waiting. One scheduler query per
    second while the run lasts."""

    def __init__(self, client, what: str, running, hint: str):
        import threading
        self.client, self.what, self.running, self.hint = client, what, running, hint
        self.gave_up: UnsupportedError | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="qsim-worker-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import time
        poll = min(1.0, WORKER_WAIT_S / 4)
        since = None
        while not self._stopped.wait(poll):
            try:
                workers = worker_count(self.client)
            except Exception:           # a lost scheduler: the run loop reports that itself
                return
            if workers:
                since = None
                continue
            if since is None:
                since = time.monotonic()
                print(f"qsim: no worker left in the {self.what}: waiting up to {WORKER_WAIT_S:g} s "
                      "for one", file=sys.stderr, flush=True)
            elif time.monotonic() - since >= WORKER_WAIT_S:
                self.gave_up = UnsupportedError(f"no worker left in the {self.what} for {WORKER_WAIT_S:g} s",
                                                hint=f"{self.hint}, and run the command again")
                with self.running.lock:         # the run loop adds futures meanwhile
                    futures = list(self.running.futures)
                self.client.cancel(futures)
                return

    def stop(self) -> None:
        self._stopped.set()
        # not longer: a query to a lost scheduler can take the connect timeout, and the thread
        # (a daemon) ends by itself after it
        self._thread.join(timeout=2.0)


def worker_count(client) -> int:
    """The workers the scheduler has now. Not len(scheduler_info()["workers"]): the client's
    periodic refresh stores an identity without the per-worker entries, which a query from
    another thread can read (a run of ResNet-18 was told "no worker left" while both worked)."""
    info = client.scheduler_info()
    return int(info.get("n_workers", len(info.get("workers") or ())))


def scheduler_address(scheduler: str | None) -> str | None:
    """The Dask scheduler to use: `scheduler`, else (None) $QSIM_SCHEDULER, else None (local).
    An empty `scheduler` means local workers whatever the environment says (the CLI's explicit
    --workers N)."""
    if scheduler is not None:
        return scheduler or None
    return os.environ.get(SCHEDULER_ENV) or None


@contextmanager
def open_pool(workers: int | None = None, scheduler: str | None = None) -> Iterator[InProcess | DaskPool]:
    """The pool a command runs its tasks on: `scheduler` (or, None, $QSIM_SCHEDULER; "": local
    whatever the environment says) names an existing Dask cluster; else `workers` processes
    (default: one per core, at most local_cluster's cap) on a LocalCluster, or this process
    alone for one worker. Both are checked before Dask is imported."""
    where = "--scheduler" if scheduler else f"${SCHEDULER_ENV}"
    scheduler = scheduler_address(scheduler)
    address = check_address(scheduler, where) if scheduler is not None else None
    if workers is not None:
        check_worker_count(workers)
    if address is None and (workers or default_workers()) == 1:
        yield InProcess()
        return
    try:
        from distributed import Client
    except ImportError:
        raise UsageError("parallel simulation needs dask.distributed",
                         hint='pip install "dask[distributed]", or run with --workers 1') from None
    if address is None:
        count = workers or default_workers()
        with local_cluster(count) as client:
            yield DaskPool(client, f"LocalCluster of {count} worker processes", same_machine=True)
        return
    # Dask trusts the first bytes of its peer (the length of a message it allocates): only a
    # peer that greets as a scheduler does reaches distributed.Client
    probe_scheduler(address, CONNECT_TIMEOUT_S)
    scheduler = address.url
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as error:
        raise UsageError(f"cannot reach the Dask scheduler at {scheduler} ({error})",
                         hint=f"start one with `dask scheduler` and `dask worker {scheduler}`, or "
                              f"unset {SCHEDULER_ENV} and drop --scheduler to use local workers") from None
    with _quiet_client_log(), client:       # the client closes (and logs) inside
        try:
            check_cluster(client, scheduler)
        except OSError as error:            # Dask's CommClosedError is one
            raise UnsupportedError(f"lost the connection to the Dask scheduler at {scheduler} ({error})",
                                   hint="the scheduler stopped, or the network to it failed") from None
        yield DaskPool(client, f"Dask cluster at {scheduler}", same_machine=False)


# -- an existing cluster: is anyone there, and do they run this qsim? ---------------------------

@functools.lru_cache(maxsize=None)
def code_identity() -> tuple[str, str, str]:
    """(qsim's version, a digest of its Python sources, where they are) of this process. Two
    processes with the same version and digest run the same qsim code, so a task gives the
    same result in either; the version alone does not say that (a development checkout keeps
    its version through every change). The digest covers qsim's and qsim.hw's .py files by
    their path in the package (an editable install maps hw/ into qsim.hw, a wheel has it in
    qsim/hw/: both give the same digest): 240 files, ~6 ms, once per process."""
    # found, not imported by name: qsim.hw is the NPU's layer, above this one (tests/test_layering.py)
    hw = importlib.import_module(__package__.rpartition(".")[0] + ".hw")
    roots = [("qsim", Path(__file__).parent.parent), ("qsim/hw", Path(hw.__file__).parent)]
    return __version__, _source_digest(roots), str(roots[0][1])


def _source_digest(roots: list[tuple[str, Path]]) -> str:
    """A digest of the .py files under each (package path, folder) of `roots`, each file named by
    its package path (so the digest does not depend on where the folders are; a file reached
    under two roots counts once)."""
    files: dict[str, Path] = {}
    for prefix, root in roots:
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            for name in names:
                if name.endswith(".py"):
                    path = Path(folder, name)
                    files[f"{prefix}/{path.relative_to(root).as_posix()}"] = path
    digest = hashlib.sha256()
    for name in sorted(files):
        data = files[name].read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())        # framed: no two file sets collide
        digest.update(data)
    return digest.hexdigest()[:12]


# Evaluated by the scheduler and the workers (as text, through the builtin eval): a process
# that cannot import qsim answers with the ImportError instead of failing to unpickle a probe.
_PROBE = "__import__('qsim.cluster.distributed', fromlist=['code_identity']).code_identity()"


def _this_worker() -> str:
    try:
        from distributed import get_worker         # deferred: only worker processes get here
        return f"Dask worker {get_worker().address}"
    except (ImportError, ValueError):               # not in a worker (a test calls the task here)
        return f"process {os.getpid()}"


def _other_code_error(who: str, theirs: tuple | None, ours: tuple) -> UsageError:
    """`theirs` None: a qsim from before code_identity (its probe found no such function)."""
    def described(identity: tuple | None) -> str:
        if identity is None:
            return "an older qsim (it has no code_identity)"
        version, digest, where = identity
        return f"qsim {version} from {where} (sources {digest})"
    return UsageError(f"{who} runs other qsim code than this command: {described(theirs)} there, "
                      f"{described(ours)} here",
                      hint="its results could differ from a serial run: start the scheduler and every "
                           "worker with the same qsim as this command (same version and sources)")


def _cannot_import_error(who: str, error: BaseException) -> UsageError:
    return UsageError(f"{who} cannot import qsim ({type(error).__name__}: {error})",
                      hint="the scheduler unpickles qsim's tasks and the workers run them: start "
                           "`dask scheduler` and every `dask worker` where the same qsim as this "
                           "command is installed (or on its PYTHONPATH)")


def check_cluster(client, address: str) -> None:
    """Before a command sends work to the existing cluster at `address`: its scheduler and
    every connected worker import the same qsim code as this process (code_identity), and at
    least one worker is there. With none, says so on stderr and waits up to WORKER_WAIT_S for
    one (a worker that joins later is checked by its first task, _call_on_worker); Dask itself
    would keep the tasks waiting forever, silently. Raises UsageError otherwise: a scheduler
    without qsim fails to unpickle every task, a worker without it dies on its first one."""
    ours = code_identity()
    try:
        theirs = client.run_on_scheduler(eval, _PROBE, {})
    except Exception as error:          # whatever the probe raised there, re-raised here by Dask
        theirs = error
    _check_answer(f"the Dask scheduler at {address}", theirs, ours)
    if not worker_count(client):
        print(f"qsim: no worker in the Dask cluster at {address} yet: waiting up to "
              f"{WORKER_WAIT_S:g} s for one", file=sys.stderr, flush=True)
        try:
            client.wait_for_workers(1, timeout=WORKER_WAIT_S)
        except TimeoutError:
            raise UsageError(f"no worker joined the Dask cluster at {address} within {WORKER_WAIT_S:g} s",
                             hint=f"start one with `dask worker {address}` (where qsim is installed), or "
                                  f"drop --scheduler (and unset {SCHEDULER_ENV}) to use local workers") from None
    for worker, answer in sorted(client.run(eval, _PROBE, {}, on_error="return").items()):
        _check_answer(f"Dask worker {worker}", answer, ours)


def _check_answer(who: str, answer: Any, ours: tuple) -> None:
    """Raises the UsageError for a process whose _PROBE gave `answer` (an identity, or the
    exception it raised), unless it runs the same qsim code as this one."""
    if isinstance(answer, ImportError):
        raise _cannot_import_error(who, answer)
    if isinstance(answer, AttributeError):      # a qsim from before code_identity
        raise _other_code_error(who, None, ours)
    if isinstance(answer, BaseException):
        raise UnsupportedError(f"{who} failed qsim's check of the cluster ({type(answer).__name__}: {answer})",
                               hint="see that process's log")
    if tuple(answer)[:2] != ours[:2]:
        raise _other_code_error(who, tuple(answer), ours)
