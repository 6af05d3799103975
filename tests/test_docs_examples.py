"""Every fenced example in README.md and docs/*.md runs as written, so an API or CLI change that
breaks one fails here.

The convention (docs/architecture.md, "Examples in the docs"):
- every fenced block names its language; `python` and `sh` blocks are examples and run, every other
  language (`text` for synopses, diagrams and sample output, `toml`, `json`) is shown only;
- a document's examples run in order in one fresh folder, its python blocks in one namespace (a
  later block may use what an earlier one made, as a reader would), its sh blocks with bash
  (`set -euo pipefail`) and `qsim` meaning this checkout's `python -m qsim`;
- examples may use the reader's own files by these names, which the test makes in the folder
  first: `model.onnx` (a small float CNN, input `x` [1, 3, 8, 8]), `model_qdq.onnx` (its QDQ
  export by onnxruntime's quantize_static), `calib.npy` (16 inputs for it), `x.npy` (one);
- an example that cannot run here says why in an HTML comment right above it:
  `<!-- not run: REASON -->`; such examples are few and each reason is checked to be given.
A block fails on a non-zero exit, an exception, or a Python traceback printed by a command.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "hw" / "README.md"]
RUN = {"python", "sh"}
SHOWN = {"text", "toml", "json"}
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Example:
    document: Path
    line: int               # the opening fence's line, 1-based
    language: str
    code: str
    not_run_reason: str | None

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def examples_of(document: Path) -> list[Example]:
    text = document.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.search(before)
        found.append(Example(document, line, match.group(1).strip(), match.group(2),
                             reason.group(1) if reason else None))
    return found


def test_every_fenced_block_names_a_known_language():
    unknown = [f"{e.where}: ```{e.language}" for d in DOCUMENTS for e in examples_of(d)
               if e.language not in RUN | SHOWN]
    assert unknown == [], "name the block's language (python, sh; text/toml/json for what is only shown)"


def test_examples_not_run_say_why_and_are_few():
    skipped = [e for d in DOCUMENTS for e in examples_of(d) if e.not_run_reason is not None]
    assert all(len(e.not_run_reason) >= 20 for e in skipped), [e.where for e in skipped]
    assert all(e.language in RUN for e in skipped), "only examples (python, sh) can be marked not run"
    runnable = [e for d in DOCUMENTS for e in examples_of(d) if e.language in RUN]
    assert len(skipped) <= len(runnable) // 4, [e.where for e in skipped]


@pytest.fixture
def shell_env(tmp_path_factory):
    """PATH with a `qsim` that is this checkout's, and PYTHONPATH so `python -m qsim` is too."""
    bin_dir = tmp_path_factory.mktemp("bin")
    wrapper = bin_dir / "qsim"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m qsim "$@"\n')
    wrapper.chmod(0o755)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    # The README's install step: this test runs inside the installed checkout already (CI
    # installs it with the README's own command, and .ci/run installs the wheel in a fresh venv
    # and runs every command from it), so `pip install` of this project passes and any other
    # pip call fails the example.
    pip = bin_dir / "pip"
    pip.write_text('#!/bin/sh\ncase "$*" in "install ."|"install -e .[test]") exit 0;; esac\n'
                   'echo "docs example runs pip $*: not this project\'s install step" >&2\nexit 1\n')
    pip.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("QSIM_SCHEDULER", None)
    return env


def make_readers_files(folder: Path) -> None:
    """The files the examples may take as the reader's own (see the module doc)."""
    from tests.onnx.qdq_models import cnn_model, quantize_qdq, samples
    from tests.onnx.onnx_helpers import save
    model = cnn_model()
    save(model, folder, "model.onnx")
    shutil.move(quantize_qdq(model, folder, per_channel=True), folder / "model_qdq.onnx")
    np.save(folder / "calib.npy", np.stack([x[0] for x in samples(model, 16, seed=5)]))
    np.save(folder / "x.npy", samples(model, 1, seed=6)[0])


def _run_python(example: Example, namespace: dict) -> None:
    code = compile("\n" * example.line + example.code, str(example.document), "exec")
    exec(code, namespace)


def _run_sh(example: Example, env: dict, cwd: Path) -> None:
    done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + example.code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (
        f"{example.where}: exit {done.returncode}\n--- stdout\n{done.stdout[-3000:]}\n"
        f"--- stderr\n{done.stderr[-3000:]}")


DOCUMENTS_WITH_EXAMPLES = [d for d in DOCUMENTS if any(e.language in RUN and e.not_run_reason is None
                                                       for e in examples_of(d))]


@pytest.mark.parametrize("document", DOCUMENTS_WITH_EXAMPLES, ids=lambda d: str(d.relative_to(ROOT)))
def test_the_examples_of_a_document_run(document, tmp_path, monkeypatch, shell_env):
    make_readers_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs_example__"}
    for example in examples_of(document):
        if example.language not in RUN or example.not_run_reason is not None:
            continue
        if example.language == "python":
            _run_python(example, namespace)
        else:
            _run_sh(example, shell_env, tmp_path)
