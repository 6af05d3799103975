"""The TOSA 0.30 target: TosaTarget (target.py), the integer side its rules call (context.py:
RESCALE, TABLE, clamps), the rules by operator family (rules_*.py, registered in
qsim.quant.rules), and the integer arithmetic they build on: fixed-point scales (scale.py),
TABLE contents (tables.py, float_chains.py), integer Newton steps (integer_newton.py)."""
