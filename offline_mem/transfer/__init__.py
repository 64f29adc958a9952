"""Export a memory file to JSONL and import it back.

The modules import each other directly; nothing is re-exported here (importing the package
loads nothing).
"""
