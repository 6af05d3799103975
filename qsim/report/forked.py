"""Two halves of a list of independent renderings at once, in this process and a forked child.

A report's plots cost the same whatever the network (~0.2 s of CPU each, qsim.report.layer_plots),
so on a fast simulation they are a visible part of the command; on two cores the child draws
half of them while this process draws the rest. Only where a fork is safe: no thread but
this one and the idle ones below (a lock another thread held at the fork would stay locked
in the child forever; a command on a Dask LocalCluster has the client's threads, and renders
in turn). Whatever
goes wrong in the child (an exception, a signal, a short answer) only costs time: this
process renders the child's half itself, so the result never depends on the fork.
"""
from __future__ import annotations

import os
import pickle
import threading
from typing import Callable, Sequence


# Threads that may be alive at a fork. qsim.threads' kernel pool ("qsim_N"): idle while this
# thread renders, since only the thread that calls a kernel submits work to it (and a forked
# child forgets the pool, qsim.threads._forget_pool_in_child). qsim.npu.simulate's import of
# matplotlib ("qsim-preload-plotting"): waited for, as the rendering needs it anyway.
IDLE_POOL_PREFIX = "qsim_"
PRELOAD_THREAD = "qsim-preload-plotting"


def can_fork() -> bool:
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return False
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    for thread in others:
        if thread.name == PRELOAD_THREAD:
            thread.join(timeout=60.0)
    return all(not t.is_alive() or t.name.startswith(IDLE_POOL_PREFIX) for t in others)


def render_all(items: Sequence, render: Callable[[object], dict[str, bytes]]) -> dict[str, bytes]:
    """The merged `render(item)` of every item (file name -> bytes), in the order of `items`."""
    if len(items) < 2 or not can_fork():
        return _in_turn(items, render)
    half = len(items) // 2
    mine, theirs = items[:half], items[half:]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child: render, send, leave at once
        code = 1
        try:
            os.close(read_end)
            data = pickle.dumps(_in_turn(theirs, render))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
            code = 0
        finally:
            os._exit(code)                          # no atexit handlers, no stdio flush of the parent's
    os.close(write_end)
    done = _in_turn(mine, render)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        try:
            return {**done, **pickle.loads(data)}
        except (pickle.UnpicklingError, EOFError, ValueError):
            pass
    return {**done, **_in_turn(theirs, render)}


def _in_turn(items: Sequence, render: Callable[[object], dict[str, bytes]]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for item in items:
        out.update(render(item))
    return out
