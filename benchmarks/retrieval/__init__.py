"""Issue 5 retrieval benchmarks: quality (dataset.py, run.py) and latency at scale (scale.py)."""
