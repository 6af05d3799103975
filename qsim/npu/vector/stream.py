"""The order in which the vector unit receives pooling windows and reduction groups.

This is the contract the DMA address generator implements (hw/README.md, "Vector
unit"): lanes carry C consecutive channels (pooling) or C consecutive positions of
the kept dimensions (reductions); one beat per element of the window or group, in
the spec's loop order, padding skipped; `last` on the final element of each. Tiles
of C lanes are the outermost loop (a per-channel instruction changes per tile);
lanes past the tensor's extent carry zeros and their results are dropped.
"""
from __future__ import annotations

import numpy as np


def _tiles(extent: int, lanes: int) -> int:
    return -(-extent // lanes)


def pool_stream(x: np.ndarray, kernel, stride, pad, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """(beats [n, lanes], last [n]) of MAX_POOL2D / AVG_POOL2D over NHWC `x`: for each channel
    tile, each output position (n, oy, ox), the window's valid taps in (ky, kx) order."""
    n, h, w, channels = x.shape
    (ky, kx), (sy, sx), (pt, pb, pl, pr) = kernel, stride, pad
    oh, ow = (h + pt + pb - ky) // sy + 1, (w + pl + pr - kx) // sx + 1
    tiles = _tiles(channels, lanes)
    xp = np.zeros((n, h, w, tiles * lanes), np.int64)
    xp[..., :channels] = x
    b, oy, ox, ty, tx = np.meshgrid(np.arange(n), np.arange(oh), np.arange(ow), np.arange(ky),
                                    np.arange(kx), indexing="ij")
    y, xx = oy * sy - pt + ty, ox * sx - pl + tx
    valid = ((y >= 0) & (y < h) & (xx >= 0) & (xx < w)).reshape(n * oh * ow, ky * kx)
    b, y, xx = (v.reshape(valid.shape)[valid] for v in (b, y, xx))   # window-major, tap order
    counts = valid.sum(axis=1)
    last = np.zeros(int(counts.sum()), bool)
    last[np.cumsum(counts) - 1] = True
    beats = [xp[b, y, xx, t * lanes:(t + 1) * lanes] for t in range(tiles)]
    return np.concatenate(beats), np.tile(last, tiles)


def pool_result(outputs: np.ndarray, shape, kernel, stride, pad) -> np.ndarray:
    """The NHWC result of `pool_stream`'s results ([tiles * positions, lanes])."""
    n, h, w, channels = shape
    (ky, kx), (sy, sx), (pt, pb, pl, pr) = kernel, stride, pad
    oh, ow = (h + pt + pb - ky) // sy + 1, (w + pl + pr - kx) // sx + 1
    lanes = outputs.shape[1]
    tiles = outputs.reshape(-1, n * oh * ow, lanes)
    return np.concatenate(list(tiles), axis=1)[:, :channels].reshape(n, oh, ow, channels)


def reduction_stream(x: np.ndarray, axis: int, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """(beats, last) of a reduction along `axis`: each tile of C kept positions (row-major
    order of the other dimensions) streams the axis in index order."""
    moved = np.moveaxis(np.asarray(x, np.int64), axis, -1)
    k = moved.shape[-1]
    columns = moved.reshape(-1, k)
    tiles = _tiles(columns.shape[0], lanes)
    padded = np.zeros((tiles * lanes, k), np.int64)
    padded[:columns.shape[0]] = columns
    beats = padded.reshape(tiles, lanes, k).transpose(0, 2, 1).reshape(tiles * k, lanes)
    return beats, np.tile(np.arange(k) == k - 1, tiles)


def reduction_result(outputs: np.ndarray, shape, axis: int, keep_axis: bool) -> np.ndarray:
    """The result tensor of `reduction_stream`'s results ([tiles, lanes]): the axis kept with
    extent 1 (REDUCE_*) or dropped (ARGMAX)."""
    kept = tuple(d for i, d in enumerate(shape) if i != axis)
    out = outputs.reshape(-1)[:int(np.prod(kept, dtype=np.int64))].reshape(kept)
    return np.expand_dims(out, axis) if keep_axis else out
