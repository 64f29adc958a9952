"""The collaborators `Memory` (memory.py) holds and hands its calls to: `MemoryReader` (reads.py:
get, get_all, search, search_messages, history), `AddWriter` (writes.py: an add's write plan,
built and written as one transaction) and `ExtractionJobs` (jobs.py: async adds and their
queue)."""
