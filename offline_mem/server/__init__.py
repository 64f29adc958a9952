"""`offline-mem serve`: one process holding one `Memory` for every app on the machine (Mem0's REST
routes, MCP over streamable HTTP, a memory browser). Needs the `server` extra."""
