"""Adaptive weight rounding (adaptive.py: the moments calibration collects, the search, its
drivers), a convolution's patch geometry (conv_geometry.py) and its moments by tap offset
(offset_moments.py). The TOSA target uses it; the choice is QuantizeOptions.weight_rounding."""
