"""`qsim export-vectors --cocotb` (qsim/npu/cocotb_export.py) and the testbench it writes
(qsim/npu/cocotb_tb/): the folder's contents, its programs reproducing the golden vectors,
the mismatch message, and the testbench run under cocotb + Verilator against qsim's exported
NPU, passing on the real vectors and failing, by layer and element, on a flipped one."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from qsim.cli import main
from qsim.errors import UsageError
from qsim.npu import cocotb_export
from qsim.npu.cocotb_tb import golden_check
from qsim.npu.config import load_config
from qsim.npu.cycle_model import cycle_stats, execute as model_execute

# The embedded model on the 8x8 array: the layers the NPU computes, with their unit.
NPU_LAYERS = {"000_input.nhwc": "vector", "001_relu1": "array", "002_relu2": "array",
              "003_relu3": "array", "004_relu4": "array", "005_pool.pooled": "vector",
              "007_output": "array"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("cocotb") / "tb"
    assert main(["export-vectors", "--config", "8x8", "--cocotb", str(out)]) == 0
    layers = json.loads((out / "vectors" / "manifest.json").read_text())["layers"]
    return out, layers, len(NPU_LAYERS)


def test_command_prints_how_to_run_it(tmp_path, capsys):
    assert main(["export-vectors", "--config", "8x8", "--cocotb", str(tmp_path / "tb")]) == 0
    printed = capsys.readouterr().out
    assert "cocotb testbench of 8 layers (7 run on the NPU and checked)" in printed
    assert f"python {tmp_path / 'tb'}/run.py --verilog RTL/qsim_npu.v" in printed


def test_command_refuses_corner_cases_and_two_outputs(tmp_path, capsys):
    assert main(["export-vectors", "--corner-cases", "3", "--cocotb", str(tmp_path / "a")]) == 2
    assert "--cocotb writes a testbench for a model's layers" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:          # argparse's own usage error
        main(["export-vectors", "--out", str(tmp_path / "b"), "--cocotb", str(tmp_path / "c")])
    assert exited.value.code == 2
    assert "argument --cocotb: not allowed with argument --out" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_folder_holds_vectors_programs_and_testbench(bench):
    path, layers, _ = bench
    assert len(layers) == 8
    for name in cocotb_export.TESTBENCH_FILES + ("README.md", "npu.toml"):
        assert (path / name).is_file(), name
    programs = json.loads((path / "programs" / "manifest.json").read_text())
    assert programs["instr_bytes"] == 20 and programs["dram_port_bytes"] == 72    # 9C, C = 8
    runs = {name: entry["runs"] for name, entry in programs["layers"].items()}
    assert all(len(r) == 1 for r in runs.values())
    checked = {name: r[0]["unit"] for name, r in runs.items() if r[0]["programs"]}
    assert checked == NPU_LAYERS
    assert all(r[0]["check"] == "output" for name, r in runs.items() if name in NPU_LAYERS)
    assert runs["006_pool"][0] == {"check": None, "why_not": "a host operator (no NPU work)", "programs": []}
    vector = runs["005_pool.pooled"][0]["programs"][0]
    assert vector["cols"] is None and vector["out_shape"] == [1, 1, 1, 64]
    readme = (path / "README.md").read_text()
    assert "qsim export-rtl --config npu.toml --out rtl" in readme
    assert "| 002_relu2 | CONV2D+RESCALE+CLAMP | `output` (array unit) | 1 |" in readme
    assert "| 005_pool.pooled | AVG_POOL2D | `output` (vector unit) | 1 |" in readme


def test_programs_reproduce_the_golden_vectors(bench):
    """Each exported program, run on qsim's cycle model from its exported DRAM image, writes
    exactly the golden tensor's elements it is responsible for, in the exported cycle count."""
    path, _, _ = bench
    assert replay_golden_layers(path, load_config("8x8").geometry)


def replay_golden_layers(path, geom) -> list:
    """Every exported layer with programs, replayed on the cycle model from its decoded
    instruction words and DRAM image: asserts the exported cycle counts and the golden
    tensors; returns the layers checked."""
    checked = []
    for layer in golden_check.load_layers(path):
        if not layer.programs:
            continue
        expected = layer.golden(path)
        results = []
        for program in layer.programs:
            dram = program.dram.copy()
            instrs = _decode(program.instrs)
            model_execute(geom, instrs, dram)
            assert cycle_stats(geom, instrs, program.dram).total_cycles == program.cycles
            results.append(program.result(dram))
        actual = golden_check.assemble(layer, expected.shape, expected.dtype, results)
        assert np.array_equal(actual, expected), layer.name
        checked.append((layer, expected))
    return checked


def _decode(blob: bytes) -> list:
    """Instruction words back to Instrs, bit fields read per hw/README.md's table (the
    header's opcode first, then the opcode's fields at qsim.hw.isa.layout's positions)."""
    from qsim.hw.isa import HEADER, INSTR_BYTES, Instr, Opcode, layout
    assert len(blob) % INSTR_BYTES == 0
    out = []
    for start in range(0, len(blob), INSTR_BYTES):
        word = int.from_bytes(blob[start:start + INSTR_BYTES], "little")
        opcode = Opcode(word & ((1 << HEADER[0][1]) - 1))       # the opcode: the lowest field
        values = {}
        for name, (lo, width, signed) in layout(opcode).items():
            value = (word >> lo) & ((1 << width) - 1)
            values[name] = value - (1 << width) if signed and value >> (width - 1) else value
        flags = {k: bool(values.pop(k)) for k in ("wait_dma", "wait_compute")}
        values.pop("opcode")
        out.append(Instr(opcode, fields=values, **flags))
        assert out[-1].encode() == word
    return out


def _layer(tensors=None, programs=()):
    return golden_check.Layer(index=2, name="relu2", folder="002_relu2", op="CONV2D+RESCALE+CLAMP",
                              kind="npu", scalars={}, tensors=tensors or {"output": {"npy": "002_relu2/output.npy"}},
                              check="output", programs=programs, why_not="")


def test_mismatch_names_layer_file_and_first_element():
    expected = np.zeros((1, 2, 3, 4), np.int8)
    actual = expected.copy()
    assert golden_check.mismatch(_layer(), "output", expected, actual) is None
    actual[0, 1, 2, 3] = -1
    actual[0, 1, 2, 1] = 5
    message = golden_check.mismatch(_layer(), "output", expected, actual)
    assert message == ("layer 'relu2' (CONV2D+RESCALE+CLAMP): element [0, 1, 2, 1] of "
                       "vectors/002_relu2/output.npy: golden 0 (0x00), DUT 5 (0x05); 2 of 24 elements differ")
    assert "shape [2, 12], golden vectors/002_relu2/output.npy [1, 2, 3, 4]" in golden_check.mismatch(
        _layer(), "output", expected, actual.reshape(2, 12))


def test_assemble_places_column_tiles_and_batches():
    def program(batch, cols):
        return golden_check.Program(b"", np.zeros(0, np.uint8), 0, (2, 2), np.dtype(np.int32), 1, batch, cols)
    layer = _layer(programs=(program(None, (0, 2)), program(None, (2, 4))))
    tiles = [np.array([[1, 2], [3, 4]]), np.array([[5, 6], [7, 8]])]
    out = golden_check.assemble(layer, (1, 2, 4), np.int32, tiles)
    assert out.tolist() == [[[1, 2, 5, 6], [3, 4, 7, 8]]]
    layer = _layer(programs=(program(1, (0, 2)), program(0, (0, 2))))
    out = golden_check.assemble(layer, (2, 2, 2), np.int32, tiles)
    assert out[1].tolist() == [[1, 2], [3, 4]] and out[0].tolist() == [[5, 6], [7, 8]]
    short = golden_check.Program(b"", np.zeros(0, np.uint8), 4, (2, 2), np.dtype(np.int8), 1, None, (0, 2))
    with pytest.raises(ValueError, match="ends before the result at byte 4"):
        short.result(bytes(6))


def test_checked_role_of_a_partly_fused_layer():
    from qsim.npu.golden_vectors import LayerVectors
    layer = LayerVectors("x", "npu", tensors={"accumulator": 0, "array_sums": 0, "output": 0})
    assert cocotb_export.checked_role(layer, fused_all=True) == "output"
    assert cocotb_export.checked_role(layer, fused_all=False) == "array_sums"
    no_bias = LayerVectors("x", "npu", tensors={"accumulator": 0, "output": 0})
    assert cocotb_export.checked_role(no_bias, fused_all=False) == "accumulator"


def test_existing_folder_is_refused(tmp_path):
    (tmp_path / "tb").mkdir()
    (tmp_path / "tb" / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="exists and is not an earlier qsim export-vectors output"):
        cocotb_export.export_cocotb(None, "", {}, "", load_config("8x8"), tmp_path / "tb")
    assert (tmp_path / "tb" / "keep.txt").read_text() == "mine"


@pytest.mark.slow
def test_testbench_passes_on_the_exported_npu_and_fails_on_a_flipped_element(bench, tmp_path):
    """CI: the testbench under cocotb + Verilator against `qsim export-rtl`'s NPU (8x8, the
    configuration it was exported for): every array layer passes; with one element of one
    golden file changed, that layer fails, naming the layer, the file and the element."""
    path, _, _ = bench
    from qsim.npu.config import load_config as load
    from qsim.npu.export import export_rtl
    export_rtl(load(str(path / "npu.toml")), tmp_path / "rtl")
    build = tmp_path / "build"
    run = [sys.executable, str(path / "run.py"), "--verilog", str(tmp_path / "rtl" / "qsim_npu.v"),
           "--build-dir", str(build)]
    done = subprocess.run(run, capture_output=True, text=True, timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    assert "qsim golden vectors: 7 of 7 layers pass" in log
    assert ("layer 'relu3' (CONV2D+RESCALE+CLAMP, array unit): 3136 elements of output equal the "
            "golden vectors") in log
    assert "layer 'pool.pooled' (AVG_POOL2D, vector unit): 64 elements of output equal" in log

    golden = path / "vectors" / "002_relu2" / "output.npy"
    values = np.load(golden)
    values[0, 3, 4, 7] = values[0, 3, 4, 7] ^ 1
    np.save(golden, values)
    done = subprocess.run(run + ["--skip-build", "--layers", "002_relu2,003_relu3"], capture_output=True,
                          text=True, timeout=600)
    log = done.stdout + done.stderr
    assert done.returncode == 1, log[-4000:]
    assert "qsim golden vectors: 1 of 2 layers pass" in log
    assert ("layer 'relu2' (CONV2D+RESCALE+CLAMP): element [0, 3, 4, 7] of vectors/002_relu2/output.npy: "
            f"golden {values[0, 3, 4, 7]}") in log
    assert "1 of 6272 elements differ" in log


def test_a_layer_on_both_units_is_two_testbench_layers(tmp_path):
    """An array layer that stores int32 sums for a vector-unit RESCALE has two runs: the array's
    (checked against array_sums) and the vector unit's (checked against output)."""
    (tmp_path / "vectors").mkdir()
    (tmp_path / "programs" / "001_x").mkdir(parents=True)
    tensors = {role: {"npy": f"001_x/{role}.npy"} for role in ("array_sums", "output")}
    (tmp_path / "vectors" / "manifest.json").write_text(json.dumps({"layers": [
        {"name": "x", "dir": "001_x", "op": "CONV2D+RESCALE", "kind": "npu", "tensors": tensors}]}))
    program = {"instrs": "001_x/p0.instr", "dram": "001_x/p0.dram", "out_addr": 0, "out_shape": [1, 2],
               "out_dtype": "int32", "cycles": 7, "batch": None, "cols": [0, 2]}
    vector = dict(program, instrs="001_x/part1_p0.instr", dram="001_x/part1_p0.dram", cols=None,
                  out_shape=[1, 1, 2], out_dtype="int8")
    for name in ("p0", "part1_p0"):
        (tmp_path / "programs" / "001_x" / f"{name}.instr").write_bytes(bytes(20))
        (tmp_path / "programs" / "001_x" / f"{name}.dram").write_bytes(bytes(8))
    (tmp_path / "programs" / "manifest.json").write_text(json.dumps({"layers": {"001_x": {"runs": [
        {"check": "array_sums", "unit": "array", "programs": [program]},
        {"check": "output", "unit": "vector", "programs": [vector]}]}}}))
    first, second = golden_check.load_layers(tmp_path)
    assert (first.test_name, first.unit, first.check) == ("001_x", "array", "array_sums")
    assert (second.test_name, second.unit, second.check) == ("001_x.1", "vector", "output")
    whole = golden_check.assemble(second, (1, 1, 2), np.int8, [second.programs[0].result(bytes([5, 250] + [0] * 6))])
    assert whole.tolist() == [[[5, -6]]]


def test_testbench_names_missing_verilog_sources_without_a_traceback(tmp_path):
    """`python tb/run.py --verilog src/*.v` with no such files (an unexpanded glob): a clear line, exit 2"""
    assert main(["export-vectors", "--config", "8x8", "--cocotb", str(tmp_path / "tb")]) == 0
    done = subprocess.run([sys.executable, str(tmp_path / "tb" / "run.py"), "--verilog", "src/*.v",
                           "--toplevel", "my_npu"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "no such Verilog file: src/*.v" in done.stderr and "Traceback" not in done.stderr
