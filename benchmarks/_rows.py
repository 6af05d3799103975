"""What the benchmarks (models.py, accuracy.py, float_speed.py, qdq.py, ...) share when they
write a report: rows per model merged with the previous run's (a run of a few models keeps the
others' figures), the machine line, and writing the JSON and Markdown pair."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # this checkout's qsim

from qsim.atomic import atomic_write_text  # noqa: E402


def machine() -> str:
    return f"{platform.machine()} {platform.system()}, Python {platform.python_version()}"


def commit() -> str | None:
    """The checkout's git commit (with "+changes" when code outside reports/ has uncommitted
    edits), None outside git: which code a report's figures come from."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                              text=True, timeout=30)
        # reports/ is what the benchmarks write: edits there are results, not code
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)reports"], cwd=root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


START_COMMIT = commit()   # the code this process runs: taken once, commits made during a run do not count


def run_header() -> dict:
    """machine, date, commit (of the checkout when this process started) and the 1-minute load
    average at the time of the call (the machine is shared: every time in a report is read
    against it)."""
    return {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "commit": START_COMMIT,
            "load": round(os.getloadavg()[0], 1)}


def merged_rows(previous: dict, new: dict, order: Iterable[str]) -> dict:
    """Rows by model name: `new` replaces `previous` model by model, the models not run this time
    keep their previous rows; in `order` (the architectures' order), names outside it dropped."""
    rows = dict(previous, **new)
    return {name: rows[name] for name in order if name in rows}


def read_previous(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def write_report(out: Path, stem: str, results: dict, markdown: Callable[[dict], str], echo: bool = True) -> str:
    """Writes out/<stem>.json and out/<stem>.md (atomically, the folder made when missing; the
    Markdown ends in one newline); prints it with `echo` and returns it. The one report writer
    of the benchmarks (models, accuracy, float_speed, qdq, ...)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / f"{stem}.json", json.dumps(results, indent=2, default=float) + "\n")
    text = markdown(results).rstrip("\n")
    atomic_write_text(out / f"{stem}.md", text + "\n")
    if echo:
        print(text)
    return text


def with_kept_sections(generated: str, previous: str | None) -> str:
    """A regenerated report: `generated` (the heading and table of this run, which has no
    second-level headings of its own) followed by every `## ` section of the `previous` text,
    the written readings and A/B comparisons that a run of the script must not erase."""
    if not previous or "\n## " not in previous:
        return generated
    return generated.rstrip("\n") + "\n\n" + previous[previous.index("\n## ") + 1:]
