"""qsim's NPU: configuration, compiler (integer layers -> instruction programs),
numpy cycle model, and simulation engines (model, amaranth, verilator).
The hardware itself is qsim.hw; docs/npu.md describes the whole."""
