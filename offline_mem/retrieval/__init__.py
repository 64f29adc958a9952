"""Search: candidates from every signal, one ranking on a fixed scale, facts and messages ranked
together, relational references resolved.

The modules import each other directly; nothing is re-exported here (importing the package
loads nothing).
"""
