"""Choosing a per-layer precision plan (params.PrecisionPlan) that meets an accuracy target at
the least cost: scoring.py measures a plan, search.py picks one. The plan's lowering is the
TOSA target's (tosa/mixed_precision.py); the cost is the caller's (the NPU's cycle and energy
model, qsim.npu.plan_cost, handed in by the command)."""
