"""qsim's version (the one place it is written besides pyproject.toml; tests/test_packaging.py
holds the two together)."""
__version__ = "0.1.0"
