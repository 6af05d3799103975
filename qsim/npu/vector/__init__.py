"""The NPU's vector unit: its opcodes and the numpy model (model.py), compiling TOSA element-wise,
table and pooling ops into vector programs (ops.py, program.py, windows.py), the operand stream
(stream.py) and the unit's own Verilator harness (verilator.py, harness.cpp)."""
