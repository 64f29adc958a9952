"""The memory file: SQLite connection and schema, every table's reads and writes, the keyword
and vector indexes, the extraction job queue. Imports no model code.

The modules import each other directly; nothing is re-exported here (importing the package
loads nothing).
"""
