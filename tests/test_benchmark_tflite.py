"""benchmarks/tflite.py's pure parts on hand-made inputs: Vela's CSV readers, the matching of Vela
rows and qsim layers to TFLite operators, the per-operator sums and the parity counts. Needs
neither TensorFlow, LiteRT nor Vela."""
import importlib.util
import os
import sys

import numpy as np
import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
sys.path.insert(0, BENCHMARKS)

from _tflite_match import (Parity, TfliteOp, builtin_key, compare, largest_differences,  # noqa: E402
                           match_items, origins, parity_by_builtin, per_op_sums, renamed, vela_type_agrees)
from _vela import VelaFormatError, parse_per_layer, parse_summary  # noqa: E402
# benchmarks/tflite.py by path under another name: "tflite" is tests/tflite's package name here
_spec = importlib.util.spec_from_file_location("bench_tflite", os.path.join(BENCHMARKS, "tflite.py"))
bench_tflite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_tflite)
parity = bench_tflite.parity

HEADER = ("Original Operator,NNG Operator,Target,Staging Usage,Peak% (Staging),Op Cycles,Network% (cycles),"
          "NPU,SRAM AC,DRAM AC,OnFlash AC,OffFlash AC,MAC Count,Network% (MAC),Util% (MAC),Name\n")
# the tail of a DS-CNN as Vela 5.2 writes it: an activation row of 0 cycles, a reshape turned into
# a copy named after the pool, a softmax decomposed into steps named after the logits
ROWS = [("Conv2D", "Conv2D", 15223, 15223, 3806, 0, 5136, 320000, "net/conv;net/relu"),
        ("Conv2D", "Relu", 0, 0, 0, 0, 0, 0, "net/conv;net/relu"),
        ("AvgPool", "AvgPool", 8064, 5476, 1608, 0, 0, 8000, "net/pool/AvgPool"),
        ("Reshape", "MemoryCopy", 64, 244, 16, 0, 0, 64, "net/pool/AvgPool_copy"),
        ("FullyConnected", "FullyConnected", 80, 1040, 11, 0, 1040, 768, "net/logits/MatMul"),
        ("Softmax", "MaxPool", 32, 134, 12, 0, 0, 12, "net/logits/MatMul_softmax_0"),
        ("Softmax", "LUT", 0, 0, 0, 0, 0, 0, "net/logits/MatMul_softmax_2"),
        ("Softmax", "Asr", 144, 14, 19, 0, 0, 0, "StatefulPartitionedCall_1:0")]
OPS = [TfliteOp(0, "CONV_2D", "net/conv;net/relu"), TfliteOp(1, "AVERAGE_POOL_2D", "net/pool/AvgPool"),
       TfliteOp(2, "RESHAPE", "net/flatten/Reshape"), TfliteOp(3, "FULLY_CONNECTED", "net/logits/MatMul"),
       TfliteOp(4, "SOFTMAX", "StatefulPartitionedCall_1:0")]


def per_layer_csv(rows=ROWS) -> str:
    return HEADER + "".join(f"{o},{n},NPU,100,1.5,{c},2.0,{npu},{sram},{dram},0,{off},{macs},1.0,5.0,{name}\n"
                            for o, n, c, npu, sram, dram, off, macs, name in rows)


def test_per_layer_csv_reads_every_row_with_its_numbers():
    rows = parse_per_layer(per_layer_csv())
    assert len(rows) == 8
    assert (rows[0].original_op, rows[0].vela_op, rows[0].target, rows[0].name) == \
        ("Conv2D", "Conv2D", "NPU", "net/conv;net/relu")
    assert (rows[0].cycles, rows[0].npu_cycles, rows[0].sram_access_cycles, rows[0].offchip_flash_access_cycles,
            rows[0].macs) == (15223, 15223, 3806, 5136, 320000)
    assert [r.cycles for r in rows] == [15223, 0, 8064, 64, 80, 32, 0, 144]


def test_per_layer_csv_without_a_needed_column_or_with_a_bad_number_is_refused():
    with pytest.raises(VelaFormatError, match="Op Cycles"):
        parse_per_layer(per_layer_csv().replace("Op Cycles", "Cycles"))
    with pytest.raises(VelaFormatError, match="line 3"):
        parse_per_layer(per_layer_csv().replace("Relu,NPU,100,1.5,0,", "Relu,NPU,100,1.5,zero,"))


def test_summary_csv_gives_numbers_and_names():
    text = ("experiment,network,accelerator_configuration,core_clock,cycles_total,sram_total_bytes\n"
            "default,ds_cnn,Ethos_U55_256,500000000.0,58600,284456\n")
    summary = parse_summary(text)
    assert summary["cycles_total"] == 58600.0 and summary["core_clock"] == 5e8
    assert summary["accelerator_configuration"] == "Ethos_U55_256" and summary["sram_total_bytes"] == 284456
    with pytest.raises(VelaFormatError, match="cycles_total"):
        parse_summary("core_clock\n500000000.0\n")
    with pytest.raises(VelaFormatError, match="2 data rows"):
        parse_summary(text + "default,x,y,1,2,3\n")


def test_builtin_names_of_litert_and_vela_meet():
    assert builtin_key("DEPTHWISE_CONV_2D") == builtin_key("DepthwiseConv2D")
    assert builtin_key("AVERAGE_POOL_2D") == builtin_key("AvgPool")
    assert builtin_key("LOGISTIC") == builtin_key("Sigmoid")
    assert builtin_key("CONCATENATION") == builtin_key("Concat")
    assert builtin_key("CONV_2D") != builtin_key("DepthwiseConv2D")


def test_vela_rows_go_to_their_tflite_operator():
    rows = parse_per_layer(per_layer_csv())
    found = match_items(OPS, [r.name for r in rows], lambda i, op: vela_type_agrees(rows[i].original_op, op))
    # the Relu row to its convolution (same name), the copy to the RESHAPE (its name's prefix is
    # the pool's, whose type disagrees), the softmax steps to the SOFTMAX they precede (their
    # names start with the FULLY_CONNECTED output, whose type disagrees)
    assert found == [0, 0, 1, 2, 3, 4, 4, 4]


def test_a_row_of_an_operator_type_the_model_lacks_stays_unmatched():
    found = match_items(OPS, ["somewhere/else"], lambda i, op: vela_type_agrees("Transpose", op))
    assert found == [None]


def test_qsim_layers_go_by_name_prefix_and_to_the_next_named_one():
    names = ["net/conv;net/relu", "net/pool/AvgPool", "net/logits/MatMul.acc", "tmp_7",
             "StatefulPartitionedCall_1:0"]
    found = match_items(OPS, names, lambda i, op: True)
    assert found == [0, 1, 3, 4, 4]


def test_qsim_layers_named_by_the_integer_graph_match_through_the_tensor_map():
    names = {"net/conv;net/relu": "net_conv_net_relu", "StatefulPartitionedCall_1:0": "StatefulPartitionedCall_1_0"}
    ops = renamed(OPS, names)
    assert [op.output for op in ops] == ["net_conv_net_relu", "net/pool/AvgPool", "net/flatten/Reshape",
                                         "net/logits/MatMul", "StatefulPartitionedCall_1_0"]
    assert [op.index for op in ops] == [0, 1, 2, 3, 4] and ops[4].builtin == "SOFTMAX"
    layers = ["net_conv_net_relu", "net/logits/MatMul", "StatefulPartitionedCall_1_0_max",
              "StatefulPartitionedCall_1_0"]
    assert match_items(ops, layers, lambda i, op: True) == [0, 3, 4, 4]


def test_per_operator_sums_and_unmatched_rest():
    values = [{"cycles": 10}, {"cycles": 5}, {"cycles": 7}, {"cycles": 1}]
    per_op, rest = per_op_sums(OPS[:2], [0, None, 0, 1], values, ["cycles"])
    assert per_op == [{"cycles": 17, "items": 2}, {"cycles": 1, "items": 1}]
    assert rest == {"cycles": 5, "items": 1}


def test_compare_counts_differences_without_wrapping():
    ours = np.array([[-128, 0, 5], [127, 1, 1]], np.int8)
    theirs = np.array([[127, 0, 4], [127, 1, 3]], np.int8)
    assert compare(ours, theirs) == Parity(6, 3, 255, 1)    # int8 differences taken in int64; one above
    assert compare(ours, ours) == Parity(6, 0, 0)
    with pytest.raises(ValueError, match="shapes differ"):
        compare(ours, theirs.reshape(3, 2))


def test_parity_sums_over_inputs_and_says_why_a_tensor_is_not_compared():
    ops = [TfliteOp(0, "CONV_2D", "a"), TfliteOp(1, "DEQUANTIZE", "f"), TfliteOp(2, "ADD", "b"),
           TfliteOp(3, "RESHAPE", "r"), TfliteOp(4, "MUL", "m")]
    dtypes = {"a": np.int8, "f": np.float32, "b": np.int8, "r": np.int8, "m": np.int16}
    ref = [{"a": np.array([1, 2, 3], np.int8), "b": np.array([[0, 0]], np.int8), "r": np.zeros((2, 2), np.int8),
            "m": np.array([-32768], np.int16), "f": np.zeros(1, np.float32)},
           {"a": np.array([1, 2, 3], np.int8), "b": np.array([[5, 5]], np.int8), "r": np.zeros((2, 2), np.int8),
            "m": np.array([0], np.int16), "f": np.zeros(1, np.float32)}]
    # qsim's candidates per tensor: its own layout first, then the float graph's
    ours = [{"a": [np.array([1, 2, 4], np.int8)], "b": [np.array([0, 0], np.int8), np.array([[0, 0]], np.int8)],
             "r": [np.zeros(4, np.int8)], "m": [np.array([32767], np.int16)]},
            {"a": [np.array([1, 0, 3], np.int8)], "b": [np.array([5, 7], np.int8), np.array([[5, 7]], np.int8)],
             "r": [np.zeros(4, np.int8)], "m": [np.array([0], np.int16)]}]
    del ours[1]["m"]
    compared, skipped = parity(ops, dtypes, ref, ours)
    assert compared == [
        {"index": 0, "builtin": "CONV_2D", "output": "a", "elements": 6, "differing": 2, "max_lsb": 2, "higher": 1},
        {"index": 2, "builtin": "ADD", "output": "b", "elements": 4, "differing": 1, "max_lsb": 2, "higher": 1}]
    assert [(s["index"], s["why"].split(" ")[0]) for s in skipped] == [(1, "float32"), (3, "qsim"), (4, "no")]
    by = parity_by_builtin(compared + [{"builtin": "CONV_2D", "elements": 4, "differing": 1, "max_lsb": 9}])
    assert by == {"CONV_2D": Parity(10, 3, 9, 1), "ADD": Parity(4, 1, 2, 1)}


def test_differences_start_where_every_input_is_exact():
    ops = [TfliteOp(0, "CONV_2D", "a", ("x", "w0")), TfliteOp(1, "CONV_2D", "b", ("a", "w1")),
           TfliteOp(2, "ADD", "c", ("x", "b")), TfliteOp(3, "RESHAPE", "d", ("x",)),
           TfliteOp(4, "MUL", "e", ("d", "x")), TfliteOp(5, "MEAN", "f", ("a",))]
    rows = [{"output": "a", "differing": 0}, {"output": "b", "differing": 3}, {"output": "c", "differing": 5},
            {"output": "e", "differing": 1}, {"output": "f", "differing": 2}]
    # b: inputs a (exact) and a constant -> origin; c: input b differs -> passed on; e: input d is
    # produced but not compared -> unknown, not an origin; f: input a exact -> origin
    assert [r["output"] for r in origins(ops, rows, {"a", "b", "c", "d", "e", "f"})] == ["b", "f"]


def test_largest_differences_by_absolute_cycle_gap():
    rows = [{"qsim_cycles": 10, "vela_cycles": 100}, {"qsim_cycles": 500, "vela_cycles": 450},
            {"qsim_cycles": 1000, "vela_cycles": 1}]
    assert [r["vela_cycles"] for r in largest_differences(rows, 2)] == [1, 100]


def test_report_keeps_qsims_message_line_and_cuts_converter_names():
    from _tflite_report import error_text, short
    message = ("qsim quantize exited 2: qsim: m.tflite: unsupported error: operator 6 BATCH_MATMUL (version 2)\n"
               "  hint: qsim converts ADD, CONV_2D")
    assert error_text(message) == ("qsim quantize exited 2: qsim: m.tflite: unsupported error: operator 6 "
                                   "BATCH_MATMUL (version 2)")
    assert error_text("Traceback\n  File \"x.py\", line 1\nValueError: bad") == "ValueError: bad"
    assert short("net/conv/Relu;net/bn/add;net/conv/convolution") == "net/conv/Relu"
    assert short("a" * 60, 10) == "…" + "a" * 9


def test_report_names_the_builtins_qsim_does_not_convert():
    from _tflite_report import unconverted_builtins
    message = "unsupported error: operator 19 NEG\n  hint: qsim converts ADD, MEAN, MUL, RESHAPE.\n"
    ops = [{"builtin": b} for b in ("ADD", "NEG", "RSQRT", "MUL", "NEG", "SQUARED_DIFFERENCE")]
    assert unconverted_builtins(message, ops) == ["NEG", "RSQRT", "SQUARED_DIFFERENCE"]
    assert unconverted_builtins("OSError: File name too long", ops) == []


def test_report_cycle_table_sums_models_both_sides_ran(tmp_path):
    from _tflite_report import _cycle_rows
    vela = {"cycles_total": 1000, "sram_bytes": 10, "dram_bytes": 1, "offchip_flash_bytes": 2, "cpu_ops": [],
            "nn_macs": 99}
    npu = {"accelerator": "ethos-u55-256", "engine": "model", "config": {"rows": 16, "cols": 16},
           "total_cycles": 1500, "dram_bytes": 40}
    models = {"a": {"vela": {"ethos-u55-256": vela}, "npu": {"16x16-model": npu}},
              "b": {"vela": {"ethos-u55-256": dict(vela, cycles_total=3000)}}}      # qsim did not run b
    lines = _cycle_rows(models)
    assert "| a | ethos-u55-256 | 1,000 | 10 | 3 | none | 16x16 | 1,500 | 40 | 1.50 | 99 |" in lines
    assert "| b | ethos-u55-256 | 3,000 | 10 | 3 | none | – | – | – | – | 99 |" in lines
    total = [line for line in lines if line.startswith("| **total")]
    assert total == ["| **total (models both ran)** | ethos-u55-256 | 1,000 | 10 | 3 | | | 1,500 | 40 | 1.50 | |"]


def test_raw_rows_and_layers_move_to_the_work_folder(tmp_path):
    import json
    keep_raw = bench_tflite.keep_raw
    result = {"vela": {"ethos-u55-256": {"cycles_total": 5, "rows": [{"name": "a"}]}},
              "npu": {"16x16-model": {"total_cycles": 7, "layers": [{"name": "b"}]}}}
    keep_raw(result, tmp_path / "m" / "raw.json")
    assert result == {"vela": {"ethos-u55-256": {"cycles_total": 5}}, "npu": {"16x16-model": {"total_cycles": 7}},
                      "raw": str(tmp_path / "m" / "raw.json")}
    assert json.loads((tmp_path / "m" / "raw.json").read_text()) == {
        "vela": {"ethos-u55-256": [{"name": "a"}]}, "npu": {"16x16-model": [{"name": "b"}]}}
    failed = {"error": {"stage": "convert", "message": "x"}}
    keep_raw(failed, tmp_path / "n" / "raw.json")
    assert failed == {"error": {"stage": "convert", "message": "x"}} and not (tmp_path / "n").exists()
