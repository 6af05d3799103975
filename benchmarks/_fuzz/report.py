"""Campaign tallies, the reproducer folders, and reports/fuzz.md / fuzz.json."""
from __future__ import annotations

import json
import os
import re
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from .runner import GOOD, OUTCOMES, Case, Result, materialize


@dataclass
class Site:
    key: str
    outcome: str
    exc_type: str | None
    site: str | None
    count: int = 0
    targets: Counter = field(default_factory=Counter)
    first: Result | None = None
    reproducer: str | None = None
    minimized: Case | None = None             # a smaller input failing the same way, if found


class Tally:
    def __init__(self):
        self.per_target: dict[str, Counter] = defaultdict(Counter)
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu_s: dict[str, float] = defaultdict(float)
        self.kinds: dict[str, Counter] = defaultdict(Counter)
        self.sites: dict[str, Site] = {}
        self.max_rss_kb: dict[str, int] = defaultdict(int)

    def add(self, res: Result) -> Site | None:
        t = res.case.target
        self.per_target[t][res.outcome] += 1
        self.per_target[t]["inputs"] += 1
        self.seconds[t] += res.seconds
        self.cpu_s[t] += res.cpu_s
        self.kinds[t][res.case.kind.split(":")[0]] += 1
        self.max_rss_kb[t] = max(self.max_rss_kb[t], res.max_rss_kb)
        if res.outcome == GOOD:
            return None
        key = res.failure_key
        site = self.sites.get(key)
        new = site is None
        if new:
            site = self.sites[key] = Site(key, res.outcome, res.exc_type, res.site, first=res)
        site.count += 1
        site.targets[t] += 1
        return site if new else None

    @property
    def total(self) -> int:
        return sum(c["inputs"] for c in self.per_target.values())


def describe(case: Case) -> str:
    if case.argv is not None:
        return "python -m qsim " + " ".join(shlex.quote(a) for a in case.argv)
    from .calls import SNIPPETS
    code = SNIPPETS.get(case.call, f"<synthetic call {case.call}>({{arg!r}})").format(arg=case.call_arg)
    return "python -c " + shlex.quote(code)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80].strip("_")


def _write_case(case: Case, path: str) -> None:
    materialize(case, os.path.join(path, "case"))
    with open(os.path.join(path, "repro.sh"), "w", errors="surrogateescape") as f:
        f.write("#!/bin/sh\n# run from the repository root; the case's files are in ./case\n"
                f"cd \"$(dirname \"$0\")/case\" && PYTHONPATH=\"$OLDPWD\" QSIM_MAX_TENSOR_BYTES=256M QSIM_MAX_MEMORY=1G "
                f"{describe(case)}\n")
    os.chmod(os.path.join(path, "repro.sh"), 0o755)


def save_minimized(site: Site) -> None:
    """Adds `min/` (case and repro.sh) to the site's reproducer folder."""
    if site.minimized is not None and site.reproducer and not os.path.exists(os.path.join(site.reproducer, "min")):
        _write_case(site.minimized, os.path.join(site.reproducer, "min"))


def save_reproducer(site: Site, folder: str, number: int) -> str:
    """Writes the first case of `site` under `folder`; returns the reproducer's folder."""
    res = site.first
    name = f"{number:03d}-{_slug(site.outcome)}-{_slug(site.exc_type or '')}-{_slug((site.site or 'no-qsim-frame').split(':')[0])}"
    path = os.path.join(folder, name)
    if os.path.exists(path):
        return path
    _write_case(res.case, path)
    info = {"key": site.key, "target": res.case.target, "kind": res.case.kind, "argv": res.case.argv,
            "call": res.case.call, "call_arg": res.case.call_arg, "outcome": res.outcome,
            "exc_type": res.exc_type, "site": res.site, "rc": res.rc, "seconds": round(res.seconds, 3),
            "detail": res.detail[-6000:], "stderr": res.stderr[-3000:]}
    with open(os.path.join(path, "case.json"), "w") as f:
        json.dump(info, f, indent=1)
    return path


def _previous_section(previous: dict) -> list[str]:
    """Markdown for an earlier campaign (its fuzz.json), reported apart: it ran other code."""
    meta, totals = previous["meta"], previous["totals"]
    lines = ["", f"## Earlier campaign (commit `{meta['commit']}`, {meta['finished']})", "",
             f"{totals['inputs']} inputs in {meta['wall_s']:.0f} s ({meta['inputs_per_s']} inputs/s, "
             f"{meta['jobs']} job(s), seed {meta['seed']}): " + ", ".join(
                 f"{o} {totals[o]}" for o in OUTCOMES) + ".", "",
             "| class | exception | innermost qsim frame | count |", "| --- | --- | --- | ---: |"]
    for s in previous["distinct_failure_sites"]:
        lines.append(f"| {s['outcome']} | {s['exception'] or ''} | `{s['innermost_qsim_frame'] or '-'}` | {s['count']} |")
    return lines


def write_reports(tally: Tally, meta: dict, out_dir: str, previous: dict | None = None) -> None:
    os.makedirs(out_dir, exist_ok=True)
    targets = sorted(tally.per_target)
    failures = sorted(tally.sites.values(), key=lambda s: (-s.count, s.key))
    data = {
        "meta": meta,
        "totals": {o: sum(tally.per_target[t][o] for t in targets) for o in ("inputs",) + OUTCOMES},
        "targets": {t: {**{o: tally.per_target[t][o] for o in ("inputs",) + OUTCOMES},
                        "mean_ms": round(1000 * tally.seconds[t] / max(1, tally.per_target[t]["inputs"]), 2),
                        "cpu_ms": round(1000 * tally.cpu_s[t] / max(1, tally.per_target[t]["inputs"]), 2),
                        "max_rss_mib": round(tally.max_rss_kb[t] / 1024, 1),
                        "kinds": dict(tally.kinds[t])} for t in targets},
        "distinct_failure_sites": [
            {"key": s.key, "outcome": s.outcome, "exception": s.exc_type, "innermost_qsim_frame": s.site,
             "count": s.count, "targets": dict(s.targets), "reproducer": s.reproducer,
             "first_command": describe(s.first.case) if s.first else None} for s in failures],
    }
    if previous is not None:
        data["previous_campaign"] = {k: previous[k] for k in ("meta", "totals", "distinct_failure_sites")}
    with open(os.path.join(out_dir, "fuzz.json"), "w") as f:
        json.dump(data, f, indent=1)
    lines = [
        "# Fuzzing qsim (benchmarks/fuzz.py)", "",
        f"Run {meta['finished']}, commit `{meta['commit']}`, seed {meta['seed']}, {meta['jobs']} job(s), "
        f"per-input timeout {meta['timeout_s']} s (slow commands up to 120 s), address-space cap "
        f"{meta['address_space_gib']} GiB, QSIM_MAX_TENSOR_BYTES={meta['max_tensor_bytes']}, "
        f"QSIM_MAX_MEMORY={meta.get('max_memory', 'unset')}.", "",
        f"**{tally.total} inputs in {meta['wall_s']:.0f} s: {meta['inputs_per_s']:.1f} inputs/s** "
        f"({meta['cpu']}; fork server: the parent imports qsim and numpy once and forks per input). "
        f"CPU time: {meta['child_cpu_s']:.0f} s in the children and {meta['parent_cpu_s']:.0f} s in the "
        f"parent (generating, laying out and checking inputs), {meta['cpu_ms_per_input']:.1f} ms per input: "
        f"{meta['inputs_per_cpu_s']:.1f} inputs per CPU-second, the rate one idle core would give "
        f"(the machine was shared: load average {meta['load_average']} at the end).", "",
        "| target | inputs | good | traceback | hang | memory | data loss | crash | bad exit | wall ms | CPU ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in targets + ["all"]:
        row = data["totals"] if t == "all" else data["targets"][t]
        mean = " | " if t == "all" else f"{row['mean_ms']:.0f} | {row['cpu_ms']:.0f}"
        lines.append(f"| {t} | {row['inputs']} | {row[GOOD]} | " + " | ".join(
            str(row[o]) for o in OUTCOMES[1:]) + f" | {mean} |")
    lines += ["", "Classes: *good* = exit 0, or exit 2 with a `qsim: ... error:` message and no traceback; "
              "*traceback* = any other exception; *hang* = no exit before the timeout; *memory* = "
              "MemoryError or killed by SIGKILL (cap/OOM); *data loss* = an input file changed or "
              "vanished; *crash* = killed by another signal; *bad exit* = non-zero exit without a clean "
              "qsim error (e.g. a verification mismatch).", "",
              f"## Distinct failure sites ({len(failures)})", "",
              "Keyed by class, exception type and innermost qsim frame (`path:function:line`). "
              "Reproducers (the case's files, `repro.sh`, `case.json`) are under the `--save-failures` folder.", "",
              "| # | class | exception | innermost qsim frame | count | targets | first command |",
              "| ---: | --- | --- | --- | ---: | --- | --- |"]
    for i, s in enumerate(failures, 1):
        cmd = describe(s.first.case).replace("|", "\\|") if s.first else ""
        if len(cmd) > 120:
            cmd = cmd[:117] + "..."
        targets_text = ", ".join(f"{k} {v}" for k, v in s.targets.most_common())
        lines.append(f"| {i} | {s.outcome} | {s.exc_type or ''} | `{s.site or '-'}` | {s.count} | "
                     f"{targets_text} | `{cmd}` |")
    lines += ["", "## Inputs by generator", ""]
    for t in targets:
        kinds = ", ".join(f"{k} {v}" for k, v in tally.kinds[t].most_common())
        lines.append(f"- **{t}**: {kinds}")
    if previous is not None:
        lines += _previous_section(previous)
    lines.append("")
    with open(os.path.join(out_dir, "fuzz.md"), "w", errors="backslashreplace") as f:
        f.write("\n".join(lines))
