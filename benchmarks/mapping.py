"""Mapping search vs the fixed rule (issue 30, item 3), per layer and per network: ResNet-18,
MobileNetV2 (224x224) and a transformer encoder (16 tokens x 64, 2 layers), quantized int8 by
qsim (4 calibration samples: the mapping depends on shapes, not on accuracy), on the 16x16
preset weight-stationary and output-stationary.

    PYTHONPATH=. python benchmarks/mapping.py [--nets resnet18,mobilenet_v2,transformer_encoder]
        [--config 16x16] [--work /tmp/qsim-mapping] [--verify [--verify-engine verilator]] [--out reports]
    PYTHONPATH=. python benchmarks/mapping.py --render      (mapping.md again from mapping.json)

Per network and dataflow: every array layer's GEMMs searched once (qsim/npu/mapping/network.py;
the CPU time of that cold search is reported: on the shared machine wall time is mostly
waiting), and from the costs of every candidate the totals under each objective (cycles, energy, edp) against the fixed rule. Cycles and energy are the
cycle model's and the energy events' (45nm table) of the very programs that run; the tests
(tests/npu/test_mapping_rtl.py) hold the model's cycles equal to the RTL's. --verify also runs
the whole network with mapping = search (edp) on --verify-engine (model, or verilator: each
program's cycles then checked equal to the model's) and checks every stage is bit-exact with
the kernels. Writes reports/mapping.md and reports/mapping.json.
Needs torch and onnx (benchmark-only) to export the networks (cached in --work).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))     # this checkout's qsim
sys.path.insert(0, str(HERE))

from qsim.atomic import atomic_write_text  # noqa: E402
from qsim.commands.quantize import quantize_to_folder  # noqa: E402
from qsim.commands.quantized_model import load_npu_model, read_inputs  # noqa: E402
from qsim.npu.config import load_config  # noqa: E402
from qsim.npu.mapping.network import network_choices  # noqa: E402
from qsim.npu.mapping.policy import MappingPolicy, Objective  # noqa: E402
from qsim.npu.program import run_graph_on_npu  # noqa: E402
from qsim.quant.options import QuantizeOptions  # noqa: E402
from qsim.runtime.executor import execute  # noqa: E402

NETS = ("resnet18", "mobilenet_v2", "transformer_encoder")
SEARCH = MappingPolicy.parse("search:edp")


def quantized(name: str, work: Path):
    """(graph, feeds) of `name` quantized int8 by qsim; the export and the folder are cached."""
    from _architectures import ARCHITECTURES, inputs      # deferred: imports torch lazily
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    onnx_path, calib, x1 = folder / f"{name}.onnx", folder / "calib4.npy", folder / "x1.npy"
    arch = ARCHITECTURES[name]
    if not onnx_path.exists():
        onnx_path.write_bytes(arch.build().SerializeToString())
    if not calib.exists():
        data = inputs(arch, 5, seed=0).astype(np.float32)
        np.save(calib, data[:4])
        np.save(x1, data[4:5])
    qfolder = folder / "int8"
    if not (qfolder / "main.sknd").exists():
        quantize_to_folder(str(onnx_path), str(calib), str(qfolder), QuantizeOptions(show_progress=False))
    loaded = load_npu_model(str(qfolder))
    feeds, _ = read_inputs(loaded.model, [str(x1)])
    return loaded.model.graph, feeds


def _gain(before: float, after: float) -> str:
    return f"{before / after:.3f}x" if after else "-"


def measure(name: str, config, graph, feeds, expected, verify: bool, engine: str = "model") -> dict:
    layers, seconds = network_choices(graph, feeds, config, SEARCH, expected)
    fixed = (sum(l.fixed().cycles for l in layers), sum(l.fixed().energy_pj for l in layers))
    out = {"network": name, "config": config.name, "dataflow": config.dataflow.value,
           "array_layers": len(layers), "gemms": sum(len(l.choices) for l in layers),
           "candidates": sum(c.candidates for l in layers for c in l.choices),
           "search_seconds": round(seconds, 2), "fixed": {"cycles": fixed[0], "energy_pj": fixed[1]},
           "search": {}, "layers": []}
    for objective in Objective:
        cost = [l.best(objective) for l in layers]
        out["search"][objective.value] = {"cycles": sum(c.cycles for c in cost),
                                          "energy_pj": sum(c.energy_pj for c in cost)}
    for l in layers:
        f, b = l.fixed(), l.best(Objective.EDP)
        out["layers"].append({"layer": l.name, "op": l.op, "gemm": list(l.shapes[0]), "programs": len(l.shapes),
                              "mapping": sorted(set(l.labels(Objective.EDP))),
                              "fixed_cycles": f.cycles, "cycles": b.cycles,
                              "fixed_energy_pj": f.energy_pj, "energy_pj": b.energy_pj})
    if verify:
        start = time.perf_counter()
        run = run_graph_on_npu(graph, feeds, dataclasses.replace(config, mapping=SEARCH), engine=engine,
                               expected=expected)
        out["verified_search_run"] = {"verified": run.verified, "total_cycles": run.total_cycles,
                                      "seconds": round(time.perf_counter() - start, 1), "engine": engine}
    return out


def markdown(results: list[dict], command: str) -> str:
    lines = ["# Mapping search vs the fixed rule", "",
             "Generated by `benchmarks/mapping.py` (" + command + "). Cycles and energy (45nm table) of",
             "the array layers, from the cycle model and energy events of the programs that run",
             "(tests/npu/test_mapping_rtl.py holds the model's cycles equal to Amaranth's and",
             "Verilator's for every loop order on both dataflows). Vector and host stages are",
             "not mapped and not counted here. Gain = fixed / search (> 1 is better). Search CPU time:",
             "CPU seconds of this process for a cold search of every array layer (Intel Xeon with AMX,",
             "2 cores shared by other jobs: wall time was ~8x longer at load average ~20).", "",
             "## Per network", "",
             "| network | dataflow | array layers (GEMMs) | candidates | search CPU time (s) | objective "
             "| fixed cycles | search cycles | cycle gain | fixed energy (uJ) | search energy (uJ) "
             "| energy gain | EDP gain |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        f = r["fixed"]
        for objective, s in r["search"].items():
            lines.append(f"| {r['network']} | {r['dataflow']} | {r['array_layers']} ({r['gemms']}) | "
                         f"{r['candidates']} | {r['search_seconds']} | {objective} | {f['cycles']:,} | "
                         f"{s['cycles']:,} | {_gain(f['cycles'], s['cycles'])} | {f['energy_pj'] / 1e6:.2f} | "
                         f"{s['energy_pj'] / 1e6:.2f} | {_gain(f['energy_pj'], s['energy_pj'])} | "
                         f"{_gain(f['cycles'] * f['energy_pj'], s['cycles'] * s['energy_pj'])} |")
    verified = [r for r in results if "verified_search_run" in r]
    if verified:
        lines += ["", "Whole-network runs with `mapping = \"search\"` (edp), every stage compared with the kernels "
                  "(on an RTL engine every program's cycles are also checked equal to the cycle model's):", "",
                  "| network | dataflow | engine | bit-exact | total cycles (array + vector) | wall seconds |",
                  "|---|---|---|---|---|---|"]
        for r in verified:
            v = r["verified_search_run"]
            lines.append(f"| {r['network']} | {r['dataflow']} | {v.get('engine', 'model')} | {v['verified']} | "
                         f"{v['total_cycles']:,} | {v['seconds']} |")
    lines += _dual_mode(results)
    for r in results:
        lines += ["", f"## {r['network']}, {r['dataflow']}: per layer (objective edp)", "",
                  "| layer | op | GEMM M x K x N (first) | programs | mapping | fixed cycles | cycles | cycle gain "
                  "| energy gain |", "|---|---|---|---|---|---|---|---|---|"]
        for l in r["layers"]:
            lines.append(f"| {l['layer']} | {l['op']} | {' x '.join(map(str, l['gemm']))} | {l['programs']} | "
                         f"{', '.join(l['mapping'])} | {l['fixed_cycles']:,} | {l['cycles']:,} | "
                         f"{_gain(l['fixed_cycles'], l['cycles'])} | "
                         f"{_gain(l['fixed_energy_pj'], l['energy_pj'])} |")
    return "\n".join(lines) + "\n"


def _dual_mode(results: list[dict]) -> list[str]:
    """Per network: per layer the better (by energy-delay) of the ws and os designs' searched
    mappings, what an array switching dataflow per layer would reach (not built: docs/npu.md)."""
    by_net = {}
    for r in results:
        by_net.setdefault(r["network"], {})[r["dataflow"]] = r
    lines = ["", "## What a per-layer dataflow would add (a dual-mode array, not built)", "",
             "Per layer the better by energy-delay of the two designs' searched (edp) mappings, against",
             "each design's fixed rule and search:", "",
             "| network | ws fixed cycles / uJ | ws search | os search | per-layer best of ws, os | layers on os |",
             "|---|---|---|---|---|---|"]
    for name, flows in by_net.items():
        if set(flows) != {"ws", "os"}:
            continue
        ws, os_ = flows["ws"]["layers"], flows["os"]["layers"]
        if [l["layer"] for l in ws] != [l["layer"] for l in os_]:
            continue
        best = [min((a, b), key=lambda l: l["cycles"] * l["energy_pj"]) for a, b in zip(ws, os_)]
        on_os = sum(b is not a for a, b in zip(ws, best))

        def cell(cycles, pj):
            return f"{cycles:,} / {pj / 1e6:.2f}"
        f, sw, so = flows["ws"]["fixed"], flows["ws"]["search"]["edp"], flows["os"]["search"]["edp"]
        lines.append(f"| {name} | {cell(f['cycles'], f['energy_pj'])} | {cell(sw['cycles'], sw['energy_pj'])} | "
                     f"{cell(so['cycles'], so['energy_pj'])} | "
                     f"{cell(sum(l['cycles'] for l in best), sum(l['energy_pj'] for l in best))} | "
                     f"{on_os} of {len(best)} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", default=",".join(NETS), help="networks of benchmarks/_architectures.py")
    parser.add_argument("--config", default="16x16", help="preset; measured as :ws and :os")
    parser.add_argument("--work", default="/tmp/qsim-mapping", help="exports and quantized folders (cache)")
    parser.add_argument("--verify", action="store_true", help="also run each network searched, bit-exact check")
    parser.add_argument("--verify-engine", default="model",
                        help="engine of --verify: model, or verilator (each program's cycles checked against the model)")
    parser.add_argument("--out", default=str(HERE.parent / "reports"), help="folder of mapping.md/.json")
    parser.add_argument("--render", action="store_true", help="rewrite mapping.md from --out's mapping.json")
    args = parser.parse_args(argv)
    if args.render:
        out = Path(args.out)
        data = json.loads((out / "mapping.json").read_text())
        atomic_write_text(out / "mapping.md", markdown(data["results"], data["command"]))
        print(f"wrote {out / 'mapping.md'}")
        return 0
    results = []
    command = "PYTHONPATH=. python benchmarks/mapping.py " + " ".join(argv if argv is not None else sys.argv[1:])
    out = Path(args.out)
    for name in args.nets.split(","):
        graph, feeds = quantized(name, Path(args.work))
        expected = execute(graph, feeds, backend="kernels")
        for flow in ("ws", "os"):
            config = load_config(f"{args.config}:{flow}")
            r = measure(name, config, graph, feeds, expected, args.verify, args.verify_engine)
            results.append(r)
            s = r["search"]["edp"]
            print(f"{name} {flow}: fixed {r['fixed']['cycles']:,} -> {s['cycles']:,} cycles, "
                  f"search {r['search_seconds']} s", flush=True)
        # written after every network, so that a long run leaves what it has measured
        atomic_write_text(out / "mapping.md", markdown(results, command.strip()))
        atomic_write_text(out / "mapping.json", json.dumps({"command": command.strip(), "results": results},
                                                           indent=1) + "\n")
    print(f"wrote {out / 'mapping.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
