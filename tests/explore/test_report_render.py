"""The explore report's readability rules: units that keep numbers short, the front of one
plot's two objectives, short point names, and the HTML's tables (on hand-made points)."""
from __future__ import annotations

from qsim.report.explore import latency_text, render, varied_keys
from qsim.report.explore_plots import energy_unit, pair_front, short_name


def test_energy_unit_keeps_the_largest_value_under_a_thousand():
    assert energy_unit([5e5, 9.9e5]) == ("nJ", 1e3)          # 990 nJ
    assert energy_unit([8.98e9]) == ("mJ", 1e9)               # a ResNet: 8.98 mJ, not 8,983,753 nJ
    assert energy_unit([2.0e10]) == ("mJ", 1e9)
    assert energy_unit([1.0e7, 5e8]) == ("µJ", 1e6)


def test_latency_in_microseconds_below_a_millisecond():
    assert latency_text(0.0137) == "13.7 µs" and latency_text(4.4184) == "4.418 ms"


def test_pair_front_keeps_what_no_other_point_beats_in_both():
    xy = [(1.0, 5.0), (2.0, 3.0), (3.0, 4.0), (4.0, 1.0), (2.0, 6.0)]
    assert pair_front(xy, maximize=False) == [(1.0, 5.0), (2.0, 3.0), (4.0, 1.0)]
    assert pair_front(xy, maximize=True) == [(1.0, 5.0), (2.0, 6.0)]


def test_short_names():
    assert short_name("int8/32x32-ws-dram_bytes_per_cycle32-clock_mhz1000") == "int8/32x32-ws-dramB32-MHz1000"
    assert short_name("16x8/8x8-os-dramddr4-3200") == "16x8/8x8-os-dramddr4-3200"


def _point(name, rows, dataflow, dram, accuracy, cycles, energy_pj, pareto):
    return {"name": name, "precision": name.split("/")[0], "accuracy": accuracy, "total_cycles": cycles,
            "latency_ms": cycles / 1e6, "inferences_per_s": 1e6 / cycles, "energy_per_inference_pj": energy_pj,
            "area_mm2": rows * 0.1, "pareto": pareto, "all_verified": True, "host_arithmetic": None,
            "rtl": {"engine": "verilator", "agree": True, "total_cycles": cycles} if pareto else None,
            "config": {"name": name.split("/")[1], "rows": rows, "cols": rows, "dataflow": dataflow,
                       "dram_bytes_per_cycle": dram, "clock_mhz": 1000.0, "dram": "ideal"}}


def test_html_and_plots_of_a_small_space():
    points = [_point("int8/8x8-ws-dram_bytes_per_cycle8", 8, "ws", 8, 0.98, 4_418_375, 8.98e9, True),
              _point("int8/16x16-os-dram_bytes_per_cycle32", 16, "os", 32, 0.98, 9_000_000, 9.5e9, False),
              _point("16x8/8x8-ws-dram_bytes_per_cycle8", 8, "ws", 8, 1.0, 44_000_000, 2.0e10, True)]
    assert varied_keys(points) == [("dram_bytes_per_cycle", "DRAM B/cycle")]     # the clock is the same
    points[1]["config"]["clock_mhz"] = 500.0
    doc = {"model": "resnet18", "engine": "model", "verify_engine": "verilator", "accuracy_kind": "agreement",
           "objectives": [["accuracy", "max"], ["latency_ms", "min"], ["energy_per_inference_pj", "min"],
                          ["area_mm2", "min"]], "notes": [], "pool": "LocalCluster of 2 worker processes",
           "wall_s": 212.4, "precisions": {"int8": {"accuracy": 0.98, "output_sqnr_db": {"logits": 30.5},
                                                    "eval_samples": 16}}, "points": points}
    files = render(doc)
    html = files["report.html"].decode()
    assert "4,418,375" in html and "energy mJ" in html and "8.98" in html and "8983" not in html
    assert "accuracy ↑, latency ↓, energy ↓, area ↓" in html and "212 s wall" in html
    assert "<td>1,000</td>" in html and "<td>500</td>" in html and "e+03" not in html
    assert "logits 30.5 dB" in html and "int8/8x8-ws-dramB8 ★" in html and "DRAM B/cycle" in html
    for name in ("accuracy_vs_latency.png", "energy_vs_latency.png", "area_vs_latency.png"):
        assert files[name][:4] == b"\x89PNG"
