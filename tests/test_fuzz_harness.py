"""The fuzz harness (benchmarks/fuzz.py): its classifier on synthetic targets of known outcome,
and a 50-input campaign end to end."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

from _fuzz.calls import _as_cli  # noqa: E402
from _fuzz.runner import (BAD_EXIT, CRASH, DATA_LOSS, GOOD, HANG, MEMORY, TRACEBACK, Case,  # noqa: E402
                          Limits, run_cases)


def _misuse_qsim(_):
    from qsim.limits import check_tensor_size
    check_tensor_size([None], 1, "x")      # int(None) inside qsim: a TypeError, not a QsimError


def _sleep(_):
    time.sleep(120)


def _spin_in_qsim(_):
    from qsim import limits
    limits.check_tensor_size(iter(int, 1), 1, "endless")   # an endless shape: multiplies 0s forever


def _allocate(_):
    return len(bytearray(4 << 30))


def _qsim_error(_):
    from qsim.errors import DataError
    raise DataError("synthetic bad input")


def _clobber(path):
    with open(path, "wb") as f:
        f.write(b"overwritten")


def _segfault(_):
    os.kill(os.getpid(), signal.SIGSEGV)


SYNTHETIC = {
    "misuse": _misuse_qsim, "sleep": _sleep, "spin": _spin_in_qsim, "allocate": _allocate, "clean": _as_cli(_qsim_error),
    "ok": lambda _: 0, "exit1": lambda _: 1, "clobber": _clobber, "segfault": _segfault,
}


def test_classifier_tells_every_outcome_apart(tmp_path):
    names = list(SYNTHETIC)
    cases = [(i, Case("synthetic", name, {"in.dat": b"input bytes"}, call=name, call_arg="in.dat"))
             for i, name in enumerate(names)]
    limits = Limits(timeout_s=2.0, address_space_bytes=1 << 30)
    results = {r.case.kind: r for r in run_cases(cases, str(tmp_path), jobs=2, limits=limits, calls=SYNTHETIC)}
    assert set(results) == set(names)
    assert results["misuse"].outcome == TRACEBACK
    assert results["misuse"].exc_type == "TypeError"
    assert results["misuse"].site.startswith("qsim/limits.py:check_tensor_size:")
    assert "Traceback" in results["misuse"].detail
    assert results["sleep"].outcome == HANG
    assert 2.0 <= results["sleep"].seconds < 100      # killed at its deadline, long before it woke
    assert results["spin"].outcome == HANG           # and a hang is located by a stack dump
    assert results["spin"].site.startswith("qsim/limits.py:check_tensor_size:")
    assert results["allocate"].outcome == MEMORY
    assert results["allocate"].exc_type == "MemoryError"
    assert results["clean"].outcome == GOOD and results["clean"].rc == 2
    assert "qsim: data error: synthetic bad input" in results["clean"].stderr
    assert results["ok"].outcome == GOOD and results["ok"].rc == 0
    assert results["exit1"].outcome == BAD_EXIT
    assert results["clobber"].outcome == DATA_LOSS
    assert "in.dat" in results["clobber"].detail
    assert results["segfault"].outcome == CRASH and results["segfault"].exc_type == "SIGSEGV"
    # every case folder is cleaned up
    assert os.listdir(tmp_path) == []


def test_failure_key_groups_by_class_exception_and_frame(tmp_path):
    cases = [(i, Case("synthetic", "misuse", {}, call="misuse")) for i in range(3)]
    results = list(run_cases(cases, str(tmp_path), jobs=1, limits=Limits(timeout_s=5), calls=SYNTHETIC))
    keys = {r.failure_key for r in results}
    assert len(keys) == 1
    assert keys.pop().startswith("traceback: TypeError @ qsim/limits.py:check_tensor_size:")


def test_fifty_input_campaign_writes_consistent_reports(tmp_path):
    out = tmp_path / "reports"
    fails = tmp_path / "failures"
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "fuzz.py"), "--count", "50", "--seed", "3",
         "--targets", "dat", "quant", "--jobs", "1", "--timeout", "20", "--out", str(out),
         "--save-failures", str(fails), "--workdir", str(tmp_path / "work"), "--quiet"],
        capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "fuzz.json").read_text())
    assert data["totals"]["inputs"] == 50
    outcomes = ("good", "traceback", "hang", "memory", "data loss", "crash", "bad exit")
    assert sum(data["totals"][o] for o in outcomes) == 50
    assert set(data["targets"]) == {"dat", "quant"}
    assert all(t["inputs"] > 0 for t in data["targets"].values())
    assert data["meta"]["inputs_per_s"] > 0
    failing = data["totals"]["inputs"] - data["totals"]["good"]
    assert sum(s["count"] for s in data["distinct_failure_sites"]) == failing
    for site in data["distinct_failure_sites"]:
        assert os.path.isfile(os.path.join(site["reproducer"], "repro.sh"))
    text = (out / "fuzz.md").read_text()
    assert "| all | 50 |" in text


@pytest.mark.parametrize("argv, replaced", [
    (["quantize", "tn/graph.nnef", "--calib", "calib.npz", "-o", "q"], "q"),
    (["quantize", "tn", "--out", "out/../qc"], "qc"),
    (["quantize", "q", "--calib", "calib.npy", "-o", "q"], None),      # q is the input: protected
    (["quantize", "tn", "--calib", "q/main.sknd", "-o", "q"], None),   # an input inside q
    (["quantize", "tn", "-o", "tiny"], None),                          # not an earlier output
    (["simulate", "q", "-o", "q"], None),
])
def test_only_an_earlier_quantize_output_named_by_o_is_unprotected(argv, replaced):
    from _fuzz.gen_cli import _replaced_earlier_output
    assert _replaced_earlier_output(argv) == replaced


def test_the_issue_26_targets_run_clean(tmp_path):
    """The targets that would have found issue 26's classes (dynamic extents into every standard
    operator, zero among huge .dat extents, ONNX attribute kinds and graph outputs, image bombs):
    a short seeded campaign ends with every input good."""
    out = tmp_path / "reports"
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCHMARKS, "fuzz.py"), "--count", "60", "--seed", "5",
         "--targets", "sknd-dynamic", "dat-extents", "onnx-attrs", "images", "--jobs", "1", "--out", str(out),
         "--workdir", str(tmp_path / "work"), "--quiet"], capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "fuzz.json").read_text())
    assert set(data["targets"]) == {"sknd-dynamic", "dat-extents", "onnx-attrs", "images"}
    assert data["totals"]["inputs"] == 60 and data["totals"]["good"] == 60, data["distinct_failure_sites"]
    assert data["meta"]["max_memory"] == "1G"
