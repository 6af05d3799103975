"""The `scheduler` fuzz target: Dask scheduler addresses and the greetings of the peers behind
them (qsim.cluster.scheduler_address).

Kinds of case:
  address   a generated or mutated address text (schemes, hosts of every length and script,
            IPv6 with and without brackets, ports of every form, paths, user names, control
            characters, non-UTF-8 bytes): `check_address`, then, for a loopback host only, a
            probe of that port (nothing is ever sent to another machine);
  cli       the same texts that check_address refuses, as `qsim simulate --scheduler TEXT`
            (argparse, the message printed with whatever characters the text holds);
  greeting  a local TCP server in the case's process sends the case's bytes (a Dask handshake
            as a scheduler frames it, mutated: lengths and frame counts at the extremes,
            truncations, HTTP responses, random bytes, silence) and `probe_scheduler` reads it.
A QsimError is a good outcome; any other exception is a traceback, a probe past its time limit
a hang, an allocation of what the peer claims a memory failure.
"""
from __future__ import annotations

import random
import socket
import struct
import threading

from . import calls
from .runner import Case

SCHEMES = ["tcp", "TCP", "Tcp", "tls", "http", "https", "inproc", "ws", "wss", "ucx", "", "tcp+tls",
           "t\u0441p", "tcp\x00", "\udcff"]
SEPARATORS = ["://", "://", "://", ":/", "//", ":", "", ":///"]
HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1", "scheduler", "dask_scheduler", "a.b.c", "b\u00fccher.example",
         "xn--bcher-kva.example", "xn--", "-a", "a-", "a..b", ".", "..", "256.1.1.1", "1.2.3", "[fe80::1%eth0]",
         "[::ffff:127.0.0.1]", "[zz]", "[", "]", "[::1", "h\u200bost", "\u00e4" * 70, "\u0661\u0662\u0663",
         "\udcff", "host\x00", "host name", "h\tost", "\U0001f600", "\u0130stanbul", "user@host", ""]
PORTS = ["8786", "1", "65535", "0", "65536", "99999999999999999999", "-1", "+8786", " 8786", "8786 ", "\u0663",
         "\uff18\uff17\uff18\uff16", "abc", "", "0x10", "1e3", "8786/", "8786/status", "8786?x=1", "8786#f",
         "8786:1", "\x00", "\udcff"]


def _label(rng: random.Random) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_" + "\u00e4\u00df\u4e2d"
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([1, 3, 10, 63, 64, 200])))


def random_address(rng: random.Random) -> str:
    """A scheduler address built from parts (each part ordinary or hostile), sometimes mutated."""
    host = rng.choice(HOSTS) if rng.random() < 0.6 else ".".join(_label(rng) for _ in range(rng.randint(1, 8)))
    port = rng.choice(PORTS) if rng.random() < 0.8 else str(rng.randint(-10, 1 << rng.choice([8, 16, 17, 64])))
    text = rng.choice(SCHEMES) + rng.choice(SEPARATORS) + host + (":" + port if rng.random() < 0.85 else "")
    if rng.random() < 0.3:
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            where = rng.randrange(len(chars) + 1)
            action = rng.random()
            if action < 0.4 and chars:
                del chars[min(where, len(chars) - 1)]
            elif action < 0.8:
                chars.insert(where, rng.choice(":/[]@.%#?\x00\x7f \u00e4\udcff0123456789"))
            else:
                chars[where:where] = list(text[:rng.randint(0, len(text))])     # a repeated run
        text = "".join(chars)
    return text


def dask_greeting(rng: random.Random) -> bytes:
    """A handshake framed as a Dask scheduler frames it (8-byte length, frame count, frame
    lengths, one msgpack frame)."""
    frame = (b"\x83\xabcompression\xc0\xa6python\x93\x03" + bytes([rng.randint(0, 13)]) + b"\x07"
             b"\xafpickle-protocol\x05")
    body = struct.pack("<QQ", 1, len(frame)) + frame
    return struct.pack("<Q", len(body)) + body


def random_greeting(rng: random.Random) -> bytes:
    good = dask_greeting(rng)
    kind = rng.random()
    if kind < 0.15:
        return good
    if kind < 0.35:                      # the announced length at the extremes
        return struct.pack("<Q", rng.choice([0, 1, 7, 8, 15, 16, 65535, 65536, 65537, 3 << 60, (1 << 64) - 1])) + good[8:]
    if kind < 0.5:                       # the frame count or a frame length at the extremes
        big = rng.choice([0, 2, 64, 65, 1 << 32, (1 << 64) - 1])
        at = rng.choice([8, 16])
        return good[:at] + struct.pack("<Q", big) + good[at + 8:]
    if kind < 0.6:
        return good[:rng.randrange(len(good))]                      # truncated, then closed
    if kind < 0.7:
        return rng.choice([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", b"SSH-2.0-OpenSSH_9.0\r\n",
                           b"+OK redis\r\n", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1", b""])
    if kind < 0.8:
        return bytes(rng.randrange(256) for _ in range(rng.choice([1, 8, 9, 64, 300])))
    data = bytearray(good)
    for _ in range(rng.randint(1, 6)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def gen_scheduler(rng: random.Random, corpus) -> Case:
    from qsim.errors import QsimError
    from qsim.cluster.scheduler_address import check_address
    if rng.random() < 0.25:
        return Case("scheduler", "greeting", {"greeting.bin": random_greeting(rng)},
                    call="scheduler_greeting", call_arg="greeting.bin", timeout_s=30)
    text = random_address(rng)
    raw = text.encode("utf-8", "surrogateescape") if _encodable(text) else text.encode("utf-8", "replace")
    try:
        check_address(raw.decode("utf-8", "surrogateescape"))
        refused = False
    except QsimError:
        refused = True
    if refused and rng.random() < 0.3 and b"\x00" not in raw:      # argv cannot hold a NUL
        return Case("scheduler", "cli", {}, timeout_s=60,
                    argv=["simulate", "--engine", "model", "--scheduler",
                          raw.decode("utf-8", "surrogateescape"), "-q", "-o", "s"])
    return Case("scheduler", "address", {"address.txt": raw}, call="scheduler_address",
                call_arg="address.txt", timeout_s=30)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")
        return True
    except UnicodeError:
        return False


# -- the library calls of the cases (run in the case's process) -----------------------------------

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
PROBE_TIMEOUT_S = 2.0


def _scheduler_address(path: str) -> None:
    from qsim.cluster.scheduler_address import check_address, probe_scheduler
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
    address = check_address(text)
    if address.host in LOOPBACK:        # never a probe of another machine
        probe_scheduler(address, PROBE_TIMEOUT_S)


def _scheduler_greeting(path: str) -> None:
    from qsim.cluster.scheduler_address import SchedulerAddress, probe_scheduler
    with open(path, "rb") as f:
        greeting = f.read()
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            try:                        # the probe may refuse and close before all is sent
                conn.sendall(greeting)
                if greeting:            # a silent peer keeps the line open (the probe times out)
                    conn.shutdown(socket.SHUT_WR)
                conn.settimeout(PROBE_TIMEOUT_S + 1)
                conn.recv(1)
            except OSError:
                pass
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        probe_scheduler(SchedulerAddress("127.0.0.1", port), PROBE_TIMEOUT_S)
    finally:
        server.close()


# registered with the runner's table of library calls (and the reproducers' snippets)
calls.CALLS.update(scheduler_address=calls._as_cli(_scheduler_address),
                   scheduler_greeting=calls._as_cli(_scheduler_greeting))
calls.SNIPPETS.update(
    scheduler_address="import sys; sys.path.insert(0, 'benchmarks'); from _fuzz.gen_scheduler import "
                      "_scheduler_address; _scheduler_address({arg!r})",
    scheduler_greeting="import sys; sys.path.insert(0, 'benchmarks'); from _fuzz.gen_scheduler import "
                       "_scheduler_greeting; _scheduler_greeting({arg!r})")
