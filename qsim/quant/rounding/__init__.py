"""Adaptive weight rounding (adaptive.py: the search and its driver in the lowering; moments.py:
the moments calibration collects and the layers it watches), a convolution's patch geometry
(conv_geometry.py) and its moments by tap offset (offset_moments.py). The TOSA target uses it;
the choice is QuantizeOptions.weight_rounding."""
