"""Several NPU cores sharing DRAM (config key `cores`): the layers' output channels split
across the cores (split.py), the co-schedule of the cores' programs with the DRAM arbiter
(schedule.py, the cycle model), the runs on the three engines (run.py, the RTL testbenches
testbench.py and harness.cpp) and a layer split, run and gathered (layer.py)."""
