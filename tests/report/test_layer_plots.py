"""The per-layer plots of a throughput report stay bounded and readable for deep networks
(qsim.report.layer_plots): at most MAX_BARS bars, the costliest layers kept in network order,
the rest summed in one bar on its own axis, and every cycle and picojoule still in the plot."""
import struct

import pytest

from qsim.report import layer_plots
from qsim.report.layer_plots import MAX_BARS, cycles_figure, energy_figure, layer_bars, utilization_figure
from qsim.report.throughput import LayerThroughput, ThroughputReport, render_part

pytest.importorskip("matplotlib")


def _report(count: int) -> ThroughputReport:
    """`count` layers alternating array / vector; the cycles of layer i are 1000 + (37 * i) % count
    (all different, not in order), its energy the reverse ranking."""
    layers = []
    for i in range(count):
        rank = (37 * i) % count
        array = i % 2 == 0
        layers.append(LayerThroughput(
            name=f"layer{i}", op="CONV2D" if array else "ADD", unit="array" if array else "vector",
            macs=16 * (1000 + rank) if array else 0, compute_cycles=1000 + rank, fill_drain_cycles=i % 7,
            stall_cycles=i % 5, mapping_efficiency=0.5, dram_input_bytes=100, dram_weight_bytes=50,
            dram_output_bytes=100, verified=True,
            energy_by_component_pj={"mac": 1000.0 * (count - rank), "dram": 10.0 * i}))
    return ThroughputReport(model="deep", engine="model",
                            config={"name": "16x16", "rows": 16, "cols": 16, "dataflow": "ws",
                                    "clock_mhz": 500.0, "dram_bytes_per_cycle": 16},
                            layers=tuple(layers), tech={"name": "45nm"})


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("count", [500, 2000])
def test_plots_of_a_deep_network_are_bounded_in_size(count):
    report = _report(count)
    for part in layer_plots.FIGURES:
        width, height = _png_size(render_part(report, part)[part])
        assert width <= 2000 and height <= 600, (part, width, height)


def _heights(ax) -> list[float]:
    """The heights of the bars drawn on `ax` (layer_plots.draw_bars: one collection of boxes
    per series)."""
    heights = []
    for collection in ax.collections:
        for path in collection.get_paths():
            ys = [y for _, y in path.vertices]
            heights.append(max(ys) - min(ys))
    return heights


def _labels(ax) -> list[str]:
    return [text.get_text() for text in ax.texts]


def test_the_cycles_plot_keeps_the_costliest_layers_in_order_and_sums_the_rest():
    report = _report(500)
    fig = cycles_figure(report)
    layers_ax, other_ax = fig.axes
    by_cycles = sorted(report.layers, key=lambda layer: -layer.cycles)[:MAX_BARS - 1]
    kept = [layer.name for layer in report.layers if layer in by_cycles]
    assert _labels(layers_ax) == kept
    assert _labels(other_ax) == ["other 461 layers"]
    drawn = sum(_heights(layers_ax)) + sum(_heights(other_ax))
    assert drawn == pytest.approx(report.total_cycles, rel=1e-12)      # every cycle is in the plot
    rest = sum(layer.cycles for layer in report.layers if layer not in by_cycles)
    assert sum(_heights(other_ax)) == pytest.approx(rest, rel=1e-12)
    assert "(39 of 500 layers, the largest by cycles; the rest summed)" in layers_ax.get_title()


def test_the_energy_plot_holds_the_whole_energy_twice():
    report = _report(500)
    fig = energy_figure(report)
    layers_ax, other_ax, total_ax = fig.axes
    assert sum(_heights(layers_ax)) + sum(_heights(other_ax)) == pytest.approx(report.total_energy_pj / 1e3)
    assert sum(_heights(total_ax)) == pytest.approx(report.total_energy_pj / 1e3)


def test_the_utilization_plot_takes_the_rest_together():
    report = _report(500)
    fig = utilization_figure(report)
    (ax,) = fig.axes
    heights = _heights(ax)
    assert len(heights) == MAX_BARS
    array = [layer for layer in report.layers if layer.unit == "array"]
    kept = sorted(array, key=lambda layer: -layer.cycles)[:MAX_BARS - 1]
    rest = [layer for layer in array if layer not in kept]
    macs = sum(layer.macs for layer in rest)
    slots = 256 * sum(layer.cycles for layer in rest)
    assert heights[-1] == pytest.approx(100 * macs / slots)


def test_a_small_network_gets_one_bar_per_layer_and_no_other_axis():
    report = _report(12)
    fig = cycles_figure(report)
    (ax,) = fig.axes
    assert _labels(ax) == [layer.name for layer in report.layers]
    assert "of 12 layers" not in ax.get_title()
    assert sum(_heights(ax)) == pytest.approx(report.total_cycles, rel=1e-12)


def test_layer_bars_breaks_ties_by_network_order():
    report = _report(50)
    same = [l for l in report.layers]
    bars = layer_bars(same, lambda layer: 1.0, limit=5)
    assert [b.label for b in bars] == ["layer0", "layer1", "layer2", "layer3", "other 46 layers"]
    assert sum(len(b.layers) for b in bars) == 50
