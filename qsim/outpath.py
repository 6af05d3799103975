"""Where an output may go: never over the user's inputs, and only where it can be written.

A command's outputs replace whatever is at their path (qsim.atomic), so an output that is,
contains or lies inside one of the command's inputs (model, calibration or evaluation data,
configuration, `--input` arrays) would destroy or alter user data: `qsim quantize M -o M` would
replace the float model. `check_output` refuses that, comparing resolved real paths (symbolic
links and `..` followed), and checks that the output's folder can be created and written,
before any long computation starts.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .errors import UsageError

# A model given by one of these files is the whole folder around it (its .dat files, modules).
_MODEL_FILES = ("main.sknd", "graph.nnef", "graph.quant")


def _extent(path: str | os.PathLike) -> str:
    """The real path an input occupies: a model's main file stands for its folder."""
    real = os.path.realpath(path)
    if os.path.basename(real) in _MODEL_FILES and os.path.isfile(real):
        return os.path.dirname(real)
    return real


def _inside(path: str, folder: str) -> bool:
    """`path` is `folder` or lies inside it (both real, absolute)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def check_output(path: str | os.PathLike, flag: str,
                 inputs: Iterable[tuple[str, str | os.PathLike | None]] = (), *,
                 outputs: Iterable[tuple[str, str | os.PathLike | None]] = (),
                 folder: bool = True, replaces: "Replaceable | None" = None) -> Path:
    """Refuses the output `path` (given by option `flag`, e.g. '-o'; a folder, or a file with
    folder=False) if it is, contains or lies inside an existing input of `inputs` ((what,
    path) pairs; None and missing paths are skipped) or of the same run's other `outputs`
    (compared whether they exist or not), if something of the other kind is in its place, or
    if its folder cannot be written. An existing non-empty output folder is replaced only if
    `replaces` recognises it as an earlier output of the same command: the swap replaces a
    folder as a whole, so `-o ~` must not take a home folder with it. Returns `path`."""
    text = os.fspath(path)
    if not text.strip():
        raise UsageError(f"{flag}: the output path is empty", hint=f"give {flag} a path")
    if "\0" in text:
        raise UsageError(f"{flag} {text!r}: a path cannot hold a NUL character")
    out = os.path.realpath(text)
    for what, given in inputs:
        if given is None or not os.path.lexists(given):
            continue
        _refuse_overlap(text, out, flag, what, given, _extent(given))
    for what, given in outputs:
        if given is not None:
            _refuse_overlap(text, out, flag, what, given, os.path.realpath(given))
    # From here on the checks look at `out`, the path as the writers will reach it: for
    # 'new/../tiny' the OS resolves '..' only once 'new' exists, so the raw text would look
    # missing here and then land on 'tiny' when the writer creates 'new'.
    text = out
    if folder and os.path.exists(text) and not os.path.isdir(text):
        raise UsageError(f"{flag} {text}: a file is in the way of the output folder",
                         hint=f"choose another {flag} path or remove the file")
    if folder and replaces is not None and os.path.isdir(text) and any(os.scandir(text)):
        if not replaces.recognises(Path(text)):
            raise UsageError(f"{flag} {text}: the folder exists and is not an earlier "
                             f"{replaces.what}; qsim replaces its output folder as a whole, "
                             "so it does not replace other folders",
                             hint=f"choose a new folder, or remove {text} first")
    if not folder and os.path.isdir(text):
        raise UsageError(f"{flag} {text}: a folder, the output is a file",
                         hint="name a file, e.g. out.npy")
    _check_writable(Path(text), flag)
    return Path(text)


@dataclass(frozen=True)
class Replaceable:
    """Which existing folders an output may replace: those holding one of `markers` (files
    the command always writes), or, with `only_suffix`, those holding nothing but such files."""
    what: str                          # e.g. "qsim quantize output (quantization.json)"
    markers: tuple[str, ...] = ()
    only_suffix: str | None = None

    def recognises(self, folder: Path) -> bool:
        if any((folder / m).is_file() for m in self.markers):
            return True
        if self.only_suffix is None:
            return False
        return all(e.is_file(follow_symlinks=False) and e.name.endswith(self.only_suffix)
                   for e in os.scandir(folder))


QUANTIZED_MODEL = Replaceable("qsim quantize output (it has no quantization.json)",
                              ("quantization.json",))
SIMULATION_REPORT = Replaceable("qsim simulate output (it has no report.json or sweep.json)",
                                ("report.json", "sweep.json"))
TENSOR_DUMP = Replaceable("qsim run --dump folder (it holds other things than .npy files)",
                          only_suffix=".npy")


def _refuse_overlap(text: str, out: str, flag: str, what: str, given, taken: str) -> None:
    if _inside(out, taken) or _inside(taken, out):
        relation = ("is" if out == taken else "lies inside" if _inside(out, taken)
                    else "contains")
        raise UsageError(f"{flag} {text} {relation} the {what} {given}; writing the output "
                         "would replace or alter it", hint="choose an output path apart from "
                         f"the inputs and other outputs, e.g. {flag} qsim-out/result")


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


def require_new_or_empty(out: str | os.PathLike) -> Path:
    """For outputs that are never replaced (golden vectors, RTL): the folder must be new or
    empty, judged where the writer will land ('new/../x' is x once 'new' exists)."""
    real = Path(os.path.realpath(out))
    if real.exists() and (not real.is_dir() or any(real.iterdir())):
        raise UsageError(f"output directory '{out}' exists and is not empty",
                         hint="choose a new directory or remove the old one")
    return Path(out)
