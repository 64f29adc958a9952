"""Whether offline_mem may tune settings of the whole process for speed.

A library shares its process with the application that imported it, so by default offline_mem
changes nothing process-wide: spaCy is imported as `import spacy` does it, numpy's BLAS keeps the
thread count the application gave it. Where the process is offline_mem's own (the `offline-mem`
command, or an application that sets the config key `"own_process": true`), two measured speed-ups
are allowed instead (docs/embedding.md lists them with their costs):

- spaCy imported without torch, its command line and the garbage collector's passes
  (spacy_import.py);
- numpy's BLAS limited to one thread per idle core around each embedder forward
  (blas_threads.py).

Once allowed, they stay allowed for the life of the process: both are settings of the process,
not of one `Memory`.
"""

from __future__ import annotations

_owned = False


def claim_process() -> None:
    """Allow offline_mem's process-wide speed settings from now on."""
    global _owned
    _owned = True


def process_claimed() -> bool:
    return _owned
