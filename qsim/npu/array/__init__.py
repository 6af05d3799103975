"""Programs for the NPU's systolic array: GEMM tiling into instructions and a DRAM image
(compile.py) and the convolution windows its LOADW address generator reads (window.py)."""
