"""Outputs that appear whole or not at all, and never go missing.

Every result qsim writes (model folders, reports, vectors, RTL, `run --output`) is built under a
temporary name beside its target and swapped in when complete, so an interrupted run never
leaves a half-written result that looks whole, and never leaves the target missing.

Folder protocol (`atomic_directory(OUT)`), each step one system call:
  1. build the result in `.OUT.partial-<pid>-<random>` (OUT's parent: same file system, so the
     renames below are atomic);
  2. OUT absent: rename the partial folder to OUT (RENAME_NOREPLACE where the kernel has it);
     OUT present: renameat2(RENAME_EXCHANGE) swaps the two names in one step (Linux >= 3.15);
  3. delete the partial name, which now holds the old content.
Where the file system cannot exchange names (ENOSYS, EINVAL), a journal makes the two-rename
swap recoverable: `.OUT.swap-<pid>` records both names, then OUT -> `.OUT.old-<pid>-<random>`,
partial -> OUT, then the journal and the old folder are deleted. OUT is missing only between
those two renames; the next run writing OUT finds the journal of the dead process and puts the
complete new folder (or, if that is gone, the old one) back under OUT.

Permissions: an output is created as `cp` or `numpy.save` would create it (folders 0777, files
0666, less the umask or the parent's default ACL); cache entries (private=True, and
atomic_directory_once) stay 0700/0600 whatever the umask.

Ownership: atomic_directory(OUT, command=...) records every file the command wrote in
OUT/.qsim-output.json (MANIFEST), so that a later run can tell its own earlier output from a
folder holding the user's files (qsim.outpath replaces only the former).

An output path that is a symbolic link stays one: the result is published at the path the link
resolves to (the temporary names live beside that folder).

Leftovers of killed runs (`.OUT.partial-<pid>-*`, `.OUT.old-<pid>-*`, `.OUT.swap-<pid>`, whose
process no longer exists) are removed, with a note on stderr, by the next run writing OUT.

QSIM_TEST_CRASH_AT=<point> kills the process with SIGKILL at a named point (POINTS), so that
tests can check every window of the protocol; QSIM_TEST_NO_EXCHANGE=1 forces the journal
protocol. Neither is meant for users.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import platform
import re
import secrets
import shutil
import signal
import stat
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from .errors import UsageError

CRASH_ENV = "QSIM_TEST_CRASH_AT"
NO_EXCHANGE_ENV = "QSIM_TEST_NO_EXCHANGE"
POINTS = ("partial-created", "built", "journal-written", "old-moved", "swapped", "discarding")

_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_SYS_RENAMEAT2 = {"x86_64": 316, "aarch64": 276, "riscv64": 276, "ppc64le": 357, "s390x": 347}


MANIFEST = ".qsim-output.json"          # the record of an output folder's own files
_MANIFEST_MAX_BYTES = 64 << 20            # ~ a million file names; a larger one is not ours


def folder_entries(folder: Path, keep=lambda rel, is_dir: True) -> Iterator[tuple[str, bool]]:
    """(relative '/'-separated path, is a real folder) of every entry under `folder`, top down,
    links not followed; a folder for which `keep` is False is yielded but not entered.
    An unreadable folder raises OSError."""
    def fail(err: OSError) -> None:
        raise err
    for top, dirs, files in os.walk(folder, onerror=fail):
        rel_top = os.path.relpath(top, folder).replace(os.sep, "/")
        prefix = "" if rel_top == "." else rel_top + "/"
        entered = []
        for name in dirs:
            rel = prefix + name
            if os.path.islink(os.path.join(top, name)):
                yield rel, False
                continue
            yield rel, True
            if keep(rel, True):
                entered.append(name)
        dirs[:] = entered
        for name in files:
            yield prefix + name, False


def write_manifest(folder: Path, command: str) -> None:
    """Records in `folder`/MANIFEST every file (not folder) in it: the output of `qsim
    <command>`, all written by it."""
    files = sorted(rel for rel, is_dir in folder_entries(folder) if not is_dir and rel != MANIFEST)
    (folder / MANIFEST).write_text(json.dumps({"qsim output of": command, "files": files},
                                              indent=0) + "\n", encoding="utf-8")


def read_manifest(folder: Path) -> tuple[str, frozenset[str]] | None:
    """(command, files) of `folder`'s manifest; None when it has none, or one that is not a
    regular file of the written form (never followed through a link)."""
    path = folder / MANIFEST
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(_MANIFEST_MAX_BYTES + 1)
    try:
        doc = json.loads(data.decode("utf-8")) if len(data) <= _MANIFEST_MAX_BYTES else None
        command, files = doc["qsim output of"], doc["files"]
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    if not (isinstance(command, str) and isinstance(files, list)
            and all(isinstance(f, str) for f in files)):
        return None
    return command, frozenset(files)


def _crash_point(name: str) -> None:
    """Test hook: dies here, without any cleanup, when QSIM_TEST_CRASH_AT names this point."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


_LIBC = _libc()


def renameat2(src: str | os.PathLike, dst: str | os.PathLike, flags: int) -> bool:
    """renameat2(2) with `flags`; False where the kernel, C library or file system lacks it
    (ENOSYS, EINVAL); any other failure raises OSError."""
    if _LIBC is None or os.environ.get(NO_EXCHANGE_ENV):
        return False
    a, b = os.fsencode(src), os.fsencode(dst)
    function = getattr(_LIBC, "renameat2", None)
    if function is not None:        # glibc >= 2.28
        result = function(_AT_FDCWD, a, _AT_FDCWD, b, ctypes.c_uint(flags))
    else:
        number = _SYS_RENAMEAT2.get(platform.machine())
        if number is None:
            return False
        result = _LIBC.syscall(ctypes.c_long(number), _AT_FDCWD, a, _AT_FDCWD, b,
                               ctypes.c_uint(flags))
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), os.fsdecode(a), None, os.fsdecode(b))


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _discard(path: Path) -> None:
    """Deletes a folder that no longer holds the live result (the crash point sits after the
    first entry is gone: a half-deleted leftover must be cleaned by the next run)."""
    if path.is_symlink():               # OUT was a link: drop the link, never its target
        path.unlink()
        return
    entries = sorted(path.iterdir()) if path.is_dir() else []
    if entries:
        _remove(entries[0])
    _crash_point("discarding")
    _remove(path)


def _leftover_re(name: str) -> re.Pattern:
    return re.compile(rf"\.{re.escape(name)}\.(partial|old|swap)-(\d+)(?:-.*)?")


def _note(text: str) -> None:
    print(f"qsim: {text}", file=sys.stderr)


def recover(target: str | os.PathLike) -> None:
    """Completes or removes what killed runs writing `target` left beside it (module doc)."""
    target = Path(target)
    parent = target.parent
    if not parent.is_dir():
        return
    pattern = _leftover_re(target.name)
    found = []
    for entry in parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and not _pid_alive(int(match.group(2))):
            found.append((match.group(1), entry))
    for kind, journal in found:         # journals first: they may name the content to keep
        if kind == "swap":
            _complete_swap(target, journal)
    for kind, entry in found:
        if kind != "swap" and os.path.lexists(entry):
            _remove(entry)
            _note(f"removed {entry}, left by an interrupted run")


def _complete_swap(target: Path, journal: Path) -> None:
    pattern = _leftover_re(target.name)
    try:
        names = json.loads(journal.read_bytes()[:4096].decode("utf-8"))
        # only the journal's own kind of names: siblings of target, never another path
        if not all(isinstance(names[k], str) and pattern.fullmatch(names[k]) for k in ("new", "old")):
            raise ValueError("not names of this output's leftovers")
        new, old = target.parent / names["new"], target.parent / names["old"]
    except Exception:       # noqa: BLE001 - a damaged journal restores nothing; it is removed
        new = old = None
    if new is not None and not os.path.lexists(target):
        for source in (new, old):
            if source.is_dir():
                os.rename(source, target)
                _note(f"restored {target} from {source.name}, left by an interrupted run")
                break
    journal.unlink()


def _place(tmp: Path, target: Path) -> None:
    """Publishes the complete folder `tmp` as `target` (module doc, steps 2 and 3)."""
    if not os.path.lexists(target):
        if not renameat2(tmp, target, _RENAME_NOREPLACE):
            os.rename(tmp, target)
        _crash_point("swapped")
        return
    if renameat2(tmp, target, _RENAME_EXCHANGE):
        _crash_point("swapped")
        _discard(tmp)                   # tmp's name now holds the old content
        return
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-{os.getpid()}-", dir=target.parent))
    os.rmdir(old)                       # a fresh name on this file system, free again
    journal = target.parent / f".{target.name}.swap-{os.getpid()}"
    atomic_write_text(journal, json.dumps({"new": tmp.name, "old": old.name}))
    _crash_point("journal-written")
    try:
        os.rename(target, old)
    except BaseException:
        journal.unlink()
        raise
    _crash_point("old-moved")
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        journal.unlink()
        raise
    _crash_point("swapped")
    journal.unlink()
    _discard(old)


def _output_error(target: Path, err: OSError) -> UsageError:
    return UsageError(f"cannot write the output {target}: {err.strerror or err}",
                      hint="choose an output path in a folder you can write")


# Modes asked of the kernel when creating: it applies the umask (or the parent folder's default
# ACL), as for `cp` and `numpy.save`; private cache entries ask for the owner only.
_DIR_MODE, _FILE_MODE = 0o777, 0o666
_PRIVATE_DIR_MODE, _PRIVATE_FILE_MODE = 0o700, 0o600


def _partial_name(target: Path) -> Path:
    """A fresh temporary name beside `target`, in the form `recover` knows."""
    return target.parent / f".{target.name}.partial-{os.getpid()}-{secrets.token_hex(4)}"


def _create_dir(target: Path, mode: int) -> Path:
    """A new empty folder under a fresh partial name (never an existing one: EEXIST retries)."""
    while True:
        path = _partial_name(target)
        try:
            os.mkdir(path, mode)
            return path
        except FileExistsError:
            continue


def _create_file(target: Path, mode: int) -> tuple[int, Path]:
    """A new empty file under a fresh partial name, opened for writing: (descriptor, path)."""
    while True:
        path = _partial_name(target)
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode), path
        except FileExistsError:
            continue


@contextlib.contextmanager
def _staging_directory(target: Path, mode: int = _DIR_MODE) -> Iterator[Path]:
    """A fresh temporary directory beside `target`, named so that `recover` finds it after a
    crash; removed when the body raises. The caller publishes it when the body completes."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        recover(target)
        tmp = _create_dir(target, mode)
    except OSError as err:
        raise _output_error(target, err) from None
    _crash_point("partial-created")
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _crash_point("built")


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike, overwrite: bool = True,
                     command: str | None = None) -> Iterator[Path]:
    """Yields a fresh temporary directory; on success it takes the place of `target`.

    On an exception the temporary directory is removed and `target` is left as it was. With
    overwrite=False an existing `target` is an error. With `command` (e.g. "quantize"), the
    folder gets a manifest of the files written in it (write_manifest)."""
    # the path as the OS reaches it ('new/../x' is './x' once 'new' exists; a link is its
    # target): a link to an output folder stays a link to the new output
    target = Path(os.path.realpath(target))
    if target.exists() and not overwrite:
        raise UsageError(f"output {target} already exists", hint="choose another -o/--out or remove it")
    if target.exists() and not target.is_dir():
        raise UsageError(f"output {target} exists and is not a directory",
                         hint="choose another -o/--out path")
    with _staging_directory(target) as tmp:
        yield tmp
        if command is not None:
            write_manifest(tmp, command)
    try:
        _place(tmp, target)
    except BaseException as err:
        if os.path.lexists(target):     # (_place restores target before it raises)
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(err, OSError):
            raise _output_error(target, err) from None
        raise


@contextlib.contextmanager
def atomic_directory_once(target: str | os.PathLike) -> Iterator[Path]:
    """Like atomic_directory, for cache entries whose name determines their content (a hash):
    the first complete copy to arrive stays. Yields a fresh temporary directory beside
    `target`; on success it is renamed to `target` unless another process published `target`
    meanwhile, in which case this copy is discarded (never a swap: a process may be using
    the files of the published one). On an exception the temporary directory is removed."""
    target = Path(target)
    with _staging_directory(target, _PRIVATE_DIR_MODE) as tmp:
        yield tmp
    try:
        if not renameat2(tmp, target, _RENAME_NOREPLACE):
            os.rename(tmp, target)      # onto an existing non-empty folder: ENOTEMPTY/EEXIST
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (err.errno in (errno.EEXIST, errno.ENOTEMPTY) and target.is_dir()):
            raise


@contextlib.contextmanager
def atomic_file(target: str | os.PathLike, private: bool = False) -> Iterator[Path]:
    """Yields a temporary path beside `target`; on success it replaces `target` (rename(2)
    replaces a file in one step, so `target` is never missing). A `target` that is a symbolic
    link stays one (the file it resolves to is replaced), except with `private` (cache
    entries: created 0600, and a link in their place is replaced, never followed)."""
    target = Path(target) if private else Path(os.path.realpath(target))
    if target.is_dir():
        raise UsageError(f"output {target} is a folder", hint="name a file, e.g. out.npy")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        recover(target)
        fd, tmp = _create_file(target, _PRIVATE_FILE_MODE if private else _FILE_MODE)
        os.close(fd)
    except OSError as err:
        raise _output_error(target, err) from None
    try:
        yield tmp
        _crash_point("built")
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes, private: bool = False) -> None:
    """Writes a file through a temporary name in the same directory (`.NAME.partial-<pid>-*`,
    the name recover() knows), renamed over `path` when complete; created as numpy.save would
    (0666 less the umask), or 0600 with `private`. The parent folder is created; an OSError
    (no permission, no space) propagates as it is, and the temporary file is gone."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_file(path, _PRIVATE_FILE_MODE if private else _FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str, private: bool = False) -> None:
    """Writes a UTF-8 text file through a temporary name in the same directory."""
    atomic_write_bytes(path, text.encode("utf-8"), private)
