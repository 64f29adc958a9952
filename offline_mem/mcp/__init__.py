"""The memory as an MCP server (`offline-mem mcp`).

The modules import each other directly; nothing is re-exported here (importing the package
loads nothing).
"""
