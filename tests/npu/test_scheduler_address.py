"""--scheduler / $QSIM_SCHEDULER checked before Dask sees it (qsim.cluster.scheduler_address): the
form of the address, and the peer behind it (a TCP service that is not a Dask scheduler is
refused without trusting the length its first bytes claim); and the cap on --workers."""
import socket
import threading
import time
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qsim.cli import main
from qsim.errors import UsageError
from qsim.cluster import distributed, local_cluster
from qsim.cluster.scheduler_address import SchedulerAddress, check_address, probe_scheduler


def _simulate_fails(capsys, tmp_path, *argv):
    code = main(["simulate", "--engine", "model", *argv, "-q", "-o", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "Traceback" not in err and "hint:" in err
    assert not (tmp_path / "o").exists()
    return err


@pytest.mark.parametrize("address,message", [
    ("http://127.0.0.1:8787", "http:// is not supported: that is the address of the scheduler's dashboard"),
    ("inproc://x", "inproc:// is not supported"),
    ("tls://127.0.0.1:8786", "tls:// is not supported"),
    ("ws://127.0.0.1:8786", "ws:// is not supported"),
    ("tcp://127.0.0.1:abc", "port 'abc' is not a number"),
    ("tcp://127.0.0.1:\u0663", "is not a number"),            # int() would take an Arabic-Indic 3
    ("tcp://127.0.0.1:0", "port 0 is outside 1-65535"),
    ("tcp://127.0.0.1:65536", "port 65536 is outside 1-65535"),
    ("tcp://127.0.0.1", "has no port"),
    ("tcp://" + "a" * 300 + ":8786", "host name of 300 characters; at most 253"),
    ("tcp://" + "a" * 64 + ".example:8786", "is not a host name"),
    ("tcp://\udcff:8786", "is not a valid internationalized domain name"),
    ("tcp://" + "\u00e4" * 70 + ":8786", "is not a valid internationalized domain name"),
    ("tcp://::1:8786", "an IPv6 address must be written in brackets"),
    ("tcp://[::1:8786", "is not closed"),
    ("tcp://[nope]:8786", "'nope' is not an IPv6 address"),
    ("tcp://host:8786/status", "has a path"),
    ("tcp://user@host:8786", "has a user name"),
    ("tcp://:8786", "has no host"),
    ("localhost:8786", "has no protocol"),
])
def test_a_bad_scheduler_address_is_a_usage_error_before_dask(capsys, tmp_path, monkeypatch, address, message):
    err = _simulate_fails(capsys, tmp_path, "--scheduler", address)
    assert message in err
    monkeypatch.setenv(distributed.SCHEDULER_ENV, address)      # the same from the environment
    err = _simulate_fails(capsys, tmp_path)
    assert message in err


def test_the_dashboard_address_gets_the_scheduler_port_as_hint():
    with pytest.raises(UsageError) as caught:
        check_address("http://127.0.0.1:8787")
    assert "tcp://HOST:8786" in caught.value.hint


@pytest.mark.parametrize("text,url", [
    ("tcp://127.0.0.1:8786", "tcp://127.0.0.1:8786"),
    ("TCP://Scheduler-1.example.org:1/", "tcp://Scheduler-1.example.org:1"),
    ("tcp://[::1]:8786", "tcp://[::1]:8786"),
    ("tcp://b\u00fccher.example:65535", "tcp://xn--bcher-kva.example:65535"),
    ("tcp://dask_scheduler:8786", "tcp://dask_scheduler:8786"),
])
def test_a_good_address_is_normalized_for_dask(text, url):
    assert check_address(text).url == url


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60),
                 st.builds(lambda scheme, host, port: f"{scheme}://{host}:{port}",
                           st.sampled_from(["tcp", "TCP", "tls", "http", "inproc", "x"]),
                           st.text(max_size=70), st.text(max_size=8))))
def test_any_text_is_an_address_or_a_usage_error(text):
    try:
        address = check_address(text)
    except UsageError as error:
        assert error.message and error.hint
        return
    assert isinstance(address, SchedulerAddress) and 1 <= address.port <= 65535
    assert check_address(address.url) == address          # the normal form is a fixed point


# -- peers that are not Dask schedulers ----------------------------------------------------------

class _Peer:
    """A TCP server on 127.0.0.1 that sends `greeting` to each connection (then waits until
    the client closes, or closes at once with `close`)."""

    def __init__(self, greeting: bytes, close: bool = False):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.greeting, self.close = greeting, close
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(self.greeting)
                if not self.close:
                    conn.settimeout(30)
                    try:
                        while conn.recv(4096):
                            pass
                    except OSError:
                        pass

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.server.close()


HUGE_LENGTH = (3 << 60).to_bytes(8, "little")      # 3 EiB announced
NOT_DASK = [
    (HUGE_LENGTH, "announce a message of 3458764513820540928 bytes"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "announce a message of"),
    ((64).to_bytes(8, "little") + b"\x00" * 64, "does not hold Dask's frames"),
    ((100).to_bytes(8, "little") + (1).to_bytes(8, "little") + (84).to_bytes(8, "little"),
     "closed the connection"),
    ((24).to_bytes(8, "little") + (1).to_bytes(8, "little") + (8).to_bytes(8, "little") + b"not dask",
     "is not a Dask handshake"),
]


@pytest.mark.parametrize("greeting,why", NOT_DASK)
def test_a_peer_that_is_not_a_scheduler_is_refused_without_trusting_its_length(greeting, why):
    with _Peer(greeting, close=why == "closed the connection") as peer:
        tracemalloc.start()
        start = time.monotonic()
        try:
            with pytest.raises(UsageError) as caught:
                probe_scheduler(SchedulerAddress("127.0.0.1", peer.port), timeout=5.0)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert f"tcp://127.0.0.1:{peer.port} is not a Dask scheduler" in caught.value.message
    assert why in caught.value.message
    assert peak < 1 << 20                   # the announced length was never allocated
    assert time.monotonic() - start < 5.0   # refused on what it sent, not by the time limit


def test_a_silent_peer_is_refused_after_the_time_limit():
    with _Peer(b"") as peer:
        with pytest.raises(UsageError, match="sent no greeting in the time limit"):
            probe_scheduler(SchedulerAddress("127.0.0.1", peer.port), timeout=0.5)


def test_the_command_refuses_a_peer_that_is_not_a_scheduler(capsys, tmp_path):
    with _Peer(HUGE_LENGTH) as peer:
        err = _simulate_fails(capsys, tmp_path, "--scheduler", f"tcp://127.0.0.1:{peer.port}")
    assert "is not a Dask scheduler (its first bytes announce a message of" in err


def test_a_real_scheduler_passes_the_probe():
    distributed_ = pytest.importorskip("distributed")
    with distributed_.LocalCluster(n_workers=0, processes=False, protocol="tcp://",
                                      dashboard_address=":0") as cluster:
        address = check_address(cluster.scheduler_address)
        probe_scheduler(address, timeout=10.0)          # raises if the greeting is not understood


# -- --workers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("count", [10000, 2 ** 63])
def test_more_workers_than_the_cap_is_a_usage_error(capsys, tmp_path, monkeypatch, count):
    monkeypatch.setattr(local_cluster, "default_workers", lambda: 2)
    err = _simulate_fails(capsys, tmp_path, "--workers", str(count))
    assert "at most 8 on this machine (4 per core, 2 cores)" in err


def test_the_cap_itself_is_allowed():
    cap = local_cluster.MAX_WORKERS_PER_CORE * local_cluster.default_workers()
    local_cluster.check_worker_count(cap)
    with pytest.raises(UsageError, match="at most"):
        local_cluster.check_worker_count(cap + 1)
