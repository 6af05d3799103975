"""The fixed prose of reports/tflite.md: how the figures were made, and why qsim's and Vela's
per-operator cycles differ (read from the measured tables; kept here so that a rerun keeps it)."""
from __future__ import annotations


def header_lines(doc: dict) -> list[str]:
    v = doc.get("versions", {})
    setups = ", ".join(f"{s['accelerator']} → qsim {s['rows']}x{s['cols']} WS, {s['dram_bytes_per_cycle']} B/cycle, "
                       f"{s['clock_mhz']:.0f} MHz" for s in doc.get("qsim_setups", []))
    return [
        "# TFLite int8 networks: LiteRT parity and Vela beside qsim's NPU", "",
        f"Command: `{doc['command']}` (benchmarks/tflite.py; its docstring lists the benchmark-only packages).",
        f"Date {doc['date']}, commit {doc['commit']}, CPU {doc['cpu']} ({doc['machine']}), "
        f"1-minute load {doc['load']} at the start.",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".", "",
        "Models (benchmarks/_tflite_models.py): MobileNetV2 (keras.applications, alpha 0.35, 224x224), an "
        "EfficientNet-Lite0-like net (MBConv, relu6, no squeeze-excitation, 224x224), a ResNet-18-like net "
        "(224x224), MLPerf Tiny's DS-CNN (49x10 MFCC input) and a two-layer transformer encoder (64 tokens x "
        "128, 4 heads, LayerNorm, ReLU feed-forward of 256). Random seeded weights, batch-norm statistics from "
        "the representative data; TFLiteConverter with 8 representative inputs (crops of scikit-image's "
        "photographs for the image nets, seeded normal samples otherwise), TFLITE_BUILTINS_INT8, int8 input "
        "and output, batch 1.", "",
        f"Parity: `qsim quantize m.tflite -o Q`, qsim's integer run on the kernels backend with every tensor "
        f"kept, against LiteRT's interpreter with the BUILTIN_REF resolver and "
        f"experimental_preserve_all_tensors, on the same {doc['inputs']} seeded int8 inputs per model (seed "
        "1000; photographs for the image nets). Every TFLite operator output that qsim has under the same "
        "name is compared element for element.", "",
        f"Cycles: `qsim simulate Q --engine model` (the cycle model, equal to the RTL's cycles by "
        f"construction and test) on the first input; Vela 5.2 with its default system configuration per "
        f"accelerator (`vela m.tflite --accelerator-config A --verbose-performance`). Same MACs per cycle: "
        f"{setups}. Vela's rows and qsim's layers are summed per TFLite operator "
        "(benchmarks/_tflite_match.py: by output tensor name, a decomposed operator's inner steps to the "
        "operator they belong to). Vela reports bytes per network only (per layer it gives access cycles); "
        "its SRAM bytes are feature maps and buffered weights, off-chip bytes are weights streamed from "
        "flash (U55) or DRAM (U65). qsim's DRAM bytes are everything its DMAs move (feature maps, weights, "
        "parameters, window descriptors).", ""]


EXPLANATION = [
    "## Why the per-operator cycles differ", "",
    "The tables above give each operator's breakdown on both sides: Vela's compute (NPU) cycles and its "
    "memory-access cycles per memory, qsim's streaming (compute), fill/drain and DMA-stall cycles. The "
    "recurring causes:", "",
    "- **Dataflow and depthwise convolutions.** Ethos-U's MAC engine works on output blocks (a few output "
    "pixels x 8-16 output channels per cycle for the U55-256) and runs a depthwise convolution at a fraction "
    "of its peak, but still walks the output pixels in parallel. qsim's weight-stationary systolic array maps "
    "a depthwise convolution block-diagonally (cols / multiplier channels per GEMM, K = the kernel taps), "
    "so a 3x3 depthwise layer keeps 9 of 16 rows busy and pays a weight preload and array fill/drain per "
    "channel group.",
    "- **Fused operators.** Vela fuses the activation into the convolution (the 0-cycle Relu rows), keeps "
    "reshapes as no-ops and fuses the LayerNorm's epsilon ADD into the RSQRT lookup; qsim fuses "
    "RESCALE and CLAMP into the array's requantization unit and the residual ADD's rescales into one vector "
    "job, but runs a Softmax, MEAN and elementwise chains as vector-unit stages whose cycles are beats plus "
    "per-job set-up and configuration loads. Vela decomposes SOFTMAX into ~26 elementwise and LUT operations.",
    "- **Memory.** Vela keeps feature maps in on-chip SRAM (U55: 8 B/cycle, U65: 16 B/cycle) and streams "
    "weights from flash/DRAM with double-buffering, overlapping transfers with compute; its per-operator cycles "
    "are the larger of compute and access time. qsim reads every operand from one DRAM at the same bandwidth "
    "(8 or 16 B/cycle), re-reads an input pixel once per kernel tap and weight fold (im2col in the window "
    "DMA), and its stage sequence has no overlap between layers; where its stall column dominates, the layer "
    "is bandwidth-bound in qsim and not in Vela.",
    "- **Array shape.** A 1x1 convolution or fully-connected layer with few output channels (DS-CNN's 12 "
    "classes, the transformer's heads of 32) fills few of qsim's columns; Vela's block config picks a "
    "shape per layer.", ""]
