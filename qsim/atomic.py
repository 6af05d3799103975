"""Outputs that appear whole or not at all.

Every result qsim writes (model folders, reports, vectors, RTL) is built in a
temporary sibling directory and renamed into place when complete, so an
interrupted run never leaves a half-written result that looks whole.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from .errors import UsageError


@contextlib.contextmanager
def atomic_directory(target: str | os.PathLike, overwrite: bool = True) -> Iterator[Path]:
    """Yields a fresh temporary directory; on success it replaces `target`.

    On an exception the temporary directory is removed and `target` is left as
    it was. With overwrite=False an existing `target` is an error.
    """
    target = Path(target)
    if target.exists() and not overwrite:
        raise UsageError(f"output {target} already exists", hint="choose another -o/--out or remove it")
    if target.exists() and not target.is_dir():
        raise UsageError(f"output {target} exists and is not a directory",
                         hint="choose another -o/--out path")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.partial-", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old-{os.getpid()}"
        os.rename(target, old)
    os.rename(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Writes a text file through a temporary name in the same directory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
