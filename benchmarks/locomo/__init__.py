"""Long-conversation benchmark in the LoCoMo format: offline_mem, a naive raw-turn baseline and
Mem0 2.2.1 (local) side by side on the same data, chunking, top-k and answer model.

    dataset.py   deterministic synthetic conversations (by seed), written in LoCoMo format
    loader.py    reads LoCoMo-format files into typed samples
    scoring.py   token F1 the LoCoMo way, evidence recall@k, not-mentioned detection
    systems.py   the three systems behind one small interface
    mem0_peer.py the fully local Mem0 configuration (llama-cpp server, spaCy shim, Qdrant on disk)
    answer.py    the shared answer model and prompt
    run.py       the harness (ingest, search, answer, score) and its CLI
    report.py    JSON, markdown table and PNG plots
"""
