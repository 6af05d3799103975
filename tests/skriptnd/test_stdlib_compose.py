"""Every standard operator case of test_stdlib_ops, invoked in a SkriptND graph and composed by
the graph composer (binding.py/compose/instance.py, not the @lower binder): the composed output shapes and
types are those of the numpy formula, and executing the composed graph gives its values."""
from __future__ import annotations

import numpy as np
import pytest

import qsim
from qsim.runtime import execute
from qsim.skriptnd.writer import format_value

try:
    from .test_stdlib_ops import CASES, _close, _lstm_ref
except ImportError:
    from test_stdlib_ops import CASES, _close, _lstm_ref


def _type(a: np.ndarray) -> str:
    return {"b": "bool", "i": "int", "u": "int", "f": "real"}[np.asarray(a).dtype.kind]


def _decl(name: str, a) -> str:
    a = np.asarray(a)
    return f"{name}: {_type(a)}[{', '.join(map(str, a.shape))}];"


@pytest.mark.parametrize("op,inputs,attrs,formula,generics", CASES)
def test_composed_shapes_and_values(tmp_path, op, inputs, attrs, formula, generics):
    module = op.split(".")[0]
    want = [np.asarray(w) for w in formula(inputs)]
    decls, feeds, args = [], {}, []
    for k, v in enumerate(inputs):
        if v is None:
            args.append("~")
        elif isinstance(v, list):
            names = [f"i{k}_{j}" for j in range(len(v))]
            for name, item in zip(names, v):
                decls.append(_decl(name, item))
                feeds[name] = np.asarray(item)
            args.append("[" + ", ".join(names) + "]")
        else:
            decls.append(_decl(f"i{k}", v))
            feeds[f"i{k}"] = np.asarray(v)
            args.append(f"i{k}")
    while args and args[-1] == "~":
        args.pop()
    outs = [f"o{j}" for j in range(len(want))]
    # a packed output (split, unstack) is unpacked by a list on the left
    from qsim.skriptnd.modules import ModuleSet
    d = ModuleSet(None).module(module, None).get(op.split(".")[1])
    packed = any(o.type.pack is not None for o in d.outputs)
    target = "[" + ", ".join(outs) + "]" if packed else ", ".join(outs)
    gen = "<" + ", ".join(generics.values()) + ">" if generics else ""
    attr = ("{" + ", ".join(f"{k} = {format_value(v, k)}" for k, v in attrs.items()) + "}") if attrs else ""
    out_decls = [f"{n}: {_type(w)}[{', '.join('~' for _ in w.shape)}];" for n, w in zip(outs, want)]
    text = (f"import {module};\ngraph G {{\n    @input {{ {' '.join(decls)} }}\n"
            f"    @output {{ {' '.join(out_decls)} }}\n"
            f"    @compose {{ {target} = {op}{gen}{attr}({', '.join(args)}); }}\n}}\n")
    (tmp_path / "main.sknd").write_text(text)
    g = qsim.load(tmp_path)
    if op == "nn.lstm_loop" and inputs[6] is not None:
        # a run-time step count: kept whole (compose.WHOLE_WITH_RUNTIME_STEPS), values in
        # test_lstm_steps.py
        assert [o.kind.name for o in g.ops] == ["nn.lstm_loop"]
    got_shapes = [g.tensors[n].shape for n in g.outputs]
    assert [tuple(s) for s in got_shapes if None not in s] == \
        [w.shape for s, w in zip(got_shapes, want) if None not in s], text
    if any(None in s for s in got_shapes):
        return          # data-dependent output shapes: values are checked in test_stdlib_ops
    values = execute(g, feeds)
    for name, w in zip(g.outputs, want):
        assert _type(values[name]) == _type(w), name
        if _type(w) == "real":      # the graph computes in float32, the formula in float64
            np.testing.assert_allclose(values[name], w, rtol=1e-4, atol=1e-5)
        else:
            _close(values[name], w)


def test_lstm_loop_without_step_count_runs_every_step(tmp_path):
    """With `steps` omitted the loop runs over all of X (static count): it composes and runs."""
    (case,) = [p for p in CASES if p.id == "nn.lstm_loop"]
    _, inputs, attrs, formula, generics = case.values
    full = list(inputs[:6]) + [None]
    want = _lstm_ref(*inputs[:6], len(inputs[0]))
    test_composed_shapes_and_values(tmp_path, "nn.lstm_loop", full, attrs,
                                    lambda _: want, generics)
