"""The run of `qsim explore`: every (precision, configuration) point of a space through the
sweep machinery of `qsim simulate --sweep` (qsim.npu.simulate.prepare_sweep: one batch of layer
tasks on the pool, each point assembled and verified against the kernels by finish_run), then
the area per geometry (when asked), the Pareto front, and the front's points once more on the
RTL engine, checked equal to the search engine in every stage's cycles and values.

A point's cycles and values depend only on its configuration, model and input (the tasks are
the same as `qsim simulate` makes for that point alone); its accuracy is its precision's: the
NPU is checked bit-exact against the integer kernels, so every configuration computes the same
integers the accuracy was measured on."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..npu.config import NpuConfig
from ..cluster.distributed import Task
from ..npu.engines import Engine
from ..npu.program import GraphRun, finish_run
from ..npu.simulate import point_tasks, prepare_sweep, start_builds
from ..progress import Progress
from ..quant.lowering.float_side import LoweredModel
from ..report.sweep import sweep_summary
from ..report.throughput import throughput_report
from .area import NOT_ASKED, area_mm2
from .pareto import pareto_indices, usable_objectives


@dataclass(frozen=True)
class Variant:
    """One precision of the model: its integer graph, the NPU input and its measured accuracy."""
    precision: str
    model: LoweredModel
    feeds: dict
    accuracy: float | None          # top-1 against labels, else top-1 agreement with float
    accuracy_kind: str              # what `accuracy` is
    detail: dict = field(default_factory=dict)     # the plan, SQNR: for the report


@dataclass
class Exploration:
    model: str
    engine: str
    verify_engine: str | None
    points: list[dict]
    objectives: tuple[tuple[str, str], ...]
    notes: list[str]

    @property
    def pareto(self) -> list[dict]:
        return [p for p in self.points if p["pareto"]]

    @property
    def agreed(self) -> bool:
        """Every point verified against the kernels and every checked point equal on both engines."""
        return all(p["all_verified"] and (p["rtl"] is None or p["rtl"]["agree"]) for p in self.points)


def run_points(name: str, variants: list[Variant], configs: list[NpuConfig], engine: Engine, pool,
               table, progress: Progress | None = None) -> tuple[list[dict], dict]:
    """Every variant x configuration as one batch of tasks on `pool`; the points' summaries (the
    sweep's, plus precision and accuracy) and their runs by (precision, config name). Every
    point's cycles are its compiled programs' (16x8 layers run on the array too)."""
    batch = variants
    prepared = {v.precision: prepare_sweep(v.model, v.feeds, configs, engine, pool) for v in batch}
    tasks = [t for v in batch for p in prepared[v.precision] for t in p.tasks]
    if progress is not None:
        progress.total = (progress.total or 0) + len(tasks)
    results = pool.run(tasks, progress.advance if progress is not None else None)
    runs, start = {}, 0
    for v in batch:
        for config, p, span in zip(configs, prepared[v.precision], point_tasks(prepared[v.precision])):
            runs[v.precision, config.name] = finish_run(p, results[start + span.start:start + span.stop])
        start += sum(len(p.tasks) for p in prepared[v.precision])
    points = []
    for v in variants:
        for config in configs:
            run = runs[v.precision, config.name]
            summary = sweep_summary(throughput_report(name, run, table))
            summary.pop("report")
            point = dict(summary, name=f"{v.precision}/{config.name}", precision=v.precision,
                         accuracy=v.accuracy, accuracy_kind=v.accuracy_kind, run_cycles=run.total_cycles,
                         area_mm2=None, area_note=NOT_ASKED, pareto=False, rtl=None)
            points.append(point)
    return points, runs


def add_area(points: list[dict], configs: list[NpuConfig], tech: str | None, pool,
             progress: Progress | None = None) -> None:
    """Each distinct geometry synthesized once (a task each), its mm^2 set on its points."""
    geometries = list(dict.fromkeys(c.geometry for c in configs))
    if progress is not None:
        progress.total = (progress.total or 0) + len(geometries)
    tasks = [Task(area_mm2, (g, tech), f"area-{g.rows}x{g.cols}", cost=1e9) for g in geometries]
    found = dict(zip(geometries, pool.run(tasks, progress.advance if progress is not None else None)))
    by_name = {c.name: found[c.geometry] for c in configs}
    for p in points:
        p["area_mm2"], p["area_note"] = by_name[p["config"]["name"]]


def mark_pareto(points: list[dict]) -> tuple[tuple[str, str], ...]:
    objectives = usable_objectives(points)
    for i in pareto_indices(points, objectives):
        points[i]["pareto"] = True
    return objectives


def compare_runs(search: GraphRun, check: GraphRun) -> dict:
    """Both engines' runs of one point: equal cycles and values in every stage?"""
    cycles = [(s.stage.name, a.cycles, s.cycles) for a, s in zip(search.stages, check.stages)]
    differing = [name for name, a, b in cycles if a != b]
    values = all(np.array_equal(a.output, b.output) for a, b in zip(search.stages, check.stages))
    return {"engine": check.engine.value, "total_cycles": check.total_cycles,
            "cycles_equal": not differing and len(search.stages) == len(check.stages),
            "values_equal": values, "verified": check.verified,
            "differing_stages": differing,
            "agree": not differing and values and check.verified}


def verify_pareto(variants: list[Variant], configs: list[NpuConfig], points: list[dict], runs: dict,
                  engine: Engine, pool, progress: Progress | None = None) -> None:
    """The Pareto points rerun on `engine` (the RTL), each compared with its search run."""
    by_name = {c.name: c for c in configs}
    if getattr(pool, "same_machine", True):
        # cold Verilator builds of the front's geometries start together, in child processes
        front_names = dict.fromkeys(p["config"]["name"] for p in points if p["pareto"])
        start_builds([by_name[n] for n in front_names], engine)
    for v in variants:
        front = [p for p in points if p["pareto"] and p["precision"] == v.precision]
        if not front:
            continue
        chosen = [by_name[p["config"]["name"]] for p in front]
        checked, _ = run_points_raw(v, chosen, engine, pool, progress)
        for p, config, run in zip(front, chosen, checked):
            p["rtl"] = compare_runs(runs[v.precision, config.name], run)


def run_points_raw(v: Variant, configs: list[NpuConfig], engine: Engine, pool,
                   progress: Progress | None) -> tuple[list[GraphRun], list]:
    prepared = prepare_sweep(v.model, v.feeds, configs, engine, pool)
    tasks = [t for p in prepared for t in p.tasks]
    if progress is not None:
        progress.total = (progress.total or 0) + len(tasks)
    results = pool.run(tasks, progress.advance if progress is not None else None)
    return [finish_run(p, results[span.start:span.stop])
            for p, span in zip(prepared, point_tasks(prepared))], prepared


def explore(name: str, variants: list[Variant], configs: list[NpuConfig], engine: Engine,
            verify_engine: Engine | None, pool, table, area: bool, area_tech: str | None,
            progress: Progress | None = None) -> Exploration:
    points, runs = run_points(name, variants, configs, engine, pool, table, progress)
    notes = []
    if area:
        add_area(points, configs, area_tech, pool, progress)
    objectives = mark_pareto(points)
    if not any(k == "area_mm2" for k, _ in objectives):
        notes.append(f"area not in the Pareto dominance ({points[0]['area_note']})")
    if verify_engine is not None and verify_engine is not engine:
        verify_pareto(variants, configs, points, runs, verify_engine, pool, progress)
    return Exploration(name, engine.value, verify_engine.value if verify_engine else None, points,
                       objectives, notes)
