"""Distributed evaluation benchmark: `qsim quantize --eval`'s evaluation on 1 vs 2 Dask workers.

    python benchmarks/eval_scale.py [--repeat 3] [--samples 10000] [--out reports]

The embedded Fashion-MNIST CNN, quantized once, evaluated on the first --samples images of the
Fashion-MNIST test set (Debian's dataset-fashion-mnist: 10,000 images; else the embedded 1,000)
by (wall-clock medians over --repeat rounds, the settings alternated within each round so that
load from other jobs hits all alike):
- serial: evaluate in this process (what `--workers 1` runs), with every core's threads (its
  default: the kernels' and BLAS's threads, the statistics on a thread beside the float graph)
  and with one thread (QSIM_THREADS=1: what each Dask worker computes with);
- the chunks here, 1 thread: the tasks' own work (evaluate_chunk on each chunk that two workers
  get, one after the other, and the merge) in this process with one thread: what
  the workers compute, without Dask; the gap to "1 worker (warm)" is what Dask adds;
- 1 and 2 workers, warm: evaluate_on a LocalCluster started beforehand (the tasks, the shipping
  of samples and of the models, once per evaluation (DaskPool.keep), and the merge);
- 2 workers, cold: evaluate_distributed(workers=2), the cluster's start and stop included (what
  `qsim quantize --workers 2` adds to a run).
Every run's report must be the serial one, bit for bit (the run stops otherwise).
Writes reports/eval_scale.md and reports/eval_scale.json, with the CPU (lscpu) and load averages.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from qsim import zoo  # noqa: E402
from qsim.cluster.distributed import DaskPool  # noqa: E402
from qsim.cluster.local_cluster import local_cluster  # noqa: E402
from qsim.quant.calibration.data import Samples  # noqa: E402
from qsim.quant.evaluation import distributed  # noqa: E402
from qsim.quant.evaluation.distributed import evaluate_distributed, evaluate_on  # noqa: E402
from qsim.quant.evaluation.evaluate import accuracy_report, evaluate  # noqa: E402
from qsim.quant.evaluation.scoring import choose_outputs  # noqa: E402
from qsim.quant.options import QuantizeOptions  # noqa: E402
from qsim.quant.pipeline import load_float_model, make_target, quantize_graph  # noqa: E402
from qsim.quant.target import TargetKind  # noqa: E402
from qsim.threads import THREADS_ENV, apply_blas_threads, set_threads, thread_count  # noqa: E402


def cpu_name() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return f"{fields.get('Model name', '?').strip()}, {fields.get('CPU(s)', '?').strip()} CPUs"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def evaluation_job(count: int):
    """The quantized embedded model and the arguments the pipeline evaluates it with."""
    path = zoo.default_model().path
    full = zoo.full_test_set()
    images, labels = full if full is not None else zoo.test_subset()
    seen = {}

    def capture(graph, model, feeds, **kwargs):
        seen.update(graph=graph, model=model, samples=list(feeds), kwargs=dict(kwargs, show_progress=False))
        return evaluate(graph, model, seen["samples"], **seen["kwargs"])

    quantize_graph(load_float_model(path), Samples(zoo.calibration_images()),
                   Samples(images[:count], labels[:count]), QuantizeOptions(show_progress=False),
                   make_target(TargetKind.TOSA), "fashion_cnn",
                   load_batch=lambda n: load_float_model(path, batch=n), evaluator=capture)
    return seen, ("Debian dataset-fashion-mnist" if full is not None else "embedded subset")


def bits(report) -> str:
    return json.dumps(dataclasses.asdict(report), default=repr, sort_keys=True)


def one_thread(fn):
    """fn() with QSIM_THREADS=1 (kernels and BLAS), the setting restored after."""
    saved = os.environ.get(THREADS_ENV)
    set_threads(1)
    try:
        return fn()
    finally:
        if saved is None:
            os.environ.pop(THREADS_ENV, None)
        else:
            os.environ[THREADS_ENV] = saved
        apply_blas_threads()


def chunks_here(g, m, s, kw):
    """The distributed run's tasks and merge, in this process (the caller sets the threads)."""
    batched, outputs = kw.get("batched"), kw.get("outputs") or choose_outputs(g)
    size = distributed.chunk_size(batched, len(s), 2)       # the chunks 2 workers get
    parts = [distributed.evaluate_chunk(g, m, batched, outputs, kw.get("backend", "kernels"), start, chunk)
             for start, chunk in distributed._chunks(s, size)]
    stats, scored, n = distributed.merge(parts, m, outputs)
    return accuracy_report(g, outputs, stats, scored, n, kw.get("name", "model"), kw.get("settings"),
                           kw.get("notes", ()))


def timed(fn):
    t0 = time.perf_counter()
    report = fn()
    return time.perf_counter() - t0, report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10000)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "reports"))
    args = parser.parse_args()
    seen, source = evaluation_job(args.samples)
    g, m, s, kw = seen["graph"], seen["model"], seen["samples"], seen["kwargs"]
    reference = bits(evaluate(g, m, s, **kw))
    times: dict[str, list[float]] = {"serial": [], "serial, 1 thread": [], "the chunks here, 1 thread": [],
                                     "1 worker (warm)": [], "2 workers (warm)": [],
                                     "2 workers (cold: cluster start included)": []}
    loads = [load_average()]
    with local_cluster(1) as one, local_cluster(2) as two:
        pools = {"1 worker (warm)": DaskPool(one, "LocalCluster of 1", True),
                 "2 workers (warm)": DaskPool(two, "LocalCluster of 2", True)}
        for key, pool in pools.items():      # the workers' first task imports and unpickles
            evaluate_on(pool, g, m, s[:200], **dict(kw, total=200))
        for _ in range(args.repeat):
            runs = {"serial": lambda: evaluate(g, m, s, **kw),
                    "serial, 1 thread": lambda: one_thread(lambda: evaluate(g, m, s, **kw)),
                    "the chunks here, 1 thread": lambda: one_thread(lambda: chunks_here(g, m, s, kw)),
                    **{k: (lambda p=p: evaluate_on(p, g, m, s, **kw)) for k, p in pools.items()},
                    "2 workers (cold: cluster start included)":
                        lambda: evaluate_distributed(g, m, s, workers=2, scheduler=None, **kw)}
            for key, fn in runs.items():
                seconds, report = timed(fn)
                if bits(report) != reference:
                    raise SystemExit(f"{key}: the report differs from the serial run's")
                times[key].append(seconds)
            loads.append(load_average())
    medians = {k: statistics.median(v) for k, v in times.items()}
    result = dict(cpu=cpu_name(), threads=thread_count(), samples=len(s), source=source, batch=kw["batched"].size if kw["batched"] else 1,
                  repeat=args.repeat, seconds=times, medians=medians, load_averages=loads,
                  identical_reports=True)
    out = Path(args.out)
    (out / "eval_scale.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "eval_scale.md").write_text(markdown(result))
    print(markdown(result))
    return 0


def markdown(r: dict) -> str:
    serial = r["medians"]["serial"]
    rows = "\n".join(f"| {k} | {v:.2f} | {serial / v:.2f}x | {' '.join(f'{x:.2f}' for x in r['seconds'][k])} |"
                     for k, v in r["medians"].items())
    return f"""# Distributed evaluation: 1 vs 2 Dask workers (benchmarks/eval_scale.py)

`qsim quantize --eval`'s evaluation of the embedded Fashion-MNIST CNN (float and integer graphs,
every tensor's statistics) on {r['samples']} test images ({r['source']}), evaluation batch
{r['batch']}; medians of {r['repeat']} rounds, the settings alternated in each round. Every run's
report was the serial run's, bit for bit.

CPU: {r['cpu']} (lscpu). Load averages 1/5/15 min, before and after each round:
{'; '.join(r['load_averages'])} (a 1-minute figure near or above the core count means other jobs
shared the cores: the figures are then this day's, not the machine's best; the ratios are what the
alternation protects).

A Dask worker computes on one thread (qsim.cluster.distributed), the serial run on every core
({r['threads']} here): "vs serial" compares with the serial run on all of them.

| evaluation on | median s | vs serial | each round (s) |
|---|---|---|---|
{rows}

Rerun: `nice python benchmarks/eval_scale.py --repeat {r['repeat']} --samples {r['samples']}`.
"""


if __name__ == "__main__":
    sys.exit(main())
