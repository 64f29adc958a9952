"""The collaborators `Memory` (memory.py) holds and hands its calls to: `MemoryReader` (reads.py:
get, get_all, search, search_messages, history), `AddWriter` (writes.py: an add's write plan,
built and written as one transaction, from the arguments add_call.py checked),
`ExtractionJobs` (jobs.py: async adds and their queue) and `MemoryEditor` (edits.py: update,
delete, delete_all, reset, compact); and components.py, which opens the store and loads the
models a caller does not hand in."""
