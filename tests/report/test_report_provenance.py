"""Every sentence of a throughput report that says how its figures were made agrees with the
layers' own records (qsim.report.provenance): for each engine, the sentences name exactly the
layers whose `unit` and `rtl` flags say so, and none claims a cost model the run did not use."""
import dataclasses

import numpy as np
import pytest

from qsim import ir
from qsim.npu.config import parse_config
from qsim.npu.program import run_graph_on_npu
from qsim.report.provenance import engine_sentences
from qsim.report.throughput import LayerThroughput, render_part, throughput_report
from tests.npu.test_simulate import _tiny_graph

TINY = parse_config("[npu]\nrows = 2\ncols = 2\ndataflow = 'ws'\ninput_buffer_bytes = 64\n"
                    "weight_buffer_bytes = 32\naccumulator_buffer_bytes = 128\ndram_bytes_per_cycle = 4\n")


def _three_unit_graph():
    """FULLY_CONNECTED+RESCALE (array) -> RESHAPE (host) -> CLAMP (vector unit)."""
    base = _tiny_graph(np.random.default_rng(3))
    reshape = ir.Op(ir.OpKind.get("tosa.RESHAPE"), ("y",), ("r",), {"new_shape": [4]}, name="flat")
    clamp = ir.Op(ir.OpKind.get("tosa.CLAMP"), ("r",), ("z",), {"min_val": -100, "max_val": 90}, name="clip")
    tensors = {**base.tensors, "r": ir.Tensor("r", ir.DType.I8, (4,)), "z": ir.Tensor("z", ir.DType.I8, (4,))}
    return dataclasses.replace(base, outputs=("z",), ops=(*base.ops, reshape, clamp), tensors=tensors).verify()


def _expected_sentences(layers, engine):
    """What the notes must say, counted here from the layer records."""
    want = []
    for unit, name in (("array", "systolic-array"), ("vector", "vector-unit")):
        rtl = [l for l in layers if l.unit == unit and l.rtl]
        model = [l for l in layers if l.unit == unit and not l.rtl]
        if rtl:
            want.append(f"{len(rtl)} {name} layer{'s' * (len(rtl) != 1)}: values and cycles from the RTL "
                        f"({engine} engine).")
        if model:
            want.append(f"{len(model)} {name} layer{'s' * (len(model) != 1)}: values and cycles from the "
                        "numpy cycle model")
    return want


@pytest.mark.parametrize("engine", ["model", "amaranth", "verilator"])
def test_the_notes_say_what_each_layer_ran_on(engine):
    graph = _three_unit_graph()
    feeds = {"x": np.arange(-3, 3, dtype=np.int8).reshape(1, 6)}
    run = run_graph_on_npu(graph, feeds, TINY, engine=engine)
    assert run.verified
    report = throughput_report("tiny", run)
    units = [layer.unit for layer in report.layers]
    assert sorted(units) == ["array", "host", "vector"]
    on_rtl = engine != "model"
    assert [layer.rtl for layer in report.layers] == [on_rtl and u != "host" for u in units]
    notes = list(report.notes)
    for sentence in _expected_sentences(report.layers, engine):
        assert any(note.startswith(sentence) for note in notes), (sentence, notes)
    how = [n for n in notes if "values and cycles from" in n]
    assert len(how) == 2                            # one per unit: nothing said twice or about others
    if on_rtl:
        assert not any("cycle model" in n for n in notes)
    assert not any("cost model" in n for n in notes)
    host = [n for n in notes if n.startswith("1 host stage: ")]
    assert len(host) == 1 and "1 reshape (no data changes" in host[0]
    html = render_part(report, "documents")["report.html"].decode()
    assert all(note.replace("'", "&#x27;") in html for note in notes)


def _layer(unit, rtl, op="ADD"):
    return LayerThroughput(name="l", op=op, unit=unit, macs=0, compute_cycles=1, fill_drain_cycles=0,
                           stall_cycles=0, mapping_efficiency=0.0, dram_input_bytes=0, dram_weight_bytes=0,
                           dram_output_bytes=0, rtl=rtl)


def test_mixed_records_give_one_sentence_per_source_and_name_host_fallbacks():
    layers = [_layer("array", True), _layer("array", True), _layer("array", False),
              _layer("vector", False), _layer("host", False, "RESHAPE"), _layer("host", False, "CONV2D")]
    assert engine_sentences(layers, "verilator") == [
        "2 systolic-array layers: values and cycles from the RTL (verilator engine).",
        "1 systolic-array layer: values and cycles from the numpy cycle model (model engine; the same "
        "values and cycles as the RTL, checked by the tests).",
        "1 vector-unit layer: values and cycles from the numpy cycle model (model engine; the same "
        "values and cycles as the RTL, checked by the tests).",
        "2 host stages: computed by the kernels on the host, no NPU cycles counted: 1 reshape (no data "
        "changes, so no work) and 1 operator neither NPU unit takes (each one's note says why).",
    ]
    assert engine_sentences([], "model") == []
