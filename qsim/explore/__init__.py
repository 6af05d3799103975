"""`qsim explore`: a design space of NPU configurations and precisions, every point's accuracy,
latency, energy and area, and the Pareto front (space parsing, the front, the run driver)."""
