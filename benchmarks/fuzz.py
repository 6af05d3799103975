"""Fuzzes qsim's inputs: model texts, tensor files, graph.quant, containers, CLI argv, npu.toml.

    python benchmarks/fuzz.py [--count 100000] [--seed 0] [--jobs N] [--targets sknd nnef1 ...]
                              [--time-budget SECONDS] [--timeout 15] [--save-failures DIR]
                              [--out reports]

Targets (benchmarks/_fuzz/targets.py): sknd, nnef1, dat, quant, container, cli, npu-config, onnx,
qdq, scheduler; (benchmarks/_fuzz/gen_robust.py) sknd-dynamic, dat-extents, onnx-attrs, images;
(benchmarks/_fuzz/gen_area.py) area-table, the area estimate's technology tables. Each
input is a case folder (files) plus a qsim command line or a library call, generated from repo
seeds (stdlib, tests/fixtures, the embedded model), grammar-aware generators, and mutators
(byte flips, token edits, deep nesting, long chains, numeric extremes, non-UTF-8 bytes).

Every input runs in a forked child of this process (which imported qsim once), with an
address-space cap (--mem-gib, default 3), QSIM_MAX_TENSOR_BYTES=256M and QSIM_MAX_MEMORY=1G (so
qsim's own limits refuse big tensors, and many of them, long before the cap: a memory failure is
a real one), and a timeout. The
outcome is one of: good (exit 0, or exit 2 with a clean `qsim: ... error:` message), traceback,
hang, memory, data loss (an input file changed or vanished), crash (a signal), bad exit.
Distinct failure sites (class + exception type + innermost qsim frame) get a reproducer folder
under --save-failures. Writes <out>/fuzz.md and <out>/fuzz.json.

Peer: none; the measured figure is throughput (inputs per second) of the harness on qsim.
"""
from __future__ import annotations

import os
import sys

# One thread per child: forking a process with BLAS threads running is unsafe, and the machine
# is shared. Set before numpy is imported.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path[:0] = [REPO, HERE]

import argparse  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from _fuzz.calls import CALLS  # noqa: E402
from _fuzz.corpus import Corpus  # noqa: E402
from _fuzz.findings import write_summary  # noqa: E402
from _fuzz.minimize import minimize  # noqa: E402
from _fuzz.report import Tally, save_minimized, save_reproducer, write_reports  # noqa: E402
from _fuzz.runner import GOOD, Limits, run_cases  # noqa: E402
from _fuzz.registry import TARGETS, WEIGHTS  # noqa: E402

MAX_TENSOR_BYTES = "256M"
MAX_MEMORY = "1G"


def warm_up(corpus: Corpus, workdir: str) -> None:
    """Imports and first runs in the parent, so every child starts warm (stdlib parsed, ...)."""
    import qsim.cli
    for module in ("qsim.skriptnd.check", "qsim.nnef1", "qsim.onnx", "qsim.quant.pipeline", "qsim.npu.simulate",
                   "qsim.npu.golden_vectors", "qsim.npu.corner_cases", "qsim.npu.export", "qsim.npu.config",
                   "qsim.selftest.runner", "qsim.report.accuracy", "qsim.report.throughput",
                   "qsim.report.html", "matplotlib.pyplot"):
        try:
            __import__(module)
        except Exception as err:  # noqa: BLE001 - a missing optional part only costs speed
            print(f"warm-up: cannot import {module}: {err}", file=sys.stderr)
    folder = os.path.join(workdir, "warm")
    for name, files in (("tiny", corpus.tiny), ("tn", corpus.tiny_nnef1)):
        for rel, blob in files.items():
            os.makedirs(os.path.join(folder, name), exist_ok=True)
            with open(os.path.join(folder, name, rel), "wb") as f:
                f.write(blob)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for argv in (["check", os.path.join(folder, "tiny")], ["check", os.path.join(folder, "tn")]):
            qsim.cli.main(argv)
    shutil.rmtree(folder, ignore_errors=True)


GENERATOR_ERRORS: collections.Counter = collections.Counter()   # inputs a generator could not make
_STOP = []   # set by SIGTERM/SIGINT: start no new inputs, finish the running ones, write the reports


def _request_stop(signum, frame) -> None:
    _STOP.append(signum)


def case_stream(seed: int, count: int, targets: list[str], corpus: Corpus, deadline: float):
    """(index, Case) for index 0..count-1; each case is a function of (seed, index) alone."""
    weights = [WEIGHTS[t] for t in targets]
    for index in range(count):
        if time.monotonic() > deadline or _STOP:
            return
        rng = random.Random(f"{seed}/{index}")
        target = rng.choices(targets, weights)[0]
        try:
            case = TARGETS[target](rng, corpus)
        except Exception as err:  # noqa: BLE001 - a generator bug must not end a long campaign
            print(f"[{index}] generator {target} failed: {type(err).__name__}: {err}", file=sys.stderr)
            GENERATOR_ERRORS[target] += 1
            continue
        yield index, case


def _job_schedule(jobs: int, one_job_until: str | None):
    """--jobs, or a callable giving 1 before the UTC time HH:MM (today, or tomorrow if past) and --jobs after."""
    if not one_job_until:
        return jobs
    hours, minutes = (int(x) for x in one_job_until.split(":"))
    now = time.time()
    day = now - now % 86400
    switch = day + hours * 3600 + minutes * 60
    if switch < now - 12 * 3600:
        switch += 86400
    return lambda: jobs if time.time() >= switch else 1


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=100000, help="inputs to run (default 100000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="children at a time (default: cores)")
    ap.add_argument("--one-job-until", metavar="HH:MM",
                    help="run one input at a time until this UTC time, then --jobs (share the machine)")
    ap.add_argument("--targets", nargs="+", choices=sorted(TARGETS), default=sorted(TARGETS))
    ap.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                    help="stop starting new inputs after this long")
    ap.add_argument("--timeout", type=float, default=15.0, help="seconds per input (default 15)")
    ap.add_argument("--mem-gib", type=float, default=3.0, help="address-space cap per input (default 3)")
    ap.add_argument("--save-failures", metavar="DIR", help="write a reproducer per distinct failure site here")
    ap.add_argument("--minimize", action="store_true",
                    help="after the campaign, shrink each site's text input while it fails the same way")
    ap.add_argument("--minimize-seconds", type=float, default=20.0, help="time per site for --minimize (default 20)")
    ap.add_argument("--summary", metavar="FILE", help="write the failure sites grouped by qsim area here (markdown)")
    ap.add_argument("--previous", metavar="FUZZ.json",
                    help="an earlier campaign's fuzz.json, summarized in its own section of the report")
    ap.add_argument("--out", default=os.path.join(REPO, "reports"), help="folder for fuzz.md / fuzz.json")
    ap.add_argument("--workdir", help="scratch folder (default: a new one under /dev/shm or /tmp)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)

    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    workdir = args.workdir or tempfile.mkdtemp(prefix="qsim-fuzz-", dir=base)
    os.makedirs(workdir, exist_ok=True)
    os.environ["QSIM_MAX_TENSOR_BYTES"] = MAX_TENSOR_BYTES
    os.environ["QSIM_MAX_MEMORY"] = MAX_MEMORY
    os.environ["QSIM_CACHE_DIR"] = os.path.join(workdir, "cache")    # not the user's cache
    cases_dir = os.path.join(workdir, "cases")
    os.makedirs(cases_dir, exist_ok=True)
    started = time.monotonic()
    commit = _commit()      # the code under test is what was checked out when the campaign began
    try:
        corpus = Corpus(workdir)
        # build the expensive seeds now: built lazily, they would stall a running input's clock
        if {"cli", "npu-config"} & set(args.targets):
            corpus.quantized
        if "cli" in args.targets:
            corpus.cli_layout
        if "container" in args.targets:
            corpus.bomb_gz
        warm_up(corpus, workdir)
        gc.collect()
        gc.freeze()          # children then share the parent's objects without copy-on-write churn
        setup_s = time.monotonic() - started
        limits = Limits(timeout_s=args.timeout, address_space_bytes=int(args.mem_gib * (1 << 30)))
        deadline = time.monotonic() + (args.time_budget if args.time_budget else float("inf"))
        tally = Tally()
        setup_cpu = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()
        last = t0
        signal.signal(signal.SIGTERM, _request_stop)
        signal.signal(signal.SIGINT, _request_stop)
        stream = case_stream(args.seed, args.count, args.targets, corpus, deadline)
        jobs = _job_schedule(args.jobs, args.one_job_until)
        for res in run_cases(stream, cases_dir, jobs=jobs, limits=limits, calls=CALLS):
            site = tally.add(res)
            if site is not None and args.save_failures:
                site.reproducer = save_reproducer(site, args.save_failures, len(tally.sites))
            if site is not None and not args.quiet:
                print(f"[{res.index}] new {site.key}  ({res.case.target}/{res.case.kind})", flush=True)
            now = time.monotonic()
            if not args.quiet and now - last > 30:
                last = now
                bad = tally.total - sum(c[GOOD] for c in tally.per_target.values())
                print(f"{tally.total} inputs, {tally.total / (now - t0):.1f}/s, {bad} failures, "
                      f"{len(tally.sites)} sites", flush=True)
        wall = time.monotonic() - t0
        if args.minimize:
            def run_one(cases):
                return list(run_cases(cases, cases_dir, jobs=1, limits=limits, calls=CALLS))
            for site in tally.sites.values():
                smaller, runs = minimize(site.first.case, site.key, run_one, seconds=args.minimize_seconds)
                if runs and smaller.files != site.first.case.files:
                    site.minimized = smaller
                    save_minimized(site)
    finally:
        shutil.rmtree(workdir, ignore_errors=True) if not args.workdir else None
    child_cpu = sum(tally.cpu_s.values())
    own = resource.getrusage(resource.RUSAGE_SELF)
    parent_cpu = own.ru_utime + own.ru_stime - setup_cpu.ru_utime - setup_cpu.ru_stime
    meta = {"child_cpu_s": round(child_cpu, 1), "parent_cpu_s": round(parent_cpu, 1),
            "cpu_ms_per_input": round(1000 * (child_cpu + parent_cpu) / max(1, tally.total), 2),
            "inputs_per_cpu_s": round(tally.total / max(1e-9, child_cpu + parent_cpu), 2),
            "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "generator_errors": dict(GENERATOR_ERRORS), "seed": args.seed, "count": args.count, "jobs": args.jobs, "targets": args.targets,
            "timeout_s": args.timeout, "address_space_gib": args.mem_gib,
            "max_tensor_bytes": MAX_TENSOR_BYTES, "max_memory": MAX_MEMORY, "wall_s": round(wall, 1), "setup_s": round(setup_s, 1),
            "inputs_per_s": round(tally.total / wall, 2) if wall else 0.0, "commit": commit,
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": _cpu(),
            "python": platform.python_version()}
    previous = None
    if args.previous:
        with open(args.previous) as f:
            previous = json.load(f)
    write_reports(tally, meta, args.out, previous)
    if args.summary:
        write_summary(tally, meta, args.summary)
    if not args.quiet:
        print(f"{tally.total} inputs in {wall:.0f} s ({meta['inputs_per_s']}/s, setup {setup_s:.0f} s); "
              f"{len(tally.sites)} distinct failure sites; wrote {args.out}/fuzz.md, fuzz.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
