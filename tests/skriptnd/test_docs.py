"""Every code example of docs/skriptnd.md runs: the Python blocks in order in one namespace, then
each `qsim ...` line of the shell blocks through qsim.cli.main (exit code 0)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

from qsim.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "skriptnd.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)


def test_doc_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    python, shell = blocks("python"), blocks("sh")
    assert python and shell
    namespace: dict = {}
    for code in python:
        exec(compile(code, str(DOC), "exec"), namespace)
    for block in shell:
        for line in block.strip().splitlines():
            command = line.split("#")[0].strip()
            assert command.startswith("qsim ")
            assert main(shlex.split(command)[1:]) == 0, command
    assert (tmp_path / "y.npy").exists() and (tmp_path / "tensors" / "output.npy").exists()
    assert "valid SkriptND model" in capsys.readouterr().out
