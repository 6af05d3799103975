"""Amaranth HDL of qsim's systolic-array NPU (installed as `qsim.hw`)."""
