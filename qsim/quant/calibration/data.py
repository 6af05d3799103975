"""Calibration and evaluation data from files: .npy/.npz arrays or a folder of images.

- `.npy`: an array of samples [N, *input_shape] (or one sample of exactly input_shape).
- `.npz`: the samples under the graph input's name, or `x`/`inputs`/`images`, or the only
  array; labels (optional, int class ids [N]) under `y`/`labels`, and labels of a named
  output under `labels/<output name>` (qsim.quant.evaluation.scoring says which output unnamed labels
  belong to).
- a folder of images (.png, .jpg, .jpeg, .bmp, sorted by name), preprocessed as documented
  in the README: decoded to float in [0, 1], converted to the input's channel count (grey
  = mean of RGB; grey replicated to RGB), resized to the input's H x W (bilinear, align
  corners false), laid out NCHW, then `(x - mean) / std` with the given per-channel
  mean/std (defaults 0 and 1). A file `labels.txt` (`<filename> <class id>` per line) in
  the folder gives labels.
A model with several inputs takes an `.npz` keyed by input name, or a folder with one file
NAME.npy (or one folder of images NAME/) per input (`load_model_samples`).
Every failure names the file and what was expected.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ...errors import DataError, Location
from ...limits import MemoryUse, check_tensor_size
from ...userdata import check_finite, is_stream, read_npy_or_npz, read_npz
from ...textfile import decode_utf8

UNNAMED = ""                # the key of unnamed labels (labels of no named output: scoring.py
                            # gives them the outputs label_targets chooses)
LABEL_PREFIX = "labels/"    # .npz key of an output's labels: labels/<output name>

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


@dataclass(frozen=True)
class Samples:
    """Samples for the graph inputs, with optional labels: `inputs` for the first (or only)
    input, `others` for the rest of a multi-input model, by input name."""
    inputs: np.ndarray                 # [N, *input_shape] float32 (int64 from integer data, bool masks)
    labels: np.ndarray | None = None   # [N] int64, naming no output
    output_labels: dict[str, np.ndarray] = field(default_factory=dict)   # output name -> [N] int64
    others: dict[str, np.ndarray] = field(default_factory=dict)          # input name -> [N, ...]

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def arrays(self, input_name: str) -> dict[str, np.ndarray]:
        """Every input's samples by name (`input_name`: the name of `inputs`)."""
        return {input_name: self.inputs, **self.others}

    def feeds(self, input_name: str, limit: int | None = None) -> Iterator[tuple[dict, object]]:
        """(feed dict with a batch axis of 1, labels) per sample: labels are None, an int
        (unnamed labels only) or {output name (UNNAMED for unnamed labels): int}."""
        n = len(self) if limit is None else min(limit, len(self))
        for i in range(n):
            label = None if self.labels is None else int(self.labels[i])
            if self.output_labels:
                named = {k: int(v[i]) for k, v in self.output_labels.items()}
                label = named if label is None else dict(named, **{UNNAMED: label})
            yield {name: v[i:i + 1] for name, v in self.arrays(input_name).items()}, label


def _fit(array: np.ndarray, input_shape: Sequence[int], where: str, input_name: str) -> np.ndarray:
    shape = tuple(int(d) for d in input_shape)
    array = np.asarray(array)
    if array.dtype.kind not in "biuf":
        raise DataError(f"{where}: data of type {array.dtype} is not numeric",
                        hint="store integer, float or bool samples")
    if tuple(array.shape) == shape:
        array = array[None]
    if tuple(array.shape[1:]) != shape:
        raise DataError(f"{where}: samples have shape {list(array.shape[1:])} "
                        f"(array {list(array.shape)}), the model input is {list(shape)}",
                        hint=f"store an array of shape [N, {', '.join(map(str, shape))}]")
    if array.shape[0] == 0:
        raise DataError(f"{where}: the array holds no samples",
                        hint="store at least one sample")
    # before the cast, which would turn 1e300 into inf
    check_finite(array, f"{where} (samples of input '{input_name}')")
    # integer samples stay integers (token ids for an integer model input) and bool ones bool
    # (masks); for a float input model_inputs.as_input converts them
    if array.dtype.kind == "b":
        return array
    return array.astype(np.int64) if array.dtype.kind in "iu" else array.astype(np.float32)


def _labels(labels, n: int, where: str) -> np.ndarray | None:
    if labels is None:
        return None
    labels = np.asarray(labels).reshape(-1)
    if labels.shape[0] != n or not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"{where}: labels must be {n} integer class ids, got {labels.dtype} "
                        f"{list(labels.shape)}", hint="store one integer class id per sample")
    return labels.astype(np.int64)


def load_samples(path: str | Path, input_name: str, input_shape: Sequence[int], *,
                 mean: Sequence[float] = (0.0,), std: Sequence[float] = (1.0,)) -> Samples:
    """Samples for `input_name` (one sample's shape `input_shape`, without batch) from `path`."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: no such file or folder",
                        hint="give a .npy/.npz array or a folder of images")
    if path.is_dir():
        return _load_images(path, input_shape, mean, std)
    if path.suffix in (".npy", ".npz") or is_stream(path):
        # a pipe (--calib <(cat d.npz)) has no suffix: its first bytes tell an archive from an array
        data = read_npz(path) if path.suffix == ".npz" else read_npy_or_npz(path, npz=path.suffix != ".npy")
        if isinstance(data, np.ndarray):
            return Samples(_fit(data, input_shape, str(path), input_name))
        archive = data
        keys = list(archive)
        key = next((k for k in (input_name, "x", "inputs", "images") if k in keys), None)
        if key is None:
            arrays = [k for k in keys if k not in ("y", "labels") and not k.startswith(LABEL_PREFIX)]
            if len(arrays) != 1:
                raise DataError(f"{path}: cannot tell which array holds the inputs (arrays: "
                                f"{', '.join(keys)})", hint=f"name it {input_name!r} or 'x'")
            key = arrays[0]
        inputs = _fit(archive[key], input_shape, f"{path}[{key}]", input_name)
        label_key = next((k for k in ("y", "labels") if k in keys), None)
        labels = _labels(archive[label_key], inputs.shape[0], f"{path}[{label_key}]") if label_key else None
        named = {k[len(LABEL_PREFIX):]: _labels(archive[k], inputs.shape[0], f"{path}[{k}]")
                 for k in keys if k.startswith(LABEL_PREFIX)}
        return Samples(inputs, labels, named)
    raise DataError(f"{path}: unknown data format {path.suffix!r}",
                    hint="use .npy, .npz or a folder of images")


def load_model_samples(path: str | Path, shapes: dict[str, Sequence[int]], *,
                       mean: Sequence[float] = (0.0,), std: Sequence[float] = (1.0,)) -> Samples:
    """Samples for every input of a model (`shapes`: input name -> one sample's shape, in graph
    input order). One input: `load_samples`. Several: an .npz with one array per input name
    (labels as for one input), or a folder with, per input, a file NAME.npy or a sub-folder NAME
    of images (labels: labels.npy beside them, or the image folders' labels.txt)."""
    names = list(shapes)
    if len(names) == 1:
        return load_samples(path, names[0], shapes[names[0]], mean=mean, std=std)
    path = Path(path)
    listing = ", ".join(f"{n} {list(shapes[n])}" for n in names)
    hint = f"give an .npz with one array [N, ...] per input name ({listing}), or a folder of NAME.npy files"
    if path.is_dir():
        arrays, labels = _input_folder(path, shapes, hint, mean, std)
        named = {}
    elif path.exists() or is_stream(path):
        data = read_npy_or_npz(path)
        if isinstance(data, np.ndarray):
            raise DataError(f"{path}: one array, and the model has {len(names)} inputs ({listing})", hint=hint)
        missing = [n for n in names if n not in data]
        if missing:
            raise DataError(f"{path}: no array for model input(s) {', '.join(map(repr, missing))} "
                            f"(arrays: {', '.join(data) or 'none'})", hint=hint)
        arrays = {n: _fit(data[n], shapes[n], f"{path}[{n}]", n) for n in names}
        label_key = next((k for k in ("y", "labels") if k in data), None)
        labels = data[label_key] if label_key else None
        named = {k[len(LABEL_PREFIX):]: data[k] for k in data if k.startswith(LABEL_PREFIX)}
    else:
        raise DataError(f"{path}: no such file or folder", hint=hint)
    counts = {n: int(a.shape[0]) for n, a in arrays.items()}
    if len(set(counts.values())) != 1:
        raise DataError(f"{path}: the inputs hold different numbers of samples "
                        f"({', '.join(f'{n}: {c}' for n, c in counts.items())})",
                        hint="store the same number of samples for every input, in the same order")
    n = counts[names[0]]
    return Samples(arrays[names[0]], _labels(labels, n, f"{path} labels"),
                   {k: _labels(v, n, f"{path}[{LABEL_PREFIX}{k}]") for k, v in named.items()},
                   {k: arrays[k] for k in names[1:]})


def _input_folder(folder: Path, shapes: dict, hint: str, mean, std) -> tuple[dict, np.ndarray | None]:
    """The per-input files (NAME.npy) or image sub-folders (NAME/) of a multi-input data folder,
    and its labels (labels.npy, else the first image folder's labels.txt)."""
    arrays, labels = {}, None
    for name, shape in shapes.items():
        file, sub = folder / f"{name}.npy", folder / name
        if file.is_file():
            arrays[name] = _fit(read_npy_or_npz(file, npz=False), shape, str(file), name)
        elif sub.is_dir():
            images = _load_images(sub, shape, mean, std)
            arrays[name] = images.inputs
            labels = images.labels if labels is None else labels
        else:
            raise DataError(f"{folder}: no {file.name} or sub-folder {name}/ for model input {name!r}", hint=hint)
    if (folder / "labels.npy").is_file():
        labels = read_npy_or_npz(folder / "labels.npy", npz=False)
    return arrays, labels


def _resize_bilinear(img: np.ndarray, h: int, w: int) -> np.ndarray:
    """[C, H, W] → [C, h, w], bilinear with half-pixel centres (align_corners=false)."""
    _, ih, iw = img.shape
    if (ih, iw) == (h, w):
        return img
    ys = np.clip((np.arange(h) + 0.5) * ih / h - 0.5, 0, ih - 1)
    xs = np.clip((np.arange(w) + 0.5) * iw / w - 0.5, 0, iw - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, ih - 1), np.minimum(x0 + 1, iw - 1)
    fy, fx = (ys - y0)[None, :, None], (xs - x0)[None, None, :]
    top = img[:, y0][:, :, x0] * (1 - fx) + img[:, y0][:, :, x1] * fx
    bottom = img[:, y1][:, :, x0] * (1 - fx) + img[:, y1][:, :, x1] * fx
    return top * (1 - fy) + bottom * fy


def _load_images(folder: Path, input_shape, mean, std) -> Samples:
    if len(input_shape) != 3:
        raise DataError(f"{folder}: a folder of images needs a [C, H, W] model input, "
                        f"the model input is {list(input_shape)}",
                        hint="give the samples as a .npy/.npz array instead")
    c, h, w = (int(d) for d in input_shape)
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise DataError(f"{folder}: no images ({', '.join(IMAGE_SUFFIXES)}) in the folder",
                        hint="give a folder of images, or a .npy/.npz array")
    labels_file = folder / "labels.txt"
    label_of: dict[str, int] = {}
    if labels_file.exists():
        label_hint = "labels.txt is UTF-8 text, one '<filename> <class id>' a line"
        try:
            data = labels_file.read_bytes()
        except OSError as err:
            raise DataError(f"{labels_file}: cannot read ({err.strerror or err})",
                            hint=label_hint) from None
        text = decode_utf8(data, str(labels_file), what="labels.txt", hint=label_hint)
        for lineno, line in enumerate(text.splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2 or not re.fullmatch(r"-?[0-9]{1,9}", parts[1]):
                raise DataError(f"{labels_file}:{lineno}: expected '<filename> <class id>', got {line!r}",
                                hint="one image file name and its integer class id per line")
            label_of[parts[0]] = int(parts[1])
    mean_a = np.broadcast_to(np.asarray(mean, np.float32).reshape(-1), (c,)).reshape(c, 1, 1)
    std_a = np.broadcast_to(np.asarray(std, np.float32).reshape(-1), (c,)).reshape(c, 1, 1)
    samples = []
    # the decoded samples are held until stacked: they, and each image while it is decoded,
    # count against the command's memory budget
    held = MemoryUse(f"the images of {folder} decoded so far")
    for f in files:
        img = _decode_image(f, held)
        if img.max() > 1.0:
            img = img / 255.0
        img = img[:, :, None] if img.ndim == 2 else img[:, :, :3]
        img = img.transpose(2, 0, 1)
        if c == 1 and img.shape[0] == 3:
            img = img.mean(axis=0, keepdims=True)
        elif c == 3 and img.shape[0] == 1:
            img = np.repeat(img, 3, axis=0)
        elif img.shape[0] != c:
            raise DataError(f"{f}: {img.shape[0]} channels cannot feed a {c}-channel input",
                            hint="use grey or RGB images")
        samples.append((_resize_bilinear(img, h, w) - mean_a) / std_a)
        held.add(samples[-1].nbytes)
    labels = None
    if label_of:
        missing = [f.name for f in files if f.name not in label_of]
        if missing:
            raise DataError(f"{labels_file}: no label for {', '.join(missing[:5])}",
                            hint="give every image a line '<filename> <class id>'")
        labels = np.array([label_of[f.name] for f in files], dtype=np.int64)
    held.check(held.held, f"the {len(samples)} samples of {folder} stacked into one array")
    return Samples(np.stack(samples).astype(np.float32), labels)


# Copies of a decoded image alive at once while it becomes a sample: the decoder's float array
# and one converted copy (the channel conversion and the resize make smaller ones after).
_DECODE_COPIES = 2


def _decode_image(path: Path, held: MemoryUse) -> np.ndarray:
    """The image at `path` as float32 [H, W] or [H, W, C] (matplotlib's imread, as before), after
    its header's dimensions are checked: a 100-byte PNG may declare 100000 x 100000 pixels,
    so the decoded size is refused (limit on one tensor, memory budget) before decoding."""
    import matplotlib.image as mpimg
    import PIL.Image
    hint = "use .png, .jpg or .bmp files, or remove this one"
    where = Location(str(path))
    try:
        with open(path, "rb") as stream:
            with warnings.catch_warnings():
                # the size is checked below against qsim's own limits, which the user can raise;
                # Pillow's fixed bomb threshold only warns up to twice its pixel count
                warnings.simplefilter("ignore", PIL.Image.DecompressionBombWarning)
                with PIL.Image.open(stream) as image:
                    width, height = image.size
                    bands = len(image.getbands())
            size = check_tensor_size((height, width, bands), 4, f"image {path} (decoded as float32)", where)
            held.check(_DECODE_COPIES * size, f"decoding image {path} ({width} x {height}, {bands} channel(s))",
                       where)
            stream.seek(0)
            return np.asarray(mpimg.imread(stream, format=path.suffix.lower()[1:]), dtype=np.float32)
    except DataError:
        raise
    except PIL.Image.DecompressionBombError as err:
        raise DataError(f"{path}: the image declares more pixels than any decoder should allocate ({err})",
                        hint=hint) from None
    except Exception as err:  # noqa: BLE001 - decoder errors have many types; the file is what matters
        raise DataError(f"{path}: cannot decode the image ({err})", hint=hint) from None
