"""`qsim simulate --cores N` and `cores = N` in the configuration: the report's per-core line,
the same layer values as one core, and the errors (exit 2, no output folder)."""
import json

import pytest

from qsim.cli import main


def _run(capsys, *argv):
    code = main(["simulate", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_on_two_cores_reports_cycles_per_core(tmp_path, capsys):
    code, one_text, _ = _run(capsys, "--engine", "model", "--config", "8x8", "-o", str(tmp_path / "one"), "-q")
    assert code == 0
    code, text, _ = _run(capsys, "--engine", "model", "--config", "8x8", "--cores", "2", "-o", str(tmp_path / "two"), "-q")
    assert code == 0 and "every layer bit-exact" in text
    line = next(line for line in text.splitlines() if line.startswith("cores: 2 sharing the DRAM port"))
    one, two = (json.loads((tmp_path / d / "report.json").read_text()) for d in ("one", "two"))
    assert two["config"]["cores"] == 2 and one["config"]["cores"] == 1
    assert "cores:" not in one_text
    array = [layer for layer in two["layers"] if layer["unit"] == "array"]
    assert f"the array layers took {sum(layer['cycles'] for layer in array):,}" in line
    # the vector and host stages run as on one core
    for a, b in zip(one["layers"], two["layers"]):
        if a["unit"] != "array":
            assert a["cycles"] == b["cycles"]
    assert all(layer["utilization"] <= 1 for layer in two["layers"])


def test_cores_sweep_names_every_point(tmp_path, capsys):
    code, text, _ = _run(capsys, "--engine", "model", "--config", "8x8", "--sweep", "cores=1,2",
                         "-o", str(tmp_path / "s"), "-q")
    assert code == 0
    assert "8x8-ws-cores1" in text and "8x8-ws-cores2" in text


@pytest.mark.parametrize("argv,message", [
    (["--cores", "0"], "--cores 0 is out of range: allowed [1, 16]"),
    (["--cores", "17"], "--cores 17 is out of range"),
    (["--config", "8x8:ddr4-3200", "--cores", "2"], "several cores are modelled with the ideal memory only"),
    (["--engine", "verilator", "--cores", "2", "--vcd", "w.vcd"], "--vcd needs one core"),
])
def test_cores_errors_are_clear(tmp_path, capsys, argv, message):
    code, _, err = _run(capsys, "--engine", "model", *argv, "-o", str(tmp_path / "o"), "-q")
    assert code == 2 and message in err
    assert not (tmp_path / "o").exists()
