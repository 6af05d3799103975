"""Times qsim's int8 GEMM shapes on each fast ISA path against onnxruntime's MatMulInteger.

    python benchmarks/gemm_paths.py [--threads 1 2] [--reps 30] [--isa avx512vnni avx512amx] [--out reports]

Shapes: FULLY_CONNECTED 1024x1024x1024 (constant weight: onnxruntime gets it as an initializer),
MATMUL [1,1024,1024]x[1,1024,1024] with a constant B (read-only: packed once; an initializer
there) and with both operands computed, and the attention products QK^T [8,128,64]x[8,64,128] and
AV [8,128,128]x[8,128,64] (both operands computed: graph inputs on both sides, so each side
packs B on every call). int32 outputs, batch as given. In one process, each repetition calls
every qsim path (forced with qsim.kernels.cpu_features.forced_isa) and onnxruntime once, in a
fixed order, so all of them see the same machine load; the report gives medians (and minima:
on a loaded machine the least disturbed run), GOPS (2 ops per MAC) and the speed ratio
onnxruntime time / qsim time per path. Before timing, every path's
output is compared with onnxruntime's, bit for bit. Writes reports/kernels_gemm_paths.md/.json.
Times are never asserted anywhere: this script measures, the tests check bits.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import kernels as kbench            # benchmarks/kernels.py: onnxruntime graphs, CPU name, writing
from qsim.kernels.cpu_features import forced_isa, supported_isas
from qsim.kernels.registry import KERNELS

INT32 = dict(out_t="int32")


def shapes(rng):
    """(name, ops, qsim call, onnxruntime model builder, feeds) per shape."""
    def ints(*shape):
        return rng.integers(-128, 128, shape, dtype=np.int8)

    x, w = ints(1024, 1024), ints(1024, 1024)
    fc = dict(INT32, weight=w, bias=np.zeros(1024, np.int32), input_zp=0, weight_zp=0)
    out = [("FULLY_CONNECTED 1024x1024 -> 1024", 2.0 * 1024 ** 3,
            lambda: KERNELS["FULLY_CONNECTED"]([x], fc)[0],
            kbench._matmul_model(x.shape, None, np.ascontiguousarray(w.T)), {"a": kbench._u8(x)})]
    mm = dict(INT32, A_zp=0, B_zp=0)
    # MATMUL with a constant B (read-only, as the executor hands a B made from constants:
    # packed once, like a weight) against MatMulInteger with B as an initializer
    a1, b1 = ints(1, 1024, 1024), ints(1, 1024, 1024)
    b1.flags.writeable = False
    out.append(("MATMUL [1,1024,1024]x[1,1024,1024], B constant", 2.0 * 1024 ** 3,
                lambda: KERNELS["MATMUL"]([a1, b1], mm)[0],
                kbench._matmul_model(a1.shape[1:], None, np.ascontiguousarray(b1[0])), {"a": kbench._u8(a1[0])}))
    for name, (n, h, c, wd) in (("MATMUL [1,1024,1024]x[1,1024,1024]", (1, 1024, 1024, 1024)),
                                ("attention QK^T [8,128,64]x[8,64,128]", (8, 128, 64, 128)),
                                ("attention AV [8,128,128]x[8,128,64]", (8, 128, 128, 64))):
        a, b = ints(n, h, c), ints(n, c, wd)
        out.append((name, 2.0 * n * h * c * wd, lambda a=a, b=b: KERNELS["MATMUL"]([a, b], mm)[0],
                    kbench._matmul_model(a.shape, b.shape), {"a": kbench._u8(a), "b": b}))
    return out


def measure(isas, threads: int, reps: int, rng) -> list[dict]:
    kbench.THREADS = threads
    os.environ["QSIM_THREADS"] = str(threads)
    rows = []
    for name, ops, call, model, feeds in shapes(rng):
        session = kbench._ort_session(model)
        if session is None:
            raise SystemExit("gemm_paths.py needs onnx and onnxruntime (pip install onnx onnxruntime)")
        want = session.run(None, feeds)[0]
        for isa in isas:
            with forced_isa(isa):
                got = call()
            if not np.array_equal(got.reshape(want.shape), want):
                raise SystemExit(f"{name} on {isa}: output differs from onnxruntime's")
        times = {label: [] for label in ["onnxruntime", *isas]}
        for _ in range(reps if ops > 1e9 else 10 * reps):
            for label in times:
                fn = (lambda: session.run(None, feeds)) if label == "onnxruntime" else call
                with forced_isa(isas[0] if label == "onnxruntime" else label):   # set outside the timing
                    start = time.perf_counter()
                    fn()
                    times[label].append(time.perf_counter() - start)
        med = {label: statistics.median(ts) for label, ts in times.items()}
        rows.append({"shape": name, "ops": ops, "threads": threads, "reps": len(times["onnxruntime"]),
                     "median_ms": {k: v * 1e3 for k, v in med.items()},
                     "min_ms": {k: min(ts) * 1e3 for k, ts in times.items()},
                     "gops": {k: ops / v / 1e9 for k, v in med.items()},
                     "ratio_ort_over_qsim": {k: med["onnxruntime"] / v for k, v in med.items()
                                             if k != "onnxruntime"}})
        print(f"{name}, {threads} thread(s): " + ", ".join(
            f"{k} {v * 1e3:.3f} ms ({ops / v / 1e9:.0f} GOPS)" for k, v in med.items()) + "; ratios " +
            ", ".join(f"{k} {r:.2f}" for k, r in rows[-1]["ratio_ort_over_qsim"].items()), flush=True)
    return rows


def write_report(rows, isas, out_dir: str, load_start, load_end) -> None:
    import json
    cpu, flags = kbench._cpu_info()
    meta = {"cpu": cpu, "cpu_flags": flags, "qsim_isas": list(isas), "cores": os.cpu_count(),
            "load_average_start": load_start, "load_average_end": load_end,
            "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, "kernels_gemm_paths")
    kbench._write_atomic(stem + ".json", json.dumps({"meta": meta, "results": rows}, indent=2))
    lines = ["# qsim int8 GEMM shapes per ISA path vs onnxruntime MatMulInteger", "",
             "Generated by `python benchmarks/gemm_paths.py` (int32 outputs; medians of alternating "
             "repetitions in one process, minima in brackets; speed ratio = onnxruntime time / qsim "
             "time, of the medians and of the minima).", "",
             f"Machine: {cpu}, {meta['cores']} cores, flags {' '.join(flags)}; {meta['date_utc']} UTC; "
             f"load average {load_start} at the start, {load_end} at the end (a shared machine: "
             "absolute times move with the load, the alternation keeps the ratios fair).", "",
             "| shape | threads | " + " | ".join(f"qsim {i}" for i in isas) + " | onnxruntime | "
             + " | ".join(f"ratio {i}" for i in isas) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in isas) + " | ---: | "
             + " | ".join("---:" for _ in isas) + " |"]
    for r in rows:
        def cell(k):
            return f"{r['median_ms'][k]:.3f} ms ({r['gops'][k]:.0f} GOPS) [{r['min_ms'][k]:.3f}]"

        def ratio(k):
            return f"{r['ratio_ort_over_qsim'][k]:.2f} [{r['min_ms']['onnxruntime'] / r['min_ms'][k]:.2f}]"
        cells, ort, ratios = [cell(i) for i in isas], cell("onnxruntime"), [ratio(i) for i in isas]
        lines.append(f"| {r['shape']} | {r['threads']} | " + " | ".join(cells) + f" | {ort} | "
                     + " | ".join(ratios) + " |")
    kbench._write_atomic(stem + ".md", "\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=40, help="repetitions of the 1024 shapes (attention: 10x)")
    ap.add_argument("--isa", nargs="+", help="qsim paths to time (default: the vector paths this CPU runs)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reports"))
    args = ap.parse_args(argv)
    isas = args.isa or [i.value for i in supported_isas() if i.value not in ("portable", "avx2")]
    load_start = [round(v, 2) for v in os.getloadavg()]
    rows = []
    for threads in args.threads:
        rows += measure(isas, threads, args.reps, np.random.default_rng(5))
    write_report(rows, isas, args.out, load_start, [round(v, 2) for v in os.getloadavg()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
