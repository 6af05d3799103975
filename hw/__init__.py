"""Amaranth 0.5 HDL of qsim's systolic-array NPU (shipped as ``qsim.hw``).

Modules: ``params`` (geometry derived from a configuration), ``isa`` (the
instruction format, shared with the compiler), ``pe`` and ``array`` (the R x C
systolic array, weight- and output-stationary), ``requant`` (bias, TOSA
apply_scale_32, zero point, clamp) built on ``scale`` (apply_scale_32/16 and
MUL's rounding shift, defined once), ``dma`` and ``compute`` (the two execution
units), ``top`` (the NPU: dispatcher, buffers, DRAM port), ``vector`` and
``vector_isa`` (the vector unit and its instruction). Ports and the
instruction format are documented in README.md next to this file.
This package knows nothing of qsim's front end; it is driven by ``qsim.npu``.
"""
