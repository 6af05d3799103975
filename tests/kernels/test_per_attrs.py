"""Per-op caches of the integer kernels (kernels.cache.PerAttrs): keyed by the identity of the
bound call's attribute mapping plus the input's shape and dtype; results and errors as uncached."""
import numpy as np
import pytest

from kernel_harness import ints
from qsim import tosa
from qsim.errors import UnpredictableError
from qsim.kernels import gemm_ops, unary_ops, window_ops
from qsim.kernels.cache import PerAttrs, clear_packed_cache
from qsim.tosa.run import prepare


def test_per_attrs_keys_on_identity_and_key():
    cache, made = PerAttrs(kept=2), []

    def get(at, key):
        return cache.get(at, key, lambda: made.append((id(at), key)) or len(made))

    a, b = {"x": 1}, {"x": 1}
    assert get(a, (1,)) == get(a, (1,)) == 1          # same mapping and key: made once
    assert get(b, (1,)) == 2                          # an equal but other mapping: its own entry
    assert get(a, (2,)) == 3                          # another key: made again (the bound cleared b)
    y, z = {"y": 2}, {"z": 3}
    assert get(y, ()) == 4 and get(a, (2,)) == 3      # {a, y} held
    assert get(z, ()) == 5                            # a third mapping: the bound clears all
    assert get(a, (2,)) == 6
    clear_packed_cache()                              # clears every PerAttrs
    assert get(a, (2,)) == 7


def _bound_attrs(op, inputs, attrs):
    call, arrays = prepare(op, inputs, attrs)
    return call.attrs, arrays


@pytest.mark.parametrize("op,kernel", [("CONV2D", gemm_ops.conv2d),
                                       ("DEPTHWISE_CONV2D", window_ops.depthwise_conv2d)])
def test_plan_per_input_shape(rng, op, kernel):
    """One attribute mapping called on inputs of several shapes and dtypes (the batch-1 and the
    batched graph share no mapping, but a direct caller may): each gets its own plan, the
    reference's bits."""
    w = ints(rng, (4, 3, 3, 5) if op == "CONV2D" else (3, 3, 5, 2), np.int8)
    attrs = dict(weight=w, bias=ints(rng, (4 if op == "CONV2D" else 10,), np.int32, -999, 999),
                 pad=(1, 0, 1, 1), stride=(1, 1), dilation=(1, 1), input_zp=0, weight_zp=0)
    at, _ = _bound_attrs(op, [ints(rng, (1, 6, 7, 5), np.int8)], attrs)
    for shape, dtype in [((1, 6, 7, 5), np.int8), ((3, 9, 4, 5), np.int8), ((1, 6, 7, 5), np.int8),
                         ((2, 5, 5, 5), np.int16), ((3, 9, 4, 5), np.int8)]:
        x = ints(rng, shape, dtype)
        ref, = tosa.run(op, [x], {**attrs, "input_zp": 0})
        got, = kernel([x], at)
        np.testing.assert_array_equal(got, ref)


def test_rescale_error_kept_per_op(rng):
    """A RESCALE whose attributes violate a REQUIRE raises the same error on every call, the
    cached plan's included; a valid one gives the reference's bits on each input shape."""
    bad = dict(input_zp=0, output_zp=0, multiplier=np.array([1 << 30], dtype=np.int32),
               shift=np.array([1], dtype=np.int8), scale32=True, double_round=False, per_channel=False, out_t="int8")
    at, _ = _bound_attrs("RESCALE", [ints(rng, (2, 3), np.int32)], {**bad, "shift": np.array([10], np.int8)})
    at = {**at, "shift": bad["shift"].astype(at["shift"].dtype)}     # past validation, as a direct caller
    messages = []
    for _ in range(2):
        with pytest.raises(UnpredictableError) as err:
            unary_ops.rescale([ints(rng, (2, 3), np.int32)], at)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "shift" in messages[0]
    good = {**bad, "shift": np.array([33], dtype=np.int8)}
    at, _ = _bound_attrs("RESCALE", [ints(rng, (2, 3), np.int32)], good)
    for shape in [(2, 3), (4, 5, 7), (2, 3), (1,)]:
        x = ints(rng, shape, np.int32)
        ref, = tosa.run("RESCALE", [x], good)
        got, = unary_ops.rescale([x], at)
        np.testing.assert_array_equal(got, ref)
