"""Evaluation: the float and integer graphs on the same samples (evaluate.py) and which outputs
the report scores, and how (scoring.py). The figures are qsim/quant/accuracy.py's AccuracyReport."""
