"""Renderings split between this process and a forked child (qsim.report.forked): the same result
as in turn, the child's half really drawn elsewhere, and a failing child costing only time."""
import os

import pytest

from qsim.report import forked

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
PARENT = os.getpid()


def _render(item):
    return {f"{item}.bin": f"{item}:{os.getpid() == PARENT}".encode()}


def test_the_child_draws_the_second_half_and_the_result_keeps_the_order(monkeypatch):
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    items = ["a", "b", "c", "d", "e"]
    out = forked.render_all(items, _render)
    assert list(out) == [f"{i}.bin" for i in items]
    assert [out[f"{i}.bin"] for i in items] == [b"a:True", b"b:True", b"c:False", b"d:False", b"e:False"]


def _fails_in_the_child(item):
    if os.getpid() != PARENT:
        raise RuntimeError("the child fails")
    return _render(item)


def test_a_failing_child_only_costs_time(monkeypatch):
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    out = forked.render_all(["a", "b", "c"], _fails_in_the_child)
    assert out == {"a.bin": b"a:True", "b.bin": b"b:True", "c.bin": b"c:True"}


def test_no_fork_with_other_threads_but_the_kernel_pool_or_one_item(monkeypatch):
    import threading
    stop_helper, stop_pool = threading.Event(), threading.Event()
    helper = threading.Thread(target=stop_helper.wait, name="helper")
    idle_pool = threading.Thread(target=stop_pool.wait, name="qsim_7")   # qsim.threads' kernel pool
    helper.start()
    idle_pool.start()
    # only these threads count: earlier tests in this process may leave their own (Dask's, a pool's)
    monkeypatch.setattr(forked.threading, "enumerate", lambda: [threading.current_thread(), helper, idle_pool])
    try:
        assert not forked.can_fork()
        stop_helper.set()
        helper.join()
        assert idle_pool.is_alive()
        assert forked.can_fork() == ((os.cpu_count() or 1) > 1)
    finally:
        stop_helper.set()
        stop_pool.set()
        helper.join()
        idle_pool.join()
    monkeypatch.setattr(forked, "can_fork", lambda: True)
    assert forked.render_all(["a"], _render) == {"a.bin": b"a:True"}
