"""Several NPU cores sharing DRAM (config key `cores`; hw/cores.py, hw/arbiter.py): the split of
a layer's output channels across the cores (split.py), the cycle model's co-schedule of the
cores' programs with the DRAM arbiter (schedule.py), one round of programs on the model,
amaranth (testbench.py) or verilator (verilator.py, harness.cpp) engine against the one shared
memory (memory.py) in run.py, a layer split, run and gathered (layer.py), the area of N cores
(area.py) and the report's per-core line (summary.py)."""
