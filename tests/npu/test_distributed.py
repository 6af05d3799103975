"""Simulation tasks on dask.distributed: one real LocalCluster of 2 worker processes per module
(made by qsim's own open_pool), whose results must equal the serial in-process run exactly;
retries after a raised exception and after a killed worker; the --workers/--scheduler errors;
and an existing cluster started outside qsim (scheduler and worker subprocesses)."""
import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from qsim.cli import main
from qsim.errors import MismatchError, UnsupportedError, UsageError
from qsim.cluster import distributed, local_cluster
from qsim.npu.config import load_config
from qsim.cluster.distributed import DaskPool, FollowUp, InProcess, Task, open_pool
from qsim.npu.program import run_graph_on_npu
from qsim.quant.pipeline import embedded_quantized_model
from tests.npu.test_program import _faulty

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def pool():
    with open_pool(workers=2) as dask_pool:
        yield dask_pool


def test_open_pool_makes_a_cluster_of_worker_processes(pool):
    assert isinstance(pool, DaskPool) and pool.workers == 2
    pids = set(pool.client.run(os.getpid).values())
    assert len(pids) == 2 and os.getpid() not in pids


def test_local_workers_share_the_cores_for_their_kernels(pool, monkeypatch):
    """Each local worker's kernels take its share of the cores, not all of them (two workers
    each running every core's threads oversubscribed the machine)."""
    from qsim.threads import thread_count
    share = max(1, thread_count() // 2)
    assert set(pool.client.run(thread_count).values()) == {share}
    monkeypatch.setenv("QSIM_THREADS", "6")
    assert local_cluster.worker_threads(2) == 3 and local_cluster.worker_threads(4) == 1
    assert local_cluster.worker_threads(8) == 1


def _simulate(capsys, tmp_path, name, *argv):
    out = tmp_path / name
    code = main(["simulate", *argv, "-o", str(out)])
    text, err = capsys.readouterr()
    assert code == 0, text + err
    return out, err


def _reports(folder: Path) -> dict:
    """The report files (not the folder's .qsim-output.json, the list of the files written)."""
    return {p.relative_to(folder).as_posix(): json.loads(p.read_text()) for p in folder.rglob("*.json")
            if p.name != ".qsim-output.json"}


@pytest.mark.parametrize("engine,argv", [
    ("model", ["--config", "8x8", "--sweep", "size=8,16", "dataflow=ws,os"]),
    # clock_mhz is not hardware: both points reuse the one 16x16 build the suite makes anyway
    ("verilator", ["--config", "16x16", "--sweep", "clock_mhz=500,1000"]),
])
def test_sweep_on_the_cluster_equals_the_serial_run(pool, capsys, tmp_path, engine, argv):
    address = pool.client.scheduler.address
    serial, _ = _simulate(capsys, tmp_path, "serial", "--engine", engine, *argv, "--workers", "1", "-q")
    spread, err = _simulate(capsys, tmp_path, "dask", "--engine", engine, *argv, "--scheduler", address)
    got, want = _reports(spread), _reports(serial)
    points = len(want["sweep.json"]["points"])
    assert points in (2, 4) and len(want) == 1 + points       # sweep.json + one report.json each
    assert got == want
    assert all(p["all_verified"] for p in got["sweep.json"]["points"])
    # the progress counts tasks: per point one per array or vector layer (5 + 2 in the embedded
    # model) and one per part of its report (JSON/CSV/HTML, 4 plots), and one drawing sweep.png
    tasks = (5 + 2 + 5) * points + 1
    assert f"tasks: {tasks} steps" in err and f"tasks: {tasks} done" in err
    assert f"({engine}, Dask cluster at {address}) tasks" in err
    for name in ("compute_report.csv", "report.html", "cycles.png", "utilization.png", "roofline.png"):
        for point in got["sweep.json"]["points"]:
            folder = point["config"]["name"]
            assert (spread / folder / name).read_bytes() == (serial / folder / name).read_bytes(), name
    assert (spread / "sweep.png").read_bytes() == (serial / "sweep.png").read_bytes()


def _same_runs(a, b):
    assert [s.stage.name for s in a.stages] == [s.stage.name for s in b.stages]
    for x, y in zip(a.stages, b.stages):
        assert x.output.dtype == y.output.dtype
        np.testing.assert_array_equal(x.output, y.output, err_msg=x.stage.name)
        assert (x.cycles, x.start_cycle, x.verified, x.mismatch) == (y.cycles, y.start_cycle, y.verified,
                                                                    y.mismatch)


def test_layers_of_one_run_spread_over_workers_equal_the_serial_run(pool, embedded):
    graph, feeds, values = embedded
    config = load_config("8x8:os")
    serial = run_graph_on_npu(graph, feeds, config, engine="model", expected=values)
    done = []
    spread = run_graph_on_npu(graph, feeds, config, engine="model", expected=values, pool=pool,
                              on_task=lambda: done.append(1))
    _same_runs(serial, spread)
    assert spread.verified and len(done) == 7          # 5 array and 2 vector layers


def test_a_mismatch_on_a_worker_names_the_layer_and_first_element(pool, embedded):
    graph, feeds, values = embedded
    faulty = _faulty(graph)
    config = load_config("16x16")
    serial = run_graph_on_npu(faulty, feeds, config, engine="model", expected=values)
    spread = run_graph_on_npu(faulty, feeds, config, engine="model", expected=values, pool=pool)
    _same_runs(serial, spread)
    message = spread.first_mismatch.message()
    assert message == serial.first_mismatch.message()
    assert message.startswith("NPU mismatch in layer 'relu2' (tosa.CONV2D+RESCALE+CLAMP")
    assert f"index {list(serial.first_mismatch.index)}" in message
    # the mismatching layer keeps its per-program records (for --vcd); verified ones travel light
    records = {s.stage.name: len(s.layer.runs) for s in spread.stages if s.layer is not None}
    assert records.pop("relu2") > 0 and set(records.values()) == {0}


class _KillingPool:
    """Runs every task through `_die_once`, so the first task to start kills its worker."""

    def __init__(self, pool, marker):
        self.pool, self.marker = pool, str(marker)

    def run(self, tasks, on_done=None):
        wrapped = [Task(_die_once, (self.marker, t.fn, t.args), t.label) for t in tasks]
        return self.pool.run(wrapped, on_done)


def _die_once(marker, fn, args):
    if not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()))
        os._exit(3)                          # the worker process dies mid-task
    return fn(*args)


def test_a_task_whose_worker_died_is_rerun_and_the_result_is_right(pool, embedded, tmp_path):
    graph, feeds, values = embedded
    config = load_config("16x16")
    marker = tmp_path / "killed"
    spread = run_graph_on_npu(graph, feeds, config, engine="model", expected=values,
                              pool=_KillingPool(pool, marker))
    assert marker.exists()                   # a worker did die
    _same_runs(run_graph_on_npu(graph, feeds, config, engine="model", expected=values), spread)
    assert spread.verified
    pool.client.wait_for_workers(2, timeout=60)      # the nanny restarted it for the next tests


def test_more_tasks_than_the_submission_window_come_back_in_order(pool):
    count = 3 * 2 * distributed.IN_FLIGHT_PER_WORKER + 1
    done = []
    assert pool.run([Task(abs, (-i,), "n") for i in range(count)], lambda: done.append(1)) == list(range(count))
    assert len(done) == count


def _log_start(log, i):
    with open(log, "a") as f:
        f.write(f"{i}\n")
    return i


def test_costliest_tasks_start_first_and_results_keep_submission_order(pool, tmp_path):
    # costs ascend with the index, so submission order alone would start the cheapest first
    log = tmp_path / "started"
    window = pool.workers * distributed.IN_FLIGHT_PER_WORKER
    count = 3 * window
    tasks = [Task(_log_start, (str(log), i), "t", cost=float(i)) for i in range(count)]
    assert pool.run(tasks) == list(range(count))
    started = [int(line) for line in log.read_text().split()]
    assert sorted(started) == list(range(count))
    costliest = set(range(count - window, count))
    assert set(started[:pool.workers]) <= costliest
    assert InProcess().run(tasks[:3]) == [0, 1, 2]      # in this process: plain order


def _fail_once(marker, value):
    if not os.path.exists(marker):
        Path(marker).write_text("")
        raise OSError("transient failure")
    return value * 2


def _count_then_mismatch(marker):
    with open(marker, "a") as f:
        f.write("x")
    raise MismatchError("layer 'fc': differs", hint="look at the RTL")


def test_a_raised_exception_is_retried_but_a_qsim_error_is_not(pool, tmp_path):
    marker = tmp_path / "failed"
    assert pool.run([Task(_fail_once, (str(marker), 21), "flaky")]) == [42]
    assert marker.exists()
    counter = tmp_path / "calls"
    with pytest.raises(MismatchError) as caught:
        pool.run([Task(_count_then_mismatch, (str(counter),), "wrong")])
    assert caught.value.message == "layer 'fc': differs" and caught.value.hint == "look at the RTL"
    assert counter.read_text() == "x"        # deterministic: run once, not TASK_RETRIES + 1 times


def test_one_worker_runs_in_this_process_without_dask(tmp_path):
    with open_pool(workers=1) as in_process:
        assert isinstance(in_process, InProcess)
    folder = tmp_path / "fashion"
    from qsim.quant.qmodel import save_quantized_model
    from qsim.quant.tosa.target import TosaTarget
    save_quantized_model(embedded_quantized_model(), TosaTarget(), folder)
    code = textwrap.dedent(f"""
        import sys
        from qsim.cli import main
        assert main(["simulate", {str(folder)!r}, "--engine", "model", "--workers", "1", "-q",
                     "-o", {str(tmp_path / "out")!r}]) == 0
        assert "distributed" not in sys.modules, "dask was imported"
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["all_verified"] is True


@pytest.mark.parametrize("argv,message", [
    (["--workers", "0"], "--workers 0: need at least 1"),
    (["--scheduler", "localhost:8786"], "Dask scheduler address 'localhost:8786' has no protocol"),
    (["--scheduler", "tcp://127.0.0.1:1"], "cannot reach the Dask scheduler at tcp://127.0.0.1:1"),
])
def test_bad_workers_or_scheduler_is_a_usage_error(capsys, monkeypatch, tmp_path, argv, message):
    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT_S", 1.0)
    code = main(["simulate", "--engine", "model", *argv, "-q", "-o", str(tmp_path / "o")])
    _, err = capsys.readouterr()
    assert code == 2 and message in err and "hint:" in err
    assert not (tmp_path / "o").exists()


def test_the_scheduler_comes_from_the_environment(monkeypatch):
    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT_S", 1.0)
    monkeypatch.setenv(distributed.SCHEDULER_ENV, "tcp://127.0.0.1:1")
    with pytest.raises(UsageError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        with open_pool(workers=1):
            pass


def test_concurrent_builders_of_one_cache_entry_take_turns(tmp_path):
    """The second process asks for the build lock while the first holds it (signalled by a
    file) and must wait until the first is done: without the lock the log interleaves."""
    script = textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        os.environ["QSIM_CACHE_DIR"] = {str(tmp_path)!r}
        from qsim.npu.sim_verilator import _exclusive
        held, log = Path({str(tmp_path / "held")!r}), Path({str(tmp_path / "log")!r})
        if sys.argv[1] == "second":
            while not held.exists():
                time.sleep(0.02)
        with _exclusive("build-same"):
            with open(log, "a") as f:
                f.write(sys.argv[1] + "-start\\n"); f.flush()
                held.touch()
                time.sleep(1.0 if sys.argv[1] == "first" else 0)
                f.write(sys.argv[1] + "-end\\n")
    """)
    root = Path(__file__).resolve().parents[2]
    procs = [subprocess.Popen([sys.executable, "-c", script, role], cwd=root) for role in ("first", "second")]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    assert (tmp_path / "log").read_text().split() == ["first-start", "first-end", "second-start", "second-end"]


def test_a_local_cluster_that_cannot_start_is_a_clear_error(monkeypatch):
    import distributed as dask_distributed

    def refuse(**_):
        raise RuntimeError("Nanny failed to start.")
    monkeypatch.setattr(dask_distributed, "LocalCluster", refuse)
    with pytest.raises(UnsupportedError) as caught:
        with open_pool(workers=2) as dask_pool:
            dask_pool.run([Task(abs, (-1,), "never")])
    assert "could not start a local Dask cluster of 2 worker processes (Nanny failed to start.)" in str(caught.value)
    assert "--workers 1" in caught.value.hint


# -- follow-ups, shared arguments, warm-up ------------------------------------------------------

def _wait_for(marker, seconds=60.0):
    """Returns 'released' once `marker` exists, 'timed out' after `seconds`."""
    import time
    deadline = time.monotonic() + seconds
    while not os.path.exists(marker):
        if time.monotonic() > deadline:
            return "timed out"
        time.sleep(0.02)
    return "released"


def _touch(marker):
    Path(marker).write_text("")
    return "touched"


def test_a_follow_up_runs_while_other_tasks_still_run(pool, tmp_path):
    # task 1 waits until the follow-up of task 0 has run: with a barrier between the tasks and
    # their follow-ups it would wait for nothing and time out
    marker = str(tmp_path / "follow-up-ran")
    made = []

    def make(results):
        made.append(list(results))
        return [Task(_touch, (marker,), "touch")]

    results, later = pool.run_with_follow_ups(
        [Task(abs, (-5,), "quick", cost=0.0), Task(_wait_for, (marker,), "waiting", cost=1.0)],
        [FollowUp([0], make)])
    assert results == [5, "released"] and later == [["touched"]] and made == [[5]]


def _fail_with(text):
    raise MismatchError(text)


@pytest.mark.parametrize("in_process", [True, False])
def test_follow_ups_come_back_in_order_and_failures_are_raised_as_in_the_serial_run(pool, in_process):
    runner = InProcess() if in_process else pool
    tasks = [Task(abs, (-i,), "n", cost=float(i)) for i in range(6)]
    follow_ups = [FollowUp([4, 1], lambda r: [Task(abs, (-sum(r),), "sum"), Task(abs, (-1,), "one")]),
                  FollowUp(range(6), lambda r: [Task(abs, (-len(r),), "count")]),
                  FollowUp([], lambda r: [])]
    done = []
    results, later = runner.run_with_follow_ups(tasks, follow_ups, lambda: done.append(1))
    assert results == [0, 1, 2, 3, 4, 5] and later == [[5, 1], [6], []] and len(done) == 9
    # a task's failure comes first, and a follow-up of a failed task is not made
    def never(_):
        raise AssertionError("made from a failed task")
    with pytest.raises(MismatchError, match="task 2"):
        runner.run_with_follow_ups(tasks[:2] + [Task(_fail_with, ("task 2",), "bad")],
                                   [FollowUp([0], lambda r: [Task(_fail_with, ("follow-up",), "bad")]),
                                    FollowUp([2], never)])
    with pytest.raises(MismatchError, match="making it"):
        runner.run_with_follow_ups(tasks[:2], [FollowUp([0], lambda r: _fail_with("making it")),
                                               FollowUp([1], lambda r: [Task(_fail_with, ("later",), "bad")])])


class _Logged:
    """A value that appends this process's id to `log` whenever it is unpickled."""

    def __init__(self, log, payload):
        self.log, self.payload = log, payload

    def __reduce__(self):
        return (_unpickle_logged, (self.log, self.payload))


def _unpickle_logged(log, payload):
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\n")
    return _Logged(log, payload)


def _payload_sum(logged, arrays, scale):
    return int(logged.payload.sum()) * scale + sum(int(a.sum()) for a in arrays)


def test_shared_arguments_reach_each_worker_once(pool, tmp_path):
    log = str(tmp_path / "unpickled")
    logged = _Logged(log, np.arange(100_000, dtype=np.int64))
    big = np.ones(distributed.SHARE_MIN_BYTES, dtype=np.uint8)           # shared: over the limit
    small = np.ones(16, dtype=np.uint8)                                   # travels with each task
    tasks = [Task(_payload_sum, (logged, [big, small], k), f"t{k}", shared=(0, 1)) for k in range(24)]
    want = [int(logged.payload.sum()) * k + big.size + small.size for k in range(24)]
    assert InProcess().run(tasks) == want
    Path(log).unlink(missing_ok=True)
    assert pool.run(tasks) == want
    workers = set(pool.client.run(os.getpid).values())
    pids = [int(p) for p in Path(log).read_text().split()]
    on_workers = [p for p in pids if p in workers]
    assert on_workers and len(on_workers) == len(set(on_workers)) <= 2    # once per worker, not per task


def _unpickled_on(pool, log: str) -> list[int]:
    workers = set(pool.client.run(os.getpid).values())
    return [int(p) for p in Path(log).read_text().split() if int(p) in workers]


def test_kept_values_reach_each_worker_once_across_runs(pool, tmp_path):
    """Three runs (rounds of a job) in one keep block: the model-sized value is unpickled at
    most once per worker in all; without keep each run sends it again (the test's control)."""
    logged = _Logged(str(tmp_path / "kept"), np.arange(100_000, dtype=np.int64))
    unkept = _Logged(str(tmp_path / "unkept"), logged.payload)
    rounds = [[Task(_payload_sum, (None, [], k), f"t{k}", shared=(0,)) for k in range(r, r + 4)]
              for r in range(0, 12, 4)]
    want = [int(logged.payload.sum()) * k for k in range(12)]
    with pool.keep(logged):
        assert [x for tasks in rounds for x in pool.run([replace_arg(t, logged) for t in tasks])] == want
    assert [x for tasks in rounds for x in pool.run([replace_arg(t, unkept) for t in tasks])] == want
    kept, sent = _unpickled_on(pool, logged.log), _unpickled_on(pool, unkept.log)
    assert kept and len(kept) == len(set(kept)) <= 2
    assert len(sent) >= 3            # at least once per run
    with InProcess().keep(logged):   # nothing to send: the tasks run on the value itself
        assert InProcess().run([replace_arg(t, logged) for t in rounds[0]]) == want[:4]


def test_a_stream_of_tasks_is_taken_as_workers_have_room(pool):
    """run_stream: results in the stream's order; never more tasks taken than done plus the
    pool's in-flight bound (the memory bound of an evaluation's samples)."""
    taken, ahead = [0], []
    done = [0]

    def stream():
        for k in range(30):
            taken[0] += 1
            yield Task(abs, (-k,), f"s{k}")

    def on_done():
        done[0] += 1
        ahead.append(taken[0] - done[0])
    assert pool.run_stream(stream(), on_done) == list(range(30))
    assert done[0] == 30 and max(ahead) <= pool.workers * distributed.IN_FLIGHT_PER_WORKER
    assert InProcess().run_stream(stream()) == list(range(30))


def replace_arg(task: Task, value) -> Task:
    return Task(task.fn, (value, *task.args[1:]), task.label, shared=task.shared)


def _record_pid(log):
    with open(log, "a") as f:
        f.write(f"{os.getpid()}\n")


def test_warm_up_runs_once_on_every_worker(pool, tmp_path):
    log = tmp_path / "warm"
    pool.warm_up(functools.partial(_record_pid, str(log)))
    pool.client.gather(pool.warming)
    assert sorted(int(p) for p in log.read_text().split()) == sorted(pool.client.run(os.getpid).values())
    InProcess().warm_up(functools.partial(_record_pid, str(tmp_path / "never")))
    assert not (tmp_path / "never").exists()


def test_sweep_points_pass_the_same_golden_tensors_and_layers(embedded):
    from qsim.npu.engines import Engine
    from qsim.npu.simulate import parse_sweep, point_tasks, prepare_sweep
    graph, feeds, _ = embedded
    model = embedded_quantized_model()
    configs = parse_sweep(["size=8,16"], load_config("8x8"))
    prepared = prepare_sweep(model, feeds, configs, Engine.MODEL, InProcess())
    first, second = (p.tasks for p in prepared)
    assert [t.label.split("-", 2)[-1] for t in first] == [t.label.split("-", 2)[-1] for t in second]
    for a, b in zip(first, second):
        assert a.shared
        for i in a.shared:
            x, y = a.args[i], b.args[i]
            assert all(p is q for p, q in (zip(x, y) if isinstance(x, list) else [(x, y)])), (a.label, i)
    assert point_tasks(prepared) == [range(0, len(first)), range(len(first), 2 * len(first))]


def test_array_tasks_cost_their_macs_plus_weights_so_the_longest_start_first(embedded):
    # the embedded model's layers carry their weights as an attribute (OHWI / OI), not as a
    # second operand; the cost must still count them (it was 0 for every such layer, so the
    # pool's longest-first order fell back to submission order)
    from qsim.npu.program import prepare_run
    graph, feeds, values = embedded
    prepared = prepare_run(graph, feeds, load_config("8x8"), "model", values)
    costs = {t.label.split("-", 1)[1]: t.cost for t in prepared.tasks if t.fn.__name__ == "run_array_stage"}
    # output elements x weights per output channel + weight elements, from the layer shapes
    assert costs == {"relu1": 28 * 28 * 16 * 9 + 16 * 9, "relu2": 14 * 14 * 32 * 9 * 16 + 32 * 9 * 16,
                     "relu3": 7 * 7 * 64 * 9 * 32 + 64 * 9 * 32, "relu4": 4 * 4 * 64 * 9 * 64 + 64 * 9 * 64,
                     "output": 10 * 64 + 10 * 64}


# -- an existing cluster, started outside qsim ---------------------------------------------------

def _dask_process(kind, tmp_path, name, *argv, preload=None):
    """A `dask scheduler` or `dask worker` (kind) subprocess that imports what this test does
    (the qsim this test runs, and this module's task functions: this process's sys.path);
    `preload` is Python run in it at start (dask's --preload). Output goes to
    tmp_path/name.log."""
    import qsim
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(qsim.__file__).resolve().parents[1])] + [p for p in sys.path if p]))
    if preload is not None:
        script = tmp_path / f"{name}_preload.py"
        script.write_text(preload)
        argv = (*argv, "--preload", str(script))
    log = open(tmp_path / f"{name}.log", "w")
    return subprocess.Popen([sys.executable, "-m", f"distributed.cli.dask_{kind}", *argv], env=env,
                            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)


def _start_scheduler(tmp_path, name, preload=None):
    """(process, address) of a new scheduler on a free local port."""
    import time
    file = tmp_path / f"{name}.json"
    process = _dask_process("scheduler", tmp_path, name, "--host", "127.0.0.1", "--port", "0",
                            "--dashboard-address", ":0", "--scheduler-file", str(file), preload=preload)
    deadline = time.monotonic() + 120
    while not file.exists() or not file.read_text().strip():
        assert process.poll() is None and time.monotonic() < deadline, (tmp_path / f"{name}.log").read_text()
        time.sleep(0.1)
    return process, json.loads(file.read_text())["address"]


def _start_worker(tmp_path, name, address, preload=None):
    return _dask_process("worker", tmp_path, name, address, "--nthreads", "1", "--no-nanny",
                         "--dashboard-address", ":0", preload=preload)


def _stop(*processes):
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_worker_count(address, count):
    from distributed import Client
    with Client(address, timeout=60) as client:
        if count:
            client.wait_for_workers(count, timeout=120)
        else:
            import time
            deadline = time.monotonic() + 60
            while client.scheduler_info()["workers"]:
                assert time.monotonic() < deadline, "a stopped worker stays registered"
                time.sleep(0.1)


@pytest.fixture(scope="module")
def external_cluster(tmp_path_factory):
    """A scheduler and one worker as separate processes, as a user starts them: qsim did not
    start them and must not stop them."""
    tmp_path = tmp_path_factory.mktemp("cluster")
    scheduler, address = _start_scheduler(tmp_path, "scheduler")
    worker = _start_worker(tmp_path, "worker", address)
    try:
        _wait_for_worker_count(address, 1)
        yield address, scheduler, worker
    finally:
        _stop(worker, scheduler)


def _all_files(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_an_existing_cluster_runs_a_sweep_and_outlives_the_command(external_cluster, capsys, tmp_path):
    address, scheduler, worker = external_cluster
    sweep = ["--engine", "model", "--config", "8x8", "--sweep", "size=8,16"]
    serial, _ = _simulate(capsys, tmp_path, "serial", *sweep, "--workers", "1", "-q")
    spread, err = _simulate(capsys, tmp_path, "spread", *sweep, "--scheduler", address)
    assert _all_files(spread) == _all_files(serial)        # every report file, byte for byte
    assert f"(model, Dask cluster at {address}) tasks: {2 * (5 + 2 + 5) + 1} done" in err
    # the cluster is the user's: still there, with its worker
    assert scheduler.poll() is None and worker.poll() is None
    _wait_for_worker_count(address, 1)


def test_on_an_existing_cluster_the_workers_build_verilator_not_the_command(
        external_cluster, capsys, tmp_path, monkeypatch):
    # the command's machine may have no Verilator, and a build there would keep the cluster
    # idle for minutes only to be made again in each worker machine's own cache; the
    # scheduler from the environment, one configuration
    address, scheduler, worker = external_cluster
    from qsim.npu import sim_verilator
    monkeypatch.setattr(sim_verilator, "_BUILT", {})       # no build this process looked up before
    monkeypatch.setenv("QSIM_CACHE_DIR", str(tmp_path / "command-cache"))
    monkeypatch.setenv(distributed.SCHEDULER_ENV, address)
    spread, err = _simulate(capsys, tmp_path, "spread", "--engine", "verilator")
    assert not (tmp_path / "command-cache" / "verilator").exists()
    assert "each Dask worker builds or reuses the NPU models" in err and "built the" not in err
    assert f"(verilator, Dask cluster at {address}) tasks: 7 done" in err
    monkeypatch.delenv("QSIM_CACHE_DIR")
    monkeypatch.delenv(distributed.SCHEDULER_ENV)
    serial, _ = _simulate(capsys, tmp_path, "serial", "--engine", "verilator", "--workers", "1", "-q")
    assert _all_files(spread) == _all_files(serial)
    assert scheduler.poll() is None and worker.poll() is None


_BLOCK_QSIM = "import sys\nsys.modules['qsim'] = None     # this process cannot import qsim\n"
_OTHER_QSIM = ("import qsim.cluster.distributed as d\n"
               "d.code_identity = lambda: ('0.0.1', '0123456789ab', '/elsewhere/qsim')\n")


def test_an_existing_cluster_without_workers_or_with_other_qsim_code_is_a_clear_error(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(distributed, "WORKER_WAIT_S", 1.0)
    scheduler, address = _start_scheduler(tmp_path, "scheduler")
    argv = ["simulate", "--engine", "model", "--scheduler", address, "-q", "-o", str(tmp_path / "o")]

    def fails(*expected):
        code = main(argv)
        _, err = capsys.readouterr()
        assert code == 2 and "Traceback" not in err and "hint:" in err, err
        for text in expected:
            assert text in err, err
        assert not (tmp_path / "o").exists()
    try:
        # Dask alone would keep the tasks waiting for a worker forever, silently
        fails(f"no worker in the Dask cluster at {address} yet: waiting up to 1 s",
              f"no worker joined the Dask cluster at {address} within 1 s", f"dask worker {address}")
        # a worker without qsim would die on its first task (and the run would then wait forever)
        worker = _start_worker(tmp_path, "bare", address, preload=_BLOCK_QSIM)
        _wait_for_worker_count(address, 1)
        fails("Dask worker tcp://127.0.0.1:", "cannot import qsim (ModuleNotFoundError")
        _stop(worker)
        _wait_for_worker_count(address, 0)
        worker = _start_worker(tmp_path, "other", address, preload=_OTHER_QSIM)
        _wait_for_worker_count(address, 1)
        ours = distributed.code_identity()
        fails("Dask worker tcp://127.0.0.1:", "runs other qsim code than this command: qsim 0.0.1 from "
              f"/elsewhere/qsim (sources 0123456789ab) there, qsim {ours[0]} from {ours[2]} (sources {ours[1]}) here")
        assert scheduler.poll() is None and worker.poll() is None      # left as they were
        _stop(worker)
    finally:
        _stop(scheduler)
    scheduler, address = _start_scheduler(tmp_path, "bare-scheduler", preload=_BLOCK_QSIM)
    argv[4] = address
    try:
        # the scheduler unpickles every task: without qsim each one fails there
        fails(f"the Dask scheduler at {address} cannot import qsim")
    finally:
        _stop(scheduler)


def test_a_task_on_a_worker_with_other_qsim_code_fails_with_the_difference():
    # a worker that joins after the command checked the cluster is caught by its first task
    ours = distributed.code_identity()
    other = ("0.0.1", "0123456789ab", "/elsewhere/qsim")
    failed = distributed._call_on_worker(abs, (-3,), code=other)
    assert isinstance(failed, distributed._Failed) and isinstance(failed.error, UsageError)
    assert failed.error.message == (f"process {os.getpid()} runs other qsim code than this command: "
                                    f"qsim {ours[0]} from {ours[2]} (sources {ours[1]}) there, qsim 0.0.1 from "
                                    "/elsewhere/qsim (sources 0123456789ab) here")
    assert distributed._call_on_worker(abs, (-3,), code=ours) == 3


def test_the_source_digest_sees_every_file_but_not_the_layout(tmp_path):
    # an editable install maps hw/ (beside qsim/) into qsim.hw, a wheel has it in qsim/hw/: the
    # same sources must give the same digest; one changed byte in any file another one
    beside, inside = tmp_path / "beside", tmp_path / "inside"
    for root in (beside / "qsim", beside / "hw", inside / "qsim" / "hw", inside / "qsim" / "npu" / "__pycache__"):
        root.mkdir(parents=True)
    for base in (beside, inside):
        (base / "qsim" / "__init__.py").write_text("x = 1\n")
        (base / "qsim" / "notes.txt").write_text(str(base))          # not Python: not code
    (beside / "qsim" / "npu").mkdir()
    for folder in (beside / "qsim" / "npu", inside / "qsim" / "npu"):
        (folder / "engine.py").write_text("y = 2\n")
    (beside / "hw" / "params.py").write_text("z = 3\n")
    (inside / "qsim" / "hw" / "params.py").write_text("z = 3\n")
    (inside / "qsim" / "npu" / "__pycache__" / "engine.py").write_text("stale")
    digest = distributed._source_digest
    one = digest([("qsim", beside / "qsim"), ("qsim/hw", beside / "hw")])
    assert one == digest([("qsim", inside / "qsim"), ("qsim/hw", inside / "qsim" / "hw")])
    (beside / "hw" / "params.py").write_text("z = 4\n")
    assert digest([("qsim", beside / "qsim"), ("qsim/hw", beside / "hw")]) != one
    # a file's bytes are framed by its name and length: moving bytes across files is a change
    (inside / "qsim" / "__init__.py").write_text("x = 1\ny = 2\n")
    (inside / "qsim" / "npu" / "engine.py").write_text("")
    assert digest([("qsim", inside / "qsim"), ("qsim/hw", inside / "qsim" / "hw")]) != one


def _started_then_sleep(marker):
    Path(marker).write_text("")
    import time
    time.sleep(120)


def _error_when_killed_mid_task(address, victim, tmp_path) -> UnsupportedError:
    """The error of a run on the cluster at `address` whose one task sleeps, `victim` (a
    process of the cluster) killed with SIGKILL as soon as the task has started."""
    import threading
    marker = str(tmp_path / "started")

    def kill_once_started():
        _wait_for(marker, 120)
        victim.kill()
    with pytest.raises(UnsupportedError) as caught:
        with open_pool(scheduler=address) as dask_pool:
            threading.Thread(target=kill_once_started, daemon=True).start()
            dask_pool.run([Task(_started_then_sleep, (marker,), "sleeper")])
    return caught.value


def test_a_scheduler_that_dies_is_a_clear_error(tmp_path, monkeypatch):
    # while the command waits for a worker, and while tasks run: no traceback, no hang
    scheduler, address = _start_scheduler(tmp_path, "waiting")
    check_answer = distributed._check_answer

    def check_then_kill(*args):         # the scheduler answers the probe, then dies
        check_answer(*args)
        scheduler.kill()
    monkeypatch.setattr(distributed, "_check_answer", check_then_kill)
    monkeypatch.setattr(distributed, "WORKER_WAIT_S", 120.0)
    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT_S", 2.0)     # also how long Dask tries to reconnect
    try:
        with pytest.raises(UnsupportedError, match=f"lost the connection to the Dask scheduler at {address}"):
            with open_pool(scheduler=address):
                pass
    finally:
        _stop(scheduler)
    monkeypatch.setattr(distributed, "_check_answer", check_answer)
    scheduler, address = _start_scheduler(tmp_path, "running")
    worker = _start_worker(tmp_path, "worker", address)
    try:
        _wait_for_worker_count(address, 1)
        error = _error_when_killed_mid_task(address, scheduler, tmp_path)
        assert error.message == f"the Dask cluster at {address} dropped this run's tasks (scheduler-connection-lost)"
    finally:
        worker.kill()                   # still in its task: it would take 30 s to stop gracefully
        _stop(worker, scheduler)


def test_workers_on_the_command_line_win_over_the_environment(capsys, monkeypatch, tmp_path):
    # $QSIM_SCHEDULER is a default: an explicit --workers N means local workers (here: this
    # process), not the cluster the environment names (unreachable here)
    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT_S", 1.0)
    monkeypatch.setenv(distributed.SCHEDULER_ENV, "tcp://127.0.0.1:1")
    out, err = _simulate(capsys, tmp_path, "local", "--engine", "model", "--workers", "1")
    assert "(model, in this process) tasks: 7 done" in err
    assert json.loads((out / "report.json").read_text())["all_verified"] is True
    # both on the command line contradict each other
    code = main(["simulate", "--engine", "model", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1",
                 "-o", str(tmp_path / "both")])
    _, err = capsys.readouterr()
    assert code == 2 and "--workers and --scheduler do not combine" in err and "hint:" in err
    assert not (tmp_path / "both").exists()


def test_a_cluster_that_loses_every_worker_mid_run_is_a_clear_error(tmp_path, capsys, monkeypatch):
    # Dask would keep the task waiting for a worker forever; after WORKER_WAIT_S without any,
    # the run ends with an error naming the cluster
    monkeypatch.setattr(distributed, "WORKER_WAIT_S", 2.0)
    scheduler, address = _start_scheduler(tmp_path, "scheduler")
    worker = _start_worker(tmp_path, "worker", address)         # no nanny: nothing restarts it
    try:
        _wait_for_worker_count(address, 1)
        error = _error_when_killed_mid_task(address, worker, tmp_path)
        assert error.message == f"no worker left in the Dask cluster at {address} for 2 s"
        assert f"dask worker {address}" in error.hint
        assert f"no worker left in the Dask cluster at {address}: waiting up to 2 s" in capsys.readouterr().err
        assert scheduler.poll() is None
    finally:
        _stop(worker, scheduler)
