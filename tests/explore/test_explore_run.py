"""A tiny qsim explore of the embedded model: every point's cycles and energy equal to
`qsim simulate` run alone at that configuration, the Pareto points rerun on the RTL with equal
cycles and values, and the report folder's files."""
from __future__ import annotations

import csv
import json

import pytest

from qsim.cli import main
from qsim.commands.explore import explore_command
from qsim.commands.simulate import simulate_command
from qsim.explore.pareto import dominates
from qsim.explore.space import parse_terms
from qsim.npu.config import load_config
from qsim.npu.engines import Engine


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    out = tmp_path_factory.mktemp("explore") / "report"
    target, result = explore_command(None, ["size=8,16", "dataflow=ws,os"], eval_limit=50,
                                     engine="model", verify_engine="verilator", workers=1, out=str(out))
    return target, result


def test_points_equal_simulate_alone(explored, tmp_path):
    _, result = explored
    configs = parse_terms(["size=8,16", "dataflow=ws,os"], load_config("16x16")).configs
    assert [p["config"]["name"] for p in result.points] == [c.name for c in configs]
    for point, config in zip(result.points, configs):
        spec = tmp_path / f"{config.name}.toml"
        spec.write_text(config.to_toml())
        alone = simulate_command(None, str(spec), Engine.MODEL, None, str(tmp_path / config.name),
                                 show_progress=False, workers=1).reports[0]
        assert point["total_cycles"] == alone.total_cycles
        assert point["energy_per_inference_pj"] == alone.total_energy_pj
        assert point["all_verified"]


def test_pareto_points_checked_on_the_rtl(explored):
    _, result = explored
    front = result.pareto
    assert front
    for p in front:
        assert p["rtl"]["engine"] == "verilator"
        assert p["rtl"]["cycles_equal"] and p["rtl"]["values_equal"] and p["rtl"]["agree"]
        assert p["rtl"]["total_cycles"] == p["total_cycles"]
    assert all(p["rtl"] is None for p in result.points if not p["pareto"])
    objectives = result.objectives
    assert ("area_mm2", "min") not in objectives        # no --area: no synthesis
    for p in result.points:
        if not p["pareto"]:
            assert any(dominates(q, p, objectives) for q in front)
    # one precision: the same accuracy everywhere, so the front is the latency/energy trade-off
    assert len({p["accuracy"] for p in result.points}) == 1 and 0.5 < result.points[0]["accuracy"] <= 1


def test_report_files(explored):
    target, result = explored
    doc = json.loads((target / "report.json").read_text())
    assert [p["total_cycles"] for p in doc["points"]] == [p["total_cycles"] for p in result.points]
    rows = list(csv.DictReader((target / "points.csv").open()))
    assert [r["name"] for r in rows] == [p["name"] for p in result.points]
    assert all(r["area_mm2"] == "n/a" for r in rows)
    html = (target / "report.html").read_text()
    assert "Pareto front" in html and "accuracy_vs_latency.png" in html
    for png in ("accuracy_vs_latency.png", "energy_vs_latency.png"):
        assert (target / png).read_bytes()[:4] == b"\x89PNG"
    assert not (target / "area_vs_latency.png").exists()


def test_cli_summary(tmp_path, capsys):
    assert main(["explore", "--space", "size=8", "precision=int8,16x8", "--eval-limit", "20",
                 "--no-verify-pareto", "--workers", "1", "-q", "-o", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "int8/8x8-ws" in out and "16x8/8x8-ws" in out and "Pareto points of 2" in out


def test_precision_plan_point_costs_what_the_plan_search_measured(tmp_path):
    """A `sqnr:DB` point is the plan `qsim quantize --target-sqnr DB` picks: its cycles on the
    16x16 preset equal the cycles the plan search costed it at (qsim.npu.plan_cost), a separate
    run of the same plan; its accuracy is the plan's."""
    target, result = explore_command(None, ["precision=sqnr:30"], eval_limit=30, engine="model",
                                     verify_engine=None, workers=1, out=str(tmp_path / "r"))
    doc = json.loads((target / "report.json").read_text())
    plan = doc["precisions"]["sqnr:30"]["plan"]
    assert plan["target"]["sqnr_db"] == 30.0 and plan["met"]
    assert set(plan["plan"]["layers"].values()) <= {"int8", "16x8"}
    (point,) = result.points
    assert point["total_cycles"] == plan["cost"]["plan"]["cycles"]
    assert point["accuracy"] == doc["precisions"]["sqnr:30"]["accuracy"]


def test_16x8_points_cost_their_own_run_like_the_plan_search(tmp_path):
    """16x8 layers run on the array (byte-plane passes): a 16x8 point's cycles are its run's, the
    same number `qsim quantize --target-sqnr` records as the 16x8 baseline's cost, with no
    arithmetic left on the host."""
    target, result = explore_command(None, ["precision=16x8,sqnr:30"], eval_limit=30, engine="model",
                                     verify_engine=None, workers=1, out=str(tmp_path / "r"))
    doc = json.loads((target / "report.json").read_text())
    baseline = doc["precisions"]["sqnr:30"]["plan"]["cost"]["16x8"]
    point = result.points[0]
    assert point["precision"] == "16x8"
    assert point["total_cycles"] == baseline["cycles"] == point["run_cycles"] > 0
    assert point["energy_per_inference_pj"] == pytest.approx(baseline["energy_pj"], rel=1e-12)
    assert baseline["host_arithmetic_layers"] == [] and not point["host_arithmetic"]
