"""The pinned local models: the manifest and verified files, the embedder, the extractor and
spaCy (entities and keyword analysis). Imports nothing of the store.

The modules import each other directly; nothing is re-exported here (importing the package
loads nothing).
"""
