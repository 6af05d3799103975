"""TOSA 0.30 integer operators: signatures, validation, shape inference, numpy reference."""
