"""QDQ models of real-size architectures: qsim's integer execution vs onnxruntime's.

    python benchmarks/qdq.py [--models resnet18,mobilenet_v2,...] [--calib 8] [--eval 4]
                             [--work DIR] [--out reports]

Per model (benchmarks/_architectures.py, as models.py: random weights except MTCNN's):
onnxruntime's quantize_static writes the QDQ model (per-channel int8 weights, int8 activations,
MinMax on the calibration inputs, benchmarks/accuracy.py `ort_quantized`); qsim reads it and
quantizes it with no calibration data (its QuantizeLinear/DequantizeLinear parameters are the
annotations); the integer outputs are compared on the evaluation inputs with onnxruntime's in
both of its modes: ORT_ENABLE_ALL (the default: QLinearConv, QLinearAdd, QGemm, ... kernels)
and ORT_DISABLE_ALL (float operators between fake-quantizing pairs). Both sides start from the
same integer input (onnxruntime's QuantizeLinear of the float input).

Per quantized activation ("taps": every QuantizeLinear output made a graph output, run in the
default mode) the elements that differ and the largest difference show where differences
start (ties of TOSA's round-half-up vs onnxruntime's round-half-even, float32 requantization in
onnxruntime) and how they grow through the layers.

Writes reports/qdq.md and reports/qdq.json. Benchmark-only packages: torch, onnxruntime,
scikit-image, scikit-learn (as models.py). CPU times depend on the load; none is compared with
a fixed figure.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))     # this checkout's qsim and tests, not another installed one

from qsim.errors import QsimError  # noqa: E402
from qsim.onnx import load  # noqa: E402
from qsim.quant.options import QuantizeOptions  # noqa: E402
from qsim.quant.pipeline import quantize_graph  # noqa: E402
from qsim.runtime.executor import execute  # noqa: E402
from _rows import write_report  # noqa: E402
from tests.onnx.qdq_models import compare_with_ort, on_signed_grid, ort_session, quantize_linear  # noqa: E402

DEFAULT_MODELS = ("resnet18", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1", "shufflenet_v2")


def with_taps(path: Path, with_sources: bool = False) -> tuple[Path, dict[str, str]]:
    """The QDQ model with every activation QuantizeLinear output (and, `with_sources`, the float
    tensor it reads) as a graph output; returns the new file and {QuantizeLinear output: the float
    tensor it quantizes}."""
    import onnx
    from onnx import helper
    model = onnx.load(str(path))
    inits = {t.name: t for t in model.graph.initializer}
    inits.update({n.output[0]: a.t for n in model.graph.node if n.op_type == "Constant"
                  for a in n.attribute if a.name == "value"})   # zero points written as Constant nodes
    taps = {}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear" and node.input[0] not in inits:  # an activation
            zp = inits.get(node.input[2]) if len(node.input) > 2 else None
            elem = zp.data_type if zp is not None else onnx.TensorProto.UINT8
            taps[node.output[0]] = node.input[0]
            model.graph.output.append(helper.make_tensor_value_info(node.output[0], elem, None))
            present = {o.name for o in model.graph.output} | {i.name for i in model.graph.input}
            if with_sources and node.input[0] not in present:
                model.graph.output.append(helper.make_tensor_value_info(node.input[0], onnx.TensorProto.FLOAT, None))
    out = path.with_name(path.stem + ("_taps_sources.onnx" if with_sources else "_taps.onnx"))
    onnx.save(model, str(out))
    return out, taps


TIE_TOLERANCE = 2.0 ** -20   # x 64 = 2^-14 relative: float32 sums of up to ~1000 products (2^-24 each)


def cause_of(position: float) -> str:
    """Why TOSA and onnxruntime round a value at exact grid position `position` (real / scale +
    zero point, before rounding) apart, or that rounding does not explain it."""
    frac = position - np.floor(position)
    if frac == 0.5:
        return "tie: TOSA RESCALE rounds half up, onnxruntime half to even"
    if abs(frac - 0.5) <= TIE_TOLERANCE * max(1.0, abs(position)) * 64:
        return ("near-tie requantization: within 2^-14 relative of a tie, where the two arithmetics "
                "(onnxruntime: float32 sums and products; TOSA: integer accumulators, 31-bit multipliers, "
                "qsim's add/mul operand rescale) land on either side")
    return ("not a rounding of the same value: the operators compute different values (an integer "
            "lowering such as an average, a table or a softmax, or a fused kernel's own arithmetic)")


def first_difference(path: Path, x: np.ndarray) -> dict | None:
    """The first quantized activation (graph order) where qsim's integer value differs from
    onnxruntime's float path (ORT_DISABLE_ALL) on the first input of x where one does: element, both values, LSB, the
    float value onnxruntime quantized there, its grid position and the cause (cause_of); None
    when every activation is equal."""
    tapped, taps = with_taps(path, with_sources=True)
    graph = load(str(path))
    lowered = quantize_graph(graph, None, None, QuantizeOptions(show_progress=False)).model
    session = ort_session(str(tapped), "ORT_DISABLE_ALL")
    names = [o.name for o in session.get_outputs()]
    for i in range(len(x)):
        found = _first_difference_on(graph, lowered, session, names, path, taps, x[i:i + 1])
        if found is not None:
            return dict(found, input=i)
    return None


def _first_difference_on(graph, lowered, session, names, path, taps, x):
    in_name = graph.inputs[0]
    in_quant = graph.tensor(in_name).quant
    xq = on_signed_grid(quantize_linear(x, in_quant), in_quant)
    values = execute(lowered.graph, {lowered.tensor_map[in_name].name: xq.astype(np.int8)})
    theirs_all = dict(zip(names, session.run(None, {in_name: x})))
    order = {name: k for k, op in enumerate(graph.ops) for name in op.outputs}
    checked = 0     # quantized activations compared so far (graph order)
    import onnx
    # a DequantizeLinear output that is a graph output names the tensor in qsim (onnx/qdq.py)
    renamed = {n.input[0]: n.output[0] for n in onnx.load(str(path)).graph.node
               if n.op_type == "DequantizeLinear" and n.output[0] in graph.outputs}
    for q_out, source in sorted(taps.items(), key=lambda kv: order.get(renamed.get(kv[0], kv[1]), -1)):
        name = renamed.get(q_out, source)
        v = lowered.tensor_map.get(name)
        if v is None or v.name not in values or name not in graph.tensors or source not in theirs_all:
            continue
        quant = graph.tensor(name).quant
        ours = np.transpose(values[v.name], np.argsort(v.perm)).astype(np.int64)
        theirs = on_signed_grid(theirs_all[q_out].astype(np.int64), quant)
        if ours.shape != theirs.shape:
            continue
        checked += 1
        d = np.abs(ours - theirs)
        if not d.any():
            continue
        k = int(np.argmax(d))
        index = np.unravel_index(k, d.shape)
        real = float(np.asarray(theirs_all[source], np.float64).reshape(-1)[k])
        zp = int(np.asarray(quant.zero_points()).reshape(-1)[0]) + (0 if quant.signed else -(1 << (quant.bits - 1)))
        position = real / float(quant.scales()[0]) + zp
        op = graph.producer(name)
        return {"tensor": name, "op": op.kind.name if op else "input", "activation_index": checked,
                "activations": len(taps), "differing": int(np.count_nonzero(d)), "elements": int(d.size),
                "element": [int(i) for i in index], "qsim": int(ours[index]), "onnxruntime": int(theirs[index]),
                "lsb": int(d[index]), "float_value": real, "grid_position": position, "cause": cause_of(position)}
    return None


def layer_differences(path: Path, x: np.ndarray) -> list[dict]:
    """Per quantized activation, in graph order: elements differing from onnxruntime (default
    mode) and the largest difference, over the inputs x (one at a time)."""
    tapped, taps = with_taps(path)
    graph = load(str(path))
    lowered = quantize_graph(graph, None, None, QuantizeOptions(show_progress=False)).model
    in_name = graph.inputs[0]
    in_quant = graph.tensor(in_name).quant
    session = ort_session(str(tapped), "ORT_ENABLE_ALL")
    names = [o.name for o in session.get_outputs()]
    stats: dict[str, list[int]] = {}
    for i in range(len(x)):
        xq = on_signed_grid(quantize_linear(x[i:i + 1], in_quant), in_quant)
        values = execute(lowered.graph, {lowered.tensor_map[in_name].name: xq.astype(np.int8)})
        theirs_all = dict(zip(names, session.run(None, {in_name: x[i:i + 1]})))
        for q_out, source in taps.items():
            v = lowered.tensor_map.get(source)
            if v is None or v.name not in values or source not in graph.tensors:
                continue    # fused away in qsim (e.g. a conv output before its relu)
            ours = np.transpose(values[v.name], np.argsort(v.perm)).astype(np.int64)
            theirs = on_signed_grid(theirs_all[q_out].astype(np.int64), graph.tensor(source).quant)
            if ours.shape != theirs.shape:
                continue
            d = np.abs(ours - theirs)
            s = stats.setdefault(source, [0, 0, 0])
            s[0] += int(np.count_nonzero(d))
            s[1] = max(s[1], int(d.max()))
            s[2] += d.size
    order = {name: k for k, op in enumerate(graph.ops) for name in op.outputs}
    rows = []
    for name in sorted(stats, key=lambda n: order.get(n, -1)):
        op = graph.producer(name)
        rows.append({"tensor": name, "op": op.kind.name if op else "input", "differing": stats[name][0],
                     "elements": stats[name][2], "max_lsb": stats[name][1]})
    return rows


def run_model(name: str, args) -> dict:
    from accuracy import ort_quantized
    from models import prepare
    result: dict = {"model": name}
    stage = "export"
    try:
        files = prepare(name, Path(args.work), args.calib, args.eval)
        stage = "quantize_static"
        qdq = Path(args.work) / name / f"{name}_qdq.onnx"
        t0 = time.perf_counter()
        if not qdq.exists():
            ort_quantized(files["model"], np.load(files["calib"]), qdq)
        result["quantize_static_s"] = round(time.perf_counter() - t0, 1)
        stage = "qsim"
        x = np.load(files["eval"])
        t0 = time.perf_counter()
        agreement = compare_with_ort(str(qdq), [x[i:i + 1] for i in range(len(x))])
        result["compare_s"] = round(time.perf_counter() - t0, 1)
        result.update(elements=agreement.elements, differing=agreement.differing, max_lsb=agreement.max_lsb,
                      per_output=agreement.per_output)
        stage = "first difference"
        result["first_difference"] = first_difference(qdq, x)
        stage = "layers"
        layers = layer_differences(qdq, x[:args.layer_inputs])
        result["layers"] = layers
        result["layers_max_lsb"] = max((r["max_lsb"] for r in layers), default=0)
    except QsimError as err:
        result["failed"] = {"stage": stage, "message": err.format()}
    except Exception as err:  # noqa: BLE001 - a benchmark records what stopped a model and goes on
        result["failed"] = {"stage": stage, "message": f"{type(err).__name__}: {err}",
                            "traceback": traceback.format_exc(limit=4)}
    return result


def markdown(results: dict) -> str:
    lines = ["# QDQ models: qsim vs onnxruntime (benchmarks/qdq.py)", "",
             f"Run {results['date']} on {results['machine']} (load average {results['load']}), onnxruntime "
             f"{results['onnxruntime']}, {results['eval']} evaluation inputs per model, calibration "
             f"{results['calib']} inputs (onnxruntime's MinMax); random weights (the flow, not accuracy).", "",
             "qsim quantizes each QDQ model with no calibration data; its integer outputs are compared "
             "element by element with onnxruntime's (same integer input).", "",
             "| model | output elements | differing (ENABLE_ALL) | max LSB | differing (DISABLE_ALL) | max LSB | "
             "largest intermediate difference |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results["models"]:
        if "failed" in r:
            lines.append(f"| {r['model']} | stopped at {r['failed']['stage']}: "
                         f"{r['failed']['message'].splitlines()[0][:160]} | | | | | |")
            continue
        d, m = r["differing"], r["max_lsb"]
        lines.append(f"| {r['model']} | {r['elements']} | {d['ORT_ENABLE_ALL']} | {m['ORT_ENABLE_ALL']} | "
                     f"{d['ORT_DISABLE_ALL']} | {m['ORT_DISABLE_ALL']} | {r['layers_max_lsb']} LSB |")
    lines += ["", "Where they differ: TOSA's RESCALE rounds half up with a 31-bit multiplier, onnxruntime rounds "
              "half to even after a float32 multiplication, so a layer's results differ by 1 LSB at ties and "
              "within float32 rounding of them (a few per million elements); those differences then move "
              "later layers' results (the per-activation tables below). A Softmax output (MTCNN's `prob`, "
              "the encoder's attention) differs more from the default mode: there onnxruntime fuses "
              "DequantizeLinear → Softmax → QuantizeLinear into QLinearSoftmax, which multiplies by "
              "floor(1 / y_scale) = 254 for the 1/255 grid "
              "(float32's 1/255 inverts to 254.99998), i.e. computes round(254 p) where the QDQ model "
              "defines round(255 p): up to 1 step under it for large p, 2 where the roundings add "
              "(tests/onnx/test_qdq_softmax.py). The float path (DISABLE_ALL) computes the definition, "
              "which qsim's integer softmax follows within one step; in the encoder the attention's p·v "
              "product then carries a 1-step difference of p to a few steps."]
    lines += ["", "## First difference from onnxruntime's float path (ORT_DISABLE_ALL)", "",
              "On the first evaluation input where any differs, the first quantized activation, in graph order, "
              "whose integer value differs; the element where the "
              "difference is largest, both values, the float value onnxruntime quantized there and its position "
              "on the grid (value / scale + zero point, before rounding), and the cause that position shows.", "",
              "| model | input | activation (n of quantized) | op | differing / elements | element | qsim | onnxruntime | "
              "grid position | cause |", "| --- | ---: | --- | --- | ---: | --- | ---: | ---: | ---: | --- |"]
    for r in results["models"]:
        f = r.get("first_difference", "absent")
        if f == "absent":
            continue
        if f is None:
            lines.append(f"| {r['model']} | all | none: every quantized activation equal | | | | | | | | |")
            continue
        lines.append(f"| {r['model']} | {f['input']} | `{f['tensor']}` ({f['activation_index']} of {f['activations']}) | {f['op']} | "
                     f"{f['differing']} / {f['elements']} | {f['element']} | {f['qsim']} | {f['onnxruntime']} | "
                     f"{f['grid_position']:.6f} | {f['cause']} |")
    multi = [r for r in results["models"] if len(r.get("per_output", {})) > 1]
    if multi:
        lines += ["", "Models with several outputs, per output (differing / elements, max LSB):", "",
                  "| model | output | ENABLE_ALL | DISABLE_ALL |", "| --- | --- | --- | --- |"]
        for r in multi:
            for out, by_level in r["per_output"].items():
                cells = [f"{d} / {n}, {m} LSB" for d, m, n in (by_level[k] for k in ("ORT_ENABLE_ALL", "ORT_DISABLE_ALL"))]
                lines.append(f"| {r['model']} | `{out}` | {cells[0]} | {cells[1]} |")
    for r in results["models"]:
        if "layers" not in r:
            continue
        lines += ["", f"## {r['model']}: per quantized activation (ENABLE_ALL, {results['layer_inputs']} inputs)", "",
                  "| tensor | op | differing | elements | max LSB |", "| --- | --- | ---: | ---: | ---: |"]
        lines += [f"| `{x['tensor']}` | {x['op']} | {x['differing']} | {x['elements']} | {x['max_lsb']} |"
                  for x in r["layers"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--calib", type=int, default=8)
    p.add_argument("--eval", type=int, default=4)
    p.add_argument("--layer-inputs", type=int, default=2)
    p.add_argument("--work", default="qsim-out/qdq-bench")
    p.add_argument("--out", default=str(HERE.parent / "reports"))
    args = p.parse_args(argv)
    import onnxruntime
    results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.processor() or
               platform.machine(), "load": " ".join(f"{v:.1f}" for v in os.getloadavg()),
               "onnxruntime": onnxruntime.__version__, "calib": args.calib, "eval": args.eval,
               "layer_inputs": args.layer_inputs, "models": []}
    for name in args.models.split(","):
        print(f"{name} ...", flush=True)
        results["models"].append(run_model(name, args))
        print(json.dumps({k: v for k, v in results["models"][-1].items() if k != "layers"}), flush=True)
    out = Path(args.out)
    write_report(out, "qdq", results, markdown, echo=False)
    print(f"wrote {out / 'qdq.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
