"""Fetching pinned model weights: the only code of offline_mem that opens a network connection.

The library (`offline_mem`) never imports this package except from the `offline-mem models fetch`
command. Every file is written to a temporary path, checked against the manifest's size and
sha256, and only then renamed into `<models_dir>/<model>/<path>`.
"""

from .fetch import FetchError, FetchOutcome, fetch_models
from .sources import SourceError

__all__ = ["FetchError", "FetchOutcome", "SourceError", "fetch_models"]
