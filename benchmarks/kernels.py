"""Times qsim's TOSA kernels against onnxruntime on the issue-2 workloads and two attention products.

    python benchmarks/kernels.py [--reps 40] [--out reports] [--only W1 W3]

Batch 1, int8, --threads N (default 1) on both sides (onnxruntime: intra_op_num_threads=N,
inter_op_num_threads=1, sequential execution; qsim: QSIM_THREADS=N, the GEMM kernels split
output rows over N threads). Every
repetition runs each timed call once, in a fixed order, so all of them see the same machine
load; the script prints medians (and minima), GOPS (2 ops per MAC) and the speed ratio
onnxruntime time / qsim time, and writes reports/kernels.md and reports/kernels.json.
Times are never asserted anywhere: this script measures, the tests check bits.

qsim is timed more than once: "kernel" is the registry call the executor makes
(qsim.kernels.registry.KERNELS[op](inputs, attrs), inputs already validated; for W1 and W2,
a conv followed by a RESCALE, the executor's fused call qsim.kernels.registry.rescaled, which
runtime/int_fusion.py makes for such a chain: one kernel, no int32 tensor in memory), "apart"
the conv and the RESCALE as two registry calls, "tosa.run" the public one-operator API
qsim.tosa.run(op, inputs, attrs), which validates every ERROR_IF first. Speed ratios use the
kernel time; the table shows all.

onnx and onnxruntime are benchmark-only dependencies (pip install onnx onnxruntime); without
them only qsim is timed. Before timing, every workload's results are checked: kernels against
qsim's reference backend, and against onnxruntime where the semantics coincide (bit for bit:
MatMulInteger, ConvInteger; QLinearConv requantizes in float32 with round-half-even, TOSA
RESCALE in fixed point with round-half-up, so there the check counts differing elements and
requires them to differ by at most 1).

Workloads:
  W1 CONV2D 3x3 56x56x64 -> 64, stride 1, pad 1, + per-channel RESCALE to int8 (two qsim
     calls); onnxruntime: QLinearConv (u8 activations with zero point 128, s8 weights)
  W2 DEPTHWISE_CONV2D 3x3 on 112x112x32 (goal: the convolution under 1 ms); the ratio compares
     convolution + RESCALE with QLinearConv group=32
  W3 FULLY_CONNECTED 512 -> 1000 (goal: under 50 us per call including Python overhead);
     onnxruntime: MatMulInteger with the weight as an initializer
  W4 MATMUL 1024x1024x1024 int8 -> int32; both operands are activations in TOSA, so
     onnxruntime's MatMulInteger gets B as a graph input too (each side packs B every call)
  W5, W6 an attention head's products QK^T [8,128,64]x[8,64,128] and AV [8,128,128]x[8,128,64]
     (MATMUL, both operands computed: graph inputs of MatMulInteger too)
Each workload's figures are recorded with the 1-minute load average at the start and the end
of its timing (a shared machine).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from qsim.kernels.cpu_features import current_isa, set_isa, supported_isas
from qsim.kernels.registry import KERNELS, rescaled
from qsim.quant.tosa.scale import rescale_for_product

for _module in ("convolution", "type_conversion"):    # operator definitions register on import
    importlib.import_module(f"qsim.tosa.ops.{_module}")
from qsim.tosa import run  # noqa: E402


@dataclass
class Workload:
    name: str
    what: str
    ops: float                                   # 2 * MACs
    goal: str
    timed: dict[str, Callable]                   # label -> qsim call ("kernel" is the ratio's)
    ort_model: Callable | None                   # builds the onnx model (helper, TensorProto, numpy_helper)
    ort_feeds: dict
    checks: Callable                             # (ort session or None) -> list of (name, ok, detail)
    times: dict[str, list[float]] = field(default_factory=dict)


# ------------------------------------------------------------------ onnxruntime graphs -------

THREADS = 1   # --threads: qsim's QSIM_THREADS and onnxruntime's intra_op_num_threads
FORCED_ISA = None   # --isa: the qsim path forced for the run (None: the CPU's best)


def _ort_session(build):
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    model = build(helper, TensorProto, numpy_helper)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _model(helper, nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "w", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _conv_model(x_shape, w_oihw, bias, group, scales=None):
    """QLinearConv (scales = (x_scale, w_scales, y_scale)) or, without scales, ConvInteger
    (int32 out, no bias); u8 activations with zero point 128, s8 weights with zero point 0."""
    def build(helper, TP, nh):
        x = [helper.make_tensor_value_info("x", TP.UINT8, list(x_shape))]
        if scales is None:
            inits = [nh.from_array(w_oihw, "w"), nh.from_array(np.array(128, np.uint8), "xz")]
            node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1] * 4,
                                    group=group)
            return _model(helper, [node], x, [helper.make_tensor_value_info("y", TP.INT32, None)],
                          inits)
        xs, ws, ys = scales
        oc = w_oihw.shape[0]
        inits = [nh.from_array(np.array(xs, np.float32), "xs"), nh.from_array(np.array(128, np.uint8), "xz"),
                 nh.from_array(w_oihw, "w"), nh.from_array(ws.astype(np.float32), "ws"),
                 nh.from_array(np.zeros(oc, np.int8), "wz"), nh.from_array(np.array(ys, np.float32), "ys"),
                 nh.from_array(np.array(128, np.uint8), "yz"), nh.from_array(bias, "b")]
        node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                                ["y"], pads=[1] * 4, strides=[1, 1], group=group)
        return _model(helper, [node], x, [helper.make_tensor_value_info("y", TP.UINT8, None)], inits)
    return build


def _matmul_model(a_shape, b_shape, b_init=None):
    def build(helper, TP, nh):
        inputs = [helper.make_tensor_value_info("a", TP.UINT8, list(a_shape))]
        inits = [nh.from_array(np.array(128, np.uint8), "az"), nh.from_array(np.array(0, np.int8), "bz")]
        if b_init is None:
            inputs.append(helper.make_tensor_value_info("b", TP.INT8, list(b_shape)))
        else:
            inits.append(nh.from_array(b_init, "b"))
        node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
        return _model(helper, [node], inputs, [helper.make_tensor_value_info("y", TP.INT32, None)], inits)
    return build


def _u8(x: np.ndarray) -> np.ndarray:
    """int8 -> the same value in ONNX's u8 form with zero point 128."""
    return (x.astype(np.int16) + 128).astype(np.uint8)


# ------------------------------------------------------------------ checks -------------------

def _equal(name, got, want):
    ok = got.shape == want.shape and np.array_equal(got, want)
    return (name, ok, "bit-exact" if ok else f"{int((got != want).sum())} of {want.size} differ")


def _within_one(name, got_i8, ort_u8):
    diff = np.abs(got_i8.astype(np.int32) + 128 - ort_u8.astype(np.int32))
    n = int((diff != 0).sum())
    return (name, int(diff.max(initial=0)) <= 1,
            f"{n} of {diff.size} elements differ, max |diff| {int(diff.max(initial=0))} LSB")


def _conv_checks(name, x, w_oihw, group, conv_api, resc, qsim_out, ort_requant):
    """Kernels vs reference (full), accumulators vs ConvInteger (exact), requantized vs QLinearConv."""
    op = "CONV2D" if group == 1 else "DEPTHWISE_CONV2D"

    def checks(session):
        ref = run(op, [x], conv_api, backend="reference")[0]
        ref = run("RESCALE", [ref], resc, backend="reference")[0]
        out = [_equal(f"{name} kernels vs qsim reference (conv + RESCALE, {how})", fn(), ref)
               for how, fn in zip(("fused", "apart"), qsim_out)]
        if session is None:
            return out
        nobias = dict(conv_api, bias=np.zeros_like(conv_api["bias"]))
        acc = KERNELS[op]([x], nobias)[0]
        conv_int = _ort_session(_conv_model(_u8(x).transpose(0, 3, 1, 2).shape, w_oihw, None, group))
        want = conv_int.run(None, {"x": np.ascontiguousarray(_u8(x).transpose(0, 3, 1, 2))})[0]
        out.append(_equal(f"{name} accumulators vs onnxruntime ConvInteger",
                          acc, want.transpose(0, 2, 3, 1)))
        got = session.run(None, ort_requant)[0].transpose(0, 2, 3, 1)
        out.append(_within_one(f"{name} int8 output vs onnxruntime QLinearConv", ref, got))
        return out
    return checks


# ------------------------------------------------------------------ workloads ----------------

def _conv_workload(rng, name, what, goal, x_shape, oc, group):
    """W1 (group 1) and W2 (depthwise: group == channels)."""
    x = rng.integers(-128, 128, x_shape, dtype=np.int8)
    c = x_shape[3]
    if group == 1:
        w = rng.integers(-128, 128, (oc, 3, 3, c), dtype=np.int8)          # OHWI
        w_oihw = np.ascontiguousarray(w.transpose(0, 3, 1, 2))
        op, macs = "CONV2D", x_shape[1] * x_shape[2] * oc * 9 * c
    else:
        w = rng.integers(-128, 128, (3, 3, c, 1), dtype=np.int8)           # HWIM
        w_oihw = np.ascontiguousarray(w.transpose(2, 3, 0, 1))            # [C*M, 1, KH, KW]
        op, macs = "DEPTHWISE_CONV2D", x_shape[1] * x_shape[2] * c * 9
    bias = rng.integers(-5000, 5000, oc).astype(np.int32)
    # the same float scales on both sides: qsim's multiplier/shift is their exact ratio (1.9.3)
    xs, ys = np.float32(0.05), np.float32(2.0 if group == 1 else 0.2)
    ws = rng.uniform(0.005, 0.02, oc).astype(np.float32)
    fixed = rescale_for_product(float(xs), [float(v) for v in ws], float(ys))
    conv = dict(weight=w, bias=bias, pad=(1, 1, 1, 1), stride=(1, 1), dilation=(1, 1),
                input_zp=0, weight_zp=0)
    conv_k = dict(conv, out_t="int32")
    resc = dict(input_zp=0, output_zp=0, multiplier=fixed.multiplier.astype(np.int32),
                shift=fixed.shift.astype(np.int32), scale32=True, double_round=False,
                per_channel=True, out_t="int8")

    def conv_only():
        return KERNELS[op]([x], conv_k)[0]

    def with_rescale():
        return KERNELS["RESCALE"]([KERNELS[op]([x], conv_k)[0]], resc)[0]

    def fused():        # the executor's call for a conv + RESCALE chain (runtime/int_fusion.py)
        y = rescaled(op, [x], conv_k, resc, None)
        if y is None:
            raise SystemExit(f"{name}: the kernels do not fuse this conv + RESCALE")
        return y

    def api_with_rescale():
        return run("RESCALE", [run(op, [x], conv)[0]], resc)[0]

    feeds = {"x": np.ascontiguousarray(_u8(x).transpose(0, 3, 1, 2))}
    timed = {"kernel": fused, "apart": with_rescale, "tosa.run": api_with_rescale}
    if group != 1:      # the goal is on the convolution alone
        timed["conv only"] = conv_only
    return Workload(name, what, 2.0 * macs, goal, timed,
                    _conv_model(feeds["x"].shape, w_oihw, bias, group, (xs, ws, ys)), feeds,
                    _conv_checks(name, x, w_oihw, group, conv, resc, (fused, with_rescale), feeds))


def workloads(rng) -> list[Workload]:
    out = [
        _conv_workload(rng, "W1", "CONV2D 3x3 56x56x64->64 s1 p1 + per-channel RESCALE to int8",
                       "ratio >= 1.0 and >= 150 GOPS", (1, 56, 56, 64), 64, 1),
        _conv_workload(rng, "W2", "DEPTHWISE_CONV2D 3x3 112x112x32 s1 p1 + per-channel RESCALE",
                       "conv only < 1 ms", (1, 112, 112, 32), 32, 32),
    ]

    # W3
    xf = rng.integers(-128, 128, (1, 512), dtype=np.int8)
    wf = rng.integers(-128, 128, (1000, 512), dtype=np.int8)
    bf = rng.integers(-5000, 5000, 1000).astype(np.int32)
    fc = dict(weight=wf, bias=bf, input_zp=0, weight_zp=0)
    fc_k = dict(fc, out_t="int32")

    def fc_checks(session):
        got = KERNELS["FULLY_CONNECTED"]([xf], fc_k)[0]
        out = [_equal("W3 kernels vs qsim reference", got,
                      run("FULLY_CONNECTED", [xf], fc, backend="reference")[0])]
        if session is not None:
            want = session.run(None, {"a": _u8(xf)})[0].astype(np.int64) + bf
            out.append(_equal("W3 vs onnxruntime MatMulInteger + bias", got, want.astype(np.int32)))
        return out

    out.append(Workload("W3", "FULLY_CONNECTED 512->1000 (int32 out)", 2.0 * 512 * 1000,
                        "< 50 us per call", {"kernel": lambda: KERNELS["FULLY_CONNECTED"]([xf], fc_k),
                                             "tosa.run": lambda: run("FULLY_CONNECTED", [xf], fc)},
                        _matmul_model(xf.shape, None, np.ascontiguousarray(wf.T)), {"a": _u8(xf)},
                        fc_checks))

    # W4
    a = rng.integers(-128, 128, (1, 1024, 1024), dtype=np.int8)
    b = rng.integers(-128, 128, (1, 1024, 1024), dtype=np.int8)
    mm = dict(A_zp=0, B_zp=0)
    mm_k = dict(mm, out_t="int32")

    def mm_checks(session):
        got = KERNELS["MATMUL"]([a, b], mm_k)[0]
        # 64 rows against numpy's int64 product (the reference backend would take minutes)
        out = [_equal("W4 rows 0..63 vs numpy int64 product", got[0, :64].astype(np.int64),
                      a[0, :64].astype(np.int64) @ b[0].astype(np.int64))]
        if session is not None:
            out.append(_equal("W4 vs onnxruntime MatMulInteger", got[0],
                              session.run(None, {"a": _u8(a[0]), "b": b[0]})[0]))
        return out

    out.append(Workload("W4", "MATMUL 1024x1024x1024 int8 -> int32", 2.0 * 1024 ** 3,
                        "ratio >= 1.0", {"kernel": lambda: KERNELS["MATMUL"]([a, b], mm_k),
                                         "tosa.run": lambda: run("MATMUL", [a, b], mm)},
                        _matmul_model(a.shape[1:], b.shape[1:]), {"a": _u8(a[0]), "b": b[0]},
                        mm_checks))
    out += [_attention_workload(rng, "W5", "QK^T", (8, 128, 64, 128)),
            _attention_workload(rng, "W6", "AV", (8, 128, 128, 64))]
    return out


def _attention_workload(rng, name, what, shape):
    """W5/W6: an attention head's batched products, both operands computed (MatMulInteger gets
    both as graph inputs: each side packs B on every call)."""
    n, h, c, w = shape
    a = rng.integers(-128, 128, (n, h, c), dtype=np.int8)
    b = rng.integers(-128, 128, (n, c, w), dtype=np.int8)
    mm_k = dict(A_zp=0, B_zp=0, out_t="int32")

    def checks(session):
        got = KERNELS["MATMUL"]([a, b], mm_k)[0]
        out = [_equal(f"{name} vs numpy int64 product", got.astype(np.int64),
                      np.einsum("nhc,ncw->nhw", a.astype(np.int64), b.astype(np.int64)))]
        if session is not None:
            out.append(_equal(f"{name} vs onnxruntime MatMulInteger", got, session.run(None, {"a": _u8(a), "b": b})[0]))
        return out

    return Workload(name, f"attention {what} MATMUL [{n},{h},{c}]x[{n},{c},{w}] int8 -> int32",
                    2.0 * n * h * c * w, "ratio >= 1.0",
                    {"kernel": lambda: KERNELS["MATMUL"]([a, b], mm_k),
                     "tosa.run": lambda: run("MATMUL", [a, b], dict(A_zp=0, B_zp=0))},
                    _matmul_model(a.shape, b.shape), {"a": _u8(a), "b": b}, checks)


# ------------------------------------------------------------------ timing -------------------

def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(wl: Workload, session, reps: int) -> dict:
    calls = dict(wl.timed)
    if session is not None:
        calls["onnxruntime"] = lambda: session.run(None, wl.ort_feeds)
    for fn in calls.values():        # warm-up: packing caches, first-touch pages, ORT init
        fn()
    wl.times = {label: [] for label in calls}
    load_start = _load()
    for _ in range(reps):
        for label, fn in calls.items():
            wl.times[label].append(_timed(fn))
    med = {label: statistics.median(ts) for label, ts in wl.times.items()}
    q, o = med["kernel"], med.get("onnxruntime")
    return {"workload": wl.name, "what": wl.what, "ops": wl.ops, "goal": wl.goal, "reps": reps,
            "median_s": med, "min_s": {label: min(ts) for label, ts in wl.times.items()},
            "load_average": [load_start, _load()],
            "qsim_gops": wl.ops / q / 1e9, "ort_gops": wl.ops / o / 1e9 if o else None,
            "speed_ratio_ort_over_qsim": o / q if o else None}


def _load() -> float | None:
    """The 1-minute load average (the machine is shared: each figure is recorded with it)."""
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def _cpu_info() -> tuple[str, list[str]]:
    name, flags = "unknown", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name == "unknown":
                    name = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    wanted = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni", "amx_int8")
    return name, [f for f in wanted if f in flags]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40, help="repetitions of the large workloads "
                    "(W3, a few microseconds per call, runs 20x as many, W5 and W6 10x)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reports"))
    ap.add_argument("--only", nargs="*", help="workload names (W1..W6)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads on both sides (QSIM_THREADS, onnxruntime intra_op_num_threads); "
                         "reports for N > 1 go to kernels_threadsN.md/.json")
    ap.add_argument("--isa", help="force qsim's kernel path (portable, avx2, avx512vnni, avx512amx; "
                    "the report then goes to kernels[_threadsN]_ISA.md/.json); "
                    "onnxruntime keeps its own best path, so ratios then compare unlike code")
    args = ap.parse_args(argv)
    global THREADS, FORCED_ISA
    THREADS, FORCED_ISA = args.threads, args.isa
    os.environ["QSIM_THREADS"] = str(args.threads)
    if args.isa:
        set_isa(args.isa)
    rng = np.random.default_rng(2)
    results, failed = [], []
    for wl in workloads(rng):
        if args.only and wl.name not in args.only:
            continue
        session = _ort_session(wl.ort_model) if wl.ort_model else None
        checks = wl.checks(session)
        for check, ok, detail in checks:
            print(f"  check {'ok  ' if ok else 'FAIL'} {check}: {detail}", flush=True)
            if not ok:
                failed.append(check)
        summary = measure(wl, session, args.reps * (20 if wl.ops < 1e7 else 10 if wl.ops < 1e8 else 1))
        summary["checks"] = [{"check": c, "ok": ok, "detail": d} for c, ok, d in checks]
        results.append(summary)
        med = summary["median_s"]
        ort_text = (f"ort {med['onnxruntime'] * 1e3:.3f} ms {summary['ort_gops']:.0f} GOPS, "
                    f"ratio {summary['speed_ratio_ort_over_qsim']:.2f}" if "onnxruntime" in med else "ort n/a")
        others = ", ".join(f"{label} {t * 1e3:.3f} ms" for label, t in med.items()
                           if label not in ("kernel", "onnxruntime"))
        print(f"{wl.name}: qsim kernel {med['kernel'] * 1e3:.3f} ms {summary['qsim_gops']:.0f} GOPS "
              f"({others}); {ort_text}   [{wl.what}]", flush=True)
    write_report(results, args.out)
    if failed:
        print("FAILED checks: " + "; ".join(failed), file=sys.stderr)
        return 1
    return 0


def write_report(results, out_dir) -> None:
    try:
        import onnxruntime
        ort_version = onnxruntime.__version__
    except ImportError:
        ort_version = None
    cpu, flags = _cpu_info()
    meta = {"cpu": cpu, "cpu_flags": flags, "qsim_isa": current_isa().value,
            "qsim_isas_supported": [i.value for i in supported_isas()],
            "python": platform.python_version(), "numpy": np.__version__, "onnxruntime": ort_version,
            "threads": THREADS, "cores": os.cpu_count(),
            "load_average_end": [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None,
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    os.makedirs(out_dir, exist_ok=True)
    stem = ("kernels" if THREADS == 1 else f"kernels_threads{THREADS}") + (f"_{FORCED_ISA}" if FORCED_ISA else "")
    _write_atomic(os.path.join(out_dir, stem + ".json"), json.dumps({"meta": meta, "results": results}, indent=2))
    lines = ["# qsim kernels vs onnxruntime", "",
             f"Generated by `python benchmarks/kernels.py --threads {THREADS}"
             f"{' --isa ' + FORCED_ISA if FORCED_ISA else ''}` (batch 1, int8, "
             f"{THREADS} thread(s) on both sides: QSIM_THREADS and intra_op_num_threads; "
             "medians of alternating repetitions in one process). Speed ratio = onnxruntime time / "
             "qsim kernel time. \"kernel\" is the registry call the executor makes "
             "(`KERNELS[op](inputs, attrs)`; W1 and W2: the fused conv + RESCALE call "
             "`qsim.kernels.registry.rescaled` the executor makes for that chain, \"apart\" the two "
             "registry calls); \"tosa.run\" is the public API `qsim.tosa.run`, which "
             "validates every ERROR_IF first.", "",
             f"Machine: {cpu}, {meta['cores']} cores, flags {' '.join(flags)}; qsim ISA path "
             f"{meta['qsim_isa']} (supported: {', '.join(meta['qsim_isas_supported'])}); onnxruntime "
             f"{ort_version}; numpy {np.__version__}; {meta['date_utc']} UTC; load average at the end "
             f"{meta['load_average_end']} (the machine is shared: absolute times move with the load, "
             "the alternation keeps the ratio fair).", "",
             "| workload | qsim kernel | qsim GOPS | other qsim timings | onnxruntime | ort GOPS | speed ratio | load (start-end) | goal |",
             "| --- | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |"]
    for r in results:
        med = r["median_s"]
        ort = (f"{med['onnxruntime'] * 1e3:.3f} ms", f"{r['ort_gops']:.0f}",
               f"{r['speed_ratio_ort_over_qsim']:.2f}") if "onnxruntime" in med else ("n/a",) * 3
        others = "; ".join(f"{label} {t * 1e3:.3f} ms" for label, t in med.items()
                           if label not in ("kernel", "onnxruntime"))
        load = "-".join(str(v) for v in r["load_average"])
        lines.append(f"| {r['workload']}: {r['what']} | {med['kernel'] * 1e3:.3f} ms | "
                     f"{r['qsim_gops']:.0f} | {others} | {ort[0]} | {ort[1]} | {ort[2]} | {load} | {r['goal']} |")
    lines += ["", "Checks run before timing:", ""]
    for r in results:
        lines += [f"- {'ok' if c['ok'] else 'FAILED'}: {c['check']} ({c['detail']})" for c in r["checks"]]
    _write_atomic(os.path.join(out_dir, stem + ".md"), "\n".join(lines) + "\n")


def _write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
