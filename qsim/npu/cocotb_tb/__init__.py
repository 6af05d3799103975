"""The cocotb testbench that `qsim export-vectors --cocotb DIR` writes (docs/cocotb.md).

These modules are copied into DIR as they are and run there, under cocotb, against a DUT:
they import numpy, cocotb and each other, never qsim, so the testbench runs wherever cocotb
and a simulator do. qsim itself never imports them (only `golden_check`, which needs nothing
but numpy, is also imported by qsim's tests).
"""
