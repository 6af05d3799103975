"""The fixed prose of reports/tflite.md: how the figures were made, and why qsim's and Vela's
per-operator cycles differ (read from the measured tables; kept here so that a rerun keeps it)."""
from __future__ import annotations


def header_lines(doc: dict) -> list[str]:
    v = doc.get("versions", {})
    setups = ", ".join(f"{s['accelerator']} → qsim {s['rows']}x{s['cols']} WS, {s['dram_bytes_per_cycle']} B/cycle, "
                       f"{s['clock_mhz']:.0f} MHz" for s in doc.get("qsim_setups", []))
    runs = [f"{name}: `{r['run']['command']}` at {r['run']['commit']} ({r['run']['date']}, load {r['run']['load']})"
            for name, r in doc["models"].items() if "run" in r]
    return [
        "# TFLite int8 networks: LiteRT parity and Vela beside qsim's NPU", "",
        f"Command: `{doc['command']}` (benchmarks/tflite.py; its docstring lists the benchmark-only packages).",
        f"Date {doc['date']}, commit {doc['commit']}, CPU {doc['cpu']} ({doc['machine']}), "
        f"1-minute load {doc['load']} at the start.",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()) + ".", "",
        *(["A run of some models keeps the other models' rows; the run each model's figures come from:", ""]
          + [f"- {line}" for line in runs] + [""] if runs else []),
        "Models (benchmarks/_tflite_models.py): MobileNetV2 (keras.applications, alpha 0.35, 224x224), an "
        "EfficientNet-Lite0-like net (MBConv, relu6, no squeeze-excitation, 224x224), a ResNet-18-like net "
        "(224x224), MLPerf Tiny's DS-CNN (49x10 MFCC input) and a two-layer transformer encoder (64 tokens x "
        "128, 4 heads, LayerNorm, ReLU feed-forward of 256). Random seeded weights, batch-norm statistics from "
        "the representative data; TFLiteConverter with 8 representative inputs (crops of scikit-image's "
        "photographs for the image nets, seeded normal samples otherwise), TFLITE_BUILTINS_INT8, int8 input "
        "and output, batch 1. Tensor names are cut to the first ';'-part of the converter's joined names "
        "(benchmarks/_tflite_models.shorten_tensor_names) before Vela, LiteRT and qsim read the file: with "
        "the converter's names (~250 characters) `qsim quantize` stops with an OSError traceback, File name "
        "too long, writing a weight's .dat file (`--keep-names` reproduces it).", "",
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


PARITY_HISTORY = [
    "Earlier runs of this benchmark on the reader branch found, and the reader fixed: SOFTMAX (1 LSB in 1 "
    "of 24 DS-CNN outputs; TFLite's fixed-point softmax now built from TOSA operators), and MEAN over 7x7 "
    "(62 of 2,560 MobileNetV2 and 95 of 1,024 ResNet-18 elements, 1 LSB: LiteRT folds 1/count into the "
    "multiplier by a truncating integer division, reader commit 4f9bef1 does the same). The per-operator "
    "origin analysis below (operators whose output differs while every input is exact) is what located "
    "them. The transformer encoder's first run, once RSQRT, SQUARED_DIFFERENCE and NEG were converted, had "
    "222,318 of 1,116,436 elements differing, all from three origins: its first FULLY_CONNECTED projections "
    "(16, 9 and 20 of 16,384 elements, 1 LSB). LiteRT's int8 FULLY_CONNECTED rescales its accumulator "
    "rounding once (64-bit), where its convolutions round twice: a numpy rescale of the projection's int32 "
    "accumulators rounding once equals LiteRT on all 8,192 elements, rounding twice differs on 2 "
    "(values within 2^-9 of a half step). qsim now rounds a .tflite model's int8 FULLY_CONNECTED once "
    "(docs/tflite.md). The other four models' rows above were measured before that change; after it, every "
    "tensor of each still equals LiteRT on 2 seeded random int8 inputs (mobilenet_v2 6,197,808, "
    "efficientnet_lite0 14,201,232, resnet18 7,178,192, ds_cnn 145,156 elements, kernels backend; not "
    "this benchmark's photographs).", ""]

# What is known of a builtin whose outputs differ from LiteRT's with exact inputs (a parity
# "origin"); the report prints the entry of every builtin that is an origin in some model.
ORIGIN_CAUSES = {
    "MEAN": "LiteRT's reference MEAN for int8 with keep_dims false and different input and output scales "
            "(Keras GlobalAveragePooling2D as converted: MEAN over H and W of 7x7) is "
            "reference_ops::QuantizedMeanOrSum: the int32 sum minus count x input zero point, times the "
            "multiplier of input_scale / output_scale into which 1/count is folded by an integer division "
            "((multiplier << s) / count, truncated, s = min(floor(log2(count)), 32, 31 + shift)), through "
            "MultiplyByQuantizedMultiplier (double rounding). A numpy transcription of that arithmetic equals "
            "LiteRT's MEAN output on every element (ResNet-18, first input: 512 of 512); qsim's output differs "
            "from it in 35 and from the exactly rounded mean in 18 of the 512, and is 1 lower wherever it "
            "differs from LiteRT (column 'qsim the higher in' = 0). So qsim's MEAN lowering rounds neither as "
            "TFLite nor exactly; to be bit-exact it must fold 1/count into the multiplier as TFLite does "
            "(benchmarks/tflite.py's figures are checked against the reader branch of the run's commit).",
}

EXPLANATION = [
    "## Why the per-operator cycles differ", "",
    "Read with the tables above and below (each operator's breakdown on both sides: Vela's MAC-engine "
    "cycles and its access cycles per memory; qsim's streaming, fill/drain and DMA-stall cycles). Vela 5.2's "
    "figures are its compiler's estimates for the accelerator's default system configuration, not "
    "measurements; qsim's are its cycle model's, equal to its RTL's (the four models run on the verilator engine above: same totals, every layer verified). "
    "Both sides count the same MACs for every convolution and fully-connected operator (checked per "
    "operator on this run); Vela's totals are 0.1-0.3 % higher because it also counts pooling, MEAN and "
    "softmax elements as MACs.", "",
    "- **Depthwise convolutions (qsim 1.4-9x slower, most 3-5x).** An Ethos-U55-256 computes a micro-block of 2x2 "
    "output pixels x 8 channels per step (Vela's architecture description: ofm_ublock 2x2x8), so a "
    "depthwise convolution still keeps 32 MAC lanes busy and reads each input block once for all taps. qsim "
    "maps a depthwise convolution block-diagonally onto the weight-stationary array: each streaming cycle "
    "uses the diagonal 16 of the 256 PEs (one tap of 16 channels), and its window DMA reads the input once "
    "per tap, so at 8 B/cycle the reads take about as long again as the streaming (stall ~50 % on 16x16). "
    "Doubling the columns (16x32) does not help it: the diagonal grows with the array.",
    "- **Few input channels (qsim 1.1-7x faster).** The first convolution of every image net (3 input "
    "channels) and DS-CNN's 10x4 convolution on a 1-channel spectrogram: Ethos-U reduces 8 input channels "
    "per step, so 1 or 3 channels leave 5/8 to 7/8 of its MACs idle (Vela's own utilisation for DS-CNN's "
    "first layer: 8 %), and on the U65 (Dedicated_Sram: feature maps in DRAM, SRAM as a cache) its estimate "
    "for the 224x224 stems is bound by the feature-map traffic, hence the 3-7x there. qsim's implicit GEMM "
    "puts kernel height x width x channels on K (40, 27 or 147 rows), which fills its rows; its stem layers "
    "still stall on DRAM for half to two thirds of their cycles.",
    "- **Weights from flash (Vela slower on U55).** The U55's default system keeps weights in off-chip flash "
    "at 0.5 GB/s (1 B/cycle at 500 MHz). The 1280x1000 classifier of MobileNetV2 and EfficientNet-Lite0 "
    "(1.28 MB of weights) takes Vela 1.29 M cycles, 44 % of MobileNetV2's total, and ResNet-18's layer-4 "
    "3x3 convolutions (2.36 MB each) 2.36 M cycles each: access-bound, where qsim (one DRAM at 8 B/cycle "
    "for weights and feature maps alike) takes 0.25 M and 1.29 M. On the U65 (weights in DRAM at 12 B/cycle) "
    "Vela's classifier drops to 0.11 M cycles and ResNet-18's layer 4 becomes compute-bound (0.30 M), and "
    "qsim is the slower one (0.17 M and 0.53 M).",
    "- **Batch-1 GEMMs (qsim fill/drain-bound).** A fully-connected layer on one input streams one row per "
    "weight fold: qsim's classifier pays 80 x 63 folds of weight preload and array fill/drain (95 % of its "
    "cycles) for 5,040 streaming cycles; ResNet-18's 7x7 layer-4 convolutions stream 49 rows per fold, so "
    "fill/drain is 34 % (16x16) and 56 % (16x32) of their cycles. Ethos-U has no systolic fill: its cost there is the "
    "weight traffic.",
    "- **Feature-map traffic of large layers (qsim 2.1x slower on ResNet-18's 56x56 layers, U55).** Where "
    "Vela runs at its peak (255 MACs/cycle, feature maps in SRAM, the input block reused across the 3x3 taps "
    "in the NPU's internal buffer), qsim's window DMA re-reads each input pixel once per tap and weight fold "
    "from DRAM at 8 B/cycle: half its cycles are stalls (at 16 B/cycle, 16x32, 5 %, and the gap closes to "
    "1.1x). qsim's DRAM bytes are 1.8-2.9x Vela's SRAM + off-chip bytes for the same reason, and because "
    "every layer's output goes to DRAM and back (Vela cascades layers through SRAM).",
    "- **Elementwise ADD (qsim 3-6x slower).** qsim lowers a TFLite ADD in TFLite's own arithmetic (each "
    "operand shifted left by 20 bits and rescaled in int32, then added and rescaled): five vector-unit "
    "stages, four of them moving int32 tensors through DRAM (ResNet-18's first residual ADD: 0.88 M cycles, "
    "92 % of them DMA stalls). qsim's vector-chain fusion merges the ONNX form of a residual ADD into one "
    "stage but not this chain of two RESCALEs per operand; Vela runs the ADD as one elementwise pass on "
    "int8 inputs.",
    "- **Pools, MEAN and SOFTMAX** are small in both. A 25x5 average pool (DS-CNN): Vela runs it as "
    "pooling sub-kernels at about 1 MAC/cycle; qsim, to round half away from zero as TFLite's reference "
    "kernel does (TOSA's AVG_POOL2D rounds half up), lowers it to ten vector stages (casts to int16, "
    "AVG_POOL2D of x and of -x, a compare and a select), about 2x Vela's cycles. qsim's 3x3 max pool reads "
    "each window from DRAM (62 % stalls). Vela decomposes SOFTMAX into ~26 elementwise and LUT "
    "operations; qsim runs TFLite's fixed-point softmax as a chain of vector stages.",
    "- **Transformer encoder (qsim 0.46x Vela's U55-256 cycles, 0.49x its U65-512's).** Vela estimates "
    "each attention BATCH_MATMUL (both operands activations) at about 300,000 NPU cycles for 524,288 MACs, "
    "under 2 MACs per cycle; qsim runs Q K^T as one array stage at 32 MACs per cycle (16,564 cycles, 72 % "
    "of them DRAM stalls). The attention-times-V BATCH_MATMUL has no qsim stage under its TFLite name (its "
    "MACs are in qsim's total, under a neighbouring stage's name). LayerNorm's SQUARED_DIFFERENCE is "
    "memory-bound on both sides (qsim: seven TOSA operators in TFLite's arithmetic, four RESCALEs, SUB, MUL and RESCALE, 93 % DMA stalls). Vela "
    "leaves LayerNorm's DEQUANTIZE, NEG, QUANTIZE (float -mean) to the CPU; qsim runs them as one int8 "
    "TABLE.",
    "- **U65-512 against 16x32.** Vela's U65-512 (two 256-MAC cores, 16 B/cycle SRAM, weights in DRAM) is "
    "2.8-3.0x faster than its U55-256 on the image nets; qsim's 16x32 at 16 B/cycle gains 1.5-2.7x over "
    "its 16x16 (most on ResNet-18, whose stalls the doubled bandwidth removes), because depthwise, "
    "fill/drain-bound and vector-unit layers do not use the extra columns.", ""]
