"""Mapping search: which loop order and tile sizes the compiler gives each GEMM (space.py, schedule.py, search.py)."""
