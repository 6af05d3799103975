"""The LocalCluster a command starts (qsim.cluster.local_cluster): patient timeouts on a loaded
machine, in every process of the cluster; a quiet, orderly close; and a simulate on two local
workers under load that prints no traceback and no Dask error."""
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from qsim.cluster import local_cluster
from qsim.cluster.distributed import open_pool

pytest.importorskip("distributed")
ROOT = Path(__file__).resolve().parents[2]


def _setting(key):
    import dask
    return dask.config.get(key)


def test_every_process_of_the_cluster_has_the_patient_timeouts():
    with open_pool(workers=2) as pool:
        for key, value in local_cluster.PATIENT_CLUSTER.items():
            assert pool.client.run_on_scheduler(_setting, key) == value
            assert set(pool.client.run(_setting, key).values()) == {value}
            assert _setting(key) == value           # the client's, in this process


class _ClosingFails:
    """A client whose close meets what a loaded machine can give: a closed comm."""
    def __init__(self):
        self.cluster = self
        self.closed = []

    def close(self, timeout=None):
        from distributed.comm.core import CommClosedError
        self.closed.append(timeout)
        logging.getLogger("distributed.core").error("an error logged while closing")
        raise CommClosedError("in <TCP (closed)>: Stream is closed")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_closing_after_a_run_is_quiet_and_does_not_raise():
    client, seen = _ClosingFails(), _Records()
    log = logging.getLogger("distributed.core")
    log.addHandler(seen)
    try:
        local_cluster._close_quietly(client)
        assert client.closed == [local_cluster.CLOSE_TIMEOUT_S]   # the client; the cluster not reached
        assert seen.records == []
        log.error("logged after the close")                      # logging is back on
        assert [r.getMessage() for r in seen.records] == ["logged after the close"]
    finally:
        log.removeHandler(seen)


DASK_LOG = re.compile(r"^\S+ \S+ - distributed\.\S+ - (WARNING|ERROR|CRITICAL) - ", re.M)


def test_a_simulate_on_two_local_workers_under_load_prints_no_traceback(tmp_path):
    """Two busy loops take both cores of a 2-core machine while the command runs."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        done = subprocess.run([sys.executable, "-m", "qsim", "simulate", "--engine", "model", "--workers", "2",
                               "-q", "-o", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True,
                              timeout=900)
    finally:
        for child in busy:
            child.kill()
            child.wait()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert not DASK_LOG.search(done.stderr), done.stderr
    assert "no worker left" not in done.stderr
    assert "every layer bit-exact with the kernels" in done.stdout
