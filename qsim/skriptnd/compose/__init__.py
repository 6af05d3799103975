"""Composition of SkriptND graphs into ir.Graph (NNEF 2.0 draft chapter 3, 2.5-2.11, 2.14): the
composer, the graph it builds, control flow, operator instances, @quantize entries, and the values
that depend on dynamic extents (packs of run-time length, run-time attributes)."""
