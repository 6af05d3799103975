"""Fork server: runs each fuzz case in a forked child of a process that imported qsim once.

Launching a fresh Python per input costs ~0.5 s of imports and stdlib parsing; a fork of a
warm parent costs a few milliseconds, so 10^5 inputs fit in well under an hour on two cores.

Per case the parent writes the case's files into a fresh folder, hashes the files the case
protects, forks, and waits (select on a pipe the child holds, so no polling) until the child
exits or its deadline passes (then SIGKILL to the child's process group). The child:
  - starts its own process group (so a kill also takes anything it started),
  - caps its address space (RLIMIT_AS) and the size of files it writes (RLIMIT_FSIZE),
  - chdirs into the case folder, sends stdout/stderr to files beside it, stdin from /dev/null,
  - runs the case's target in-process (qsim.cli.main(argv), or a library entry point),
  - writes what happened (return code, exception type, innermost qsim frame, traceback) as
    JSON beside the folder, and leaves with os._exit (no atexit handlers, no flushing of
    buffers inherited from the parent).
The parent then classifies (see `Outcome`) and checks the protected files are byte-identical.
"""
from __future__ import annotations

import faulthandler
import hashlib
import io
import json
import os
import re
import resource
import selectors
import shutil
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

GOOD, TRACEBACK, HANG, MEMORY, DATA_LOSS, CRASH, BAD_EXIT = (
    "good", "traceback", "hang", "memory", "data loss", "crash", "bad exit")
# Every class a case can end in; all but GOOD are failures.
OUTCOMES = (GOOD, TRACEBACK, HANG, MEMORY, DATA_LOSS, CRASH, BAD_EXIT)

_CLEAN_ERROR = re.compile(r"^qsim\b[^\n]*error:", re.MULTILINE)
_QSIM_DIR = os.sep + "qsim" + os.sep


@dataclass
class Case:
    """One input: files to lay out in a fresh folder, and what to run there.

    `argv` runs `qsim.cli.main(argv)`; `call` names an entry in the runner's `calls` table
    (a library function given `call_arg`). Paths are relative to the case folder.
    `protected`: files that must be byte-identical after the run (None: every file of the case).
    """
    target: str
    kind: str                                   # generator/mutator that made it (for the report)
    files: dict[str, bytes] = field(default_factory=dict)
    argv: list[str] | None = None
    call: str | None = None
    call_arg: str = ""
    dirs: tuple[str, ...] = ()
    symlinks: dict[str, str] = field(default_factory=dict)
    copies: dict[str, str] = field(default_factory=dict)   # relative dest -> absolute source tree
    protected: tuple[str, ...] | None = None
    timeout_s: float | None = None
    address_space_bytes: int | None = None      # None: the campaign's cap


@dataclass
class Result:
    case: Case
    index: int
    outcome: str
    seconds: float
    rc: int | None = None
    exc_type: str | None = None
    site: str | None = None                     # innermost qsim frame: path:function:line
    detail: str = ""                            # traceback, signal, changed files
    stderr: str = ""
    max_rss_kb: int = 0
    cpu_s: float = 0.0                          # the child's user + system time

    @property
    def failure_key(self) -> str:
        """What makes two failures the same: the class, exception type and innermost qsim frame."""
        return f"{self.outcome}: {self.exc_type or '-'} @ {self.site or '-'}"


def innermost_qsim_frame(tb) -> str | None:
    """'qsim/x/y.py:function:line' of the deepest traceback frame inside the qsim package."""
    site = None
    for frame, line in traceback.walk_tb(tb):
        name = frame.f_code.co_filename
        if _QSIM_DIR in name:
            rel = name[name.rindex(_QSIM_DIR) + 1:]
            site = f"{rel}:{frame.f_code.co_name}:{line}"
    return site


_DUMP_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)', re.MULTILINE)


def hang_site(stderr: str) -> str | None:
    """The innermost qsim frame of the last faulthandler stack dump in `stderr` (most recent first)."""
    start = stderr.rfind("most recent call first")
    if start < 0:
        return None
    for name, line, function in _DUMP_FRAME.findall(stderr[start:]):
        if _QSIM_DIR in name:
            return f"{name[name.rindex(_QSIM_DIR) + 1:]}:{function}:{line}"
    return None


def _dump_tail(stderr: str) -> str:
    start = stderr.rfind("Thread 0x")
    if start < 0:
        start = stderr.rfind("Current thread")
    return stderr[start:][:3000] if start >= 0 else ""


def _hash_tree(root: str, names: Iterable[str]) -> dict[str, str | None]:
    hashes = {}
    for rel in names:
        path = os.path.join(root, rel)
        try:
            with open(path, "rb") as f:
                hashes[rel] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            hashes[rel] = None
    return hashes


def _all_files(root: str) -> list[str]:
    out = []
    for base, dirs, files in os.walk(root):
        for name in files:
            full = os.path.join(base, name)
            if not os.path.islink(full):
                out.append(os.path.relpath(full, root))
    return sorted(out)


def materialize(case: Case, folder: str) -> None:
    """Lays the case's files out under `folder` (which must not exist)."""
    os.makedirs(folder)
    for rel, src in case.copies.items():
        shutil.copytree(src, os.path.join(folder, rel), dirs_exist_ok=True)
    for rel in case.dirs:
        os.makedirs(os.path.join(folder, rel), exist_ok=True)
    for rel, blob in case.files.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(blob)
    for rel, target in case.symlinks.items():
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(target, path)


@dataclass
class Limits:
    timeout_s: float = 15.0
    address_space_bytes: int = 3 << 30
    file_size_bytes: int = 512 << 20


def _child(case: Case, folder: str, stem: str, limits: Limits, calls: dict[str, Callable]) -> None:
    """Runs in the forked child; never returns."""
    status = 3
    try:
        os.setpgid(0, 0)
        faulthandler.disable()     # a crash is classified by its signal, not dumped by a test runner
        cap = case.address_space_bytes or limits.address_space_bytes
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # an oversized write fails with EFBIG
        signal.signal(signal.SIGINT, signal.SIG_DFL)     # the parent's stop handlers are not ours
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(folder)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(stem + ".out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(stem + ".err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        # what a CLI user with a UTF-8 locale gets (the parent's sys.stdout may be a capture object)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="strict")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True)
        # a hang is killed at its deadline; a second before, the stacks go to stderr so the
        # parent can name where it hung (the innermost qsim frame, as for a traceback)
        timeout = case.timeout_s or limits.timeout_s
        faulthandler.dump_traceback_later(max(0.5, timeout - 1.0), exit=False, file=sys.stderr)
        record = {"rc": None, "exc_type": None, "site": None, "tb": None}
        try:
            if case.argv is not None:
                from qsim.cli import main
                rc = main(list(case.argv))
            else:
                rc = calls[case.call](case.call_arg)
            record["rc"] = 0 if rc is None else int(rc)
        except SystemExit as exc:
            code = exc.code
            record["rc"] = code if isinstance(code, int) else (0 if code is None else 1)
        except BaseException as exc:   # noqa: BLE001 - classifying every escape is the point
            record["exc_type"] = type(exc).__name__
            record["site"] = innermost_qsim_frame(exc.__traceback__)
            record["tb"] = "".join(traceback.format_exception(exc))[-6000:]
            record["rc"] = 1
            try:
                sys.stderr.write(record["tb"])
            except BaseException:      # noqa: BLE001
                pass
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:          # noqa: BLE001
            pass
        with open(stem + ".json", "w") as f:
            json.dump(record, f)
        status = 0
    except MemoryError:
        status = 4
    except BaseException:              # noqa: BLE001
        status = 3
    os._exit(status)


def _read(path: str, limit: int = 20000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _classify(case: Case, index: int, folder: str, stem: str, status: int, rusage, seconds: float,
              timed_out: bool, before: dict, limits: Limits) -> Result:
    stderr = _read(stem + ".err")
    max_rss_kb = int(rusage.ru_maxrss) if rusage else 0
    cpu_s = float(rusage.ru_utime + rusage.ru_stime) if rusage else 0.0
    res = Result(case, index, GOOD, seconds, stderr=stderr[-4000:], max_rss_kb=max_rss_kb, cpu_s=cpu_s)
    record = None
    if os.path.exists(stem + ".json"):
        try:
            with open(stem + ".json") as f:
                record = json.load(f)
        except (OSError, ValueError):
            record = None
    if timed_out:
        res.outcome, res.detail = HANG, f"no exit after {seconds:.1f} s (killed)\n{_dump_tail(stderr)}"
        res.site = hang_site(stderr)
    elif os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        res.outcome = MEMORY if sig == signal.SIGKILL else CRASH
        res.exc_type = signal.Signals(sig).name
        res.detail = f"killed by {signal.Signals(sig).name}" + (
            " (out-of-memory killer?)" if sig == signal.SIGKILL else "")
    elif record is None:
        code = os.WEXITSTATUS(status)
        res.outcome = MEMORY if code == 4 else CRASH
        res.exc_type = "MemoryError" if code == 4 else f"exit {code}"
        res.detail = "the child died before writing its result"
    else:
        res.rc, res.exc_type, res.site = record["rc"], record["exc_type"], record["site"]
        if record["exc_type"] == "MemoryError":
            res.outcome, res.detail = MEMORY, record["tb"] or ""
        elif record["exc_type"] is not None:
            res.outcome, res.detail = TRACEBACK, record["tb"] or ""
        elif res.rc == 0:
            res.outcome = GOOD
        elif res.rc == 2 and _CLEAN_ERROR.search(stderr) and "Traceback" not in stderr:
            res.outcome = GOOD
        else:
            res.outcome, res.detail = BAD_EXIT, f"exit {res.rc} without a clean qsim error message"
    if max_rss_kb * 1024 > limits.address_space_bytes and res.outcome == GOOD:
        res.outcome, res.detail = MEMORY, f"peak RSS {max_rss_kb} KiB over the cap"
    after = _hash_tree(folder, before)
    changed = sorted(rel for rel in before if after[rel] != before[rel])
    if changed:
        res.detail = (f"input files changed or lost: {', '.join(changed[:10])}\n" + res.detail)
        res.outcome = DATA_LOSS
    return res


@dataclass
class _Running:
    case: Case
    index: int
    folder: str
    stem: str
    started: float
    deadline: float
    before: dict
    pipe_r: int


def run_cases(cases: Iterable[tuple[int, Case]], workdir: str, *, jobs=1,
              limits: Limits = Limits(), calls: dict[str, Callable] | None = None,
              keep: Callable[[Result], bool] | None = None) -> Iterator[Result]:
    """Runs (index, case) pairs, at most `jobs` at a time; yields a Result per case as it ends.

    Each case's folder is removed after classification unless `keep(result)` says otherwise.
    """
    calls = calls or {}
    running: dict[int, _Running] = {}
    selector = selectors.DefaultSelector()
    source = iter(cases)
    prepared: list[tuple] = []      # the next case, laid out while the running ones work
    exhausted = False

    def prepare() -> None:
        nonlocal exhausted
        if prepared or exhausted:
            return
        try:
            index, case = next(source)
        except StopIteration:
            exhausted = True
            return
        folder = stem = os.path.join(workdir, f"c{index}")
        materialize(case, folder)
        names = case.protected if case.protected is not None else _all_files(folder)
        prepared.append((index, case, folder, stem, _hash_tree(folder, names)))

    try:
        while True:
            prepare()
            while prepared and len(running) < _jobs(jobs):
                index, case, folder, stem, before = prepared.pop()
                pipe_r, pipe_w = os.pipe()
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    os.close(pipe_r)
                    selector.close()
                    _child(case, folder, stem, limits, calls)
                os.close(pipe_w)
                now = time.monotonic()
                timeout = case.timeout_s or limits.timeout_s
                running[pid] = _Running(case, index, folder, stem, now, now + timeout, before, pipe_r)
                selector.register(pipe_r, selectors.EVENT_READ, pid)
                prepare()
            if not running:
                if exhausted and not prepared:
                    break
                continue
            now = time.monotonic()
            wait = max(0.0, min(r.deadline for r in running.values()) - now)
            ready = selector.select(wait)
            finished = [key.data for key, _ in ready]
            now = time.monotonic()
            finished += [pid for pid, r in running.items() if r.deadline <= now and pid not in finished]
            for pid in finished:
                r = running.pop(pid)
                timed_out = False
                pid_done, status, rusage = os.wait4(pid, os.WNOHANG)
                if pid_done == 0:
                    # pipe closed but not yet reaped, or past its deadline: give it a moment
                    if r.deadline <= time.monotonic():
                        timed_out = True
                        _kill_group(pid)
                    _, status, rusage = os.wait4(pid, 0)
                _kill_group(pid)     # anything the child started and left behind
                selector.unregister(r.pipe_r)
                os.close(r.pipe_r)
                result = _classify(r.case, r.index, r.folder, r.stem, status, rusage,
                                   time.monotonic() - r.started, timed_out, r.before, limits)
                if keep is None or not keep(result):
                    _remove(r.folder, r.stem)
                yield result
    finally:
        for pid, r in running.items():
            _kill_group(pid)
            os.waitpid(pid, 0)
            _remove(r.folder, r.stem)
        for _, _, folder, stem, _ in prepared:
            _remove(folder, stem)
        selector.close()


def _jobs(jobs) -> int:
    """`jobs` is a number, or a callable giving the number now (e.g. more after a set time)."""
    return max(1, int(jobs() if callable(jobs) else jobs))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _remove(folder: str, stem: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    for ext in (".out", ".err", ".json"):
        try:
            os.unlink(stem + ext)
        except OSError:
            pass
