"""The fuzzing harness behind benchmarks/fuzz.py (see that script's docstring)."""
