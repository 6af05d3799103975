"""Integer models in SkriptND text (qsim/skriptnd/integer_form.py): the one width rule, used
by the writer and by the TOSA text form alike, and the dialect converters."""
import numpy as np
import pytest

from qsim import ir
from qsim.skriptnd import integer_form
from qsim.skriptnd.integer_form import register_text_form, to_ir_form, width_quant
from qsim.skriptnd.writer import _width_quant as writer_width_quant
from qsim.tosa.sknd_form import to_sknd_form


@pytest.mark.parametrize("dtype,bits,signed", [(ir.DType.I4, 4, True), (ir.DType.I8, 8, True),
                                               (ir.DType.U8, 8, False), (ir.DType.I16, 16, True),
                                               (ir.DType.U16, 16, False), (ir.DType.I48, 48, True)])
def test_narrow_and_wide_integers_record_their_width(dtype, bits, signed):
    q = width_quant(dtype)
    assert (q.bits, q.signed, q.scale, q.zero_point, q.symmetric) == (bits, signed, 1.0, 0, True)


@pytest.mark.parametrize("dtype", [ir.DType.I32, ir.DType.I64, ir.DType.F32, ir.DType.BOOL])
def test_default_widths_and_non_integers_get_no_entry(dtype):
    assert width_quant(dtype) is None


def test_writer_and_tosa_form_use_the_same_rule():
    # the writer's entry for a tensor without a QuantInfo, and the TOSA form's for an
    # attribute tensor, are both width_quant's
    t = ir.Tensor("t", ir.DType.I16, (2,), data=np.zeros(2, np.int16))
    assert writer_width_quant(t) == width_quant(ir.DType.I16)
    own = ir.QuantInfo(scale=0.5, zero_point=3, bits=16, signed=True)
    assert writer_width_quant(ir.Tensor("t", ir.DType.I16, (2,), quant=own)) is own
    x = ir.Tensor("x", ir.DType.I8, (1, 4), quant=ir.QuantInfo(scale=0.1, zero_point=0, bits=8))
    op = ir.Op(ir.OpKind.get("tosa.RESCALE"), ("x",), ("y",),
               {"input_zp": 0, "output_zp": 0, "multiplier": np.array([1 << 30], np.int32),
                "shift": np.array([31], np.int8), "scale32": True, "double_round": False,
                "per_channel": False, "out_t": "int16"}, name="r")
    y = ir.Tensor("y", ir.DType.I16, (1, 4))
    g = to_sknd_form(ir.Graph("g", ("x",), ("y",), (op,), {"x": x, "y": y}))
    assert g.tensor("y.shift").quant == width_quant(ir.DType.I8)
    assert g.tensor("y.multiplier").quant is None          # int32: the default width
    assert g.tensor("y").quant == width_quant(ir.DType.I16)


def test_registered_dialect_forms_apply_to_graphs_using_the_dialect(monkeypatch):
    monkeypatch.setattr(integer_form, "_FROM_TEXT", dict(integer_form._FROM_TEXT))
    calls = []
    register_text_form("math", lambda g: calls.append(g.name) or g)
    x = ir.Tensor("x", ir.DType.F32, (2,))
    y = ir.Tensor("y", ir.DType.F32, (2,))
    g = ir.Graph("g", ("x",), ("y",), (ir.Op(ir.OpKind.get("math.neg"), ("x",), ("y",), {}),),
                 {"x": x, "y": y})
    assert to_ir_form(g) is g and calls == ["g"]
    empty = ir.Graph("h", ("x",), ("x",), (), {"x": x})
    assert to_ir_form(empty) is empty and calls == ["g"]
