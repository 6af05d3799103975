"""`qsim selftest`'s checks: seeded comparisons that this installation computes the right bits.

Each check compares two independent computations of the same integers (the compiled kernels
against the numpy reference, on every ISA path this CPU runs; the int64 reference helpers
against unbounded Python integers) and returns how many elements it compared. A failing check
raises MismatchError with the first differing element. runner.run_selftest runs them all.
"""
