"""One KV-cache snapshot per kind of prompt, so that interleaved kinds do not evict each other.

llama.cpp keeps one sequence in its KV cache, and llama-cpp-python reuses the longest common
prefix of the previous call and the next. The extractor makes two kinds of call: the facts prompt
(system rules, then the scope's recent messages, which stay the same from one add to the next) and
the supersession check (the same system rules, then a fixed question). A check therefore cut the
cached facts prompt back to the system rules, and the next add re-read all its recent messages
(measured on the side-by-side benchmark: ~250 more prompt tokens, ~5 s at one thread).

`KvSlots.switch_to(kind)` saves the live sequence under the kind that made it and restores the
last sequence of the kind asked for, if any: a copy of ~28 KiB per token (~30 MiB for a 1,100
token facts prompt of the 1.5B model), milliseconds against seconds of re-evaluation. A restore
that llama.cpp refuses leaves an empty cache, which only costs time: the prompt is evaluated in
full, as on a first call.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any


@dataclass
class _Snapshot:
    tokens: list[int]  # the tokens whose keys and values `data` holds, in order
    data: Any  # ctypes uint8 array from llama_state_seq_get_data


class KvSlots:
    """Per-kind snapshots of sequence 0 of one `llama_cpp.Llama`. Not thread-safe: the caller
    holds the extractor's lock."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.live_kind: str | None = None
        self.snapshots: dict[str, _Snapshot] = {}
        self.restored = 0  # how many restores succeeded (tests and benchmarks read it)

    def switch_to(self, kind: str) -> None:
        """Make the KV cache hold the last sequence evaluated for `kind` (or nothing)."""
        if self.live_kind == kind:
            return
        if self.live_kind is not None:
            self.snapshots[self.live_kind] = self._save()
        snapshot = self.snapshots.get(kind)
        # With no snapshot of its own, a kind starts from the live sequence: both kinds begin
        # with the same system rules, which llama-cpp-python's prefix match then reuses.
        if snapshot is not None:
            self._clear()
            if self._restore(snapshot):
                self.restored += 1
        self.live_kind = kind

    def _memory(self) -> Any:
        import llama_cpp

        return llama_cpp.llama_get_memory(self.llm._ctx.ctx)

    def _save(self) -> _Snapshot:
        import llama_cpp

        ctx = self.llm._ctx.ctx
        count = int(self.llm.n_tokens)
        # Drop any cell past the evaluated tokens, so the saved cells match `tokens` exactly.
        llama_cpp.llama_memory_seq_rm(self._memory(), 0, count, -1)
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        data = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, data, size, 0)
        if written == 0 and count:
            return _Snapshot(tokens=[], data=None)
        return _Snapshot(tokens=[int(t) for t in self.llm.input_ids[:count]], data=data)

    def _clear(self) -> None:
        import llama_cpp

        llama_cpp.llama_memory_seq_rm(self._memory(), 0, -1, -1)
        self.llm.n_tokens = 0

    def _restore(self, snapshot: _Snapshot) -> bool:
        import llama_cpp

        if not snapshot.tokens or snapshot.data is None:
            return False
        ctx = self.llm._ctx.ctx
        if llama_cpp.llama_state_seq_set_data(ctx, snapshot.data, len(snapshot.data), 0) == 0:
            self._clear()
            return False
        count = len(snapshot.tokens)
        self.llm.input_ids[:count] = snapshot.tokens
        self.llm.n_tokens = count
        # The logits in memory belong to the other kind's last token: make the next call decode
        # at least one token before sampling (llama-cpp-python's own flag for restored state).
        self.llm._requires_eval = True
        return True
