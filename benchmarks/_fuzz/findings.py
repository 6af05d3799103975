"""SUMMARY.md of a campaign's distinct failure sites, grouped by the area of qsim that owns them.

The area comes from the innermost qsim frame (the file the fix most likely goes in); a failure
without a qsim frame (a hang, a crash, data loss) is placed by its target and command.
"""
from __future__ import annotations

import os
from collections import defaultdict

from .minimize import subject_of
from .report import Site, Tally, describe

AREAS = (  # (path prefix of the innermost frame, area), first match wins
    ("qsim/skriptnd/parser", "skriptnd parser"), ("qsim/skriptnd/modules", "skriptnd parser"),
    ("qsim/commands/run", "cli/data reading"), ("qsim/runtime/float_ops", "float executor"),
    ("qsim/runtime/runners", "float executor"), ("qsim/skriptnd/lower", "float executor"), ("qsim/skriptnd/", "skriptnd composer"),
    ("qsim/nnef1/quantfile", "graph.quant"), ("qsim/nnef1/loader", "containers/loader"),
    ("qsim/nnef1/", "nnef1"), ("qsim/tensorfile", "tensorfile/.dat"), ("qsim/loader", "containers/loader"),
    ("qsim/npu/config", "npu config"), ("qsim/quant/data", "cli/data reading"),
    ("qsim/npu/golden_vectors", "cli/data reading"), ("qsim/atomic", "cli/data reading"), ("qsim/cli", "cli/data reading"),
    ("qsim/commands", "cli/data reading"),
    ("qsim/kernels", "kernels"), ("qsim/tosa", "kernels"), ("qsim/cvm", "kernels"), ("qsim/runtime", "kernels"),
    ("qsim/quant/", "quantize pipeline"), ("qsim/npu/", "npu"), ("qsim/report", "reports"),
)
BY_TARGET = {"sknd": "skriptnd parser", "nnef1": "nnef1", "dat": "tensorfile/.dat", "quant": "graph.quant",
             "container": "containers/loader", "cli": "cli/data reading", "npu-config": "npu config"}


def area_of(site: Site) -> str:
    frame = site.site or ""
    for prefix, area in AREAS:
        if frame.startswith(prefix):
            return area
    return BY_TARGET.get(site.first.case.target, "other") if site.first else "other"


def _tail(text: str, lines: int = 4) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def write_summary(tally: Tally, meta: dict, path: str) -> None:
    groups: dict[str, list[Site]] = defaultdict(list)
    for site in tally.sites.values():
        groups[area_of(site)].append(site)
    out = ["# qsim fuzz findings", "",
           f"Campaign: commit `{meta['commit']}`, seed {meta['seed']}, {tally.total} inputs, "
           f"{meta['finished']}. Each site is one (class, exception, innermost qsim frame); its folder has "
           "`case/` (the input files), `repro.sh` (run it from the repository root) and `case.json` "
           "(argv, traceback); `min/` holds the minimized input where the harness could shrink it.", ""]
    for area in sorted(groups):
        out += [f"## {area}", ""]
        for site in sorted(groups[area], key=lambda s: -s.count):
            res = site.first
            out.append(f"### {site.key}  ({site.count}x)")
            out.append("")
            out.append(f"- targets: {', '.join(f'{k} {v}' for k, v in site.targets.most_common())}; "
                       f"generator: `{res.case.kind}`")
            out.append(f"- reproducer: `{site.reproducer}`")
            out.append(f"- command (in `case/`): `{describe(site.minimized or res.case)}`")
            case = site.minimized or res.case
            rel = subject_of(case)
            if rel is not None:
                blob = case.files[rel]
                if len(blob) <= 1200:
                    out += [f"- `{rel}`{' (minimized)' if site.minimized else ''}:", "", "```",
                            blob.decode("utf-8", "backslashreplace").rstrip(), "```"]
                else:
                    out.append(f"- `{rel}`: {len(blob)} bytes (see the reproducer)")
            detail = _tail(res.detail) if res.detail else _tail(res.stderr)
            if detail:
                out += ["", "```", detail, "```"]
            out.append("")
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", errors="backslashreplace") as f:
        f.write("\n".join(out) + "\n")
