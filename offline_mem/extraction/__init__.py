"""An add with inference: the prompt, the model's answer, the fact checks, admission and
supersession, turned into one write plan for the store.

The modules import each other directly; nothing is re-exported here (importing the package
loads nothing).
"""
