"""The checks a fact of the model's answer passes before admission (checks.py says how)."""
