"""Unpacking an NNEF 1.0 container (a tar archive, optionally compressed; chapter 5) safely.

The archive is read member by member in one pass and never held in memory. Before a member is
copied out, its header is checked:
- its name must stay inside the container (no absolute name, no `..` component);
- it must be a regular file or a folder: links, devices and fifos are refused, so nothing
  unpacked can point outside the temporary folder;
- its declared size must be within the tensor limit (qsim.limits.max_tensor_bytes), and all
  members together within CONTAINER_SIZE_FACTOR times that limit;
- at most MAX_MEMBERS members.
Only what a model is made of is copied out (graph.nnef, graph.quant, *.dat, 5.1); vendor files
are skipped. The copy is streamed in blocks and stops at the declared size. The `.dat` files
copied out are then read like those of a folder, with the same header checks.
"""
from __future__ import annotations

import lzma
import os
import tarfile
import zlib

from ..errors import DataError, Location
from ..limits import MAX_TENSOR_BYTES_ENV, format_bytes, max_tensor_bytes
from ..tensorfile import relative_parts

# A real model has a few hundred members; a million empty headers is an attack on memory.
MAX_MEMBERS = 100_000
# All members together may take this many times the limit on one tensor.
CONTAINER_SIZE_FACTOR = 4
MODEL_FILES = ("graph.nnef", "graph.quant")
_COPY_BLOCK = 1 << 20
_READ_ERRORS = (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError)


def unpack_container(path: str, dest: str) -> str:
    """Copies the model files of the container at `path` into the empty folder `dest`.

    Returns the model root inside `dest`: `dest` itself, or the one top folder that wraps
    everything when graph.nnef is not at the top. Raises DataError for any refused member.
    """
    where = Location(path)
    limit = max_tensor_bytes()
    total_limit = CONTAINER_SIZE_FACTOR * limit
    total = members = 0
    copied: set[str] = set()
    current = None
    try:
        with tarfile.open(path, "r:*") as tar:
            while True:
                current = None
                member = tar.next()
                if member is None:
                    break
                current = member.name
                members += 1
                if members > MAX_MEMBERS:
                    raise DataError(f"container {path} has more than {MAX_MEMBERS} members", location=where,
                                    hint="an NNEF container holds graph.nnef, graph.quant and one .dat "
                                         "file per variable (5.1)")
                rel = member_path(member.name, path)
                if member.isdir():
                    continue
                _check_kind(member, path)
                if member.size > limit:
                    raise DataError(
                        f"container member '{member.name}' is {format_bytes(member.size)}, over the "
                        f"{format_bytes(limit)} limit on one tensor", location=where,
                        hint=f"if this is intended, raise the limit with --max-tensor-bytes or "
                             f"{MAX_TENSOR_BYTES_ENV}")
                total += member.size
                if total > total_limit:
                    raise DataError(
                        f"container {path} unpacks to more than {format_bytes(total_limit)} "
                        f"({CONTAINER_SIZE_FACTOR} x the tensor limit) at member '{member.name}'",
                        location=where, hint="raise the limit with --max-tensor-bytes if the model "
                                             "really is this large")
                if not _is_model_file(rel):
                    continue  # vendor data (5.1: "simply omitted by other tools")
                copied.add(rel)  # a later member of the same name replaces the earlier (tar)
                _copy_member(tar, member, os.path.join(dest, *rel.split("/")))
    except _READ_ERRORS as err:
        at = f" at member '{current}'" if current else ""
        raise DataError(f"cannot read container {path}{at}: {err}", location=where,
                        hint="NNEF containers are (optionally gzip-compressed) tar archives (5)") from None
    return _model_root(dest, copied)


def member_path(name: str, container: str) -> str:
    """A member's name as a relative path of '/'-separated parts; refuses names that leave."""
    parts = relative_parts(name)
    if parts is None:
        raise DataError(f"container member '{name}' has a name outside the container",
                        location=Location(container),
                        hint="member names must be relative paths without '..' (refused for safety)")
    return "/".join(parts)


def _check_kind(member: tarfile.TarInfo, container: str) -> None:
    if member.isfile():
        return
    if member.issym() or member.islnk():
        what = f"a {'symbolic' if member.issym() else 'hard'} link to '{member.linkname}'"
    elif member.ischr() or member.isblk():
        what = "a device"
    elif member.isfifo():
        what = "a fifo"
    else:
        what = f"of tar type {member.type!r}"
    raise DataError(f"container member '{member.name}' is {what}", location=Location(container),
                    hint="NNEF containers hold regular files only (links and devices are refused for safety)")


def _is_model_file(rel: str) -> bool:
    return rel.rsplit("/", 1)[-1] in MODEL_FILES or rel.endswith(".dat")


def _copy_member(tar: tarfile.TarFile, member: tarfile.TarInfo, target: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    source = tar.extractfile(member)
    left = member.size
    with source, open(target, "wb") as out:
        while left > 0:
            block = source.read(min(_COPY_BLOCK, left))
            if not block:
                raise EOFError(f"member '{member.name}' ends before its declared {member.size} bytes")
            out.write(block)
            left -= len(block)


def _model_root(dest: str, copied: set[str]) -> str:
    """`dest`, or the one top folder that wraps the whole model."""
    if "graph.nnef" in copied:
        return dest
    tops = {rel.split("/", 1)[0] for rel in copied if "/" in rel}
    if len(tops) == 1 and not any("/" not in rel for rel in copied):
        top = tops.pop()
        if f"{top}/graph.nnef" in copied:
            return os.path.join(dest, top)
    return dest
