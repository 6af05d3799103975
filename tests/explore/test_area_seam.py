"""The area seam of qsim explore: with a qsim.npu.area module (here a stand-in with the API of
the synthesis flow: load_area_table, synthesize, area_report), --area fills area_mm2 once per
geometry and area joins the Pareto objectives; without the module the column is n/a."""
from __future__ import annotations

import dataclasses
import sys
import types

import pytest

from qsim.commands.explore import explore_command
import qsim.npu.cores.area as cores_area      # before a test puts a stand-in for qsim.npu.area
from qsim.explore.area import NOT_BUILT, area_mm2
from qsim.npu.config import load_config


@dataclasses.dataclass
class FakeSynthesis:
    cells: dict
    sram_bits: dict
    memories: dict = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    cpu_seconds: float = 0.0


def fake_area_module(calls: list) -> types.ModuleType:
    """qsim.npu.area's API; a geometry's 'synthesis' counts rows x cols cells."""
    module = types.ModuleType("qsim.npu.area")
    table = types.SimpleNamespace(name="45nm")
    module.Synthesis = FakeSynthesis
    module.load_area_table = lambda spec: table
    module.synthesize = lambda geom: (calls.append((geom.rows, geom.cols, geom.dataflow.value))
                                      or FakeSynthesis({"pes": {"$_AND_": geom.rows * geom.cols}}, {"pes": 0}))
    module.area_report = lambda synth, tables, name: {"total_mm2": {"45nm": synth.cells["pes"]["$_AND_"] * 0.01}}
    return module


@pytest.fixture
def fake_area(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setenv("QSIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "qsim.npu.area", fake_area_module(calls))
    import qsim.npu
    monkeypatch.setattr(qsim.npu, "area", sys.modules["qsim.npu.area"], raising=False)
    return calls


def test_area_filled_per_geometry_and_in_the_front(tmp_path, fake_area):
    calls = fake_area
    target, result = explore_command(None, ["size=8,16", "clock_mhz=500,1000"], eval_limit=20, engine="model",
                                     verify_engine=None, area=True, workers=1, out=str(tmp_path / "r"))
    assert sorted(calls) == [(8, 8, "ws"), (16, 16, "ws")]       # the clock does not change the area
    assert {p["config"]["rows"]: p["area_mm2"] for p in result.points} == {8: 0.64, 16: 2.56}
    assert ("area_mm2", "min") in result.objectives
    # the 8x8 array is smaller than every 16x16 point: its fastest clock is on the front
    assert any(p["pareto"] and p["config"]["rows"] == 8 for p in result.points)
    assert (target / "area_vs_latency.png").read_bytes()[:4] == b"\x89PNG"


def test_a_synthesis_is_read_from_the_cache_the_second_time(fake_area):
    geometry = load_config("8x8").geometry
    assert area_mm2(geometry, None)[0] == area_mm2(geometry, None)[0] == 0.64
    assert fake_area == [(8, 8, "ws")]                            # synthesized once
    assert area_mm2(load_config("8x8:os").geometry, None)[0] == 0.64
    assert fake_area == [(8, 8, "ws"), (8, 8, "os")]              # another geometry: its own entry


def test_area_without_the_module(monkeypatch):
    import qsim.npu
    monkeypatch.setitem(sys.modules, "qsim.npu.area", None)     # import fails: ImportError
    monkeypatch.delattr(qsim.npu, "area", raising=False)       # (an earlier import left the attribute)
    assert area_mm2(load_config("8x8").geometry, None) == (None, NOT_BUILT)


def test_several_cores_are_n_times_one_core_plus_their_port(monkeypatch, fake_area):
    monkeypatch.setattr(cores_area, "port_cells", lambda geom, n: ({"$_AND_": 3 * n}, 0.0, 0.0))
    geometry = load_config("8x8").geometry
    assert area_mm2(geometry, None, 2)[0] == pytest.approx(2 * 0.64)
    assert area_mm2(geometry, None, 4)[0] == pytest.approx(4 * 0.64)
    assert fake_area == [(8, 8, "ws")]          # one core's synthesis serves every core count
