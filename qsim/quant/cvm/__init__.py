"""The CVM target: CvmTarget (target.py), its power-of-two arithmetic (context.py) and its
rules (rules.py, registered in qsim.quant.rules)."""
