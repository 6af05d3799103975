"""Recurrent networks (ONNX LSTM / GRU as torch.onnx exports them) for the benchmarks.

1. `ARCHITECTURES`: keyword-spotting networks for benchmarks/models.py (registered there in one
   line): MFCC frames [49, 10] → nn.LSTM (2 layers) or nn.GRU (1 layer), hidden 64,
   batch_first → the last step's output → nn.Linear(12); random (seeded PyTorch) weights.
2. `python benchmarks/_recurrent.py [--epochs 60] [--out reports]`: accuracy of trained
   networks. scikit-learn's digits (1,797 8x8 images, package data: nothing is downloaded)
   read as sequences: 8 steps of 8 features (the rows) and 64 steps of 1 feature (the pixels
   one by one, a long sequence that stresses the cell state). A tiny LSTM and GRU (hidden 32)
   are trained with torch on the first 1,437 images (seeded), exported to ONNX, quantized by
   `qsim quantize` (int8 and 16x8, the default recipe, 64 training images as calibration data)
   and evaluated on the other 360 with their labels: float top-1, integer top-1, top-1
   agreement and logits SQNR; the float model is checked against onnxruntime and the int8
   model simulated on the NPU's cycle model (one input: verified, cycles, host arithmetic).
   Writes reports/recurrent.md and reports/recurrent.json.

Benchmark-only packages: torch, onnxruntime, scikit-learn.
"""
from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))     # this checkout's qsim, not another installed one

from _architectures import Architecture  # noqa: E402

KWS_INPUT = (49, 10)
TRAIN = 1437


def _torch():
    try:
        import torch   # deferred: benchmark-only dependency
    except ImportError:
        raise SystemExit("benchmark-only package missing: torch (pip install torch)")
    return torch


def sequence_classifier(cell: str, features: int, hidden: int, layers: int, classes: int):
    """nn.LSTM / nn.GRU (batch_first) over [N, steps, features], the last step's output → Linear."""
    torch = _torch()
    nn = torch.nn

    class SequenceClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            kind = nn.LSTM if cell == "lstm" else nn.GRU
            self.rnn = kind(features, hidden, num_layers=layers, batch_first=True)
            self.fc = nn.Linear(hidden, classes)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.fc(y[:, -1])
    return SequenceClassifier()


def export(module, input_shape: tuple[int, ...]):
    """The module as torch.onnx writes it (TorchScript exporter, opset 14, dynamic batch)."""
    import onnx   # deferred: benchmark-only dependency
    torch = _torch()
    buf = io.BytesIO()
    torch.onnx.export(module.eval(), (torch.zeros(1, *input_shape),), buf, input_names=["x"],
                      output_names=["logits"], opset_version=14, dynamo=False,
                      dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
    return onnx.load_from_string(buf.getvalue())


def _kws(cell: str, layers: int, seed: int = 0):
    _torch().manual_seed(seed)
    return export(sequence_classifier(cell, KWS_INPUT[1], 64, layers, 12), KWS_INPUT)


ARCHITECTURES = {a.name: a for a in [
    Architecture("kws_lstm", KWS_INPUT, "random", lambda: _kws("lstm", 2)),
    Architecture("kws_gru", KWS_INPUT, "random", lambda: _kws("gru", 1)),
]}


# ---------------------------------------------------------------------- trained accuracy

def digit_sequences(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as [1797, steps, 64 / steps] sequences in [0, 1], and the labels."""
    from sklearn.datasets import load_digits   # deferred: benchmark-only dependency
    digits = load_digits()
    x = (digits.images.reshape(len(digits.images), steps, 64 // steps) / 16.0).astype(np.float32)
    return x, digits.target.astype(np.int64)


def train(cell: str, x: np.ndarray, y: np.ndarray, epochs: int, seed: int = 0):
    torch = _torch()
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    module = sequence_classifier(cell, x.shape[2], 32, 1, 10)
    opt = torch.optim.Adam(module.parameters(), lr=1e-2)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    order = np.random.default_rng(seed)
    for _ in range(epochs):
        for batch in np.array_split(order.permutation(len(x)), len(x) // 64):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(module(xt[batch]), yt[batch])
            loss.backward()
            opt.step()
    return module.eval()


def _ort(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort   # deferred: benchmark-only dependency
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def snap_recurrent_weights(model):
    """The model with the W and R of every LSTM/GRU node rounded to the symmetric per-channel
    int8 grid (scale max|row| / 127): qsim's int8 weights then equal the float ones, so what is
    left of the integer error comes from the activations alone."""
    from onnx import numpy_helper
    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in ("LSTM", "GRU"):
            for name in node.input[1:3]:
                w = numpy_helper.to_array(inits[name]).astype(np.float64)
                scale = np.maximum(np.abs(w).max(axis=-1, keepdims=True), 1e-30) / 127
                inits[name].CopyFrom(numpy_helper.from_array((np.round(w / scale) * scale).astype(np.float32), name))
    return model


def measure(cell: str, steps: int, epochs: int, work: Path, on_grid: bool = False) -> dict:
    import onnx   # deferred: benchmark-only dependency
    from qsim.commands.quantize import quantize_to_folder
    from qsim.commands.simulate import simulate_command
    from qsim.npu.engines import Engine
    from qsim.quant.options import QuantizeOptions
    from qsim.quant.params import Precision
    from qsim.quant.pipeline import load_float_model
    from qsim.runtime.executor import execute

    name = f"digits{steps}_{cell}" + ("_weights_on_int8_grid" if on_grid else "")
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    x, y = digit_sequences(steps)
    t0 = time.perf_counter()
    module = train(cell, x[:TRAIN], y[:TRAIN], epochs)
    row = {"model": name, "cell": cell, "steps": steps, "features": x.shape[2], "train_s": round(time.perf_counter() - t0)}
    path = folder / f"{name}.onnx"
    exported = export(module, x.shape[1:])
    onnx.save(snap_recurrent_weights(exported) if on_grid else exported, path)
    np.save(folder / "calib.npy", x[:64])
    np.savez(folder / "eval.npz", x=x[TRAIN:], y=y[TRAIN:])
    graph = load_float_model(path, batch=8)
    got = execute(graph, {graph.inputs[0]: x[TRAIN:TRAIN + 8]})[graph.outputs[0]]
    row["float_vs_onnxruntime"] = float(np.max(np.abs(got - _ort(path, x[TRAIN:TRAIN + 8]))))
    for precision in (Precision.INT8, Precision.INT16X8):
        out = folder / precision.value
        result = quantize_to_folder(str(path), str(folder / "calib.npy"), str(out),
                                    QuantizeOptions(show_progress=False, precision=precision),
                                    evaluation=str(folder / "eval.npz"))
        report = result.report
        row["observer"] = options_observer(out)
        row[precision.value] = {"float_top1": report.float_top1, "int_top1": report.int8_top1,
                                "agreement": report.top1_agreement, "sqnr_db": report.outputs[0].sqnr_db,
                                "integer_ops": len(result.model.graph.ops),
                                "state_sqnr_db": state_sqnr(report, "c" if cell == "lstm" else "h")}
        np.save(folder / "x1.npy", x[TRAIN:TRAIN + 1])
        sim = simulate_command(str(out), "16x16", Engine.MODEL, str(folder / "x1.npy"), str(folder / f"npu-{precision.value}"),
                               show_progress=False, workers=1)
        layers = sim.reports[0].layers
        host = sorted({la.op for la in layers if la.unit == "host" and la.op not in ("RESHAPE", "IDENTITY", "CONST")})
        row[precision.value]["simulate"] = {"verified": sim.verified, "cycles": sim.reports[0].total_cycles,
                                            "layers": len(layers), "host_arithmetic": host}
    return row


def options_observer(folder: Path) -> str:
    """The range observer the quantized folder was made with (its report.json settings)."""
    import json
    return json.loads((folder / "report.json").read_text())["settings"]["observer"]


def state_sqnr(report, which: str) -> dict:
    """SQNR of the recurrent state `which` (c: LSTM cell, h: GRU hidden) by step: the first,
    the last and the lowest (the converter names a step's states `<node>.<direction>.t<step>.<h|c>`)."""
    import re
    by_step = {}
    for t in report.tensors:
        m = re.search(r"\.t(\d+)\." + which + r"$", t.name)
        if m:
            by_step[int(m.group(1))] = t.sqnr_db
    steps = sorted(by_step)
    return {"first": by_step[steps[0]], "last": by_step[steps[-1]], "lowest": min(by_step.values())}


def markdown(results: dict) -> str:
    lines = ["# Recurrent networks: trained LSTM / GRU, float vs int8 vs 16x8", "",
             f"Generated by `python benchmarks/_recurrent.py --epochs {results['epochs']}` on {results['machine']} "
             f"({results['date']}; each row names the commit it ran).", "",
             "Data: scikit-learn's digits (package data), images 0-1436 for training and the first 64 of them for "
             "calibration, images 1437-1796 (360) for evaluation with their labels. Each 8x8 image is read as a "
             "sequence: 8 steps of 8 features (rows) or 64 steps of 1 feature (pixels). Networks: torch nn.LSTM / "
             "nn.GRU (1 layer, hidden 32, batch_first) → last step → nn.Linear(10), trained with Adam, exported "
             "by torch.onnx (opset 14); qsim unrolls the ONNX LSTM/GRU node (docs/onnx.md, \"Recurrent networks\"). "
             "Quantization: `qsim quantize` defaults at int8 and at 16x8 (int16 activations): per-channel weights, "
             "adaptive weight rounding and the default range observer of the row's commit, which the row names "
             "(`auto` today; rows that name none ran when the default was `percentile`). Simulation: the NPU's "
             "cycle model, 16x16, one input, every layer compared with the kernels.", "",
             "State SQNR: the recurrent state (LSTM: the cell state C, GRU: the hidden state H) of each step, float "
             "vs dequantized integer over the evaluation set: at the first step, the last step, and the lowest.", "",
             "| model | float vs onnxruntime (max abs) | precision | float top-1 | integer top-1 | top-1 agreement "
             "| logits SQNR | state SQNR first / last / lowest | integer ops | simulate |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["models"]:
        for p in ("int8", "16x8"):
            m = r[p]
            s = m["simulate"]
            sim = (("verified" if s["verified"] else "**MISMATCH**") + f", {s['cycles']} cycles, "
                   + ("host: " + ", ".join(s["host_arithmetic"]) if s["host_arithmetic"] else "no host arithmetic"))
            observer = f", {r['observer']}" if "observer" in r else ""
            lines.append(f"| {r['model']} ({r['steps']} steps × {r['features']}; {r.get('commit', '?')}{observer}) | "
                         f"{r['float_vs_onnxruntime']:.1e} | "
                         f"{p} | {100 * m['float_top1']:.1f} % | {100 * m['int_top1']:.1f} % | "
                         f"{100 * m['agreement']:.1f} % | {m['sqnr_db']:.1f} dB | "
                         + " / ".join(f"{m['state_sqnr_db'][k]:.1f}" for k in ("first", "last", "lowest"))
                         + f" dB | {m['integer_ops']} | {sim} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from _rows import merged_rows, read_previous, run_header, with_kept_sections, write_report
    parser = argparse.ArgumentParser(description="trained LSTM/GRU: float vs int8 vs 16x8")
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--work", default="/tmp/qsim-bench-recurrent")
    parser.add_argument("--out", default="reports")
    parser.add_argument("--models", default="8:lstm,8:gru,64:lstm,64:gru,64:lstm:on-grid",
                        help="steps:cell[:on-grid], comma-separated; on-grid: W and R rounded to the int8 grid "
                             "before quantizing (the error of the activations alone)")
    args = parser.parse_args(argv)
    results = dict(run_header(), epochs=args.epochs, models=[])
    for item in args.models.split(","):
        steps, cell, *variant = item.split(":")
        print(f"{item} ...", flush=True)
        row = measure(cell, int(steps), args.epochs, Path(args.work), on_grid=variant == ["on-grid"])
        row["commit"] = results["commit"]
        print(row, flush=True)
        results["models"].append(row)
    # the models not run this time keep their previous rows (each row names its commit)
    before = {r["model"]: r for r in read_previous(Path(args.out) / "recurrent.json").get("models", [])}
    now = {r["model"]: r for r in results["models"]}
    results["models"] = list(merged_rows(before, now, list(before) + [m for m in now if m not in before]).values())
    previous = Path(args.out) / "recurrent.md"      # its "## " sections (the reading) are kept
    kept = previous.read_text() if previous.is_file() else None
    write_report(Path(args.out), "recurrent", results, lambda r: with_kept_sections(markdown(r), kept))
    return 0


if __name__ == "__main__":
    sys.exit(main())
