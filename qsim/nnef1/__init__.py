"""NNEF 1.0 front end: graph.nnef (flat and compositional syntax), graph.quant, `.dat` data,
model folders and .tar/.tgz containers → the same ir.Graph of NNEF 2.0 operators that the
SkriptND front end produces. Entry point: `load_nnef1(path)`. docs/nnef1.md has the
1.0 → 2.0 operator mapping and every decision where the spec text was silent or damaged."""
from .loader import load_nnef1

__all__ = ["load_nnef1"]
