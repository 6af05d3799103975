"""Where an output may go: never over what the command reads, never over the user's files.

Checked before any long work (README, "Outputs"); paths are compared as the OS will reach them
(real paths: symbolic links and '..' followed).

- Inputs: an output is refused when it IS one of the command's inputs, CONTAINS one (replacing
  it would delete the input), or would REPLACE an existing file an input reads: in a model
  folder its model files (.sknd, .dat, graph.nnef, graph.quant, quantization.json), in any
  other input folder (images) every file. A new file or folder beside or inside a model folder
  harms nothing and is allowed. The outputs of one run must not overlap at all.
- Ownership: an existing non-empty output folder is replaced only when everything in it was
  written by an earlier run of the same command, as its manifest (qsim.atomic.MANIFEST) lists;
  a folder written before manifests existed only when it holds the files that command writes
  and nothing else (`OutputKind.legacy`).
- The nearest existing folder of the output must be writable.
A refusal names the conflict; a hint that proposes a place proposes one these rules accept.
"""
from __future__ import annotations

import fnmatch
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .atomic import MANIFEST, folder_entries, read_manifest
from .errors import UsageError

# A model given by one of these files is the whole folder around it (its .dat files, modules).
_MODEL_FILES = ("main.sknd", "graph.nnef", "graph.quant")
_MODEL_FOLDER_MARKS = _MODEL_FILES + ("quantization.json",)
_MODEL_SUFFIXES = (".sknd", ".dat", ".nnef", ".quant")
_SHOWN = 4          # foreign files named in a refusal


@dataclass(frozen=True)
class OutputKind:
    """The folders one command writes. `legacy`: for folders written before manifests, one of
    `marks` must be there and every entry must match one of `legacy` ('/'-separated fnmatch
    patterns, one per depth: '*.png' matches top-level files only); empty: no such folder is
    replaced."""
    command: str                       # as the manifest records it, e.g. "quantize"
    marks: tuple[str, ...] = ()
    legacy: tuple[str, ...] = ()

    def legacy_allows(self, rel: str, is_dir: bool) -> bool:
        """Whether a file (a folder: on the way to a file) at `rel` matches a `legacy` pattern."""
        depth = rel.count("/") + 1
        return any(fnmatch.fnmatchcase(rel, "/".join(parts[:depth]))
                   for parts in (p.split("/") for p in self.legacy)
                   if (len(parts) > depth if is_dir else len(parts) == depth))


QUANTIZED_MODEL = OutputKind("quantize", ("quantization.json",),
                             ("main.sknd", "*.sknd", "*.dat", "quantization.json", "report.json",
                              "report.html", "*.png"))
SIMULATION_REPORT = OutputKind("simulate", ("report.json", "sweep.json"),
                               ("report.json", "report.html", "*.png", "*.csv", "sweep.json",
                                "*/report.json", "*/report.html", "*/*.png", "*/*.csv"))
EXPLORE_REPORT = OutputKind("explore", ("report.json", "points.csv"),
                            ("report.json", "report.html", "points.csv", "*.png"))
TENSOR_DUMP = OutputKind("run --dump")
GOLDEN_VECTORS = OutputKind("export-vectors")
RTL = OutputKind("export-rtl")


@dataclass(frozen=True)
class _Input:
    what: str           # e.g. "model"
    given: str          # as the user wrote it
    real: str
    folder: str | None  # the folder whose files it reads (a model's folder, an input folder)
    model: bool         # the folder is a model folder: only its model files are read

    @staticmethod
    def of(what: str, given) -> "_Input":
        real = os.path.realpath(given)
        if os.path.isfile(real) and os.path.basename(real) in _MODEL_FILES:
            return _Input(what, os.fspath(given), real, os.path.dirname(real), True)
        if os.path.isdir(real):
            model = any(os.path.isfile(os.path.join(real, m)) for m in _MODEL_FOLDER_MARKS)
            return _Input(what, os.fspath(given), real, real, model)
        return _Input(what, os.fspath(given), real, None, False)

    def reads(self, path: str) -> bool:
        """Whether the existing file `path`, inside self.folder, is one this input reads."""
        name = os.path.basename(path)
        return not self.model or name.endswith(_MODEL_SUFFIXES) or name == "quantization.json"


def _inside(path: str, folder: str) -> bool:
    """`path` is `folder` or lies inside it (both real, absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _overlap(a: str, b: str) -> bool:
    return _inside(a, b) or _inside(b, a)


def _conflict(out: str, given: _Input, folder: bool) -> tuple[str, str] | None:
    """(kind, how the output `out` harms the input `given`), or None when it does not."""
    source = f"the {given.what} {given.given}"
    if out == given.real:
        return "is", f"is {source}; writing the output there would replace it"
    if _inside(given.real, out):
        return "contains", f"contains {source}; replacing it would delete the {given.what}"
    if (not folder and given.folder is not None and _inside(out, given.folder)
            and os.path.isfile(out) and given.reads(out)):
        return "is", f"would replace {out}, a file {source} reads"
    return None


def check_output(path: str | os.PathLike, flag: str,
                 inputs: Iterable[tuple[str, str | os.PathLike | None]] = (), *,
                 outputs: Iterable[tuple[str, str | os.PathLike | None]] = (),
                 folder: bool = True, replaces: OutputKind | None = None,
                 default: bool = False, suffixes: tuple[str, ...] = ()) -> Path:
    """Refuses the output `path` (given by option `flag`, e.g. '-o'; `default`: chosen by qsim
    as flag's default; a folder, or a file with folder=False) by the rules of the module doc:
    against the existing inputs of `inputs` ((what, path) pairs; None and missing paths are
    skipped), the same run's other `outputs` (whether they exist or not), the kind of what is in
    its place, the folder's ownership (`replaces`: the kind of output it may replace; None: the
    caller replaces nothing) and its writability. `suffixes`: those a file output may have (a
    place proposed in a hint has one). Returns the real path."""
    text = os.fspath(path)
    if not text.strip():
        raise UsageError(f"{flag}: the output path is empty", hint=f"give {flag} a path")
    if "\0" in text:
        raise UsageError(f"{flag} {text!r}: a path cannot hold a NUL character")
    inputs = [_Input.of(what, given) for what, given in inputs
              if given is not None and os.path.lexists(given)]
    outputs = [(what, given) for what, given in outputs if given is not None]
    label = f"the default output folder {text}" if default else f"{flag} {text}"
    out = os.path.realpath(text)
    for given in inputs:
        conflict = _conflict(out, given, folder)
        if conflict is not None:
            place = _accepted_place(out, conflict[0], flag, inputs, outputs, folder, replaces,
                                    suffixes)
            raise UsageError(f"{label} {conflict[1]}",
                             hint=f"write the output elsewhere, e.g. {flag} {place}" if place else
                             f"choose a {flag} path apart from the inputs")
    for what, given in outputs:
        other = os.path.realpath(given)
        if _overlap(out, other):
            relation = ("is" if out == other else "lies inside" if _inside(out, other)
                        else "contains")
            raise UsageError(f"{label} {relation} the {what} {given}, an output of the same run",
                             hint=f"choose a {flag} path outside the {what}")
    _check_place(out, label, flag, folder, replaces)
    return Path(out)


def _check_place(out: str, label: str, flag: str, folder: bool, replaces: OutputKind | None) -> None:
    """What is at `out` may be replaced by an output of this kind, and `out` can be written."""
    if folder and os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"{label}: a file is in the way of the output folder",
                         hint=f"choose another {flag} path or remove the file")
    if not folder and os.path.isdir(out):
        raise UsageError(f"{label}: a folder, the output is a file",
                         hint="name a file, e.g. out.npy")
    if folder and replaces is not None and os.path.isdir(out):
        refuse_foreign_files(Path(out), replaces, label, flag)
    _check_writable(Path(out), flag)


def _accepted_place(out: str, kind: str, flag: str, inputs: list[_Input], outputs: list,
                    folder: bool, replaces: OutputKind | None, suffixes: tuple[str, ...]) -> str | None:
    """A path, shown relative to the current folder when inside it, that the rules accept in
    place of `out`: a sibling named <name>-out, a qsim-out folder inside `out` (when `out`
    contains an input), or qsim-out/<name> here; None if none is."""
    stem, suffix = (os.path.basename(out), "") if folder else os.path.splitext(os.path.basename(out))
    if suffixes and suffix.lower() not in suffixes:
        suffix = suffixes[0]
    candidates = [os.path.join(os.path.dirname(out), f"{stem}-out{suffix}")]
    if kind == "contains" and folder:
        candidates.insert(0, os.path.join(out, "qsim-out"))
    candidates.append(os.path.join(os.getcwd(), "qsim-out", f"{stem}{suffix}"))
    for candidate in candidates:
        if any(_conflict(candidate, given, folder) for given in inputs):
            continue
        if any(_overlap(candidate, os.path.realpath(g)) for _, g in outputs):
            continue
        try:
            _check_place(candidate, candidate, flag, folder, replaces)
        except UsageError:
            continue
        shown = os.path.relpath(candidate)
        return candidate if shown.startswith("..") else shown
    return None


def refuse_foreign_files(folder: Path, kind: OutputKind, label: str, flag: str) -> None:
    """Refuses to replace the existing folder `folder` unless everything in it was written by
    `qsim <kind.command>` (module doc, Ownership); an empty folder is fine."""
    manifest = read_manifest(folder)
    if manifest is not None and manifest[0] != kind.command:
        raise UsageError(f"{label} is the output of qsim {manifest[0]}, not of qsim {kind.command}; "
                         "qsim replaces an output folder only with the same command's output",
                         hint=f"choose another {flag} path")
    if manifest is not None:
        owned = manifest[1]
        owned_dirs = {f.rsplit("/", k)[0] for f in owned for k in range(1, f.count("/") + 1)}

        def ours(rel: str, is_dir: bool) -> bool:
            return rel == MANIFEST or (rel in owned_dirs if is_dir else rel in owned)
    else:
        def ours(rel: str, is_dir: bool) -> bool:
            return kind.legacy_allows(rel, is_dir)
    foreign = []
    try:
        for rel, is_dir in folder_entries(folder, keep=ours):
            if not ours(rel, is_dir):
                foreign.append(rel + "/" if is_dir else rel)
                if len(foreign) > _SHOWN:
                    break
    except OSError as err:
        raise UsageError(f"{label}: cannot read {err.filename or folder} to see whether qsim wrote "
                         f"it ({err.strerror or err})", hint=f"choose another {flag} path") from None
    named = ", ".join(foreign[:_SHOWN]) + (", ..." if len(foreign) > _SHOWN else "")
    if manifest is not None and foreign:
        raise UsageError(f"{label} holds files qsim {kind.command} did not write: {named}; qsim "
                         "replaces an output folder as a whole, so it would delete them",
                         hint=f"choose another {flag} path, or move those files out of {folder}")
    legacy = (foreign == [] and any((folder / m).is_file() for m in kind.marks))
    if manifest is None and not legacy and (foreign or not _empty(folder)):
        shown = f"holds {named}" if foreign else "has none of " + ", ".join(kind.marks)
        raise UsageError(f"{label} exists and is not an earlier qsim {kind.command} output (it has "
                         f"no {MANIFEST} manifest and {shown}); qsim replaces an output folder "
                         "as a whole, so it would delete what is in it",
                         hint=f"choose a new folder for {flag}, or empty {folder} first")


def _empty(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return next(entries, None) is None


def require_replaceable(out: str | os.PathLike, kind: OutputKind, flag: str = "--out") -> Path:
    """For writers called directly (the Python API): `out`, where the output lands (its real
    path: 'new/../x' is x once 'new' exists), must be new, empty or an earlier output of `kind`
    (refuse_foreign_files). Returns `out` as given."""
    real = Path(os.path.realpath(out))
    if real.exists() and not real.is_dir():
        raise UsageError(f"{flag} {out}: a file is in the way of the output folder",
                         hint=f"choose another {flag} path or remove the file")
    if real.is_dir():
        refuse_foreign_files(real, kind, f"{flag} {out}", flag)
    return Path(out)


def _check_writable(path: Path, flag: str) -> None:
    """The nearest existing ancestor of `path` must be a folder in which qsim can create
    entries (tried for real: permission bits say nothing for root, nor for /proc)."""
    folder = path.absolute().parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: {folder} is a file, not a folder",
                         hint="choose an output path whose folders are folders")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".qsim-write-test-", dir=folder))
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot write in {folder} ({err.strerror or err})",
                         hint="choose an output path in a folder you can write") from None
