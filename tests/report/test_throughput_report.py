import csv
import json

import pytest

from qsim.report.throughput import LayerThroughput, ThroughputReport
from qsim.report.throughput import SCALESIM_COMPUTE_COLUMNS, write_throughput_report


def _report():
    conv = LayerThroughput("conv1", "CONV2D", "array", macs=16 * 16 * 100, compute_cycles=100,
                           fill_drain_cycles=30, stall_cycles=70, mapping_efficiency=1.0,
                           dram_input_bytes=1000, dram_weight_bytes=500, dram_output_bytes=250,
                           verified=True, rtl=True,
                           energy_by_component_pj={"mac": 100.0, "dram": 400.0, "vector": 0.0})
    pool = LayerThroughput("pool", "AVG_POOL2D", "vector", macs=0, compute_cycles=50,
                           fill_drain_cycles=0, stall_cycles=0, mapping_efficiency=0.0,
                           dram_input_bytes=0, dram_weight_bytes=0, dram_output_bytes=0,
                           energy_by_component_pj={"mac": 0.0, "dram": 60.0, "vector": 40.0})
    cfg = {"rows": 16, "cols": 16, "dataflow": "ws", "clock_mhz": 500, "dram_bytes_per_cycle": 16}
    return ThroughputReport("demo", "model", cfg, (conv, pool), tech={"name": "45nm", "description": "d"})


def test_totals_follow_from_layers():
    r = _report()
    assert r.total_cycles == 250
    assert r.utilization(r.layers[0]) == pytest.approx(25600 / (256 * 200))
    assert r.compute_utilization(r.layers[0]) == pytest.approx(25600 / (256 * 130))
    assert r.latency_s == pytest.approx(250 / 500e6)
    assert r.gops == pytest.approx(2 * 25600 / (250 / 500e6) / 1e9)


def test_json_and_scalesim_csv(tmp_path):
    paths = write_throughput_report(_report(), tmp_path)
    data = json.loads(paths["report.json"].read_text())
    assert data["total_cycles"] == 250 and data["engine"] == "model"
    assert {"name", "op", "macs", "cycles", "utilization", "dram_bytes", "verified"} <= set(data["layers"][0])
    assert data["layers"][0]["dram_bytes"] == 1750
    rows = list(csv.reader(paths["compute_report.csv"].open()))
    assert tuple(rows[0]) == SCALESIM_COMPUTE_COLUMNS
    assert rows[1][:3] == ["0", "200", "70"] and float(rows[1][3]) == pytest.approx(50.0)


def test_plots_and_html(tmp_path):
    paths = write_throughput_report(_report(), tmp_path)
    for key in ("cycles.png", "utilization.png", "roofline.png"):
        assert paths[key].read_bytes()[:4] == b"\x89PNG"
    html = paths["report.html"].read_text()
    assert "roofline.png" in html and "conv1" in html and "16 x 16 (ws)" in html


def test_energy_totals_and_plot(tmp_path):
    r = _report()
    assert r.layers[0].energy_pj == 500.0 and r.layers[1].energy_pj == 100.0
    assert r.total_energy_pj == 600.0
    assert r.energy_by_component_pj == {"mac": 100.0, "dram": 460.0, "vector": 40.0}
    paths = write_throughput_report(r, tmp_path)
    data = json.loads(paths["report.json"].read_text())
    assert data["total_energy_pj"] == data["energy_per_inference_pj"] == 600.0
    assert [l["energy_pj"] for l in data["layers"]] == [500.0, 100.0]
    assert data["layers"][0]["rtl"] is True and data["layers"][1]["rtl"] is False
    assert paths["energy.png"].read_bytes()[:4] == b"\x89PNG"
    html = paths["report.html"].read_text()
    assert "energy.png" in html and "Energy by component" in html and "0.6 nJ" in html


def test_parts_render_exactly_the_written_files(tmp_path):
    """A sweep renders the report part by part on workers: the parts together are the files
    write_throughput_report writes, byte for byte, and no part repeats a file."""
    from qsim.report.throughput import PARTS, render_part
    report = _report()
    written = write_throughput_report(report, tmp_path)
    rendered = {}
    for part in PARTS:
        files = render_part(report, part)
        assert not set(files) & set(rendered)
        rendered.update(files)
    assert set(rendered) == set(written) == {"report.json", "compute_report.csv", "report.html",
                                             "cycles.png", "utilization.png", "roofline.png", "energy.png"}
    for name, data in rendered.items():
        assert written[name].read_bytes() == data, name
