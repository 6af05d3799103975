"""Seeded corner-case layers for RTL verification, in the golden-vector format.

Each case is one NPU layer (a TOSA layer operator + RESCALE [+ CLAMP]) built to hit
one corner of the datapath; its expected values come from the TOSA 0.30 reference
(qsim.tosa.run backend="reference"), never from the NPU. Case i has kind
KINDS[i % len(KINDS)] and draws its random values from default_rng([seed, i]), so a
(count, seed) pair always yields the same vectors.

Kinds and the corner each one hits (tests/npu/test_corner_cases.py checks each):
  saturation          outputs pushed past both int8 rails (-128 and 127) by the scale
  clamp_rails         a CLAMP narrower than int8: outputs sit on both clamp bounds
  neg128_squared      every product is (-128) x (-128) = 16384 (zero points 0)
  zero_points_min     input_zp = weight_zp = output_zp = -128, padding with input_zp
  zero_points_max     input_zp = weight_zp = output_zp = 127
  ties_single         acc * multiplier exactly halfway between two outputs, both signs,
                      single rounding (shift 31..40)
  ties_double         the same with double_round and shift > 31, including values where
                      double rounding changes the result
  acc_max, acc_min    accumulators of exactly 2^31 - 1 and -2^31 (K = 33025 products of
                      +-255 x 255, bias making up the rest; array sums within 33023 of 2^31)
  k_longer_than_array K = 3*3*80 = 720 > 64 (the widest array), M and N not multiples of it
  transposed_conv     TRANSPOSE_CONV2D (sub-pixel phases): stride 3 x 2, kernel 4 x 3, out_pad
                      (2, 1, 0, 1), zero points -128 / 127, outputs on both rails
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import tosa
from ..errors import UsageError
from ..version import __version__
from .golden_vectors import LayerVectors, Step, build_layer, write_vectors
from .layers import run_layer

MAX_CASES = 1000
# K of the accumulator-limit cases: 33025 * 255 * 255 = 2^31 - 33023 (the largest
# product sum that stays below 2^31; the bias adds the last 33022 or 33023).
LIMIT_K = 33025


@dataclass(frozen=True)
class CornerCase:
    name: str
    kind: str
    description: str
    op: str                 # TOSA layer operator
    inputs: tuple           # numpy arrays
    attrs: dict             # layer operator attributes (TOSA names)
    rescale: dict           # RESCALE attributes
    clamp: dict | None      # CLAMP attributes (min_val, max_val) or None


def _rescale(multiplier, shift, output_zp=0, double_round=False) -> dict:
    return dict(input_zp=0, output_zp=int(output_zp), multiplier=np.asarray(multiplier, np.int32),
                shift=np.asarray(shift, np.int8), scale32=True, double_round=bool(double_round),
                per_channel=True, out_t="int8")


def _i8(rng, shape, low=-128, high=127):
    return rng.integers(low, high + 1, shape).astype(np.int8)


def _fc(x, w, bias, input_zp=0, weight_zp=0) -> dict:
    return dict(weight=w, bias=np.asarray(bias, np.int32), input_zp=input_zp, weight_zp=weight_zp)


def _saturation(rng):
    n = 16
    x, w = _i8(rng, (8, 64)), _i8(rng, (n, 64))
    # scale 2^30 / 2^24 = 64: sums of 64 products of size ~2^13 leave int8 far behind
    return ("FULLY_CONNECTED", (x,), _fc(x, w, rng.integers(-1000, 1000, n)),
            _rescale(np.full(n, 1 << 30), np.full(n, 24), rng.integers(-8, 8)), None)


def _clamp_rails(rng):
    n = 16
    x, w = _i8(rng, (8, 64)), _i8(rng, (n, 64))
    lo, hi = int(rng.integers(-100, -20)), int(rng.integers(20, 100))
    return ("FULLY_CONNECTED", (x,), _fc(x, w, rng.integers(-1000, 1000, n)),
            _rescale(np.full(n, 1 << 30), np.full(n, 38), 0), dict(min_val=lo, max_val=hi))


def _neg128_squared(rng):
    oc, ic = 16, 8
    x = np.full((1, 5, 6, ic), -128, np.int8)
    w = np.full((oc, 3, 3, ic), -128, np.int8)
    attrs = dict(weight=w, bias=rng.integers(-5000, 5000, oc).astype(np.int32), pad=(0, 0, 0, 0),
                 stride=(1, 1), dilation=(1, 1), input_zp=0, weight_zp=0)
    # 72 * 16384 = 1179648 ~ 2^20.2; scale 2^-16 keeps the outputs inside int8
    return ("CONV2D", (x,), attrs, _rescale(np.full(oc, 1 << 30), np.full(oc, 46), 0), None)


def _zero_points(value):
    def make(rng):
        oc, ic = 12, 5
        x, w = _i8(rng, (1, 6, 5, ic)), _i8(rng, (oc, 3, 3, ic))
        attrs = dict(weight=w, bias=np.zeros(oc, np.int32), pad=(1, 1, 1, 1), stride=(1, 1),
                     dilation=(1, 1), input_zp=value, weight_zp=value)
        # With both zero points at the same extreme every product is >= 0 (up to 255 * 255):
        # the bias centres each channel so that outputs spread around 0 instead of
        # all saturating at the rail the output zero point sits on (scale ~2^-12).
        sums, = tosa.run("CONV2D", [x], attrs, backend="reference")
        centre = np.median(sums.reshape(-1, oc), axis=0).astype(np.int64)
        attrs["bias"] = (-centre - value * 4096 + rng.integers(-2000, 2000, oc)).astype(np.int32)
        return ("CONV2D", (x,), attrs,
                _rescale(rng.integers(1 << 30, (1 << 30) + (1 << 20), oc), np.full(oc, 42), value), None)
    return make


def _ties(double_round):
    def make(rng):
        # acc = x + bias (K = 1, weight 1); multiplier = odd * 2^p makes
        # acc * multiplier / 2^shift land exactly on .5 for suitable acc.
        n = 16
        x = np.arange(-128, 128, dtype=np.int8).reshape(256, 1)
        w = np.ones((n, 1), np.int8)
        bias = rng.integers(-50, 50, n)
        odd = rng.choice([1, 3, 5, 7], n)
        p = rng.integers(29, 31, n)           # multiplier odd * 2^p stays below 2^31
        mult = np.where(odd << p >= 1 << 31, 1 << 30, odd << p)
        # a tie needs acc * odd = 2^(d-1) mod 2^d, d = shift - p; |acc| <= 177 allows d <= 7
        shift = p + rng.integers(3 if double_round else 1, 8, n)
        if double_round:
            shift = np.maximum(shift, 32)     # double rounding acts only for shift > 31
        out_zp = int(rng.integers(-4, 5))
        return ("FULLY_CONNECTED", (x,), _fc(x, w, bias), _rescale(mult, shift, out_zp, double_round), None)
    return make


def _acc_limit(sign):
    def make(rng):
        n = 16
        x = np.full((3, LIMIT_K), 127, np.int8)
        x[1] = _i8(rng, LIMIT_K)
        # (x - input_zp) = 255 for x = 127; (w - weight_zp) = +-255 on channel 0
        w_zp = -128 if sign > 0 else 127
        w = _i8(rng, (n, LIMIT_K))
        w[0] = 127 if sign > 0 else -128
        bias = np.zeros(n, np.int64)
        bias[0] = 33022 if sign > 0 else -33023
        # other channels: random weights, sums far from the limits; bias 0
        return ("FULLY_CONNECTED", (x,), _fc(x, w, bias.astype(np.int32), -128, w_zp),
                _rescale(np.full(n, 1 << 30), np.full(n, 55), 0), None)
    return make


def _k_longer(rng):
    oc, ic = 20, 80
    x, w = _i8(rng, (1, 7, 10, ic)), _i8(rng, (oc, 3, 3, ic))
    attrs = dict(weight=w, bias=rng.integers(-20000, 20000, oc).astype(np.int32), pad=(1, 1, 0, 1),
                 stride=(2, 1), dilation=(1, 1), input_zp=int(rng.integers(-20, 20)),
                 weight_zp=int(rng.integers(-3, 3)))
    return ("CONV2D", (x,), attrs,
            _rescale(rng.integers(1 << 30, 1 << 31, oc), rng.integers(44, 48, oc), -3), None)


def _transposed(rng):
    """Stride 3 x 2, kernel 4 x 3 (longer than the stride down, not across), out_pad cropping
    unevenly, zero points at opposite extremes, a scale that saturates both rails."""
    oc, ic = 10, 9
    x, w = _i8(rng, (2, 3, 4, ic)), _i8(rng, (oc, 4, 3, ic))
    top, bottom, left, right = 2, 1, 0, 1
    # opposite zero-point extremes make every product <= 0 ((x + 128) >= 0, (w - 127) <= 0),
    # sums down to ~-2^21: biases of either sign up to 2^22 put outputs past both rails
    bias = rng.integers(1 << 21, 1 << 22, oc) * np.where(np.arange(oc) % 2, 1, -1)
    attrs = dict(weight=w, bias=bias.astype(np.int32),
                 out_pad=(top, bottom, left, right), stride=(3, 2),
                 out_shape=(2, 2 * 3 - top - bottom + 4, 3 * 2 - left - right + 3, oc),
                 input_zp=-128, weight_zp=127)
    return ("TRANSPOSE_CONV2D", (x,), attrs, _rescale(np.full(oc, 1 << 30), np.full(oc, 36), -5), None)


KINDS = {
    "saturation": (_saturation, "outputs beyond both int8 rails, saturated to -128 and 127"),
    "clamp_rails": (_clamp_rails, "a CLAMP inside int8: outputs on both clamp bounds"),
    "neg128_squared": (_neg128_squared, "every product (-128) x (-128), zero points 0"),
    "zero_points_min": (_zero_points(-128), "input, weight and output zero points -128"),
    "zero_points_max": (_zero_points(127), "input, weight and output zero points 127"),
    "ties_single": (_ties(False), "RESCALE rounding ties, single rounding"),
    "ties_double": (_ties(True), "RESCALE rounding ties and double-round adjustments"),
    "acc_max": (_acc_limit(+1), "accumulator exactly 2^31 - 1"),
    "acc_min": (_acc_limit(-1), "accumulator exactly -2^31"),
    "k_longer_than_array": (_k_longer, "K = 720 > array rows; M, N not multiples of the array"),
    "transposed_conv": (_transposed, "TRANSPOSE_CONV2D stride 3 x 2, kernel 4 x 3, uneven out_pad, "
                                     "zero points -128 / 127, both rails"),
}


def generate(count: int | None = None, seed: int = 0) -> list[CornerCase]:
    """`count` cases (default: one of each kind), reproducible from `seed`."""
    count = len(KINDS) if count is None else count
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_CASES:
        raise UsageError(f"--corner-cases {count!r}: the count must be in [1, {MAX_CASES}]")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UsageError(f"--seed {seed!r}: the seed must be a non-negative integer")
    names = list(KINDS)
    cases = []
    for i in range(count):
        kind = names[i % len(names)]
        make, description = KINDS[kind]
        op, inputs, attrs, rescale, clamp = make(np.random.default_rng([seed, i]))
        name = kind if i < len(names) else f"{kind}_v{i // len(names)}"
        cases.append(CornerCase(name, kind, description, op, inputs, attrs, rescale, clamp))
    return cases


def reference_steps(case: CornerCase) -> list[Step]:
    """The case's operators executed by the TOSA reference (the expected values)."""
    acc, = tosa.run(case.op, list(case.inputs), case.attrs, backend="reference")
    steps = [Step(case.op, dict(case.attrs), list(case.inputs), [acc], label=case.name)]
    out, = tosa.run("RESCALE", [acc], case.rescale, backend="reference")
    steps.append(Step("RESCALE", dict(case.rescale), [acc], [out], label=case.name))
    if case.clamp is not None:
        clamped, = tosa.run("CLAMP", [out], case.clamp, backend="reference")
        steps.append(Step("CLAMP", dict(case.clamp), [out], [clamped], label=case.name))
    return steps


def case_layers(cases: list[CornerCase], seed: int) -> list[LayerVectors]:
    layers = []
    for case in cases:
        layer = build_layer(case.name, reference_steps(case))
        layer.notes = {"corner_case": case.kind, "description": case.description, "seed": seed,
                       "expected_from": "TOSA 0.30 reference (qsim.tosa.run backend='reference')"}
        layers.append(layer)
    return layers


def run_on_npu(case: CornerCase, geom, engine="model"):
    """The case on the NPU (qsim.npu.layers.run_layer): a LayerResult."""
    return run_layer(geom, case.op, list(case.inputs), case.attrs, case.rescale, case.clamp,
                     engine=engine, name=case.name)


def export_corner_cases(count: int | None, seed: int, config, out):
    """`qsim export-vectors --corner-cases N --seed S --out DIR`."""
    cases = generate(count, seed)
    header = {"qsim": __version__, "model": "corner cases", "source": "qsim.npu.corner_cases",
              "input": f"seed {seed}", "backend": "reference", "seed": seed, "count": len(cases),
              "config": {"name": config.name, "dataflow": config.dataflow.value}}
    intro = (f"{len(cases)} seeded corner-case layers (seed {seed}), expected values from the "
             "TOSA 0.30 reference; each layer's `corner_case` and `description` in the manifest "
             "name the corner it hits.")
    return write_vectors(case_layers(cases, seed), out, config.rows, config.cols, header, intro), cases
