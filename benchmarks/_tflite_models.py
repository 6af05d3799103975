"""The five Keras networks of benchmarks/tflite.py and their full-integer TFLite conversion.

Benchmark-only: imports TensorFlow (`pip install tensorflow-cpu`, 2.21) inside the functions, so
that the pure parts of the benchmark (and its tests) import without it. Weights are random
(seeded); batch normalisation statistics are set from one batch of the representative data
(each layer's momentum set to 0 for one training-mode call), so that every activation has the
spread of a trained network's instead of shrinking or exploding through the layers, which
would make an int8 comparison trivial (all zeros) or saturated.

Conversion: TFLiteConverter.from_keras_model (batch 1), Optimize.DEFAULT, a representative dataset of
CALIBRATION_SAMPLES inputs, TFLITE_BUILTINS_INT8 only, int8 input and output: the full-integer
model Vela and int8 NPU toolchains take.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

CALIBRATION_SAMPLES = 8
IMAGE_SIZE = 224
KWS_SHAPE = (49, 10, 1)          # MLPerf Tiny keyword spotting: 49 frames x 10 MFCC features
SEQ_LEN, D_MODEL, HEADS, FFN_DIM = 64, 128, 4, 256


@dataclass(frozen=True)
class Network:
    name: str
    input_shape: tuple[int, ...]          # without the batch dimension
    build: Callable                       # keras module -> keras.Model
    images: bool                          # representative data from photographs


def _conv_bn(keras, x, filters, kernel, stride=1, act="relu6", name=""):
    L = keras.layers
    x = L.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=f"{name}conv")(x)
    x = L.BatchNormalization(name=f"{name}bn")(x)
    return L.ReLU(6.0 if act == "relu6" else None, name=f"{name}{act}")(x) if act else x


def _dw_bn(keras, x, kernel, stride=1, act="relu6", name=""):
    L = keras.layers
    x = L.DepthwiseConv2D(kernel, strides=stride, padding="same", use_bias=False, name=f"{name}dw")(x)
    x = L.BatchNormalization(name=f"{name}dwbn")(x)
    return L.ReLU(6.0 if act == "relu6" else None, name=f"{name}dw{act}")(x)


def mobilenet_v2(keras):
    return keras.applications.MobileNetV2(input_shape=(IMAGE_SIZE, IMAGE_SIZE, 3), alpha=0.35,
                                          weights=None, classes=1000)


# EfficientNet-Lite0 (TF efficientnet/lite builder): MBConv blocks with relu6 and no
# squeeze-excitation; (expansion, kernel, stride, output channels, repeats)
_LITE0_BLOCKS = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                 (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))


def efficientnet_lite0(keras):
    L = keras.layers
    inp = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3))
    x = _conv_bn(keras, inp, 32, 3, 2, name="stem_")
    channels, index = 32, 0
    for expansion, kernel, stride, out, repeats in _LITE0_BLOCKS:
        for r in range(repeats):
            name, shortcut = f"block{index}_", x
            y = _conv_bn(keras, x, channels * expansion, 1, name=name + "expand_") if expansion > 1 else x
            y = _dw_bn(keras, y, kernel, stride if r == 0 else 1, name=name)
            y = _conv_bn(keras, y, out, 1, act=None, name=name + "project_")
            x = L.Add(name=name + "add")([shortcut, y]) if (r > 0 and channels == out) else y
            channels, index = out, index + 1
    x = _conv_bn(keras, x, 1280, 1, name="head_")
    x = L.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(inp, L.Dense(1000, name="logits")(x), name="efficientnet_lite0")


def resnet18(keras):
    L = keras.layers
    inp = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3))
    x = _conv_bn(keras, inp, 64, 7, 2, act="relu", name="stem_")
    x = L.MaxPooling2D(3, 2, padding="same", name="stem_pool")(x)
    for stage, filters in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            name, shortcut = f"layer{stage + 1}_{block}_", x
            y = _conv_bn(keras, x, filters, 3, stride, act="relu", name=name + "a_")
            y = _conv_bn(keras, y, filters, 3, act=None, name=name + "b_")
            if stride != 1 or shortcut.shape[-1] != filters:
                shortcut = _conv_bn(keras, x, filters, 1, stride, act=None, name=name + "down_")
            x = L.ReLU(name=name + "out")(L.Add(name=name + "add")([shortcut, y]))
    x = L.GlobalAveragePooling2D(name="pool")(x)
    return keras.Model(inp, L.Dense(1000, name="logits")(x), name="resnet18")


def ds_cnn(keras):
    """MLPerf Tiny keyword spotting DS-CNN (small): conv 10x4 stride 2 with 64 filters, four
    depthwise-separable blocks, average pool, 12 classes, softmax."""
    L = keras.layers
    inp = keras.Input(KWS_SHAPE)
    x = _conv_bn(keras, inp, 64, (10, 4), 2, act="relu", name="conv1_")
    for block in range(4):
        x = _dw_bn(keras, x, 3, act="relu", name=f"ds{block}_")
        x = _conv_bn(keras, x, 64, 1, act="relu", name=f"ds{block}_pw_")
    x = L.AveragePooling2D(pool_size=(x.shape[1], x.shape[2]), name="pool")(x)
    x = L.Flatten(name="flatten")(x)
    x = L.Dense(12, name="logits")(x)
    return keras.Model(inp, L.Softmax(name="softmax")(x), name="ds_cnn")


def transformer_encoder(keras):
    """Two post-norm encoder layers (multi-head attention, LayerNorm, ReLU feed-forward) over a
    sequence of SEQ_LEN feature vectors, mean over the sequence, a 10-class head."""
    L = keras.layers
    inp = keras.Input((SEQ_LEN, D_MODEL))
    x = inp
    for layer in range(2):
        name = f"enc{layer}_"
        attn = L.MultiHeadAttention(HEADS, D_MODEL // HEADS, name=name + "mha")(x, x)
        x = L.LayerNormalization(epsilon=1e-5, name=name + "ln1")(L.Add(name=name + "add1")([x, attn]))
        y = L.Dense(FFN_DIM, activation="relu", name=name + "ffn1")(x)
        y = L.Dense(D_MODEL, name=name + "ffn2")(y)
        x = L.LayerNormalization(epsilon=1e-5, name=name + "ln2")(L.Add(name=name + "add2")([x, y]))
    x = L.GlobalAveragePooling1D(name="pool")(x)
    return keras.Model(inp, L.Dense(10, name="logits")(x), name="transformer")


NETWORKS = {n.name: n for n in (
    Network("mobilenet_v2", (IMAGE_SIZE, IMAGE_SIZE, 3), mobilenet_v2, True),
    Network("efficientnet_lite0", (IMAGE_SIZE, IMAGE_SIZE, 3), efficientnet_lite0, True),
    Network("resnet18", (IMAGE_SIZE, IMAGE_SIZE, 3), resnet18, True),
    Network("ds_cnn", KWS_SHAPE, ds_cnn, False),
    Network("transformer", (SEQ_LEN, D_MODEL), transformer_encoder, False),
)}


def photo_batch(count: int, seed: int) -> np.ndarray:
    """`count` crops of scikit-image's bundled photographs, IMAGE_SIZE square, in [-1, 1]
    (MobileNet's preprocessing), NHWC float32; crop boxes drawn from `seed`."""
    import skimage.data as sk
    from skimage.transform import resize

    names = ("astronaut", "chelsea", "coffee", "rocket", "camera", "immunohistochemistry")
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        img = np.asarray(getattr(sk, names[i % len(names)])())
        img = np.repeat(img[:, :, None], 3, axis=2) if img.ndim == 2 else img[:, :, :3]
        side = int(rng.integers(min(img.shape[:2]) // 2, min(img.shape[:2]) + 1))
        top = int(rng.integers(0, img.shape[0] - side + 1))
        left = int(rng.integers(0, img.shape[1] - side + 1))
        crop = resize(img[top:top + side, left:left + side], (IMAGE_SIZE, IMAGE_SIZE), anti_aliasing=True)
        out.append(crop * 2.0 - 1.0)          # resize returns floats in [0, 1]
    return np.stack(out).astype(np.float32)


def sample_batch(net: Network, count: int, seed: int) -> np.ndarray:
    if net.images:
        return photo_batch(count, seed)
    return np.random.default_rng(seed).standard_normal((count, *net.input_shape)).astype(np.float32)


def build(net: Network, seed: int):
    """The Keras model with seeded random weights and batch-norm statistics of real inputs."""
    import keras
    keras.utils.set_random_seed(seed)
    model = net.build(keras)
    norms = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    for layer in norms:
        layer.momentum = 0.0          # one training-mode call makes the moving statistics the batch's
        gamma, beta = layer.gamma, layer.beta
        rng = np.random.default_rng(seed + len(layer.name))
        gamma.assign(rng.uniform(0.5, 1.5, gamma.shape).astype(np.float32))
        beta.assign(rng.normal(0.0, 0.2, beta.shape).astype(np.float32))
    if norms:
        model(sample_batch(net, CALIBRATION_SAMPLES, seed), training=True)
    return model


def convert(model, net: Network, seed: int) -> bytes:
    """Full-integer int8 TFLite flatbuffer (int8 input and output)."""
    import tensorflow as tf

    calib = sample_batch(net, CALIBRATION_SAMPLES, seed)

    def representative():
        for sample in calib:
            yield [sample[None]]

    # the model called on a batch-1 input: with Keras' dynamic batch the converter keeps
    # SHAPE/STRIDED_SLICE/PACK operators around every Flatten/Reshape
    import keras
    inp = keras.Input(net.input_shape, batch_size=1)
    fixed = keras.Model(inp, model(inp, training=False))
    converter = tf.lite.TFLiteConverter.from_keras_model(fixed)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    return converter.convert()


def shorten_tensor_names(data: bytes, width: int = 120) -> bytes:
    """The flatbuffer with every tensor named by the first ';'-part of its converter name (cut to
    `width` characters, made unique with a suffix). The converter joins the names of all TF ops it
    fused into one tensor (~250 characters for a conv + batch norm + relu), and qsim quantize fails
    writing a quantized model with such names (its .dat file names exceed the file system's 255
    bytes: reports/tflite.md). Vela, LiteRT and qsim all read the renamed file, so names still
    match across the three."""
    from tensorflow.lite.tools import flatbuffer_utils

    model = flatbuffer_utils.convert_bytearray_to_object(bytearray(data))
    for subgraph in model.subgraphs:
        seen: set[bytes] = set()
        for tensor in subgraph.tensors:
            name = (tensor.name or b"").split(b";")[0][:width]
            unique, k = name, 1
            while unique in seen:
                unique, k = name + b"_%d" % k, k + 1
            seen.add(unique)
            tensor.name = unique
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))
