"""Mapping search (qsim/npu/mapping/): candidates and their legality, the schedules' buffer hazards
against the dispatch timing, values of every candidate, the search's choice, the policy in the
configuration, the sweep and the command line."""
import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from qsim.errors import DataError, UsageError
from qsim.hw.isa import LoadBuffer, Opcode, StoreBuffer
from qsim.hw.params import Dataflow, Geometry
from qsim.npu.array.compile import Gemm, compile_gemm
from qsim.npu.config import load_config, parse_config
from qsim.npu.cycle_model import instr_duration, run_model, schedule, vrun_configs
from qsim.npu.mapping.policy import MappingMode, MappingPolicy, Objective
from qsim.npu.mapping.search import choose, gemm_cycles, program_cost
from qsim.npu.mapping.space import FIXED, LoopOrder, Mapping, Shape, candidates
from qsim.npu.simulate import parse_sweep

WS, OS = Dataflow.WEIGHT_STATIONARY, Dataflow.OUTPUT_STATIONARY
GEOMS = [Geometry(4, 8, WS, 4 * 32, 8 * 16, 32 * 16, 8), Geometry(4, 4, WS, 4 * 16, 4 * 8, 16 * 8, 8),
         Geometry(4, 4, WS, 4 * 64, 4 * 64, 16 * 64, 4), Geometry(4, 8, OS, 4 * 32, 8 * 16, 32 * 16, 8),
         Geometry(4, 4, OS, 4 * 16, 4 * 8, 16 * 8, 8), Geometry(4, 4, OS, 4 * 64, 4 * 64, 16 * 64, 4)]
SHAPES = [(1, 1, 1), (17, 33, 9), (64, 5, 40), (50, 30, 10), (200, 70, 23)]


def _intervals(geom, program):
    """Per instruction: (first, last) busy cycle (hw/README.md: dispatched at t, busy t+1..t+D)."""
    dispatch, _ = schedule(geom, program.instrs, program.dram)
    configs = vrun_configs(geom, program.instrs, program.dram)
    return [(int(t) + 1, int(t) + instr_duration(geom, i, configs.get(k)))
            for k, (i, t) in enumerate(zip(program.instrs, dispatch))]


def _accesses(geom, instr):
    """(buffer, first word, words, writes) of one instruction's buffer accesses. A COMPUTE's
    parameter word matters only with requant, and is read in its first two busy cycles only
    (hw/compute.py): `param` here stands for that read, checked against those cycles."""
    R = geom.rows
    if instr.opcode is Opcode.LOAD and instr.get("buf") != LoadBuffer.VCONFIG:
        name = LoadBuffer(instr.get("buf")).name.lower()
        return [(name, instr.get("buf_addr"), instr.get("count"), True)]
    if instr.opcode is Opcode.LOADW:
        return [("input", instr.get("buf_addr"), instr.get("count"), True)]
    if instr.opcode is Opcode.STORE:
        return [("acc", instr.get("buf_addr"), instr.get("count"), False)]
    if instr.opcode is Opcode.COMPUTE:
        count, ws = instr.get("count"), geom.dataflow is WS
        return [("input", instr.get("a_addr"), count, False), ("weight", instr.get("w_addr"), R if ws else count, False),
                ("acc", instr.get("acc_addr"), count if ws else R, True)] + \
            ([("param", instr.get("param_addr"), 1, False)] if instr.get("requant") else [])
    return []


def races(geom, program) -> list[str]:
    """Pairs of instructions touching the same buffer word, at least one writing, whose busy
    intervals overlap: what the RTL would get wrong while the sequential numpy model does not."""
    spans = _intervals(geom, program)
    touched = [_accesses(geom, i) for i in program.instrs]
    found = []
    for b in range(len(program.instrs)):
        for a in range(max(0, b - 40), b):      # a stream's overlaps are between neighbours
            if spans[a][1] < spans[b][0] or spans[b][1] < spans[a][0]:
                continue
            for name, lo, n, wr in touched[a]:
                for name2, lo2, n2, wr2 in touched[b]:
                    if name == "param" == name2 and spans[a][0] + 1 < spans[b][0]:
                        continue        # the COMPUTE latched its parameters before the LOAD began
                    if name == name2 and (wr or wr2) and lo < lo2 + n2 and lo2 < lo + n:
                        found.append(f"{program.instrs[a].opcode.name}#{a} / {program.instrs[b].opcode.name}#{b} on {name}")
    return found


@pytest.mark.parametrize("geom", GEOMS, ids=[f"{g.dataflow.value}-{g.input_depth_words}" for g in GEOMS])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_candidate_is_exact_and_race_free(geom, shape):
    M, K, N = shape
    rng = np.random.default_rng(M * K + N)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    w = rng.integers(-128, 128, (K, N)).astype(np.int8)
    gemm = Gemm(a, w, in_zp=-128, w_zp=127)
    expected = ((a.astype(np.int64) + 128) @ (w.astype(np.int64) - 127)).astype(np.int32)
    options = candidates(Shape(M, K, N, geom))
    assert options[0] == FIXED
    for mapping in options:
        program = compile_gemm(geom, gemm, mapping)
        dram = program.dram.copy()
        cycles, _ = run_model(geom, program.instrs, dram)
        np.testing.assert_array_equal(program.output(dram), expected, err_msg=mapping.label)
        assert races(geom, program) == [], mapping.label
        assert gemm_cycles(geom, program) == cycles, mapping.label     # the search's fast timing


def test_race_checker_finds_a_removed_wait():
    """The checker is not vacuous: dropping the COMPUTEs' wait for the DMA makes loads race them."""
    geom = GEOMS[0]
    rng = np.random.default_rng(1)
    gemm = Gemm(rng.integers(-128, 128, (50, 30)).astype(np.int8), rng.integers(-128, 128, (30, 10)).astype(np.int8))
    program = compile_gemm(geom, gemm, Mapping(LoopOrder.MKN))
    broken = [dataclasses.replace(i, wait_dma=False) if i.opcode is Opcode.COMPUTE else i for i in program.instrs]
    assert races(geom, dataclasses.replace(program, instrs=broken))


def test_orders_keep_what_they_promise_in_dram_traffic():
    """MKN reads A once (input bytes = the fixed rule's when A is resident, less when not); NMK
    reads each column tile's weights once."""
    geom = Geometry(4, 4, WS, 4 * 64, 4 * 128, 16 * 64, 4)      # halves: 32 input, 64 weight, 32 acc words
    rng = np.random.default_rng(2)
    M, K, N = 60, 40, 12                                          # 10 folds, 3 column tiles
    gemm = Gemm(rng.integers(-128, 128, (M, K)).astype(np.int8), rng.integers(-128, 128, (K, N)).astype(np.int8))
    fixed = compile_gemm(geom, gemm)
    mkn = compile_gemm(geom, gemm, Mapping(LoopOrder.MKN))
    assert mkn.dram_input_bytes == M * K                      # every A byte once
    assert fixed.dram_input_bytes == 3 * M * K                # not resident: once per column tile
    nmk_rows = Shape(M, K, N, geom).tile(Mapping(LoopOrder.NMK))
    nmk = compile_gemm(geom, gemm, Mapping(LoopOrder.NMK))
    weight_loads = [i for i in nmk.instrs if i.opcode is Opcode.LOAD and i.get("buf") == LoadBuffer.WEIGHT]
    assert len(weight_loads) == 3 and all(i.get("count") == 40 for i in weight_loads)
    assert nmk_rows == 32
    stores = [i for i in mkn.instrs if i.opcode is Opcode.STORE]
    assert sum(i.get("count") for i in stores) == M * 3 and all(i.get("buf") == StoreBuffer.ACCUMULATOR for i in stores)


def test_legality_names_the_buffer():
    geom = Geometry(4, 4, WS, 4 * 16, 4 * 8, 16 * 8, 8)          # 8 input, 4 weight, 4 acc words per half
    shape = Shape(50, 30, 10, geom)
    assert "weight buffer" in shape.legal(Mapping(LoopOrder.NMK))
    assert "outside 1..4" in shape.legal(Mapping(LoopOrder.MNK, 5))
    assert shape.legal(Mapping(LoopOrder.MKN, 1)) is None
    os_shape = Shape(50, 30, 40, Geometry(4, 4, OS, 4 * 16, 4 * 8, 16 * 8, 8))
    assert "accumulator" in os_shape.legal(Mapping(LoopOrder.MKN))
    with pytest.raises(ValueError, match="does not fit"):
        compile_gemm(geom, Gemm(np.zeros((50, 30), np.int8), np.zeros((30, 10), np.int8)), Mapping(LoopOrder.NMK))


@pytest.mark.parametrize("objective", list(Objective))
def test_search_is_never_worse_than_fixed_and_picks_the_minimum(objective):
    geom = Geometry(4, 4, OS, 4 * 64, 4 * 64, 16 * 64, 4)
    rng = np.random.default_rng(3)
    gemm = Gemm(rng.integers(-128, 128, (200, 70)).astype(np.int8), rng.integers(-128, 128, (70, 23)).astype(np.int8))
    choice = choose(geom, gemm, MappingPolicy(MappingMode.SEARCH, objective))
    values = [c.value(objective) for _, c in choice.costs]
    assert choice.cost.value(objective) == min(values) <= choice.fixed.value(objective)
    assert choice.cost == program_cost(geom, compile_gemm(geom, gemm, choice.mapping))
    assert choice.candidates == len(candidates(Shape(200, 70, 23, geom))) > 1
    if objective is Objective.CYCLES:    # the measured case: MKN reads A once and wins by > 2x
        assert choice.mapping.order is LoopOrder.MKN and choice.fixed.cycles > 2 * choice.cost.cycles
    assert choose(geom, gemm, MappingPolicy()).mapping == FIXED


def test_policy_parsing_and_errors():
    assert MappingPolicy.parse("search") == MappingPolicy(MappingMode.SEARCH, Objective.EDP)
    assert MappingPolicy.parse("search:cycles").objective is Objective.CYCLES
    assert MappingPolicy.parse("fixed").mode is MappingMode.FIXED
    with pytest.raises(UsageError, match="unknown mapping 'best'"):
        MappingPolicy.parse("best")
    with pytest.raises(UsageError, match="fixed rule has no objective"):
        MappingPolicy.parse("fixed:cycles")
    assert Mapping.parse("mkn/16") == Mapping(LoopOrder.MKN, 16) and Mapping.parse("mnk") == FIXED


BASE = load_config("8x8").to_toml()


def test_config_keys_round_trip_and_errors():
    config = parse_config(BASE + 'mapping = "search"\nmapping_objective = "energy"\n')
    assert config.mapping == MappingPolicy(MappingMode.SEARCH, Objective.ENERGY)
    assert parse_config(config.to_toml()).mapping == config.mapping
    assert parse_config(BASE).mapping.mode is MappingMode.FIXED
    with pytest.raises(DataError, match=r"<config>:\d+.*'mapping' = 'best'"):
        parse_config(BASE + 'mapping = "best"\n')
    with pytest.raises(DataError, match="needs mapping"):
        parse_config(BASE + 'mapping_objective = "cycles"\n')
    with pytest.raises(DataError, match="not an objective"):
        parse_config(BASE + 'mapping = "search"\nmapping_objective = "speed"\n')


def test_sweep_over_mappings_keeps_the_rest():
    base = dataclasses.replace(load_config("8x8"), mapping=MappingPolicy.parse("search:cycles"))
    fixed, search = parse_sweep(["mapping=fixed,search:energy"], base)
    assert fixed.mapping.mode is MappingMode.FIXED and search.mapping.objective is Objective.ENERGY
    assert "mappingsearch-energy" in search.name and fixed.rows == 8
    (same,) = parse_sweep(["size=16"], base)
    assert same.mapping == base.mapping


def test_simulate_mapping_option(tmp_path, capsys):
    from qsim.cli import main
    assert main(["simulate", "--engine", "model", "--mapping", "search:cycles", "-o", str(tmp_path / "s"), "-q"]) == 0
    assert "bit-exact" in capsys.readouterr().out
    report = json.loads((tmp_path / "s" / "report.json").read_text())
    assert report["config"]["mapping"] == "search:cycles"
    mapped = [layer["mapping"] for layer in report["layers"] if layer["unit"] == "array"]
    assert len(mapped) == 5 and any(m.startswith("mkn") for m in mapped)
    assert all(layer["mapping"] == "" for layer in report["layers"] if layer["unit"] != "array")
    assert main(["simulate", "--engine", "model", "--mapping", "quick", "-o", str(tmp_path / "q"), "-q"]) == 2
    assert "unknown mapping 'quick'" in capsys.readouterr().err


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=24))
def test_policy_parser_takes_any_text(text):
    """Any --mapping text is a policy that prints back to itself, or a UsageError naming it."""
    try:
        policy = MappingPolicy.parse(text)
    except UsageError as err:
        assert "mapping" in str(err)
        return
    assert MappingPolicy.parse(policy.text) == policy


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.sampled_from(["fixed", "search", "Search", "", "best"]), st.integers(), st.booleans()),
       st.one_of(st.none(), st.sampled_from(["edp", "cycles", "energy", "EDP", "speed"]), st.integers()))
def test_config_mapping_keys_any_values(mode, objective):
    """The two keys take any TOML values: a configuration, or a DataError naming the key's line."""
    def literal(v):
        return f'"{v}"' if isinstance(v, str) else str(v).lower()
    text = BASE + f"mapping = {literal(mode)}\n" + ("" if objective is None else f"mapping_objective = {literal(objective)}\n")
    try:
        config = parse_config(text)
    except DataError as err:
        assert "mapping" in str(err) and "<config>:" in str(err)
        return
    assert str(mode).lower() in ("fixed", "search") and config.mapping.mode.value == str(mode).lower()


def test_search_with_dram_timing_counts_the_waits_the_engines_count():
    """With a DRAM profile the search's cycles are the engines' (row-buffer waits included), and
    the memo keeps choices apart per timing (geometries with and without are equal otherwise)."""
    from qsim.npu.dram import DramTiming
    from qsim.npu.engines import run_program
    timing = DramTiming(trcd=3, trp=2, tcl=4, banks=2, row_bytes=16, burst_bytes=8)
    ideal = Geometry(4, 4, OS, 4 * 64, 4 * 64, 16 * 64, 4)
    slow = dataclasses.replace(ideal, dram=timing)
    rng = np.random.default_rng(5)
    gemm = Gemm(rng.integers(-128, 128, (40, 70)).astype(np.int8), rng.integers(-128, 128, (70, 9)).astype(np.int8))
    policy = MappingPolicy.parse("search:cycles")
    fast, waited = choose(ideal, gemm, policy), choose(slow, gemm, policy)
    for geom, choice in ((ideal, fast), (slow, waited)):
        for mapping, cost in choice.costs:
            assert run_program(geom, compile_gemm(geom, gemm, mapping), "model").stats.total_cycles == cost.cycles
    assert waited.fixed.cycles > fast.fixed.cycles
