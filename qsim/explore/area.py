"""The area seam of `qsim explore`: a point's area in mm^2 from qsim.npu.area (Yosys synthesis
of the configuration's RTL times a per-cell and per-SRAM-bit table), imported only when asked
for, since a synthesis takes minutes per geometry. Where that module is not in this build the
area is None with a note, and the Pareto front is taken over the other objectives."""
from __future__ import annotations

from ..hw.params import Geometry

NOT_BUILT = "n/a: qsim.npu.area (Yosys synthesis) is not in this build"
NOT_ASKED = "n/a: pass --area to synthesize every geometry (minutes each)"


def area_available() -> bool:
    try:
        from ..npu import area  # noqa: F401 # deferred: the synthesis flow, absent in some builds
    except ImportError:
        return False
    return True


def area_mm2(geometry: Geometry, tech: str | None) -> tuple[float | None, str]:
    """(total mm^2 for the area table `tech` (default 45nm), note); a Dask task, one per geometry
    (the area depends on the hardware alone, not on the clock or the precision)."""
    try:
        from ..npu import area  # deferred: Yosys synthesis; the module may be absent
    except ImportError:
        return None, NOT_BUILT
    table = area.load_area_table(tech)
    report = area.area_report(area.synthesize(geometry), [table], "")
    return float(report["total_mm2"][table.name]), f"Yosys generic cells + SRAM bits ({table.name})"
