"""MTCNN's RNet and ONet as ONNX models with their real trained weights.

The weights are the state dicts the PyPI package `facenet-pytorch` ships as package data
(facenet_pytorch/data/rnet.pt, onet.pt; install with `pip install --no-deps facenet-pytorch`,
reading them needs torch). The networks are written here with onnx.helper from the published
layer structure (Zhang et al. 2016, "Joint Face Detection and Alignment using Multi-task Cascaded
Convolutional Networks", table/figure 2): 3x3 convolutions with per-channel PReLU, 3x3/2 max
pooling with ceil rounding, a final 2x2 convolution, the feature map flattened in (W, H, C) order,
a dense layer with PReLU and the heads. Outputs in the order the reference implementation returns
them: box regression first, then the face probability (softmax), then (ONet) the landmarks.
Nothing is downloaded at run time.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INSTALL_HINT = "pip install --no-deps facenet-pytorch   (the weights are its package data; torch reads them)"

# (conv name, kernel, pool after it: (kernel, stride) or None)
_RNET = [("conv1", (3, 2)), ("conv2", (3, 2)), ("conv3", None)]
_ONET = [("conv1", (3, 2)), ("conv2", (3, 2)), ("conv3", (2, 2)), ("conv4", None)]
SPECS = {
    "rnet": {"size": 24, "convs": _RNET, "dense": ("dense4", "prelu4"),
             "heads": [("box", "dense5_2", False), ("prob", "dense5_1", True)]},
    "onet": {"size": 48, "convs": _ONET, "dense": ("dense5", "prelu5"),
             "heads": [("box", "dense6_2", False), ("prob", "dense6_1", True), ("landmarks", "dense6_3", False)]},
}


def weights_file(which: str) -> Path:
    spec = importlib.util.find_spec("facenet_pytorch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"MTCNN weights need the facenet-pytorch package: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / f"{which}.pt"
    if not path.exists():
        raise SystemExit(f"{path} is missing: {INSTALL_HINT}")
    return path


def state_dict(which: str) -> dict[str, np.ndarray]:
    try:
        import torch   # deferred: only this benchmark helper reads .pt files
    except ImportError:
        raise SystemExit(f"reading the MTCNN weights needs torch: pip install torch; {INSTALL_HINT}") from None
    sd = torch.load(weights_file(which), map_location="cpu", weights_only=True)
    return {k: v.detach().numpy().astype(np.float32) for k, v in sd.items()}


def mtcnn_model(which: str, sd: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """RNet ("rnet", input 3x24x24) or ONet ("onet", 3x48x48), batch dimension dynamic."""
    spec = SPECS[which]
    sd = state_dict(which) if sd is None else sd
    nodes, inits = [], []

    def const(name, array):
        inits.append(numpy_helper.from_array(np.asarray(array, np.float32), name))
        return name

    x = "input"
    for k, (conv, pool) in enumerate(spec["convs"], start=1):
        w = const(f"{conv}.weight", sd[f"{conv}.weight"])
        b = const(f"{conv}.bias", sd[f"{conv}.bias"])
        nodes.append(helper.make_node("Conv", [x, w, b], [f"{conv}_out"], name=conv))
        slope = const(f"prelu{k}.weight", sd[f"prelu{k}.weight"].reshape(-1, 1, 1))
        nodes.append(helper.make_node("PRelu", [f"{conv}_out", slope], [f"prelu{k}_out"], name=f"prelu{k}"))
        x = f"prelu{k}_out"
        if pool is not None:
            kernel, stride = pool
            nodes.append(helper.make_node("MaxPool", [x], [f"pool{k}_out"], name=f"pool{k}",
                                          kernel_shape=[kernel, kernel], strides=[stride, stride], ceil_mode=1))
            x = f"pool{k}_out"
    # the reference flattens the feature map in (W, H, C) order
    nodes.append(helper.make_node("Transpose", [x], ["permuted"], name="permute", perm=[0, 3, 2, 1]))
    nodes.append(helper.make_node("Flatten", ["permuted"], ["flat"], name="flatten", axis=1))
    dense, prelu = spec["dense"]
    nodes.append(helper.make_node("Gemm", ["flat", const(f"{dense}.weight", sd[f"{dense}.weight"]),
                                           const(f"{dense}.bias", sd[f"{dense}.bias"])],
                                  [f"{dense}_out"], name=dense, transB=1))
    nodes.append(helper.make_node("PRelu", [f"{dense}_out", const(f"{prelu}.weight", sd[f"{prelu}.weight"])],
                                  ["features"], name=prelu))
    outputs = []
    for out, layer, softmax in spec["heads"]:
        w = sd[f"{layer}.weight"]
        target = f"{layer}_out" if softmax else out
        nodes.append(helper.make_node("Gemm", ["features", const(f"{layer}.weight", w),
                                               const(f"{layer}.bias", sd[f"{layer}.bias"])],
                                      [target], name=layer, transB=1))
        if softmax:
            nodes.append(helper.make_node("Softmax", [target], [out], name=f"{layer}_softmax", axis=1))
        outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", w.shape[0]]))
    size = spec["size"]
    graph = helper.make_graph(nodes, which, [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                          ["N", 3, size, size])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def crops(which: str, n: int, seed: int = 0) -> np.ndarray:
    """n input crops normalised as MTCNN expects ((pixel - 127.5) / 128): the embedded
    Fashion-MNIST images scaled to the network's size in three channels (no face data ships
    with qsim; the figures measure agreement with the float network, not face detection)."""
    from qsim.zoo.fashion_mnist import test_subset   # deferred: only crops() needs the data
    images = test_subset()[0][seed:seed + n, 0]                  # [n, 28, 28] in [0, 1]
    size = SPECS[which]["size"]
    idx = (np.arange(size) * 28 // size)
    scaled = images[:, idx][:, :, idx] * 255.0
    rng = np.random.default_rng(seed)
    colour = rng.uniform(0.6, 1.0, size=(n, 3, 1, 1)).astype(np.float32)
    return ((scaled[:, None] * colour - 127.5) / 128.0).astype(np.float32)
