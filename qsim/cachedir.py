"""qsim's on-disk caches: one root, and folders private to the user.

`$QSIM_CACHE_DIR` (default `~/.cache/qsim`) is the root of every cache: `skriptnd/` holds parsed
SkriptND modules (pickles), `verilator/` the Verilator builds (shared libraries that qsim loads).
Loading either runs code, so a cache folder is used only while it is private: a real folder (no
symbolic link: the path is checked as named, never resolved first), owned by this user, writable
by no group or other user. A cache that is not is never read; the parse cache is then skipped, and
the Verilator cache replaced, for this process, by a fresh private temporary folder (a slower run,
with a one-line warning).
"""
from __future__ import annotations

import atexit
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

_WARNED: set[str] = set()
_FALLBACKS: dict[str, Path] = {}


def cache_root() -> Path:
    return Path(os.environ.get("QSIM_CACHE_DIR") or Path.home() / ".cache" / "qsim")


def not_private(st: os.stat_result, want_dir: bool) -> str | None:
    """Why a stat result (taken without following links) is not a private folder / file of
    this user, or None when it is."""
    kind_ok = stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if not kind_ok:
        return "not a folder" if want_dir else "not a regular file"
    if st.st_uid != os.getuid():
        return f"owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def warn_once(path: str | Path, what: str, why: str) -> None:
    if str(path) not in _WARNED:
        _WARNED.add(str(path))
        print(f"qsim: warning: not using the {what} {path}: {why}; make it private (chmod 700, "
              f"owned by you) or set QSIM_CACHE_DIR", file=sys.stderr)


def private_folder(name: str, what: str) -> Path:
    """`<root>/<name>`, created 0700; when it is not private (see the module doc), a private
    temporary folder used for the rest of this process instead."""
    folder = cache_root() / name
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        why = not_private(os.lstat(folder), want_dir=True)
    except OSError as err:
        why = err.strerror or str(err)
    if why is None:
        return folder
    warn_once(folder, what, why)
    if name not in _FALLBACKS:
        fallback = Path(tempfile.mkdtemp(prefix=f"qsim-{name}-"))      # created 0700
        atexit.register(shutil.rmtree, fallback, True)
        _FALLBACKS[name] = fallback
    return _FALLBACKS[name]


def is_private(path: Path, want_dir: bool = False) -> bool:
    """Whether `path` is a regular file (a folder with want_dir) of this user that no one else
    may write, and not a symbolic link."""
    try:
        return not_private(os.lstat(path), want_dir) is None
    except OSError:
        return False
