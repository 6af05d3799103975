"""A Dask scheduler address, checked before Dask sees it: its form (`check_address`) and the
peer behind it (`probe_scheduler`).

Dask's own parsing of a bad address ends in ValueError, TypeError or UnicodeError tracebacks,
and its client trusts the first bytes a peer sends: a TCP service that is not a Dask
scheduler can make it allocate whatever length those bytes claim. So qsim accepts only the
form it can use, `tcp://HOST:PORT`, and reads the peer's greeting itself, bounded in bytes
and time, before handing the address to distributed.Client.

The greeting: a Dask listener writes its handshake as soon as it accepts a connection,
without waiting for the client (distributed.comm.core.Listener.on_connection). On TCP a
message is an 8-byte native unsigned length, then that many bytes: an 8-byte frame count,
one 8-byte length per frame, and the frames (distributed.comm.tcp); the handshake is one
small msgpack frame naming "compression", "python" and "pickle-protocol" (58 bytes with
distributed 2026.8).
"""
from __future__ import annotations

import ipaddress
import re
import socket
import struct
import time
from dataclasses import dataclass

from ..errors import UsageError

DASHBOARD_PORT, SCHEDULER_PORT = 8787, 8786     # Dask's defaults
GREETING_MAX_BYTES = 64 * 1024      # a handshake is ~60 bytes; more is not a Dask scheduler
GREETING_MAX_FRAMES = 64
GREETING_MARK = b"pickle-protocol"  # a key of every Dask handshake
MAX_HOST_CHARS = 253                # a DNS name's limit (RFC 1035), in its ASCII form
MAX_LABEL_CHARS = 63
_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?")   # "_": container host names
_PORT = re.compile(r"[0-9]{1,5}")
_LENGTH = struct.Struct("=Q")       # Dask's framing: native byte order ("Q")

# Schemes Dask knows that qsim does not connect through, and why.
_REFUSED_SCHEMES = {
    "http": "that is the address of the scheduler's dashboard (a web page), not of the scheduler",
    "https": "that is the address of the scheduler's dashboard (a web page), not of the scheduler",
    "inproc": "an in-process scheduler lives inside another Python process; a command cannot reach it",
    "tls": "qsim connects to schedulers over plain TCP only (no certificates to give it)",
    "ws": "qsim connects to schedulers over plain TCP only",
    "wss": "qsim connects to schedulers over plain TCP only",
    "ucx": "qsim connects to schedulers over plain TCP only",
}


@dataclass(frozen=True)
class SchedulerAddress:
    host: str           # ASCII: a DNS name (IDNA-encoded), an IPv4 or an IPv6 address
    port: int

    @property
    def url(self) -> str:
        """The address as Dask takes it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"tcp://{host}:{self.port}"


def _usage(where: str, text: str, why: str, hint: str = "give it as tcp://HOST:PORT, e.g. "
           f"tcp://127.0.0.1:{SCHEDULER_PORT} (the port `dask scheduler` prints)") -> UsageError:
    return UsageError(f"{where} {_shown(text)}: {why}", hint=hint)


def _shown(text: str) -> str:
    """`text` for a message: quoted, and cut if long (a 300-character host name stays readable)."""
    return repr(text if len(text) <= 80 else text[:60] + "..." + text[-12:])


def check_address(text: str, where: str = "--scheduler") -> SchedulerAddress:
    """The scheduler address `text` (given by `where`: "--scheduler" or "$QSIM_SCHEDULER")
    as qsim connects to it, or a UsageError saying what is wrong with it."""
    scheme, sep, rest = text.partition("://")
    if not sep:
        plain = text if len(text) <= 80 and text.isascii() and text.isprintable() else ""
        example = f"{plain}{'' if ':' in plain else f':{SCHEDULER_PORT}'}" if plain else \
            f"127.0.0.1:{SCHEDULER_PORT}"
        raise UsageError(f"Dask scheduler address {_shown(text)} has no protocol",
                         hint=f"give it as tcp://HOST:PORT, e.g. tcp://{example}")
    scheme = scheme.lower()
    if scheme != "tcp":
        why = _REFUSED_SCHEMES.get(scheme, "not a protocol qsim connects through")
        hint = (f"the scheduler listens on tcp://HOST:{SCHEDULER_PORT} (the dashboard on "
                f"http://HOST:{DASHBOARD_PORT}); give --scheduler tcp://HOST:PORT"
                if scheme in ("http", "https") else "give it as tcp://HOST:PORT (e.g. through an "
                "SSH tunnel for a remote cluster)")
        raise _usage(where, text, f"{scheme}:// is not supported: {why}", hint)
    hostport = rest[:-1] if rest.endswith("/") else rest
    for mark, what in (("/", "a path"), ("?", "a query"), ("#", "a fragment"), ("@", "a user name")):
        if mark in hostport:
            raise _usage(where, text, f"has {what} ({mark!r}); a scheduler address is only HOST:PORT")
    host, port_text = _split_host_port(hostport, where, text)
    return SchedulerAddress(_checked_host(host, where, text), _checked_port(port_text, where, text))


def _split_host_port(hostport: str, where: str, text: str) -> tuple[str, str | None]:
    if hostport.startswith("["):                    # [IPv6]:PORT
        close = hostport.find("]")
        if close < 0:
            raise _usage(where, text, "an IPv6 address opened with '[' is not closed with ']'")
        after = hostport[close + 1:]
        if after and not after.startswith(":"):
            raise _usage(where, text, f"unexpected {_shown(after)} after the IPv6 address")
        return hostport[:close + 1], (after[1:] if after else None)
    if hostport.count(":") > 1:
        raise _usage(where, text, "an IPv6 address must be written in brackets",
                     hint=f"e.g. tcp://[::1]:{SCHEDULER_PORT}")
    host, sep, port = hostport.partition(":")
    return host, (port if sep else None)


def _checked_port(port: str | None, where: str, text: str) -> int:
    if port is None:
        raise _usage(where, text, "has no port",
                     hint=f"add the scheduler's port: `dask scheduler` listens on {SCHEDULER_PORT} by default")
    if not _PORT.fullmatch(port):                   # ASCII digits only: int() takes others
        raise _usage(where, text, f"port {_shown(port)} is not a number")
    if not 1 <= int(port) <= 65535:
        raise _usage(where, text, f"port {int(port)} is outside 1-65535")
    return int(port)


def _checked_host(host: str, where: str, text: str) -> str:
    if not host:
        raise _usage(where, text, "has no host")
    if host.startswith("["):
        try:
            return str(ipaddress.IPv6Address(host[1:-1]))
        except ValueError:
            raise _usage(where, text, f"{_shown(host[1:-1])} is not an IPv6 address") from None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:            # its message may quote the offending character raw
            raise _usage(where, text, f"host {_shown(host)} is not a valid internationalized "
                                      "domain name") from None
    if len(host) > MAX_HOST_CHARS:
        raise _usage(where, text, f"host name of {len(host)} characters; at most {MAX_HOST_CHARS}")
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    for label in labels:
        if len(label) > MAX_LABEL_CHARS or not _LABEL.fullmatch(label):
            raise _usage(where, text, f"host {_shown(host)} is not a host name or an IPv4 address "
                                      "(letters, digits, '-' and '_' between dots, at most "
                                      f"{MAX_LABEL_CHARS} between two)")
    return host


class NotAScheduler(Exception):
    """The peer answered, but not as a Dask scheduler does."""


def probe_scheduler(address: SchedulerAddress, timeout: float) -> None:
    """Connects to `address` and reads its greeting (module docstring) within `timeout`
    seconds in all, never more than GREETING_MAX_BYTES; raises UsageError unless the peer
    greets as a Dask scheduler does. The connection is closed again (the scheduler logs, at
    INFO level, that it closed before the handshake)."""
    deadline = time.monotonic() + timeout
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout) as sock:
            (length,) = _LENGTH.unpack(_read(sock, _LENGTH.size, deadline))
            if not _LENGTH.size <= length <= GREETING_MAX_BYTES:
                raise NotAScheduler(f"its first bytes announce a message of {length} bytes")
            _check_greeting(_read(sock, length, deadline))
    except NotAScheduler as error:
        raise UsageError(f"{address.url} is not a Dask scheduler ({error})",
                         hint="give the address `dask scheduler` prints (tcp://HOST:PORT, port "
                              f"{SCHEDULER_PORT} by default), not another service's") from None
    except socket.gaierror as error:
        raise UsageError(f"cannot find the host of the Dask scheduler at {address.url} ({error.strerror})",
                         hint="check the host name") from None
    except OSError as error:            # refused, unreachable, timed out (socket.timeout is one)
        reason = "no answer within the time limit" if isinstance(error, TimeoutError) else error
        raise UsageError(f"cannot reach the Dask scheduler at {address.url} ({reason})",
                         hint="start one with `dask scheduler` and `dask worker tcp://HOST:PORT`, or "
                              "unset QSIM_SCHEDULER and drop --scheduler to use local workers") from None


def _read(sock: socket.socket, count: int, deadline: float) -> bytes:
    """Exactly `count` bytes before `deadline`, else NotAScheduler (a peer that closes, or
    sends less: e.g. a service that waits for the client to speak first)."""
    data = bytearray()
    while len(data) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise NotAScheduler(f"it sent {len(data)} of the greeting's bytes in the time limit"
                                if data else "it sent no greeting in the time limit")
        sock.settimeout(left)
        try:
            chunk = sock.recv(count - len(data))
        except TimeoutError:
            continue                    # the loop reports it with the deadline
        if not chunk:
            raise NotAScheduler("it closed the connection without a Dask greeting")
        data += chunk
    return bytes(data)


def _check_greeting(body: bytes) -> None:
    """`body`: the bytes after the length. Frame count, frame lengths that add up, and the
    handshake's mark."""
    (frames,) = _LENGTH.unpack_from(body)
    prelude = _LENGTH.size * (1 + frames) if frames <= GREETING_MAX_FRAMES else None
    if prelude is None or frames == 0 or prelude > len(body):
        raise NotAScheduler(f"its greeting does not hold Dask's frames (it announces {frames} of them)")
    lengths = struct.unpack_from(f"={frames}Q", body, _LENGTH.size)
    if sum(lengths) != len(body) - prelude or GREETING_MARK not in body[prelude:]:
        raise NotAScheduler("its greeting is not a Dask handshake")
